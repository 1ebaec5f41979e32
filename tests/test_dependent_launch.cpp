// Note [dependent launch] on every kernel family: each kernel of a chain may start while the one
// before it finishes, and must wait for it before it reads that one's output (NaN until written) or
// overwrites what it still reads. Each chain is checked against the double reference, eager on a
// stream and replayed as a CUDA graph, with dependent launches on (the default) and off. Skipped
// where no GPU is visible.
#include <cuda_runtime.h>

#include <cmath>
#include <functional>
#include <string>

#include "../src/algorithms/single_channel/planner.hpp"
#include "device_bytes.hpp"
#include "dtype_tensors.hpp"

namespace mconv::test {
namespace {

using detail::kChannelsLastDepthwiseTile;
using detail::kPlaneBulkTile;
using detail::kPlaneStreamTile;
using detail::kSingleChannelPaperTile;

class DependentLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible: GPU tests skipped";
  }
};

// Values of n elements drawn from N(0, scale^2) and rounded to t.
std::vector<float> random_values(size_t n, float scale, DType t, std::mt19937_64& g) {
  std::vector<float> v(n);
  std::normal_distribution<float> d(0.0f, scale);
  for (float& e : v) e = round_to_dtype(d(g), t);
  return v;
}

TensorDesc as_fp32(TensorDesc d) {
  d.dtype = DType::Float32;
  return d;
}

// Runs `chain` on a fresh stream of `engine`, eager or captured and replayed as a graph, and waits.
void run_on_stream(Engine& engine, bool graph, const std::function<void()>& chain) {
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  engine.set_stream(s);
  cudaGraph_t captured = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    chain();
    CUDA_OK(cudaStreamEndCapture(s, &captured));
    CUDA_OK(cudaGraphInstantiate(&exec, captured, 0));
    CUDA_OK(cudaGraphLaunch(exec, s));
  } else {
    chain();
  }
  CUDA_OK(cudaStreamSynchronize(s));
  if (exec) cudaGraphExecDestroy(exec);
  if (captured) cudaGraphDestroy(captured);
  engine.set_stream(nullptr);
  cudaStreamDestroy(s);
}

// Runs body(engine, graph) on a fresh engine for each ordering: dependent launches on (the default)
// and off, eager on a stream and replayed as a CUDA graph.
template <class Body>
void for_each_ordering(Body body) {
  for (const bool dependent : {true, false})
    for (const bool graph : {false, true}) {
      SCOPED_TRACE(std::string(dependent ? "dependent launches" : "full ordering") + (graph ? ", graph" : ", eager"));
      EngineOptions options;
      options.dependent_launch = dependent;
      Engine engine(Target::Cuda, 0, nullptr, options);
      body(engine, graph);
    }
}

// A layer whose output has its input's shape, run three times in a chain: y1 = conv(x, w0),
// y2 = conv(y1, w1), y1 = conv(y2, w2). The third overwrites y1, which the second reads.
struct ForwardChain {
  const char* name;
  Problem p;
  Layout layout;
  DType dtype;
  Algorithm algorithm;
  int split_k = 0;        // implicit_precomp: atomic slices add into y after the pre-pass kernel sets it
  const char* tile = "";  // the single-channel kernels by name in fp16 and bf16
};

void check_forward_chain(const ForwardChain& c) {
  SCOPED_TRACE(c.name);
  const DType t = c.dtype;
  const TensorDesc xd = c.p.x_desc(c.layout, t), wd = c.p.w_desc(c.layout, t), yd = c.p.y_desc(c.layout, t);
  ASSERT_EQ(xd.dims, yd.dims);
  ASSERT_EQ(xd.strides, yd.strides);
  std::mt19937_64 g(test_seed() + 960);
  const size_t n = yd.span_elements(), filters = wd.span_elements();
  const std::vector<float> x0 = random_values(n, 1.0f, t, g);
  // Keeps each layer's output near unit scale.
  const float scale = 1.0f / std::sqrt(float(c.p.c_per_group() * c.p.r * c.p.s));
  const std::vector<float> w[3] = {random_values(filters, scale, t, g), random_values(filters, scale, t, g),
                                   random_values(filters, scale, t, g)};
  auto reference = [&](const std::vector<float>& in, const std::vector<float>& f) {
    std::vector<float> out(n, NAN);
    cpu::reference_forward(c.p, as_fp32(xd), in.data(), as_fp32(wd), f.data(), as_fp32(yd), out.data(), Epilogue{});
    for (float& e : out) e = round_to_dtype(e, t);
    return out;
  };
  const std::vector<float> y2_ref = reference(reference(x0, w[0]), w[1]);
  const double tol = tolerance(t, MathMode::Exact);
  for_each_ordering([&](Engine& engine, bool graph) {
    PlanOptions o;
    o.algorithm = c.algorithm;
    o.split_k = c.split_k;
    o.tile = c.tile;
    auto plan = engine.plan(c.p, xd, wd, yd, o);
    ASSERT_EQ(plan->algorithm(), c.algorithm);
    SCOPED_TRACE(division_name(plan->division()));
    const std::vector<unsigned char> poison = storage_bytes(t, std::vector<float>(n, NAN));
    DeviceBytes dx(storage_bytes(t, x0)), dy1(poison), dy2(poison), dw0(storage_bytes(t, w[0])),
        dw1(storage_bytes(t, w[1])), dw2(storage_bytes(t, w[2]));
    ASSERT_TRUE(dx.ptr && dy1.ptr && dy2.ptr && dw0.ptr && dw1.ptr && dw2.ptr);
    run_on_stream(engine, graph, [&] {
      engine.conv2d_forward(*plan, dx.ptr, dw0.ptr, dy1.ptr);
      engine.conv2d_forward(*plan, dy1.ptr, dw1.ptr, dy2.ptr);
      engine.conv2d_forward(*plan, dy2.ptr, dw2.ptr, dy1.ptr);
    });
    const std::vector<float> y2 = stored_values(t, dy2.read(n * dtype_size(t)));
    const std::vector<float> y3 = stored_values(t, dy1.read(n * dtype_size(t)));
    EXPECT_LT(rel_error(y2, y2_ref), tol) << "the second layer read y1 before the first had written it, or after "
                                             "the third had overwritten it";
    EXPECT_LT(rel_error(y3, reference(y2, w[2])), tol) << "the third layer read y2 before the second had written it";
  });
}

// The first layer's grid is several waves, so the second's blocks are dispatched into its last wave.
TEST_F(DependentLaunch, TensorCoreLayersKeepTheirOrder) {
  check_forward_chain({"implicit_mma bf16 NHWC 3x3", make(8, 64, 56, 56, 64, 3, 3, 1), Layout::NHWC, DType::BFloat16,
                       Algorithm::ImplicitMma});
  check_forward_chain({"implicit_mma bf16 NHWC 3x3, cluster split", make(4, 256, 7, 7, 256, 3, 3, 1), Layout::NHWC,
                       DType::BFloat16, Algorithm::ImplicitMma, 4});
}

TEST_F(DependentLaunch, SingleChannelLayersKeepTheirOrder) {
  const Problem depthwise = make(8, 128, 56, 56, 128, 3, 3, 1, 1, 1, 128);
  check_forward_chain({"channels-last depthwise bf16", depthwise, Layout::NHWC, DType::BFloat16,
                       Algorithm::SingleChannel, 0, kChannelsLastDepthwiseTile});
  check_forward_chain(
      {"plane streams bf16", depthwise, Layout::NCHW, DType::BFloat16, Algorithm::SingleChannel, 0, kPlaneStreamTile});
  check_forward_chain({"bulk plane streams bf16", depthwise, Layout::NCHW, DType::BFloat16, Algorithm::SingleChannel, 0,
                       kPlaneBulkTile});
  check_forward_chain({"strip, one channel and one filter, fp16", make(16, 1, 224, 224, 1, 3, 3, 1), Layout::NCHW,
                       DType::Float16, Algorithm::SingleChannel, 0, kSingleChannelPaperTile});
  check_forward_chain({"planner's pick, fp32 5x5 depthwise", make(4, 96, 28, 28, 96, 5, 5, 2, 1, 1, 96), Layout::NCHW,
                       DType::Float32, Algorithm::SingleChannel});
}

TEST_F(DependentLaunch, FfmaLayersKeepTheirOrder) {
  check_forward_chain({"direct_block fp32 depthwise", make(8, 64, 56, 56, 64, 3, 3, 1, 1, 1, 64), Layout::NCHW,
                       DType::Float32, Algorithm::DirectBlock});
  check_forward_chain(
      {"stride_fixed fp32", make(4, 32, 56, 56, 32, 3, 3, 1), Layout::NCHW, DType::Float32, Algorithm::StrideFixed});
  check_forward_chain({"stride_fixed fp32, channel slices on a small map", make(2, 256, 14, 14, 256, 3, 3, 1),
                       Layout::NCHW, DType::Float32, Algorithm::StrideFixed});
  check_forward_chain({"implicit_precomp fp32, split", make(2, 128, 14, 14, 128, 3, 3, 1), Layout::NCHW, DType::Float32,
                       Algorithm::ImplicitPrecomp, 4});
}

// A training step's order: y = conv(x, w) (y NaN until written), then dx from dy = y and dw from
// (x, dy = y), each launched right behind the forward layer. dgrad's fills, its phase steps on side
// streams and wgrad's pre-pass all run behind a dependent launch.
struct BackwardChain {
  const char* name;
  Problem p;
  Layout layout;
  DType dtype;
};

void check_backward_chain(const BackwardChain& c) {
  SCOPED_TRACE(c.name);
  const DType t = c.dtype;
  const TensorDesc xd = c.p.x_desc(c.layout, t), wd = c.p.w_desc(c.layout, t), yd = c.p.y_desc(c.layout, t);
  std::mt19937_64 g(test_seed() + 961);
  const size_t nx = xd.span_elements(), nw = wd.span_elements(), ny = yd.span_elements();
  const std::vector<float> x = random_values(nx, 1.0f, t, g);
  const std::vector<float> w = random_values(nw, 1.0f / std::sqrt(float(c.p.c_per_group() * c.p.r * c.p.s)), t, g);
  std::vector<float> y_ref(ny, NAN), dx_ref(nx, NAN), dw_ref(nw, NAN);
  cpu::reference_forward(c.p, as_fp32(xd), x.data(), as_fp32(wd), w.data(), as_fp32(yd), y_ref.data(), Epilogue{});
  for (float& e : y_ref) e = round_to_dtype(e, t);
  cpu::reference_backward_data(c.p, as_fp32(yd), y_ref.data(), as_fp32(wd), w.data(), as_fp32(xd), dx_ref.data());
  cpu::reference_backward_filter(c.p, as_fp32(xd), x.data(), as_fp32(yd), y_ref.data(), as_fp32(wd), dw_ref.data());
  const double tol = tolerance(t, MathMode::Exact);
  for_each_ordering([&](Engine& engine, bool graph) {
    auto forward = engine.plan(c.p, xd, wd, yd);
    auto dgrad = engine.plan_backward_data(c.p, yd, wd, xd);
    auto wgrad = engine.plan_backward_filter(c.p, xd, yd, wd);
    DeviceBytes dx_in(storage_bytes(t, x)), dw_in(storage_bytes(t, w)),
        dy(storage_bytes(t, std::vector<float>(ny, NAN))), ddx(storage_bytes(t, std::vector<float>(nx, NAN))),
        ddw(storage_bytes(t, std::vector<float>(nw, NAN)));
    ASSERT_TRUE(dx_in.ptr && dw_in.ptr && dy.ptr && ddx.ptr && ddw.ptr);
    run_on_stream(engine, graph, [&] {
      engine.conv2d_forward(*forward, dx_in.ptr, dw_in.ptr, dy.ptr);
      engine.conv2d_backward_data(*dgrad, dy.ptr, dw_in.ptr, ddx.ptr);
      engine.conv2d_backward_filter(*wgrad, dx_in.ptr, dy.ptr, ddw.ptr);
    });
    EXPECT_LT(rel_error(stored_values(t, ddx.read(nx * dtype_size(t))), dx_ref), tol)
        << "dgrad read dy before the forward layer had written it";
    EXPECT_LT(rel_error(stored_values(t, ddw.read(nw * dtype_size(t))), dw_ref), tol)
        << "wgrad read dy before the forward layer had written it";
  });
}

TEST_F(DependentLaunch, TrainingStepsKeepTheirOrder) {
  check_backward_chain(
      {"bf16 NHWC depthwise 3x3", make(8, 128, 56, 56, 128, 3, 3, 1, 1, 1, 128), Layout::NHWC, DType::BFloat16});
  check_backward_chain({"bf16 NHWC 3x3 stride 2", make(8, 64, 56, 56, 64, 3, 3, 1, 2), Layout::NHWC, DType::BFloat16});
  check_backward_chain({"fp32 NCHW 1x1 stride 2", make(4, 64, 28, 28, 128, 1, 1, 0, 2), Layout::NCHW, DType::Float32});
  check_backward_chain(
      {"fp32 NCHW depthwise 5x5", make(4, 96, 28, 28, 96, 5, 5, 2, 1, 1, 96), Layout::NCHW, DType::Float32});
}

}  // namespace
}  // namespace mconv::test
