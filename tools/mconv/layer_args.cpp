#include "layer_args.hpp"

#include <unistd.h>

#include <cmath>

#include "mconv/cpu.hpp"
#include "mconv/numeric.hpp"

namespace mconv::tools {

void LayerArgs::add_to(CLI::App& app) {
  Problem& p = problem;
  app.add_option("--n", p.n, "batch (images)")->capture_default_str();
  app.add_option("--c", p.c, "input channels")->capture_default_str();
  app.add_option("--h", p.h, "input height")->capture_default_str();
  app.add_option("--w", p.w, "input width")->capture_default_str();
  app.add_option("--k", p.k, "filters (output channels)")->capture_default_str();
  app.add_option("--r", p.r, "filter height")->capture_default_str();
  app.add_option("--s", p.s, "filter width")->capture_default_str();
  app.add_option("--pad-h", p.pad_h, "zero padding, rows")->capture_default_str();
  app.add_option("--pad-w", p.pad_w, "zero padding, columns")->capture_default_str();
  app.add_option("--stride-h", p.stride_h, "stride, rows")->capture_default_str();
  app.add_option("--stride-w", p.stride_w, "stride, columns")->capture_default_str();
  app.add_option("--dil-h", p.dil_h, "dilation, rows")->capture_default_str();
  app.add_option("--dil-w", p.dil_w, "dilation, columns")->capture_default_str();
  app.add_option("--groups,-g", p.groups, "groups (c and k both divisible; = c for depthwise)")->capture_default_str();
  app.add_option("--alpha", alpha, "y = alpha*conv + beta*y (+ bias)")->capture_default_str();
  app.add_option("--beta", beta, "0 never reads y")->capture_default_str();
  app.add_option("--mode", mode, "cross (cross-correlation, the CNN convention) or conv (flipped filter)")
      ->check(CLI::IsMember({"cross", "conv"}))
      ->capture_default_str();
  app.add_option("--layout", layout, "layout of x, w and y: NCHW, NHWC or CNHW")->capture_default_str();
  app.add_option("--x-layout", x_layout, "overrides --layout for x");
  app.add_option("--w-layout", w_layout, "overrides --layout for w (NCHW = KCRS, NHWC = KRSC, CNHW = CKRS)");
  app.add_option("--y-layout", y_layout, "overrides --layout for y");
  app.add_option("--target", target, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--algo", algorithm,
                 "auto, reference, implicit_precomp, direct_block, single_channel, stride_fixed, implicit_mma, "
                 "depthwise_wgrad (wgrad of C/G = 1 layers), few_channel_wgrad (wgrad of C <= 4 layers, fp16/bf16), "
                 "few_channel (forward of C <= 4 layers, fp16/bf16/TF32), few_filter (layers of K <= 8, fp16/bf16), "
                 "window_mma (TF32 with x in plane order)")
      ->capture_default_str();
  app.add_option("--tile", tile, "force a CUDA tile (e.g. 128x128x8)");
  app.add_option("--split-k", split_k, "CUDA row slices: 0 = planner, 1 = off (bitwise reproducible), n = force")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--dtype", dtype,
                 "fp32 (exact), tf32 (fp32 tensors on tensor cores), fp16 or bf16 (storage; fp32 accumulation)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_flag("--deterministic", deterministic,
               "no atomics (splits only within a cluster, summed in rank order): bitwise the same y on every run");
}

Problem LayerArgs::resolved_problem() const {
  Problem p = problem;
  p.mode = mode == "conv" ? Mode::Convolution : Mode::CrossCorrelation;
  return p;
}

TensorDesc LayerArgs::x_desc() const {
  return resolved_problem().x_desc(parse_layout(x_layout.empty() ? layout : x_layout), storage_dtype());
}
TensorDesc LayerArgs::w_desc() const {
  return resolved_problem().w_desc(parse_layout(w_layout.empty() ? layout : w_layout), storage_dtype());
}
TensorDesc LayerArgs::y_desc() const {
  return resolved_problem().y_desc(parse_layout(y_layout.empty() ? layout : y_layout), storage_dtype());
}

DType LayerArgs::storage_dtype() const {
  return parse_precision(dtype).first;
}

std::pair<DType, MathMode> parse_precision(const std::string& s) {
  if (s == "tf32") return {DType::Float32, MathMode::TF32};
  return {parse_dtype(s), MathMode::Exact};
}

double precision_tolerance(DType t, MathMode m) {
  if (t != DType::Float32) return 1e-2;
  return m == MathMode::TF32 ? 1e-3 : 1e-5;
}

double sampled_tolerance(DType t, MathMode m) {
  return t == DType::Float32 && m == MathMode::Exact ? 2e-5 : precision_tolerance(t, m);
}

void round_to_storage(std::vector<float>& v, DType t) {
  for (float& e : v) e = round_to_dtype(e, t);
}

TensorDesc widened(TensorDesc d) {
  d.dtype = DType::Float32;
  return d;
}

std::vector<unsigned char> to_storage(const std::vector<float>& v, DType t) {
  std::vector<unsigned char> b(v.size() * size_t(dtype_size(t)));
  from_float(t, v.data(), b.data(), int64_t(v.size()));
  return b;
}

std::vector<float> from_storage(const std::vector<unsigned char>& b, DType t) {
  std::vector<float> v(b.size() / size_t(dtype_size(t)));
  to_float(t, b.data(), v.data(), int64_t(v.size()));
  return v;
}

PlanOptions LayerArgs::plan_options() const {
  PlanOptions o;
  o.target = parse_target(target);
  o.algorithm = parse_algorithm(algorithm);
  o.tile = tile;
  o.split_k = split_k;
  o.deterministic = deterministic;
  o.math = parse_precision(dtype).second;
  return o;
}

/// A host buffer of `count` floats for tensor `what`, or an OutOfMemory error naming it and its size.
std::vector<float> host_tensor(const char* what, int64_t count, float value) {
  const double bytes = 4.0 * double(count);
  const double physical = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (physical > 0 && bytes > physical)
    throw Error(Status::OutOfMemory, std::string(what) + ": needs " + std::to_string(bytes / 1e9) +
                                         " GB of host memory, more than this machine has (" +
                                         std::to_string(physical / 1e9) + " GB)");
  try {
    return std::vector<float>(static_cast<size_t>(count), value);
  } catch (const std::bad_alloc&) {
    throw Error(Status::OutOfMemory,
                std::string(what) + ": cannot allocate " + std::to_string(bytes / 1e9) + " GB of host memory");
  }
}

void fill_uniform(std::vector<float>& v, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& e : v) e = d(gen);
}

double sampled_error(const Problem& p, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                     const TensorDesc& yd, const float* y, int64_t samples, uint64_t seed, Activation act) {
  const int64_t P = p.p(), Q = p.q(), total = p.n * p.k * P * Q;
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  double err2 = 0, ref2 = 0;
  const int64_t count = std::min(samples, total);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t idx = total <= samples ? i : pick(gen);
    const int64_t q = idx % Q, pp = (idx / Q) % P, k = (idx / (P * Q)) % p.k, n = idx / (P * Q * p.k);
    const double ref = apply_activation(act, cpu::reference_point(p, xd, x, wd, w, n, k, pp, q));
    const double got = y[n * yd.strides[0] + k * yd.strides[1] + pp * yd.strides[2] + q * yd.strides[3]];
    if (!std::isfinite(got)) return INFINITY;
    err2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

double sampled_backward_error(Pass pass, const Problem& p, const TensorDesc& ad, const float* a, const TensorDesc& bd,
                              const float* b, const TensorDesc& od, const float* out, int64_t samples, uint64_t seed) {
  const auto& d = od.dims;
  const int64_t total = d[0] * d[1] * d[2] * d[3];
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  auto at = [](const TensorDesc& t, const float* v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return double(v[i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2] + i3 * t.strides[3]]);
  };
  double err2 = 0, ref2 = 0;
  const int64_t count = std::min(samples, total);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t idx = total <= samples ? i : pick(gen);
    const int64_t i3 = idx % d[3], i2 = (idx / d[3]) % d[2], i1 = (idx / (d[3] * d[2])) % d[1],
                  i0 = idx / (d[3] * d[2] * d[1]);
    const double ref = pass == Pass::BackwardData
                           ? cpu::reference_backward_data_point(p, ad, a, bd, b, i0, i1, i2, i3)     // a = dy, b = w
                           : cpu::reference_backward_filter_point(p, ad, a, bd, b, i0, i1, i2, i3);  // a = x, b = dy
    const double got = at(od, out, i0, i1, i2, i3);
    if (!std::isfinite(got)) return INFINITY;
    err2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

}  // namespace mconv::tools
