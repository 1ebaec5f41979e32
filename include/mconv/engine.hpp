// mconv: the runtime. An Engine is bound to a target (CPU, or one CUDA device and stream), caches
// plans and their device-side tables, and runs convolutions.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "mconv/plan.hpp"

namespace mconv {

/// Fused epilogue applied after alpha/beta: y = act(alpha*conv + beta*y + bias[k]).
struct Epilogue {
  const float* bias = nullptr;  ///< K values, in the executor's memory space; null = none
  bool relu = false;
};

/// Compile-time features of this build.
bool built_with_cuda();
/// True when mconv was built with CUDA and a device is visible.
bool cuda_available();

/// One executor target plus its plan cache. Not thread-safe for concurrent conv2d_forward on one
/// Engine unless the caller serialises; plan() is thread-safe.
class Engine {
 public:
  /// Target::Auto picks CUDA when a GPU is available, otherwise the CPU. `stream` is a cudaStream_t.
  explicit Engine(Target target = Target::Auto, int device = 0, void* stream = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Target target() const { return target_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }
  void set_stream(void* stream) { stream_ = stream; }

  /// Builds or looks up the plan for (problem, descriptors, options) on this engine's target.
  std::shared_ptr<const Plan> plan(const Problem& problem, const TensorDesc& x, const TensorDesc& w,
                                   const TensorDesc& y, PlanOptions options = {});

  /// y = alpha * conv(x, w) + beta * y (+ epilogue). Pointers live in the target's memory space.
  /// On CUDA the call is asynchronous on the engine's stream. On error nothing is written to y.
  void conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& epilogue = {});

  /// Waits for the engine's stream (no-op on the CPU).
  void synchronize();

  /// Device bytes held for `plan` (its offset table), 0 on the CPU.
  int64_t plan_device_bytes(const Plan& plan);

 private:
  struct DeviceTables;
  const void* device_table(const Plan& plan);

  Target target_;
  int device_ = 0;
  void* stream_ = nullptr;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;
  std::unique_ptr<DeviceTables> tables_;
};

}  // namespace mconv
