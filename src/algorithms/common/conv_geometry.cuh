// The layer as the direct kernel families (direct_block, single_channel, its plane stream,
// stride_fixed) read it: pointers, element strides of x (n, c, h, w), w (k, c, r, s) and
// y (n, k, p, q), sizes, stride/padding/dilation and the epilogue. Each family's parameter struct
// derives from it and adds only its own division, and conv_geometry() fills it from a Plan once for
// all of them. (The implicit GEMM reads the Plan's start-address and output rules instead.)
#pragma once

#include <cstdint>

#include "mconv/engine.hpp"
#include "mconv/plan.hpp"

namespace mconv::cuda {

struct ConvGeometry {
  const float* x;
  const float* w;
  float* y;
  const float* bias;  // K values or null
  long long x_sn, x_sc, x_sh, x_sw;
  long long w_sk, w_sc, w_sr, w_ss;
  long long y_sn, y_sk, y_sp, y_sq;
  int groups, cg, kg;  // groups, channels and filters per group
  int N, H, W, P, Q, R, S;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int flip;  // true convolution: w[R-1-r][S-1-s]
  float alpha, beta;
  int activation;  // mconv::Activation's number (epilogue.cuh)
};

/// The geometry of `plan` with these tensors and epilogue (host side, once per launch).
inline ConvGeometry conv_geometry(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e) {
  const Problem& pr = plan.problem();
  const auto &xs = plan.x_desc().strides, &ws = plan.w_desc().strides, &ys = plan.y_desc().strides;
  ConvGeometry g{};
  g.x = x;
  g.w = w;
  g.y = y;
  g.bias = e.bias;
  g.x_sn = xs[0];
  g.x_sc = xs[1];
  g.x_sh = xs[2];
  g.x_sw = xs[3];
  g.w_sk = ws[0];
  g.w_sc = ws[1];
  g.w_sr = ws[2];
  g.w_ss = ws[3];
  g.y_sn = ys[0];
  g.y_sk = ys[1];
  g.y_sp = ys[2];
  g.y_sq = ys[3];
  g.groups = static_cast<int>(pr.groups);
  g.cg = static_cast<int>(pr.c_per_group());
  g.kg = static_cast<int>(pr.k_per_group());
  g.N = static_cast<int>(pr.n);
  g.H = static_cast<int>(pr.h);
  g.W = static_cast<int>(pr.w);
  g.P = static_cast<int>(pr.p());
  g.Q = static_cast<int>(pr.q());
  g.R = static_cast<int>(pr.r);
  g.S = static_cast<int>(pr.s);
  g.stride_h = static_cast<int>(pr.stride_h);
  g.stride_w = static_cast<int>(pr.stride_w);
  g.pad_h = static_cast<int>(pr.pad_h);
  g.pad_w = static_cast<int>(pr.pad_w);
  g.dil_h = static_cast<int>(pr.dil_h);
  g.dil_w = static_cast<int>(pr.dil_w);
  g.flip = pr.mode == Mode::Convolution;
  g.alpha = e.alpha;
  g.beta = e.beta;
  g.activation = static_cast<int>(e.activation);
  return g;
}

/// x, w and y in their storage dtype (fp32, fp16 or bf16), for the kernels templated on it; a
/// parameter struct that derives from ConvGeometry and this leaves ConvGeometry's fp32 pointers null.
struct StoragePointers {
  const void* xs;
  const void* ws;
  void* ys;
  template <class T>
  __host__ __device__ const T* x_as() const {
    return static_cast<const T*>(xs);
  }
  template <class T>
  __host__ __device__ const T* w_as() const {
    return static_cast<const T*>(ws);
  }
  template <class T>
  __host__ __device__ T* y_as() const {
    return static_cast<T*>(ys);
  }
};

/// Whether every row of x starts `bytes`-aligned and holds whole vectors of `bytes`: contiguous
/// rows, W and the row, channel and image strides multiples of the vector's elements, x itself
/// aligned (vector copies of its rows).
inline bool x_rows_aligned(const Plan& plan, const void* x, int bytes) {
  const auto& xs = plan.x_desc().strides;
  const int64_t v = bytes / dtype_size(plan.x_desc().dtype);
  return v >= 1 && xs[3] == 1 && plan.problem().w % v == 0 && xs[2] % v == 0 && xs[1] % v == 0 && xs[0] % v == 0 &&
         reinterpret_cast<uintptr_t>(x) % bytes == 0;
}
/// The same for fp32 x and float4s.
inline bool x_rows_float4_aligned(const Plan& plan, const float* x) {
  return x_rows_aligned(plan, x, 16);
}

/// The same for y's rows (float4 stores): contiguous rows, row, filter and image strides multiples
/// of 4, y 16-byte aligned.
inline bool y_rows_float4_aligned(const Plan& plan, const float* y) {
  const auto& ys = plan.y_desc().strides;
  return ys[3] == 1 && ys[2] % 4 == 0 && ys[1] % 4 == 0 && ys[0] % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
}

}  // namespace mconv::cuda
