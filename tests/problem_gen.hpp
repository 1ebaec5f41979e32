// Problems for the property tests: a fixed list aimed at tile edges and a random generator over
// every feature (filter sizes 1..7, non-square, padding larger than the filter, stride larger than
// the filter, dilation, groups, depthwise, N = 1, P or Q = 1, every layout, both modes, alpha/beta).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "mconv/mconv.hpp"

namespace mconv::test {

struct Case {
  Problem p;
  Layout xl = Layout::NCHW, wl = Layout::NCHW, yl = Layout::NCHW;
  float alpha = 1.0f, beta = 0.0f;  // the call's Epilogue
  Activation act = Activation::Identity;
  bool bias = false;
  /// x as a strided view instead of packed: padded rows (pitch W + 3), channels 5 and images 7
  /// elements apart beyond their extent, so no plane stride is constant.
  bool strided_x = false;
  /// x starts this many floats past a 16-byte boundary (GPU runs: copies that must handle the
  /// unaligned ends of a range).
  int x_offset = 0;
  /// y likewise (GPU runs: kernels that must fall back from vector stores).
  int y_offset = 0;
  std::string name() const {
    return p.to_string() +
           (alpha != 1.0f || beta != 0.0f ? " alpha" + std::to_string(alpha) + " beta" + std::to_string(beta) : "") +
           " x" + layout_name(xl) + " w" + layout_name(wl) + " y" + layout_name(yl) +
           (act != Activation::Identity ? std::string(" ") + activation_name(act) : "") + (bias ? " bias" : "") +
           (strided_x ? " strided x" : "") + (x_offset ? " x offset " + std::to_string(x_offset) : "") +
           (y_offset ? " y offset " + std::to_string(y_offset) : "");
  }
};

/// The whole epilogue: alpha, beta (reading y), bias and ReLU.
inline Case with_whole_epilogue(Case c) {
  c.alpha = 0.5f;
  c.beta = 0.75f;
  c.bias = true;
  c.act = Activation::ReLU;
  return c;
}

/// The run's seed: MCONV_TEST_SEED if set, else fresh; printed so a failure can be replayed.
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("MCONV_TEST_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cout << "[mconv] MCONV_TEST_SEED=" << s << "\n";
    return s;
  }();
  return seed;
}

inline Problem make(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t pad = 0,
                    int64_t stride = 1, int64_t dil = 1, int64_t g = 1) {
  Problem p;
  p.n = n;
  p.c = c;
  p.h = h;
  p.w = w;
  p.k = k;
  p.r = r;
  p.s = s;
  p.pad_h = p.pad_w = pad;
  p.stride_h = p.stride_w = stride;
  p.dil_h = p.dil_w = dil;
  p.groups = g;
  return p;
}

/// Tile edges: C and K below, equal to, above and off the tiles (8 rows, 32/64/128 filters), odd H, W.
inline std::vector<Case> edge_cases() {
  std::vector<Case> v;
  for (int64_t c : {1, 7, 8, 9, 33})
    for (int64_t k : {1, 31, 32, 33, 64, 65, 129}) v.push_back({make(1, c, 7, 9, k, 3, 3, 1)});
  v.push_back({make(2, 16, 7, 9, 24, 1, 1)});
  v.push_back({make(2, 16, 8, 12, 40, 3, 3, 1)});  // Q % 4 == 0: the vector epilogue
  Case vec_beta{make(3, 8, 8, 8, 70, 1, 1)};
  vec_beta.alpha = 2.0f;
  vec_beta.beta = 1.0f;
  vec_beta.bias = true;
  vec_beta.act = Activation::ReLU;
  v.push_back(vec_beta);
  v.push_back({make(1, 3, 224 / 8, 224 / 8, 16, 7, 7, 3, 2)});
  v.push_back({make(3, 4, 5, 5, 4, 5, 5, 6, 1)});        // padding larger than the filter
  v.push_back({make(2, 3, 11, 11, 5, 2, 2, 0, 3)});      // stride larger than the filter
  v.push_back({make(1, 4, 12, 13, 6, 3, 3, 2, 1, 2)});   // dilation 2
  v.push_back({make(2, 8, 9, 9, 8, 3, 3, 1, 2, 1, 8)});  // depthwise stride 2
  v.push_back({make(1, 6, 1, 9, 4, 1, 3, 0)});           // P = 1
  v.push_back({make(2, 6, 9, 1, 4, 3, 1, 0)});           // Q = 1
  Case asym{make(2, 5, 9, 7, 3, 3, 5)};
  asym.p.pad_h = 0;
  asym.p.pad_w = 2;
  asym.p.stride_h = 2;
  asym.p.dil_w = 2;
  v.push_back(asym);
  return v;
}

inline Case random_case(std::mt19937_64& g, int64_t max_macs = 1500000) {
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  for (;;) {
    Case c;
    Problem& p = c.p;
    const int family = int(u(0, 11));
    p.n = u(0, 3) == 0 ? 1 : u(1, 4);
    p.groups = 1;
    p.c = u(1, 24);
    p.k = u(1, 40);
    const int64_t rs[] = {1, 3, 5, 7};
    p.r = p.s = rs[u(0, 3)];
    p.h = u(1, 20);
    p.w = u(1, 20);
    p.pad_h = u(0, p.r / 2);
    p.pad_w = u(0, p.s / 2);
    p.stride_h = u(1, 2);
    p.stride_w = u(1, 2);
    switch (family) {
      case 0:
        p.r = 1;
        p.s = 1;
        p.pad_h = p.pad_w = 0;
        break;
      case 1:
        p.r = u(1, 7);
        p.s = u(1, 7);
        break;  // non-square
      case 2:
        p.pad_h = p.r + u(0, 2);
        p.pad_w = p.s + u(0, 2);
        break;  // padding > filter
      case 3:
        p.stride_h = p.r + u(1, 2);
        p.stride_w = p.s + u(1, 2);
        break;  // stride > filter
      case 4:
        p.dil_h = u(2, 3);
        p.dil_w = u(1, 3);
        break;  // dilation
      case 5: {
        const int64_t g2 = u(2, 4);
        p.groups = g2;
        p.c = g2 * u(1, 6);
        p.k = g2 * u(1, 8);
        break;
      }
      case 6:
        p.groups = p.c = p.k = u(2, 24);
        break;  // depthwise
      case 7:
        p.k = p.c * u(1, 2);
        p.groups = p.c;
        break;  // depthwise multiplier
      case 8:
        p.h = p.r + 2 * p.pad_h - 1 + u(1, 1);
        break;  // P often 1
      case 9:
        p.h = u(20, 40);
        p.w = u(20, 40);
        p.c = u(1, 4);
        break;  // larger maps
      default:
        break;
    }
    c.xl = Layout(u(0, 2));
    c.wl = Layout(u(0, 2));
    c.yl = Layout(u(0, 2));
    p.mode = u(0, 1) ? Mode::Convolution : Mode::CrossCorrelation;
    if (u(0, 2) == 0) {
      c.alpha = float(u(1, 4)) * 0.5f;
      c.beta = float(u(0, 4)) * 0.25f;
    }
    const int act = u(0, 3);  // what every executor fuses
    c.act = act == 0 ? Activation::ReLU : act == 1 ? Activation::SiLU : Activation::Identity;
    c.bias = u(0, 3) == 0;
    try {
      p.validate();
    } catch (const Error&) {
      continue;
    }
    if (double(p.n) * p.k * p.p() * p.q() * p.c_per_group() * p.r * p.s > max_macs) continue;
    return c;
  }
}

/// Fills with values in [-1, 1) (float check) or small integers in [-3, 3] (exact check).
inline void fill(std::vector<float>& v, std::mt19937_64& g, bool integers) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::uniform_int_distribution<int> di(-3, 3);
  for (auto& e : v) e = integers ? float(di(g)) : d(g);
}

/// ||got - ref|| / ||ref||; NaN anywhere gives infinity.
inline double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) return INFINITY;
    e2 += double(got[i] - ref[i]) * (got[i] - ref[i]);
    r2 += double(ref[i]) * ref[i];
  }
  return r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
}

/// Host tensors of one case: inputs filled, y poisoned with NaN unless beta != 0 (then random).
struct HostTensors {
  TensorDesc xd, wd, yd;
  std::vector<float> x, w, y, bias;
  HostTensors(const Case& c, std::mt19937_64& g, bool integers) {
    xd = c.p.x_desc(c.xl);
    if (c.strided_x) {
      const int64_t sh = c.p.w + 3, sc = c.p.h * sh + 5;
      xd.strides = {c.p.c * sc + 7, sc, sh, 1};
    }
    wd = c.p.w_desc(c.wl);
    yd = c.p.y_desc(c.yl);
    x.resize(xd.span_elements());
    w.resize(wd.span_elements());
    y.resize(yd.span_elements());
    fill(x, g, integers);
    fill(w, g, integers);
    if (c.beta != 0.0f)
      fill(y, g, integers);
    else
      std::fill(y.begin(), y.end(), NAN);
    if (c.bias) {
      bias.resize(c.p.k);
      fill(bias, g, integers);
    }
  }
  Epilogue epilogue(const float* bias_ptr) const {
    Epilogue e;
    e.bias = bias.empty() ? nullptr : bias_ptr;
    return e;
  }
};

}  // namespace mconv::test
