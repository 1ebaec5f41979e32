// mconv: the runtime. An Engine is bound to a target (CPU, or one CUDA device and stream), caches
// plans and their device-side tables, and runs convolutions.
#pragma once

#include <array>
#include <cmath>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "mconv/backward.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv {

/// The activation a call fuses after the sum: identity, ReLU max(v, 0), or SiLU v / (1 + exp(-v)).
/// Every executor applies all three in fp32. The CPU and the CUDA memory-bound kernels fuse them
/// before the one rounding to y's dtype; the CUDA tensor-core tiles that store y from shared memory
/// apply SiLU there, and after the other GEMM-like kernels it is an in-place pass over y (both round
/// y twice in fp16/bf16). The CUDA SiLU is __expf / __fdividef, within 1e-6 relative.
enum class Activation : int { Identity = 0, ReLU = 1, SiLU = 2 };
const char* activation_name(Activation a);  // "identity", "relu", "silu"
/// act(v) in double: what the CPU executor, the reference and the checks of GPU results apply.
inline double apply_activation(Activation a, double v) {
  if (a == Activation::ReLU) return v < 0.0 ? 0.0 : v;
  if (a == Activation::SiLU) return v / (1.0 + std::exp(-v));
  return v;
}
Activation parse_activation(const std::string& s);  // throws Error(BadParam) on an unknown name

/// What a call does with the convolution: y = act(alpha*conv(x, w) + beta*y + bias[k]), in fp32 and
/// rounded once to y's dtype. Arguments of the call, not of the Plan, so one plan serves every alpha,
/// beta, bias and activation. beta = 0 never reads y (it may hold NaN). alpha and beta must be finite.
struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  ///< K fp32 values, in the executor's memory space; null = none
  Activation activation = Activation::Identity;
};

/// Compile-time features of this build.
bool built_with_cuda();
/// True when mconv was built with CUDA and a device is visible.
bool cuda_available();

/// How an Engine checks the pointers of a call, keeps its plans and launches its kernels.
struct EngineOptions {
  /// Ask the CUDA driver where x, w, y and bias live and how far their allocations reach
  /// (cudaPointerGetAttributes and cuMemGetAddressRange, about 1-3 us a call in all): host memory,
  /// another device's, or a buffer shorter than its descriptor is then a clear error instead of a
  /// fault in the kernel.
  /// Null and alignment checks are always made (they cost nothing).
  bool check_device_pointers = true;
  /// Plans kept by plan(), least recently used dropped first (a dropped plan stays valid for as long
  /// as the caller holds it; plan() then builds it again). At least 1.
  size_t plan_cache_capacity = 1024;
  /// Launch every kernel as a programmatic dependent launch (sm_90 and later): a kernel's blocks are
  /// dispatched (and, on the tensor cores, set up) while the previous kernel of the stream finishes,
  /// and wait for it before they touch memory, in a stream as in a CUDA graph. Off: each kernel
  /// starts only once the previous one has ended (measured in docs/PERFORMANCE.md, "Dependent
  /// launches").
  bool dependent_launch = true;
};

namespace detail {
/// What a plan is cached under: the pass, every field of the problem, the descriptors, the options
/// and a backward step's group strides, as integers (hashing them costs well under a microsecond, so
/// a per-call plan() is cheap).
struct PlanKey {
  std::array<int64_t, 54> fields{};
  std::string tile;
  bool operator==(const PlanKey& o) const { return fields == o.fields && tile == o.tile; }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const;
};

/// Plans by key, least recently used dropped first (not thread-safe: the Engine locks around it).
template <class P>
class PlanCache {
 public:
  std::shared_ptr<const P> find(const PlanKey& key) {
    auto it = plans_.find(key);
    if (it == plans_.end()) return nullptr;
    recent_.splice(recent_.begin(), recent_, it->second.second);  // now the most recently used
    return it->second.first;
  }
  void insert(const PlanKey& key, std::shared_ptr<const P> plan, size_t capacity) {
    recent_.push_front(key);
    plans_.emplace(key, std::make_pair(std::move(plan), recent_.begin()));
    while (plans_.size() > capacity) {
      plans_.erase(recent_.back());
      recent_.pop_back();
    }
  }
  size_t size() const { return plans_.size(); }

 private:
  std::list<PlanKey> recent_;  // keys in use order, most recent first
  std::unordered_map<PlanKey, std::pair<std::shared_ptr<const P>, typename std::list<PlanKey>::iterator>, PlanKeyHash>
      plans_;
};
}  // namespace detail

namespace detail::cuda_device {
class StreamFork;  // the engine's side streams for a backward pass's independent steps
}

/// One executor target plus its plan cache.
///
/// On CUDA the engine owns the hardware model of its device (measured once, cached on disk) and
/// plans with it; a plan it makes carries its device tables (uploaded on the engine's stream when
/// the plan is made). conv2d_forward then does no allocation, copy, synchronisation or lookup: it
/// can be captured in a CUDA graph. Every call restores the caller's current device.
/// plan() is thread-safe; conv2d_forward on one Engine from several threads is safe as long as they
/// share its stream.
///
/// Errors: a bad argument is an Error before anything is launched, and y is untouched. A fault inside a
/// kernel (memory the checks could not see, such as a tensor shorter than its descriptor) is a sticky
/// CUDA error: it surfaces as Error(CudaError) from that call, a later one or synchronize(), and the
/// device's CUDA context is then unusable for the whole process (the CUDA runtime's rule, not
/// mconv's): destroy the Engines and their plans, and restart the process.
class Engine {
 public:
  /// Target::Auto picks CUDA when a GPU is available, otherwise the CPU. `stream` is a cudaStream_t.
  explicit Engine(Target target = Target::Auto, int device = 0, void* stream = nullptr, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Target target() const { return target_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }
  void set_stream(void* stream) { stream_ = stream; }
  const EngineOptions& options() const { return options_; }

  /// The device model plans are made for (measured on first use; empty on the CPU target).
  const HardwareModel& hardware();

  /// Builds or looks up the plan for (problem, descriptors, options) on this engine's target. On CUDA
  /// a new plan's table is on the device when this returns (it allocates and waits for its copy, so
  /// make plans before a CUDA graph capture); a cached plan costs a hash lookup.
  std::shared_ptr<const Plan> plan(const Problem& problem, const TensorDesc& x, const TensorDesc& w,
                                   const TensorDesc& y, PlanOptions options = {});

  /// y = act(alpha * conv(x, w) + beta * y + bias). Pointers live in the target's memory space; `plan`
  /// must come from this engine's plan(). On CUDA the call is asynchronous on the engine's stream.
  /// On error nothing is written to y.
  void conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& epilogue = {});
  /// The same on `stream` (a cudaStream_t of the engine's device) instead of the engine's stream, for
  /// callers whose stream changes from call to call, such as a framework's current stream.
  void conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& epilogue, void* stream);

  /// The backward passes of `problem` (the forward problem; include/mconv/backward.hpp): dgrad writes
  /// dx from dy and w, wgrad writes dw from x and dy. Descriptors as the forward's (dx, dw like x, w;
  /// dy like y). Cached like plan(); each step's forward plan comes from plan(), so the options
  /// (algorithm, tile, split_k, deterministic, math) apply to every step. deterministic makes wgrad
  /// bitwise reproducible (no split-K atomics; slower on layers whose reduction N*P*Q is long).
  std::shared_ptr<const BackwardPlan> plan_backward_data(const Problem& problem, const TensorDesc& dy,
                                                         const TensorDesc& w, const TensorDesc& dx,
                                                         PlanOptions options = {});
  std::shared_ptr<const BackwardPlan> plan_backward_filter(const Problem& problem, const TensorDesc& x,
                                                           const TensorDesc& dy, const TensorDesc& dw,
                                                           PlanOptions options = {});

  /// dx = alpha * dgrad(dy, w) + beta * dx. Asynchronous on `stream` (null: the engine's stream) on
  /// CUDA; a strided layer's phase steps run on the engine's side streams, forked from `stream` and
  /// joined back into it, so `stream` sees one order and a CUDA graph capture of it holds them. On
  /// error nothing is written to dx.
  void conv2d_backward_data(const BackwardPlan& plan, const void* dy, const void* w, void* dx, float alpha = 1.0f,
                            float beta = 0.0f, void* stream = nullptr);
  /// dw = alpha * wgrad(x, dy) + beta * dw, likewise.
  void conv2d_backward_filter(const BackwardPlan& plan, const void* x, const void* dy, void* dw, float alpha = 1.0f,
                              float beta = 0.0f, void* stream = nullptr);

  /// Waits for the engine's stream (no-op on the CPU).
  void synchronize();

  /// Device bytes held for `plan` (its offset table), 0 on the CPU.
  int64_t plan_device_bytes(const Plan& plan) const;

  /// Forward plans in the cache now (at most options().plan_cache_capacity; a backward pass's steps
  /// are among them).
  size_t cached_plans() const;

 private:
  Target target_;
  int device_ = 0;
  void* stream_ = nullptr;
  EngineOptions options_;
  mutable std::mutex mutex_;
  std::unique_ptr<HardwareModel> hardware_;
  detail::PlanCache<Plan> plans_;
  detail::PlanCache<BackwardPlan> backward_plans_;
  // Side streams for a backward pass's independent steps, made with the first plan that has several.
  std::unique_ptr<detail::cuda_device::StreamFork> fork_;

  std::shared_ptr<const Plan> step_plan(const ForwardStep& step, const PlanOptions& options,
                                        bool filter_gradient = false, double sm_share = 1.0);
  std::shared_ptr<const BackwardPlan> plan_backward(Pass pass, const Problem& problem, const TensorDesc& a,
                                                    const TensorDesc& b, const TensorDesc& out, PlanOptions options);
  void run_backward(const BackwardPlan& plan, Pass pass, const void* a, const void* b, void* out, float alpha,
                    float beta, void* stream);
};

}  // namespace mconv
