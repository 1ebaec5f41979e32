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
    default:
      fail(std::string(name) + ".dtype: " + std::string(torch::headeronly::toString(t.scalar_type())) +
           " is not supported (float32, float16, bfloat16)");
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

Tensor conv2d(Tensor x, Tensor w, std::optional<Tensor> bias, std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups, std::string activation, bool allow_tf32) {
  if (x.dim() != 4) fail("input: expected a 4-d (N, C, H, W) tensor, got " + std::to_string(x.dim()) + " dims");
  if (w.dim() != 4) fail("weight: expected a 4-d (K, C/groups, R, S) tensor, got " + std::to_string(w.dim()) + " dims");
  const bool cuda = x.is_cuda();
  if (!cuda && !x.is_cpu()) fail("input: only CPU and CUDA tensors are supported");
  const int device = cuda ? x.get_device_index() : 0;
  if (w.is_cuda() != cuda || (cuda && w.get_device_index() != device)) fail("weight: on a different device than input");
  const mconv::DType dtype = dtype_of(x, "input");
  if (dtype_of(w, "weight") != dtype) fail("weight.dtype differs from input.dtype (they must match)");

  mconv::Problem p;
  p.n = x.size(0);
  p.c = x.size(1);
  p.h = x.size(2);
  p.w = x.size(3);
  p.k = w.size(0);
  p.r = w.size(2);
  p.s = w.size(3);
  const auto st = pair_arg(stride, "stride"), pad = pair_arg(padding, "padding"), dil = pair_arg(dilation, "dilation");
  p.stride_h = st[0];
  p.stride_w = st[1];
  p.pad_h = pad[0];
  p.pad_w = pad[1];
  p.dil_h = dil[0];
  p.dil_w = dil[1];
  p.groups = groups;
  if (groups > 0 && w.size(1) * groups != p.c)
    fail("weight: " + std::to_string(w.size(1)) + " channels per group x " + std::to_string(groups) +
         " groups != input channels " + std::to_string(p.c));

  const float* bias_ptr = nullptr;
  Tensor bias32;  // keeps a widened copy alive until the launch is queued
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

  try {
    // An empty batch is valid in PyTorch: plan one image for the shape checks, launch nothing.
    const int64_t batch = p.n;
    if (batch == 0) p.n = 1;
    p.validate();  // names the bad field before P and Q are used
    const int64_t P = p.p(), Q = p.q();
    const bool nhwc = is_channels_last(x);
    const std::array<int64_t, 4> sizes{batch, p.k, P, Q};
    const std::array<int64_t, 4> strides =
        nhwc ? std::array<int64_t, 4>{P * Q * p.k, 1, Q * p.k, p.k} : std::array<int64_t, 4>{p.k * P * Q, P * Q, Q, 1};
    Tensor y = empty_strided(sizes, strides, x);
    if (batch == 0) return y;
    mconv::PlanOptions options;
    if (dtype == mconv::DType::Float32 && allow_tf32 && cuda) options.math = mconv::MathMode::TF32;
    mconv::Engine& engine = engine_for(cuda, device);
    auto plan = engine.plan(p, desc_of(x, dtype), desc_of(w, dtype), desc_of(y, dtype), options);
    if (cuda)
      engine.conv2d_forward(*plan, x.const_data_ptr(), w.const_data_ptr(), y.mutable_data_ptr(), e,
                            current_cuda_stream(device));
    else
      engine.conv2d_forward(*plan, x.const_data_ptr(), w.const_data_ptr(), y.mutable_data_ptr(), e);
    return y;
  } catch (const mconv::Error& err) {
    fail(std::string(mconv::status_name(err.status())) + ": " + err.what());
  }
}

}  // namespace

STABLE_TORCH_LIBRARY(mconv, m) {
  m.def(
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], int[] padding=[0], "
      "int[] dilation=[1], int groups=1, str activation=\"identity\", bool allow_tf32=False) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(mconv, CPU, m) {
  m.impl("conv2d", TORCH_BOX(&conv2d));
}

STABLE_TORCH_LIBRARY_IMPL(mconv, CUDA, m) {
  m.impl("conv2d", TORCH_BOX(&conv2d));
}
