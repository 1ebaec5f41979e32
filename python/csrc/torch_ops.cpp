// mconv's PyTorch operator torch.ops.mconv.conv2d, registered through LibTorch's stable ABI.
//
// Why the stable ABI (torch/csrc/stable): the library is compiled once against the headers of one
// torch release and keeps loading in later ones (target: 2.10 and up), it is independent of the
// Python version (it is a plain shared library, loaded with torch.ops.load_library), and a call goes
// through the C++ dispatcher straight to this kernel, with no Python frame of its own.
//
// The kernel reads the tensors' sizes and strides as they are (NCHW, channels_last or any other
// positive strides: mconv's Plan takes arbitrary strides, so nothing is copied or transposed),
// allocates only y (through PyTorch's allocator, in x's memory format) and launches on the current
// stream of the tensors' device. The one extra allocation: a bias in fp16/bf16 is widened to fp32
// (K values), the type mconv's epilogue reads.
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cmath>
#include <map>
#include <mconv/mconv.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("mconv.conv2d: " + message);
}

mconv::DType dtype_of(const Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return mconv::DType::Float32;
    case ScalarType::Half:
      return mconv::DType::Float16;
    case ScalarType::BFloat16:
      return mconv::DType::BFloat16;
    case ScalarType::Double:
      if (t.is_cpu()) return mconv::DType::Float64;  // the CPU's double loops: gradient checks
      [[fallthrough]];
    default:
      fail(std::string(name) + ".dtype: " + std::string(torch::headeronly::toString(t.scalar_type())) +
           " is not supported (float32, float16, bfloat16; float64 on the CPU)");
  }
}

mconv::TensorDesc desc_of(const Tensor& t, mconv::DType dtype) {
  mconv::TensorDesc d;
  d.dtype = dtype;
  for (int i = 0; i < 4; ++i) {
    d.dims[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

// y takes x's memory format: channels_last when x is channels_last-contiguous and not contiguous
// (PyTorch's is_contiguous(memory_format=...) rules: dims of size 1 do not count). The fake
// implementation in mconv/_library.py applies the same rule.
bool is_channels_last(const Tensor& t) {
  if (t.is_contiguous()) return false;
  int64_t expect = 1;
  for (int dim : {1, 3, 2, 0}) {
    if (t.size(dim) != 1 && t.stride(dim) != expect) return false;
    expect *= t.size(dim);
  }
  return true;
}

// One Engine per device (and one for the CPU), made on first use and kept for the process: each
// holds its plan cache. Device pointers need no driver query: a tensor's storage covers its strides.
mconv::Engine& engine_for(bool cuda, int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<mconv::Engine>> engines;
  const int key = cuda ? device : -1;
  std::lock_guard<std::mutex> lock(mutex);
  auto& e = engines[key];
  if (!e) {
    mconv::EngineOptions options;
    options.check_device_pointers = false;
    e = std::make_unique<mconv::Engine>(cuda ? mconv::Target::Cuda : mconv::Target::Cpu, cuda ? device : 0, nullptr,
                                        options);
  }
  return *e;
}

// The current CUDA stream of `device`, from libtorch_cuda (looked up at run time, so the library also
// loads into a CPU-only torch).
void* current_cuda_stream(int device) {
  using Fn = AOTITorchError (*)(int32_t, void**);
  static const Fn fn = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<Fn>(dlsym(lib, "aoti_torch_get_current_cuda_stream")) : Fn(nullptr);
  }();
  if (!fn) fail("this torch has no CUDA support (libtorch_cuda is not loaded)");
  void* stream = nullptr;
  if (fn(device, &stream) != AOTI_TORCH_SUCCESS) fail("could not read the current CUDA stream");
  return stream;
}

Tensor empty_strided(const std::array<int64_t, 4>& sizes, const std::array<int64_t, 4>& strides, const Tensor& like) {
  int32_t dtype = 0, device_type = 0, device_index = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(like.get(), &dtype));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  AtenTensorHandle out = nullptr;
  TORCH_ERROR_CODE_CHECK(
      aoti_torch_empty_strided(4, sizes.data(), strides.data(), dtype, device_type, device_index, &out));
  return Tensor(out);
}

std::array<int64_t, 2> pair_arg(const std::vector<int64_t>& v, const char* name) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  fail(std::string(name) + ": expected 1 or 2 values, got " + std::to_string(v.size()));
}

// The problem of x's and w's sizes (x: N, C, H, W; w: K, C/groups, R, S) and the hyper-parameters.
mconv::Problem problem_of(const std::array<int64_t, 4>& xs, const std::array<int64_t, 4>& ws,
                          const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                          const std::vector<int64_t>& dilation, int64_t groups) {
  mconv::Problem p;
  p.n = xs[0];
  p.c = xs[1];
  p.h = xs[2];
  p.w = xs[3];
  p.k = ws[0];
  p.r = ws[2];
  p.s = ws[3];
  const auto st = pair_arg(stride, "stride"), pad = pair_arg(padding, "padding"), dil = pair_arg(dilation, "dilation");
  p.stride_h = st[0];
  p.stride_w = st[1];
  p.pad_h = pad[0];
  p.pad_w = pad[1];
  p.dil_h = dil[0];
  p.dil_w = dil[1];
  p.groups = groups;
  if (groups > 0 && ws[1] * groups != p.c)
    fail("weight: " + std::to_string(ws[1]) + " channels per group x " + std::to_string(groups) +
         " groups != input channels " + std::to_string(p.c));
  return p;
}

std::array<int64_t, 4> sizes_of(const Tensor& t) {
  return {t.size(0), t.size(1), t.size(2), t.size(3)};
}

std::array<int64_t, 4> sizes_of(const std::vector<int64_t>& v, const char* name) {
  if (v.size() != 4) fail(std::string(name) + ": expected 4 sizes, got " + std::to_string(v.size()));
  return {v[0], v[1], v[2], v[3]};
}

// Packed strides of `sizes`, channels-last (NHWC) or contiguous (NCHW).
std::array<int64_t, 4> packed_strides(const std::array<int64_t, 4>& d, bool channels_last) {
  if (channels_last) return {d[2] * d[3] * d[1], 1, d[3] * d[1], d[1]};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

// Both tensors 4-d, on one CPU or CUDA device, in one dtype; returns (cuda, device).
std::pair<bool, int> common_device(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  for (auto [t, name] : {std::pair{&a, a_name}, {&b, b_name}})
    if (t->dim() != 4) fail(std::string(name) + ": expected a 4-d tensor, got " + std::to_string(t->dim()) + " dims");
  const bool cuda = a.is_cuda();
  if (!cuda && !a.is_cpu()) fail(std::string(a_name) + ": only CPU and CUDA tensors are supported");
  const int device = cuda ? a.get_device_index() : 0;
  if (b.is_cuda() != cuda || (cuda && b.get_device_index() != device))
    fail(std::string(b_name) + ": on a different device than " + a_name);
  const mconv::DType a_dtype = dtype_of(a, a_name);  // a's dtype is named first when both are unsupported
  if (dtype_of(b, b_name) != a_dtype)
    fail(std::string(b_name) + ".dtype differs from " + a_name + ".dtype (they must match)");
  return {cuda, device};
}

// y += bias[k], then the activation, on a CPU fp64 y (the epilogue ran with identity and no bias).
void add_bias_then_activate(Tensor& y, const Tensor& bias, mconv::Activation act) {
  auto* out = static_cast<double*>(y.mutable_data_ptr());
  const auto* b = static_cast<const double*>(bias.const_data_ptr());
  for (int64_t n = 0; n < y.size(0); ++n)
    for (int64_t k = 0; k < y.size(1); ++k)
      for (int64_t p = 0; p < y.size(2); ++p)
        for (int64_t q = 0; q < y.size(3); ++q) {
          double& v = out[n * y.stride(0) + k * y.stride(1) + p * y.stride(2) + q * y.stride(3)];
          v = mconv::apply_activation(act, v + b[k * bias.stride(0)]);
        }
}

Tensor conv2d(Tensor x, Tensor w, std::optional<Tensor> bias, std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups, std::string activation, bool allow_tf32) {
  if (x.dim() != 4) fail("input: expected a 4-d (N, C, H, W) tensor, got " + std::to_string(x.dim()) + " dims");
  if (w.dim() != 4) fail("weight: expected a 4-d (K, C/groups, R, S) tensor, got " + std::to_string(w.dim()) + " dims");
  const auto [cuda, device] = common_device(x, "input", w, "weight");
  const mconv::DType dtype = dtype_of(x, "input");
  mconv::Problem p = problem_of(sizes_of(x), sizes_of(w), stride, padding, dilation, groups);

  const float* bias_ptr = nullptr;
  Tensor bias32;  // keeps a widened copy alive until the launch is queued
  // fp64 (CPU): the epilogue's bias is fp32, so a double bias is added after the convolution instead,
  // in double (gradient checks perturb it by 1e-6).
  std::optional<Tensor> bias64;
  if (bias.has_value() && dtype == mconv::DType::Float64) {
    bias64 = bias;
    bias.reset();
    if (bias64->dim() != 1 || bias64->size(0) != p.k || !bias64->is_cpu() ||
        bias64->scalar_type() != ScalarType::Double)
      fail("bias: expected a float64 CPU tensor of shape (" + std::to_string(p.k) + ",)");
  }
  if (bias.has_value()) {
    const Tensor& b = *bias;
    if (b.dim() != 1 || b.size(0) != p.k)
      fail("bias: expected shape (" + std::to_string(p.k) + ",), got a " + std::to_string(b.dim()) + "-d tensor");
    if (b.is_cuda() != cuda || (cuda && b.get_device_index() != device)) fail("bias: on a different device than input");
    if (dtype_of(b, "bias") != dtype && b.scalar_type() != ScalarType::Float)
      fail("bias.dtype differs from input.dtype");
    if (b.scalar_type() != ScalarType::Float)
      bias32 = torch::stable::to(b, ScalarType::Float);  // a new, contiguous tensor
    else
      bias32 = b.stride(0) == 1 ? b : torch::stable::contiguous(b);
    bias_ptr = static_cast<const float*>(bias32.const_data_ptr());
  }
  mconv::Epilogue e;
  e.bias = bias_ptr;
  try {
    e.activation = mconv::parse_activation(activation);
  } catch (const mconv::Error& err) {
    fail(err.what());
  }
  mconv::Epilogue run = e;
  if (bias64) run.activation = mconv::Activation::Identity;  // after the bias, in add_bias_then_activate

  try {
    // An empty batch is valid in PyTorch: plan one image for the shape checks, launch nothing.
    const int64_t batch = p.n;
    if (batch == 0) p.n = 1;
    p.validate();  // names the bad field before P and Q are used
    const int64_t P = p.p(), Q = p.q();
    const std::array<int64_t, 4> sizes{batch, p.k, P, Q};
    Tensor y = empty_strided(sizes, packed_strides(sizes, is_channels_last(x)), x);
    if (batch == 0) return y;
    mconv::PlanOptions options;
    if (dtype == mconv::DType::Float32 && allow_tf32 && cuda) options.math = mconv::MathMode::TF32;
    mconv::Engine& engine = engine_for(cuda, device);
    auto plan = engine.plan(p, desc_of(x, dtype), desc_of(w, dtype), desc_of(y, dtype), options);
    if (cuda)
      engine.conv2d_forward(*plan, x.const_data_ptr(), w.const_data_ptr(), y.mutable_data_ptr(), run,
                            current_cuda_stream(device));
    else
      engine.conv2d_forward(*plan, x.const_data_ptr(), w.const_data_ptr(), y.mutable_data_ptr(), run);
    if (bias64) add_bias_then_activate(y, *bias64, e.activation);
    return y;
  } catch (const mconv::Error& err) {
    fail(std::string(mconv::status_name(err.status())) + ": " + err.what());
  }
}

// The two backward passes: `a` and `b` are the pass's inputs (dgrad: grad_output, weight; wgrad:
// grad_output, input), `out_sizes` the gradient's (input's or weight's sizes). The gradient is
// allocated in the memory format of `like` (grad_output for dgrad, input for wgrad).
Tensor backward(mconv::Pass pass, const Tensor& dy, const Tensor& other, const std::vector<int64_t>& out_sizes,
                const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                const std::vector<int64_t>& dilation, int64_t groups, bool allow_tf32, bool deterministic) {
  const bool dgrad = pass == mconv::Pass::BackwardData;
  const char* other_name = dgrad ? "weight" : "input";
  const auto [cuda, device] = common_device(dy, "grad_output", other, other_name);
  const mconv::DType dtype = dtype_of(dy, "grad_output");
  const std::array<int64_t, 4> out = sizes_of(out_sizes, dgrad ? "input_size" : "weight_size");
  mconv::Problem p =
      problem_of(dgrad ? out : sizes_of(other), dgrad ? sizes_of(other) : out, stride, padding, dilation, groups);
  try {
    const int64_t batch = p.n;
    if (batch == 0) p.n = 1;
    p.validate();
    const std::array<int64_t, 4> y_sizes{batch, p.k, p.p(), p.q()};
    if (sizes_of(dy) != y_sizes)
      fail("grad_output: sizes do not match the convolution's output (" + std::to_string(batch) + ", " +
           std::to_string(p.k) + ", " + std::to_string(p.p()) + ", " + std::to_string(p.q()) + ")");
    const bool channels_last = is_channels_last(dgrad ? dy : other);
    Tensor result = empty_strided(out, packed_strides(out, channels_last), dy);
    if (batch == 0) {  // dx is empty; dw of an empty batch is zero
      if (!dgrad) torch::stable::zero_(result);
      return result;
    }
    mconv::PlanOptions options;
    if (dtype == mconv::DType::Float32 && allow_tf32 && cuda) options.math = mconv::MathMode::TF32;
    options.deterministic = deterministic;
    mconv::Engine& engine = engine_for(cuda, device);
    void* stream = cuda ? current_cuda_stream(device) : nullptr;
    const mconv::TensorDesc dy_d = desc_of(dy, dtype), other_d = desc_of(other, dtype), out_d = desc_of(result, dtype);
    if (dgrad) {
      auto plan = engine.plan_backward_data(p, dy_d, other_d, out_d, options);
      engine.conv2d_backward_data(*plan, dy.const_data_ptr(), other.const_data_ptr(), result.mutable_data_ptr(), 1.0f,
                                  0.0f, stream);
    } else {
      auto plan = engine.plan_backward_filter(p, other_d, dy_d, out_d, options);
      engine.conv2d_backward_filter(*plan, other.const_data_ptr(), dy.const_data_ptr(), result.mutable_data_ptr(), 1.0f,
                                    0.0f, stream);
    }
    return result;
  } catch (const mconv::Error& err) {
    fail(std::string(mconv::status_name(err.status())) + ": " + err.what());
  }
}

Tensor conv2d_backward_data(Tensor grad_output, Tensor weight, std::vector<int64_t> input_size,
                            std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                            int64_t groups, bool allow_tf32) {
  return backward(mconv::Pass::BackwardData, grad_output, weight, input_size, stride, padding, dilation, groups,
                  allow_tf32, false);
}

Tensor conv2d_backward_filter(Tensor grad_output, Tensor input, std::vector<int64_t> weight_size,
                              std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                              int64_t groups, bool allow_tf32, bool deterministic) {
  return backward(mconv::Pass::BackwardFilter, grad_output, input, weight_size, stride, padding, dilation, groups,
                  allow_tf32, deterministic);
}

}  // namespace

STABLE_TORCH_LIBRARY(mconv, m) {
  m.def(
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], int[] padding=[0], "
      "int[] dilation=[1], int groups=1, str activation=\"identity\", bool allow_tf32=False) -> Tensor");
  m.def(
      "conv2d_backward_data(Tensor grad_output, Tensor weight, int[] input_size, int[] stride, int[] padding, "
      "int[] dilation, int groups, bool allow_tf32=False) -> Tensor");
  m.def(
      "conv2d_backward_filter(Tensor grad_output, Tensor input, int[] weight_size, int[] stride, int[] padding, "
      "int[] dilation, int groups, bool allow_tf32=False, bool deterministic=False) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(mconv, CPU, m) {
  m.impl("conv2d", TORCH_BOX(&conv2d));
  m.impl("conv2d_backward_data", TORCH_BOX(&conv2d_backward_data));
  m.impl("conv2d_backward_filter", TORCH_BOX(&conv2d_backward_filter));
}

STABLE_TORCH_LIBRARY_IMPL(mconv, CUDA, m) {
  m.impl("conv2d", TORCH_BOX(&conv2d));
  m.impl("conv2d_backward_data", TORCH_BOX(&conv2d_backward_data));
  m.impl("conv2d_backward_filter", TORCH_BOX(&conv2d_backward_filter));
}
