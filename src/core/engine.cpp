// Engine: target selection, the plan cache, and dispatch to the CPU or CUDA executors.
#include "mconv/engine.hpp"

#include <sstream>

#include "../cuda/cuda_backend.hpp"
#include "mconv/cpu.hpp"
#include "pointer_checks.hpp"

namespace mconv {

bool built_with_cuda() {
  return detail::cuda_backend::compiled();
}
bool cuda_available() {
  return detail::cuda_backend::available();
}

namespace detail {
DeviceSummary current_device_summary() {
  return cuda_backend::available() ? cuda_backend::summary() : DeviceSummary{};
}

HardwareModel planning_hardware_model(std::vector<std::string>& why) {
  if (cuda_backend::available()) return hardware_model(cuda_backend::current_device());
  // Inspecting a plan needs no GPU: the H100 80GB HBM3 as `mconv device` measured it (2026-11-22).
  HardwareModel m;
  m.name = "H100 (assumed: no GPU visible)";
  m.cc_major = 9;
  m.sm_count = 132;
  m.cores_per_sm = 128;
  m.smem_per_sm = 228 * 1024;
  m.smem_per_block_optin = 227 * 1024;
  m.l2_bytes = 50ll << 20;
  m.regs_per_sm = 65536;
  m.max_threads_per_sm = 2048;
  m.clock_mhz = 1980;
  m.latency_cycles = 283;
  m.bandwidth = 2.959e12;
  why.push_back("hardware model: no GPU visible, planning for an H100 (132 SMs, 283-cycle latency, 2.96 TB/s)");
  return m;
}
}  // namespace detail

// Device copies of plan tables, keyed like the plan cache.
struct Engine::DeviceTables {
  std::unordered_map<std::string, void*> tables;
};

Engine::Engine(Target target, int device, void* stream)
    : target_(target), device_(device), stream_(stream), tables_(std::make_unique<DeviceTables>()) {
  if (target_ == Target::Auto) target_ = cuda_available() ? Target::Cuda : Target::Cpu;
  if (target_ == Target::Cuda) {
    if (!built_with_cuda()) throw Error(Status::NoDevice, "target: mconv was built without CUDA");
    if (!cuda_available()) throw Error(Status::NoDevice, "target: no CUDA device is visible");
    detail::cuda_backend::set_device(device_);
  }
}

Engine::~Engine() {
  for (auto& [key, table] : tables_->tables) detail::cuda_backend::free_table(table, device_);
}

std::shared_ptr<const Plan> Engine::plan(const Problem& problem, const TensorDesc& x, const TensorDesc& w,
                                         const TensorDesc& y, PlanOptions options) {
  if (options.target != Target::Auto && options.target != target_)
    throw Error(Status::BadParam, std::string("target: plan asked for ") + target_name(options.target) +
                                      " on an engine bound to " + target_name(target_));
  options.target = target_;
  std::ostringstream key;
  key << problem.to_string() << " m" << int(problem.mode) << " a" << problem.alpha << " b" << problem.beta << "|"
      << x.to_string() << "|" << w.to_string() << "|" << y.to_string() << "|" << algorithm_name(options.algorithm)
      << "|" << options.tile << "|split" << options.split_k << "|dev" << device_;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key.str());
  if (it != plans_.end()) return it->second;
  if (target_ == Target::Cuda) detail::cuda_backend::set_device(device_);
  auto plan = std::make_shared<const Plan>(Plan::build(problem, x, w, y, options));
  plans_.emplace(key.str(), plan);
  return plan;
}

const void* Engine::device_table(const Plan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = plan.key();
  auto it = tables_->tables.find(key);
  if (it != tables_->tables.end()) return it->second;
  void* t = detail::cuda_backend::upload_table(plan, device_);
  tables_->tables.emplace(key, t);
  return t;
}

int64_t Engine::plan_device_bytes(const Plan& plan) {
  // Only the implicit GEMM reads the offset table; the direct kernels need no device bytes at all.
  return target_ == Target::Cuda && plan.algorithm() == Algorithm::ImplicitPrecomp ? plan.table_bytes() : 0;
}

void Engine::conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e) {
  if (plan.target() != target_)
    throw Error(Status::BadParam, std::string("plan: built for ") + target_name(plan.target()) + ", engine runs on " +
                                      target_name(target_));
  detail::check_tensors(x, w, y, e);
  const auto* xf = static_cast<const float*>(x);
  const auto* wf = static_cast<const float*>(w);
  auto* yf = static_cast<float*>(y);
  if (target_ == Target::Cpu) {
    if (plan.algorithm() == Algorithm::Reference)
      cpu::reference_forward(plan.problem(), plan.x_desc(), xf, plan.w_desc(), wf, plan.y_desc(), yf, e);
    else
      cpu::implicit_precomp_forward(plan, xf, wf, yf, e);
    return;
  }
  detail::cuda_backend::check_device_pointer(x, "x", device_);
  detail::cuda_backend::check_device_pointer(w, "w", device_);
  detail::cuda_backend::check_device_pointer(y, "y", device_);
  if (e.bias) detail::cuda_backend::check_device_pointer(e.bias, "bias", device_);
  if (plan.algorithm() == Algorithm::DirectBlock)
    detail::cuda_backend::direct_block_forward(plan, xf, wf, yf, e, stream_);
  else if (plan.algorithm() == Algorithm::SingleChannel)
    detail::cuda_backend::single_channel_forward(plan, xf, wf, yf, e, stream_);
  else if (plan.algorithm() == Algorithm::StrideFixed)
    detail::cuda_backend::stride_fixed_forward(plan, xf, wf, yf, e, stream_);
  else
    detail::cuda_backend::implicit_precomp_forward(plan, device_table(plan), xf, wf, yf, e, stream_);
}

void Engine::synchronize() {
  if (target_ == Target::Cuda) detail::cuda_backend::synchronize(stream_);
}

}  // namespace mconv
