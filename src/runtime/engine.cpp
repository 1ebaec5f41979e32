// Engine: target selection, the hardware model and the plan cache, device tables made with the plan,
// and a conv2d_forward that only checks and launches.
#include "mconv/engine.hpp"

#include <cmath>

#include "../algorithms/launch.hpp"
#include "../core/call_checks.hpp"
#include "cuda_device.hpp"
#include "mconv/cpu.hpp"

namespace mconv {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Identity:
      return "identity";
    case Activation::ReLU:
      return "relu";
    case Activation::SiLU:
      return "silu";
  }
  return "?";
}

Activation parse_activation(const std::string& s) {
  for (Activation a : {Activation::Identity, Activation::ReLU, Activation::SiLU})
    if (s == activation_name(a)) return a;
  throw Error(Status::BadParam, "activation: unknown name '" + s + "' (expected identity, relu or silu)");
}

namespace detail {

size_t PlanKeyHash::operator()(const PlanKey& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields, then the tile name
  for (int64_t v : k.fields) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return static_cast<size_t>(h ^ std::hash<std::string>()(k.tile));
}

}  // namespace detail

namespace {

detail::PlanKey plan_key(Pass pass, const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                         const PlanOptions& o, const std::optional<GroupStrides>& groups = std::nullopt,
                         double sm_share = 1.0) {
  detail::PlanKey key;
  size_t i = 0;
  auto put = [&](int64_t v) { key.fields.at(i++) = v; };
  put(int64_t(pass));
  for (int64_t v : {groups ? groups->x : -1, groups ? groups->w : -1, groups ? groups->y : -1}) put(v);
  for (int64_t v : {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.pad_h, p.pad_w, p.end_pad_h(), p.end_pad_w(), p.stride_h,
                    p.stride_w, p.dil_h, p.dil_w, p.groups, int64_t(p.mode)})
    put(v);
  for (const TensorDesc* d : {&x, &w, &y}) {
    put(int64_t(d->dtype));
    for (int64_t v : d->dims) put(v);
    for (int64_t v : d->strides) put(v);
  }
  for (int64_t v :
       {int64_t(o.target), int64_t(o.algorithm), int64_t(o.split_k), int64_t(o.deterministic), int64_t(o.math)})
    put(v);
  put(std::llround(sm_share * 1e6));  // millionths
  key.tile = o.tile;
  return key;  // 4 + 17 + 3 * 9 + 5 + 1 = 54 fields
}

}  // namespace

bool built_with_cuda() {
  return detail::cuda_device::compiled();
}
bool cuda_available() {
  return detail::cuda_device::available();
}

Engine::Engine(Target target, int device, void* stream, EngineOptions options)
    : target_(target), device_(device), stream_(stream), options_(options) {
  if (options_.plan_cache_capacity < 1) throw Error(Status::BadParam, "plan_cache_capacity: must be >= 1");
  if (target_ == Target::Auto) target_ = cuda_available() ? Target::Cuda : Target::Cpu;
  if (target_ == Target::Cuda) {
    if (!built_with_cuda()) throw Error(Status::NoDevice, "target: mconv was built without CUDA");
    if (!cuda_available()) throw Error(Status::NoDevice, "target: no CUDA device is visible");
    detail::cuda_device::check_index(device_);
  }
}

Engine::~Engine() = default;

const HardwareModel& Engine::hardware() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!hardware_)
    hardware_ = std::make_unique<HardwareModel>(target_ == Target::Cuda ? hardware_model(device_) : HardwareModel{});
  return *hardware_;
}

std::shared_ptr<const Plan> Engine::plan(const Problem& problem, const TensorDesc& x, const TensorDesc& w,
                                         const TensorDesc& y, PlanOptions options) {
  if (options.target != Target::Auto && options.target != target_)
    throw Error(Status::BadParam, std::string("target: plan asked for ") + target_name(options.target) +
                                      " on an engine bound to " + target_name(target_));
  options.target = target_;
  return step_plan(ForwardStep{problem, x, w, y, 0, 0, 0, std::nullopt}, options);
}

std::shared_ptr<const Plan> Engine::step_plan(const ForwardStep& step, const PlanOptions& options, bool filter_gradient,
                                              double sm_share) {
  const detail::PlanKey key = plan_key(filter_gradient ? Pass::BackwardFilter : Pass::Forward, step.problem, step.x,
                                       step.w, step.y, options, step.group_strides, sm_share);
  const HardwareModel& hw = hardware();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto hit = plans_.find(key)) return hit;
  auto plan = std::make_shared<Plan>(Plan::build(step.problem, step.x, step.w, step.y, hw, options,
                                                 StepContext{step.group_strides, filter_gradient, sm_share}));
  if (target_ == Target::Cuda) {
    detail::cuda_device::DeviceGuard guard(device_);
    plan->device_ = device_;
    // Only the implicit GEMMs read the offset table; the direct kernels need no device bytes at all.
    if (plan->algorithm() == Algorithm::ImplicitPrecomp || plan->algorithm() == Algorithm::ImplicitMma)
      plan->device_table_ = detail::cuda_device::upload_table(*plan, device_);
    detail::prepare_launch(*plan);
  }
  plans_.insert(key, plan, options_.plan_cache_capacity);
  return plan;
}

std::shared_ptr<const BackwardPlan> Engine::plan_backward(Pass pass, const Problem& problem, const TensorDesc& a,
                                                          const TensorDesc& b, const TensorDesc& out,
                                                          PlanOptions options) {
  if (options.target != Target::Auto && options.target != target_)
    throw Error(Status::BadParam, std::string("target: plan asked for ") + target_name(options.target) +
                                      " on an engine bound to " + target_name(target_));
  options.target = target_;
  const detail::PlanKey key = plan_key(pass, problem, a, b, out, options);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto hit = backward_plans_.find(key)) return hit;
  }
  auto plan = std::make_shared<BackwardPlan>();
  plan->pass = pass;
  plan->problem = problem;
  plan->a = a;
  plan->b = b;
  plan->out = out;
  // The CPU executor reads whole views (span_elements), so it gets one step per group where a fused
  // step's views would reach past the tensors.
  const GroupSteps groups = target_ == Target::Cuda ? GroupSteps::Fused : GroupSteps::PerGroup;
  plan->decomposition = pass == Pass::BackwardData ? decompose_backward_data(problem, a, b, out, groups)
                                                   : decompose_backward_filter(problem, a, b, out, groups);
  // Several steps run at once on side streams on the GPU (Note [dependent launch] aside), each on its
  // share of the SMs (Note [phase steps' SM shares]).
  const std::vector<double> shares = step_sm_shares(plan->decomposition);
  for (size_t i = 0; i < plan->decomposition.steps.size(); ++i)
    plan->plans.push_back(step_plan(plan->decomposition.steps[i], options, pass == Pass::BackwardFilter,
                                    target_ == Target::Cuda ? shares[i] : 1.0));
  std::lock_guard<std::mutex> lock(mutex_);
  if (target_ == Target::Cuda && plan->plans.size() > 1 && !fork_)
    fork_ = std::make_unique<detail::cuda_device::StreamFork>(device_);
  backward_plans_.insert(key, plan, options_.plan_cache_capacity);
  return plan;
}

std::shared_ptr<const BackwardPlan> Engine::plan_backward_data(const Problem& problem, const TensorDesc& dy,
                                                               const TensorDesc& w, const TensorDesc& dx,
                                                               PlanOptions options) {
  return plan_backward(Pass::BackwardData, problem, dy, w, dx, options);
}

std::shared_ptr<const BackwardPlan> Engine::plan_backward_filter(const Problem& problem, const TensorDesc& x,
                                                                 const TensorDesc& dy, const TensorDesc& dw,
                                                                 PlanOptions options) {
  return plan_backward(Pass::BackwardFilter, problem, x, dy, dw, options);
}

void Engine::conv2d_backward_data(const BackwardPlan& plan, const void* dy, const void* w, void* dx, float alpha,
                                  float beta, void* stream) {
  run_backward(plan, Pass::BackwardData, dy, w, dx, alpha, beta, stream);
}

void Engine::conv2d_backward_filter(const BackwardPlan& plan, const void* x, const void* dy, void* dw, float alpha,
                                    float beta, void* stream) {
  run_backward(plan, Pass::BackwardFilter, x, dy, dw, alpha, beta, stream);
}

void Engine::run_backward(const BackwardPlan& plan, Pass pass, const void* a, const void* b, void* out, float alpha,
                          float beta, void* stream) {
  if (plan.pass != pass)
    throw Error(Status::BadParam, std::string("plan: a ") + pass_name(plan.pass) + " plan given to " +
                                      (pass == Pass::BackwardData ? "conv2d_backward_data" : "conv2d_backward_filter"));
  for (const auto& p : plan.plans)
    if (p->target() != target_ || (target_ == Target::Cuda && p->device() != device_))
      throw Error(Status::BadParam, "plan: made by another engine");
  const Epilogue e{alpha, beta, nullptr, Activation::Identity};
  const int esz = dtype_size(plan.out.dtype);
  const detail::TensorNames names =
      pass == Pass::BackwardData ? detail::TensorNames{"dy", "w", "dx"} : detail::TensorNames{"x", "dy", "dw"};
  detail::check_call(a, b, out, e, esz, names);
  detail::check_disjoint(a, plan.a.span_elements(), b, plan.b.span_elements(), out, plan.out.span_elements(), esz,
                         names);
  if (stream == nullptr) stream = stream_;
  auto at = [esz](const void* p, int64_t offset) { return static_cast<const char*>(p) + offset * esz; };
  auto at_mut = [esz](void* p, int64_t offset) { return static_cast<char*>(p) + offset * esz; };
  const auto& steps = plan.decomposition.steps;
  if (target_ == Target::Cpu) {
    for (size_t i = 0; i < steps.size(); ++i)
      cpu::forward(*plan.plans[i], at(a, steps[i].x_offset), at(b, steps[i].w_offset), at_mut(out, steps[i].y_offset),
                   e);
    for (const FillStep& f : plan.decomposition.fills) cpu::fill_view(f.view, at_mut(out, f.offset), beta);
    return;
  }
  detail::cuda_device::DeviceGuard guard(device_);
  if (options_.check_device_pointers) {
    detail::cuda_device::check_device_pointer(a, names.x, device_, plan.a.span_elements() * esz);
    detail::cuda_device::check_device_pointer(b, names.w, device_, plan.b.span_elements() * esz);
    detail::cuda_device::check_device_pointer(out, names.y, device_, plan.out.span_elements() * esz);
  }
  // The fills and the steps write disjoint parts of the output.
  for (const FillStep& f : plan.decomposition.fills)
    detail::fill_view(f.view, at_mut(out, f.offset), beta, stream, options_.dependent_launch);
  // Independent steps (a strided dgrad's phases), each too small to fill the GPU alone, overlap on
  // side streams (resnet50 bf16 dgrad, docs/PERFORMANCE.md).
  detail::cuda_device::StreamFork* fork = nullptr;
  if (steps.size() > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    fork = fork_.get();
  }
  auto launch_steps = [&](auto&& stream_of) {
    for (size_t i = 0; i < steps.size(); ++i)
      detail::launch_forward(*plan.plans[i], at(a, steps[i].x_offset), at(b, steps[i].w_offset),
                             at_mut(out, steps[i].y_offset), e, stream_of(i), options_.dependent_launch);
  };
  if (!fork) {  // one step, or a plan of another engine of this device: one stream (none is made here)
    launch_steps([stream](size_t) { return stream; });
    return;
  }
  detail::cuda_device::StreamFork::Fork forked(*fork, stream);
  launch_steps([&forked](size_t i) { return forked.stream(i); });
}

size_t Engine::cached_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

int64_t Engine::plan_device_bytes(const Plan& plan) const {
  return plan.device_table() ? plan.table_bytes() : 0;
}

void Engine::conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e) {
  conv2d_forward(plan, x, w, y, e, stream_);
}

void Engine::conv2d_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e, void* stream) {
  if (plan.target() != target_)
    throw Error(Status::BadParam, std::string("plan: built for ") + target_name(plan.target()) + ", engine runs on " +
                                      target_name(target_));
  detail::check_call(x, w, y, e, dtype_size(plan.dtype()));
  detail::check_disjoint(x, plan.x_desc().span_elements(), w, plan.w_desc().span_elements(), y,
                         plan.y_desc().span_elements(), dtype_size(plan.y_desc().dtype));
  if (target_ == Target::Cpu) {
    cpu::forward(plan, x, w, y, e);
    return;
  }
  if (plan.device() != device_)
    throw Error(Status::BadParam, "plan: made by an engine on device " + std::to_string(plan.device()) +
                                      " (or not by an Engine), given to an engine on device " +
                                      std::to_string(device_));
  detail::cuda_device::DeviceGuard guard(device_);
  if (options_.check_device_pointers) {
    const int64_t esz = dtype_size(plan.y_desc().dtype);
    detail::cuda_device::check_device_pointer(x, "x", device_, plan.x_desc().span_elements() * esz);
    detail::cuda_device::check_device_pointer(w, "w", device_, plan.w_desc().span_elements() * esz);
    detail::cuda_device::check_device_pointer(y, "y", device_, plan.y_desc().span_elements() * esz);
    if (e.bias) detail::cuda_device::check_device_pointer(e.bias, "bias", device_, plan.problem().k * 4);
  }
  detail::launch_forward(plan, x, w, y, e, stream, options_.dependent_launch);
}

void Engine::synchronize() {
  if (target_ != Target::Cuda) return;
  detail::cuda_device::DeviceGuard guard(device_);
  detail::cuda_device::synchronize(stream_);
}

}  // namespace mconv
