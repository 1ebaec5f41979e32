// The backward passes on the GPU against their double references, in every precision: fp32 (the
// planner's families, depthwise dgrad steps included), TF32, fp16 and bf16, outputs poisoned with
// NaN on the device. Deterministic wgrad bitwise equal across runs. Skipped where no GPU is visible.
#include <cuda_runtime.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "backward_tensors.hpp"
#include "device_bytes.hpp"

namespace mconv::test {
namespace {

class BackwardGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible: GPU tests skipped";
  }
};

struct Precision {
  DType dtype;
  MathMode math;
  double tolerance;
};
constexpr Precision kPrecisions[] = {{DType::Float32, MathMode::Exact, 1e-5},
                                     {DType::Float32, MathMode::TF32, 1e-3},
                                     {DType::Float16, MathMode::Exact, 1e-2},
                                     {DType::BFloat16, MathMode::Exact, 1e-2}};

// The plan of one pass of a case, for its tensors' descriptors.
std::shared_ptr<const BackwardPlan> plan_pass(Engine& engine, const Case& c, Pass pass, const BackwardTensors& bt,
                                              const PlanOptions& o) {
  return pass == Pass::BackwardData ? engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o)
                                    : engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
}

// Runs one pass of a case on the GPU; returns the error and, through `out`, the output bytes.
double run_gpu(Engine& engine, const Case& c, Pass pass, const Precision& pr, std::mt19937_64& g, PlanOptions o = {},
               std::vector<unsigned char>* out = nullptr) {
  BackwardTensors bt(c, pass, pr.dtype, g);
  DeviceBytes a(bt.a_bytes), b(bt.b_bytes), y(bt.out_bytes);
  EXPECT_TRUE(a.ptr && b.ptr && y.ptr);
  if (!a.ptr || !b.ptr || !y.ptr) return INFINITY;
  o.math = pr.math;
  const auto plan = plan_pass(engine, c, pass, bt, o);
  if (pass == Pass::BackwardData)
    engine.conv2d_backward_data(*plan, a.ptr, b.ptr, y.ptr, c.alpha, c.beta);
  else
    engine.conv2d_backward_filter(*plan, a.ptr, b.ptr, y.ptr, c.alpha, c.beta);
  engine.synchronize();
  const std::vector<unsigned char> got = y.read(bt.out_bytes.size());
  if (out) *out = got;
  return bt.error(c, bt.decode(got));
}

TEST_F(BackwardGpu, EdgeCasesEveryPrecisionAndLayout) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 950);
  for (const Case& c0 : backward_edge_cases())
    for (Pass pass : {Pass::BackwardData, Pass::BackwardFilter})
      for (int l = 0; l < 3; ++l)
        for (const Precision& pr : kPrecisions) {
          Case c = backward_case(c0, pass);
          c.xl = c.yl = Layout(l);
          c.wl = Layout((l + 1) % 3);
          EXPECT_LT(run_gpu(engine, c, pass, pr, g), pr.tolerance)
              << pass_name(pass) << " " << dtype_name(pr.dtype) << " " << math_mode_name(pr.math) << " " << c.name();
        }
}

TEST_F(BackwardGpu, RandomCases) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 951);
  for (int i = 0; i < 240; ++i) {
    const Pass pass = i % 2 ? Pass::BackwardFilter : Pass::BackwardData;
    const Case c = backward_case(random_case(g, 400000), pass);
    const Precision& pr = kPrecisions[(i / 2) % 4];
    EXPECT_LT(run_gpu(engine, c, pass, pr, g), pr.tolerance)
        << pass_name(pass) << " " << dtype_name(pr.dtype) << " " << math_mode_name(pr.math) << " " << c.name();
  }
}

// dgrad of stage 4's 3x3 layer at batch 8: its one step on the cooperative 128x128 tile split 2
// ways that the planner picks at batch 32 (PlanDtypes.LongReductionsOnFewLargeTilesSplitInACluster),
// and on the 128x256 tile split 4 ways, the split rule's tile where y takes no tensor-map store.
TEST_F(BackwardGpu, DgradLongReductionSplitsTheLargestTile) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 958);
  Case c{make(8, 512, 7, 7, 512, 3, 3, 1)};
  c.xl = c.wl = c.yl = Layout::NHWC;
  c = backward_case(c, Pass::BackwardData);
  struct Split {
    const char* tile;
    int ways;
    const char* division;
  };
  for (const Split& split : {Split{"wgmma128x128_s3_tma_cooperative", 2, "wgmma128x128_s3_tma_cooperative_cs2"},
                             Split{"wgmma128x256_s4_tma", 4, "wgmma128x256_s4_tma_cs4"}})
    for (const Precision& pr : {kPrecisions[2], kPrecisions[3]}) {
      BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
      PlanOptions o;
      o.tile = split.tile;
      o.split_k = split.ways;
      auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
      ASSERT_EQ(plan->plans.size(), 1u);
      EXPECT_EQ(division_name(plan->plans[0]->division()), split.division);
      EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g, o), pr.tolerance)
          << split.division << " " << dtype_name(pr.dtype);
    }
}

// dgrad of first layers (C = 3, 7x7 and 5x5 at stride 2; Auto: direct_block for few filters): every
// phase step (4x4, 4x3, 3x4 and 3x3 taps of a 7x7; 3x3, 3x2, 2x3, 2x2 of a 5x5) takes the 4-filter
// shape on phases wider than 16 (Note [filter vectors], [bounded taps]): fp32 in every layout, and
// TF32 (exact FFMA) in plane order (Note [few filters off the tensor cores]); fp16 and bf16 in
// plane order run few_filter (Note [few-filter forward]).
// Alpha/beta on one, against the double reference.
TEST_F(BackwardGpu, FirstLayerDgradPhasesOnDirectBlock) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 963);
  std::vector<Case> cases{{make(2, 3, 40, 46, 32, 7, 7, 3, 2)}, {make(2, 3, 38, 41, 24, 5, 5, 2, 2)}};
  cases[1].alpha = 0.5f;
  cases[1].beta = 0.75f;
  for (const Precision& pr : kPrecisions)
    for (Case c : cases)
      for (int l = 0; l < 3; ++l) {
        c.xl = c.wl = c.yl = Layout(l);
        if (pr.dtype != DType::Float32 || pr.math != MathMode::Exact) {
          if (c.xl == Layout::NHWC) continue;  // channels-last: the tensor cores
          c.wl = Layout::NCHW;
        }
        c = backward_case(c, Pass::BackwardData);
        BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
        PlanOptions o;
        o.math = pr.math;
        auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
        EXPECT_EQ(plan->plans.size(), 4u) << c.name();
        // (fp16/bf16 steps run few_filter: Note [few-filter forward])
        const std::string want = pr.dtype == DType::Float32 ? "direct_32x8_r2x2_f4" : "few_filter_";
        for (const auto& step : plan->plans)
          EXPECT_EQ(division_name(step->division()).rfind(want, 0), 0u) << c.name() << ": " << step->to_text(0);
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g, o), pr.tolerance)
            << dtype_name(pr.dtype) << " " << math_mode_name(pr.math) << " " << c.name();
      }
}

// fp16/bf16 depthwise dgrad in plane order (NCHW, CNHW): the stride-1 step runs the plane streams;
// at stride 2 the phases' 1x1 step runs the plane stream and their 1x2, 2x1 and 2x2 steps (5x5: 3x2,
// 2x3, 2x2) direct_block, none the tensor-core GEMM, whose tile would hold one filter; at stride 3
// the plane stream's 1x1 steps. Against the double reference, with a channel multiplier of 2 (its
// dgrad steps reduce over 2 channels a group: implicit_mma).
TEST_F(BackwardGpu, HalfDepthwiseDgradStepsRunTheDirectFamilies) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 962);
  const std::vector<Case> cases{{make(2, 24, 28, 28, 24, 3, 3, 1, 1, 1, 24)},
                                {make(2, 24, 28, 28, 24, 3, 3, 1, 2, 1, 24)},
                                {make(2, 16, 27, 29, 16, 5, 5, 2, 2, 1, 16)},
                                {make(2, 8, 20, 20, 8, 3, 3, 1, 3, 1, 8)},
                                {make(2, 8, 16, 16, 16, 3, 3, 1, 2, 1, 8)}};
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (Case c : cases)
      for (Layout l : {Layout::NCHW, Layout::CNHW}) {
        c.xl = c.wl = c.yl = l;
        c = backward_case(c, Pass::BackwardData);
        BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
        auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd);
        for (const auto& step : plan->plans)
          if (c.p.k_per_group() == 1)
            EXPECT_NE(step->algorithm(), Algorithm::ImplicitMma) << c.name() << ": " << step->to_text(0);
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g), pr.tolerance)
            << dtype_name(pr.dtype) << " " << c.name();
      }
}

// A strided dgrad's phase steps run on side streams forked from the caller's stream and joined back
// into it (stride 3: nine steps on four streams). Work queued on the caller's stream just before the
// call (the NaN poison) and just after (the read back) stays in order; a CUDA graph captured on the
// stream replays the same bytes; a second engine's plan runs on one stream, also the same bytes
// (deterministic plans: no atomics).
TEST_F(BackwardGpu, StridedDgradStepsForkOntoSideStreams) {
  Engine engine(Target::Cuda), other(Target::Cuda);
  std::mt19937_64 g(test_seed() + 957);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (const Precision& pr : {kPrecisions[0], kPrecisions[3]})
    for (Case c : {Case{make(4, 64, 15, 15, 128, 3, 3, 1, 2)}, Case{make(2, 32, 20, 19, 64, 3, 3, 1, 3)}}) {
      c.xl = c.wl = c.yl = pr.dtype == DType::BFloat16 ? Layout::NHWC : Layout::NCHW;
      c = backward_case(c, Pass::BackwardData);
      BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
      DeviceBytes a(bt.a_bytes), b(bt.b_bytes), y(bt.out_bytes);
      ASSERT_TRUE(a.ptr && b.ptr && y.ptr);
      PlanOptions o;
      o.math = pr.math;
      o.deterministic = true;  // fp32 steps would otherwise split with atomics: the same bytes every run
      auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
      EXPECT_EQ(plan->plans.size(), size_t(c.p.stride_h * c.p.stride_w)) << c.name();
      for (const auto& step : plan->plans) EXPECT_TRUE(step->deterministic()) << step->to_text(0);
      const size_t n = bt.out_bytes.size();
      auto run = [&](Engine& e, const BackwardPlan& bp) {
        std::vector<unsigned char> got(n);
        EXPECT_EQ(cudaMemsetAsync(y.ptr, 0xff, n, s), cudaSuccess);  // NaN in every dtype
        e.conv2d_backward_data(bp, a.ptr, b.ptr, y.ptr, 1.0f, 0.0f, s);
        EXPECT_EQ(cudaMemcpyAsync(got.data(), y.ptr, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
        EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        return got;
      };
      const std::vector<unsigned char> direct = run(engine, *plan);
      EXPECT_LT(bt.error(c, bt.decode(direct)), pr.tolerance) << dtype_name(pr.dtype) << " " << c.name();
      EXPECT_EQ(run(other, *plan), direct) << "one stream: " << c.name();
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(y.ptr, 0xff, n, s), cudaSuccess);
      engine.conv2d_backward_data(*plan, a.ptr, b.ptr, y.ptr, 1.0f, 0.0f, s);
      ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(y.read(n), direct) << "graph replay: " << c.name();
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  cudaStreamDestroy(s);
}

// Note [mma gather forms]: channels-last fp16/bf16 steps gather the filter (dgrad) or both operands
// (wgrad) transposed, element by element what has three channels (a first layer's wgrad when its
// split is forced; the planner gives it to few_channel_wgrad); wgrad splits tiles among a
// cluster and groups adding with atomics (a cluster only in deterministic plans). Strides, dilation,
// groups, partial tiles, alpha/beta, and every forced split, each against the double reference.
TEST_F(BackwardGpu, ChannelsLastHalfStepsTransposedGathersAndClusterSplits) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 954);
  std::vector<Case> cases = {{make(4, 64, 14, 14, 72, 3, 3, 1)},           // K = 72: a partial filter tile
                             {make(8, 32, 15, 15, 48, 3, 3, 1, 2)},        // stride 2: dgrad phases
                             {make(8, 64, 10, 10, 64, 3, 3, 1, 1, 1, 4)},  // groups of 16 channels
                             {make(16, 128, 7, 7, 256, 1, 1)},             // 1x1
                             {make(8, 16, 12, 12, 24, 3, 3, 2, 1, 2)},     // dilation 2
                             {make(4, 3, 23, 23, 64, 7, 7, 3, 2)}};        // a first layer: C = 3
  cases[0].alpha = 0.5f;
  cases[0].beta = 0.75f;
  for (Case& c : cases) c.xl = c.wl = c.yl = Layout::NHWC;
  // Under the sanitizers (MCONV_GPU_TEST_FEW): the partial tile with alpha/beta and the first layer.
  const bool few = std::getenv("MCONV_GPU_TEST_FEW") != nullptr;
  if (few) cases = {cases.front(), cases.back()};
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (const Case& c0 : cases)
      for (Pass pass : {Pass::BackwardData, Pass::BackwardFilter})
        for (auto [split, deterministic] :
             {std::pair{0, false}, {1, false}, {3, false}, {16, false}, {3, true}, {16, true}}) {
          // Without a deterministic plan wgrad's forced slices are groups adding with atomics (Note
          // [mma atomic slices]); with one, and for dgrad, a cluster summing in rank order.
          const Case c = backward_case(c0, pass);
          PlanOptions o;
          o.split_k = split;
          o.deterministic = deterministic;
          o.math = pr.math;
          if (split == 0) {  // the planner's forms: what the test is for
            BackwardTensors bt(c, pass, pr.dtype, g);
            auto plan = plan_pass(engine, c, pass, bt, o);
            // Three channels: dgrad's filters (dx's channels) and wgrad's images (x's) are no vector;
            // the planner's wgrad is few_channel_wgrad (Note [few-channel wgrad]) and its dgrad
            // few_filter (Note [few-filter forward]), the forced splits below implicit_mma's element
            // forms.
            const bool three = c0.p.c == 3;
            if (three) {
              EXPECT_EQ(plan->plans.at(0)->algorithm(),
                        pass == Pass::BackwardFilter ? Algorithm::FewChannelWgrad : Algorithm::FewFilter)
                  << c.name();
              EXPECT_LT(run_gpu(engine, c, pass, pr, g, o), pr.tolerance) << dtype_name(pr.dtype) << " " << c.name();
              continue;
            }
            const auto& d = std::get<ImplicitMmaDivision>(plan->plans.at(0)->division());
            const GatherForm want_a = pass == Pass::BackwardData ? GatherForm::Vector : GatherForm::Transposed;
            EXPECT_EQ(d.a_gather, want_a) << pass_name(pass) << " " << c.name();
            EXPECT_EQ(d.b_gather, GatherForm::Transposed) << pass_name(pass) << " " << c.name();
          }
          EXPECT_LT(run_gpu(engine, c, pass, pr, g, o), pr.tolerance)
              << pass_name(pass) << " " << dtype_name(pr.dtype) << " split " << split
              << (deterministic ? " deterministic " : " ") << c.name();
        }
}

// Note [wgmma tensor-map loads]: channels-last fp16/bf16 dgrad steps whose dy has a multiple of 64
// channels load dy through an im2col map and w as N-major boxes (filters, C, S, R) at each stage's
// tap: stride 1 and the phases of stride 2, dilation, a 1x1 stride-2 layer (one step and three fills),
// 7x7 with 16 filters in a 64-wide box, a partial second box (96), late-stage reductions, true
// convolution (flipped taps) and alpha/beta, also on persistent and warp-specialized tiles (Note
// [wgmma persistent tiles], [wgmma warp-specialized tiles]; the phases' dx is not dense, so they run
// the plain form on persistent tiles and store filter pairs from the accumulators on warp-specialized
// ones, Note [wgmma strided dgrad stores]). Every warpgroup step must take the maps; each case
// against the double reference.
TEST_F(BackwardGpu, DgradTensorMapLoads) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 956);
  std::vector<Case> cases = {{make(4, 64, 10, 9, 128, 3, 3, 1)},
                             {make(4, 96, 15, 15, 64, 3, 3, 1, 2)},
                             {make(2, 128, 14, 14, 64, 1, 1, 0, 2)},
                             {make(2, 32, 12, 12, 64, 3, 3, 2, 1, 2)},
                             {make(2, 16, 23, 23, 64, 7, 7, 3, 2)},
                             {make(2, 256, 7, 7, 512, 3, 3, 1)},
                             {make(2, 64, 9, 11, 192, 3, 5, 1)},
                             // Note [strided dgrad pixel runs]: phases of 72 channels, beta 0, a
                             // tile's last runs past K/G.
                             {make(2, 72, 13, 13, 64, 3, 3, 1, 2)}};
  Case conv{make(2, 64, 9, 9, 64, 3, 3, 1)};
  conv.p.mode = Mode::Convolution;
  cases.push_back(conv);
  cases[0].alpha = 0.5f;
  cases[0].beta = 0.75f;
  cases[1].alpha = 1.5f;  // a strided layer's phases, beta reading dx at each phase's pixels
  cases[1].beta = -0.5f;
  const bool few = std::getenv("MCONV_GPU_TEST_FEW") != nullptr;
  if (few) cases = {cases[0], cases[1]};
  // The planner's tiles (small grids take mma.sync tiles, which gather), then every step forced onto
  // one box of 64 filters a stage, two, and four.
  const char* tiles[] = {"",
                         "wgmma128x64_s3_tma",
                         "wgmma64x128_s3_tma",
                         "wgmma128x256_s4_tma",
                         "wgmma128x128_s3_tma_persistent",
                         "wgmma64x128_s4_tma_persistent",
                         "wgmma64x128_s4_tma_pingpong",
                         "wgmma128x128_s3_tma_pingpong",
                         "wgmma128x64_s3_tma_cooperative"};
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (Case c : cases)
      for (const char* tile : tiles) {
        if (few && tile[0] == 0) continue;
        c.xl = c.wl = c.yl = Layout::NHWC;
        c = backward_case(c, Pass::BackwardData);
        BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
        PlanOptions o;
        o.math = pr.math;
        o.tile = tile;
        auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
        for (const auto& step : plan->plans) {
          const auto& d = std::get<ImplicitMmaDivision>(step->division());
          if (tile[0] != 0 || d.tile_name.rfind("wgmma", 0) == 0)
            EXPECT_TRUE(d.tensor_maps) << c.name() << ": " << step->to_text(0);
          EXPECT_EQ(d.b_gather, GatherForm::Transposed) << c.name();
          // Warp-specialized tiles keep their form on every step, strided ones included.
          const std::string forced = tile;
          if (forced.find("_pingpong") != std::string::npos || forced.find("_cooperative") != std::string::npos)
            EXPECT_TRUE(d.persistent && d.consumers != ConsumerSchedule::None) << c.name() << ": " << step->to_text(0);
        }
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g, o), pr.tolerance)
            << dtype_name(pr.dtype) << " tile " << tile << " " << c.name();
      }
}

// Note [wgmma wave-fitted filter tiles]: the cooperative 128x208 tile forced onto stride-1 dgrad
// steps (N-major filters, which it does not take) of 200 and 424 channels runs 128x128's cooperative
// form, with alpha/beta; each against the double reference.
TEST_F(BackwardGpu, DgradWaveFittedTile) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 958);
  Case tail{make(2, 200, 9, 11, 64, 3, 3, 1)};
  tail.alpha = 0.5f;
  tail.beta = 0.75f;
  for (Case c : {tail, Case{make(3, 424, 7, 7, 128, 1, 1)}})
    for (const Precision& pr : {kPrecisions[2], kPrecisions[3]}) {
      c.xl = c.wl = c.yl = Layout::NHWC;
      c = backward_case(c, Pass::BackwardData);
      BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
      PlanOptions o;
      o.tile = "wgmma128x208_s4_tma_cooperative";
      auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
      ASSERT_EQ(plan->plans.size(), 1u);
      const auto& d = std::get<ImplicitMmaDivision>(plan->plans[0]->division());
      EXPECT_EQ(d.block_n, 128) << plan->plans[0]->to_text(0);
      EXPECT_EQ(d.consumers, ConsumerSchedule::Cooperative);
      EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g, o), pr.tolerance)
          << dtype_name(pr.dtype) << " " << c.name();
    }
}

// Note [wgmma tensor-map loads]: channels-last fp16/bf16 wgrad steps whose layer has a multiple of
// 64 channels load x as im2col columns over dy's pixels at the block's tap and dy as boxes of pixels x
// filters: stride 1 and 2, a 1x1 stride-2 layer, dilation, a non-square filter, a partial filter box
// (K = 192), alpha/beta. On the planner's tiles, then forced onto 64- and 128-column tiles (refused,
// with a reason, where C is no multiple of the tile's columns) and a forced cluster split, and onto
// cooperative warp-specialized blocks (Note [wgmma warp-specialized wgrad]): unsplit, in atomic
// groups (6), in groups of clusters (12 = 6 x 2) and, deterministic, in a cluster of 3 (slices of no
// rows where the reduction is shorter); each against the double reference.
TEST_F(BackwardGpu, WgradTensorMapLoads) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 957);
  std::vector<Case> cases = {{make(4, 64, 10, 9, 64, 3, 3, 1)},       {make(2, 128, 15, 15, 64, 3, 3, 1, 2)},
                             {make(2, 128, 14, 14, 128, 1, 1, 0, 2)}, {make(2, 64, 12, 12, 64, 3, 3, 2, 1, 2)},
                             {make(2, 256, 7, 7, 192, 3, 3, 1)},      {make(2, 128, 9, 11, 64, 3, 5, 1)}};
  cases[0].alpha = 0.5f;
  cases[0].beta = 0.75f;
  cases[1].alpha = 1.5f;
  cases[1].beta = 0.5f;
  const bool few = std::getenv("MCONV_GPU_TEST_FEW") != nullptr;
  if (few) cases = {cases[0], cases[1]};
  struct Forced {
    const char* tile;
    int split;
    bool deterministic = false;
  };
  const Forced forced[] = {{"", 0},
                           {"wgmma64x128_s3_tma", 0},
                           {"wgmma64x64_s3_tma", 0},
                           {"wgmma64x64_s8_tma", 0},
                           {"wgmma64x64_s8_tma", 16, true},
                           {"wgmma128x128_s3_tma", 0},
                           {"wgmma64x128_s4_tma", 4},
                           {"wgmma128x128_s3_tma_cooperative", 0},
                           {"wgmma128x64_s3_tma_cooperative", 6},
                           {"wgmma128x128_s3_tma_cooperative", 12},
                           {"wgmma128x64_s3_tma_cooperative", 3, true}};
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (Case c : cases)
      for (const Forced& f : forced) {
        if (few && f.tile[0] == 0) continue;
        c.xl = c.wl = c.yl = Layout::NHWC;
        c = backward_case(c, Pass::BackwardFilter);
        BackwardTensors bt(c, Pass::BackwardFilter, pr.dtype, g);
        PlanOptions o;
        o.math = pr.math;
        o.tile = f.tile;
        o.split_k = f.split;
        o.deterministic = f.deterministic;
        const bool whole_tiles =
            f.tile[0] == 0 || c.p.c % (std::string(f.tile).rfind("wgmma64", 0) == 0 ? 64 : 128) == 0;
        if (!whole_tiles) {
          try {
            engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
            ADD_FAILURE() << f.tile << " on " << c.name() << ": C is no multiple of the tile's columns";
          } catch (const Error& e) {
            EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
            EXPECT_NE(std::string(e.what()).find("not a multiple of the tile's"), std::string::npos) << e.what();
          }
          continue;
        }
        auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
        for (const auto& step : plan->plans) {
          const auto& d = std::get<ImplicitMmaDivision>(step->division());
          if (f.tile[0] != 0 || (d.tile_name.rfind("wgmma", 0) == 0 && c.p.c % d.block_m == 0))
            EXPECT_TRUE(d.tensor_maps) << c.name() << ": " << step->to_text(0);
          EXPECT_EQ(d.a_gather, GatherForm::Transposed) << c.name();
        }
        if (std::string(f.tile).find("_cooperative") != std::string::npos)
          for (const auto& step : plan->plans)
            EXPECT_EQ(std::get<ImplicitMmaDivision>(step->division()).consumers, ConsumerSchedule::Cooperative)
                << c.name() << ": " << step->to_text(0);
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g, o), pr.tolerance)
            << dtype_name(pr.dtype) << " tile " << f.tile << " split " << f.split << " " << c.name();
      }
}

TEST_F(BackwardGpu, LargeReductionWgradAndDeterministicMode) {
  // A ResNet-like layer whose wgrad reduction (N*P*Q = 6272) is long: split-K with atomics by
  // default, bitwise reproducible with deterministic.
  Engine engine(Target::Cuda);
  Case c{make(8, 64, 28, 28, 64, 3, 3, 1)};
  c.xl = c.wl = c.yl = Layout::NHWC;
  PlanOptions det;
  det.deterministic = true;
  for (const Precision& pr : kPrecisions) {
    std::mt19937_64 g1(test_seed() + 952), g2(test_seed() + 952);
    std::vector<unsigned char> first, second;
    EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g1, det, &first), pr.tolerance) << dtype_name(pr.dtype);
    EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g2, det, &second), pr.tolerance);
    EXPECT_EQ(first, second) << dtype_name(pr.dtype) << " " << math_mode_name(pr.math);
    std::mt19937_64 g3(test_seed() + 953);
    EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g3), pr.tolerance) << dtype_name(pr.dtype);
    EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g3), pr.tolerance) << dtype_name(pr.dtype);
  }
}

// Note [mma reduction runs]: the wgrad of 1x1, stride-1 layers in plane order on the tensor cores,
// x and dy gathered as 16-byte runs of taps, in TF32, fp16 and bf16: planes of 8x12 and 8x8 (whole
// runs of 4 and 8 taps) and 14x14 (of 4 only: the 16-bit steps gather elements), grouped, alpha and
// beta; atomic groups, and deterministic clusters bitwise equal across runs.
TEST_F(BackwardGpu, PlaneOrderOneByOneWgradGathersRunsOfTaps) {
  Engine engine(Target::Cuda);
  std::vector<Case> cases{{make(6, 40, 8, 12, 24, 1, 1)},
                          {make(4, 64, 14, 14, 96, 1, 1)},
                          {make(16, 128, 8, 8, 72, 1, 1)},
                          {make(3, 32, 8, 8, 48, 1, 1, 0, 1, 1, 2)}};
  cases[1].alpha = 0.5f;
  cases[1].beta = 0.75f;
  for (const Precision& pr : {kPrecisions[1], kPrecisions[2], kPrecisions[3]})
    for (Case c : cases) {
      c = backward_case(c, Pass::BackwardFilter);
      const bool runs = c.p.h * c.p.w % (16 / dtype_size(pr.dtype)) == 0;
      for (bool deterministic : {false, true}) {
        PlanOptions o;
        o.deterministic = deterministic;
        o.math = pr.math;
        std::mt19937_64 g1(test_seed() + 966), g2(test_seed() + 966);
        {
          BackwardTensors bt(c, Pass::BackwardFilter, pr.dtype, g1);
          auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
          ASSERT_EQ(plan->plans.size(), 1u);
          const Plan& step = *plan->plans[0];
          ASSERT_EQ(step.algorithm(), Algorithm::ImplicitMma) << c.name() << ": " << step.to_text(0);
          EXPECT_EQ(std::get<ImplicitMmaDivision>(step.division()).a_gather,
                    runs ? GatherForm::Vector : GatherForm::Element)
              << c.name() << ": " << step.to_text(0);
          if (deterministic) EXPECT_TRUE(plan->deterministic()) << c.name();
        }
        g1.seed(test_seed() + 966);
        std::vector<unsigned char> first, second;
        const std::string what = std::string(dtype_name(pr.dtype)) + " " + math_mode_name(pr.math) +
                                 (deterministic ? " deterministic " : " ") + c.name();
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g1, o, &first), pr.tolerance) << what;
        if (!deterministic) continue;
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g2, o, &second), pr.tolerance) << what;
        EXPECT_EQ(first, second) << what;
      }
    }
}

// Note [mma filter rows]: the wgrad steps of padded, strided and dilated layers in plane order
// gather x element by element, and dy's P x Q planes (the step's filter) as 16-byte vectors of rows
// where P*Q is whole vectors, in TF32, fp16 and bf16: groups, alpha and beta, atomic groups and
// deterministic clusters bitwise equal across runs; a 7x7 plane (49) keeps the element gather.
TEST_F(BackwardGpu, PlaneOrderWgradStepsCopyDyRowsAsVectors) {
  Engine engine(Target::Cuda);
  std::vector<Case> cases{{make(4, 24, 8, 12, 40, 3, 3, 1)},
                          {make(3, 32, 8, 12, 48, 1, 1, 0, 2)},
                          {make(2, 16, 12, 12, 24, 3, 3, 2, 1, 2)},
                          {make(4, 32, 8, 8, 64, 3, 3, 1, 1, 1, 2)},
                          {make(8, 16, 7, 7, 32, 3, 3, 1)}};
  cases[0].alpha = 0.5f;
  cases[0].beta = 0.75f;
  for (const Precision& pr : {kPrecisions[1], kPrecisions[2], kPrecisions[3]})
    for (Case c : cases) {
      c = backward_case(c, Pass::BackwardFilter);
      const bool rows = c.p.p() * c.p.q() % (16 / dtype_size(pr.dtype)) == 0;
      for (bool deterministic : {false, true}) {
        PlanOptions o;
        o.deterministic = deterministic;
        o.math = pr.math;
        const std::string what = std::string(dtype_name(pr.dtype)) + " " + math_mode_name(pr.math) +
                                 (deterministic ? " deterministic " : " ") + c.name();
        std::mt19937_64 g1(test_seed() + 967), g2(test_seed() + 967);
        {
          BackwardTensors bt(c, Pass::BackwardFilter, pr.dtype, g1);
          auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
          ASSERT_EQ(plan->plans.size(), 1u);
          const Plan& step = *plan->plans[0];
          ASSERT_EQ(step.algorithm(), Algorithm::ImplicitMma) << what << ": " << step.to_text(0);
          const auto& d = std::get<ImplicitMmaDivision>(step.division());
          EXPECT_EQ(d.a_gather, GatherForm::Element) << what << ": " << step.to_text(0);
          EXPECT_EQ(d.b_gather, rows ? GatherForm::Vector : GatherForm::Element) << what << ": " << step.to_text(0);
        }
        g1.seed(test_seed() + 967);
        std::vector<unsigned char> first, second;
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g1, o, &first), pr.tolerance) << what;
        if (!deterministic) continue;
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g2, o, &second), pr.tolerance) << what;
        EXPECT_EQ(first, second) << what;
      }
    }
}

// Note [mma tf32 transposed filters]: TF32 steps whose filter operand has its filters contiguous --
// dgrad in channels-last (w's channels), dgrad of 1x1 stride-1 layers in plane order (x as pixel
// runs), wgrad in channels-last (both operands transposed) -- run on mma.sync tiles, the filters
// copied 4 at a time and loaded through registers. Filter counts of 16 (the narrow tile), 24 and
// 200 (edge tiles), padding, stride 2 (phase steps), groups, alpha and beta; outputs poisoned.
TEST_F(BackwardGpu, Tf32TransposedFiltersOnMmaSyncTiles) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 967);
  struct Shape {
    Problem p;
    Pass pass;
    Layout layout;
  };
  std::vector<Shape> shapes{{make(4, 64, 14, 14, 24, 3, 3, 1), Pass::BackwardData, Layout::NHWC},
                            {make(2, 200, 9, 11, 16, 3, 3, 1, 2), Pass::BackwardData, Layout::NHWC},
                            {make(3, 16, 10, 10, 32, 1, 1), Pass::BackwardData, Layout::NHWC},
                            {make(4, 24, 12, 12, 200, 1, 1), Pass::BackwardData, Layout::NCHW},
                            {make(2, 128, 8, 8, 64, 1, 1, 0, 1, 1, 2), Pass::BackwardData, Layout::NCHW},
                            {make(4, 40, 14, 14, 24, 3, 3, 1), Pass::BackwardFilter, Layout::NHWC},
                            {make(8, 64, 8, 8, 200, 1, 1, 0, 2), Pass::BackwardFilter, Layout::NHWC}};
  for (Shape& s : shapes) {
    Case c{s.p};
    c.xl = c.wl = c.yl = s.layout;
    c.alpha = 0.75f;
    c.beta = 0.5f;
    c = backward_case(c, s.pass);
    const Precision& pr = kPrecisions[1];
    {
      BackwardTensors bt(c, s.pass, pr.dtype, g);
      PlanOptions o;
      o.math = MathMode::TF32;
      auto plan = plan_pass(engine, c, s.pass, bt, o);
      for (const auto& step : plan->plans) {
        if (step->algorithm() != Algorithm::ImplicitMma) continue;  // a phase no tap reaches
        const auto& d = std::get<ImplicitMmaDivision>(step->division());
        EXPECT_EQ(d.b_gather, GatherForm::Transposed) << c.name() << ": " << step->to_text(0);
        EXPECT_EQ(d.tile_name.rfind("mma", 0), 0u) << c.name() << ": " << step->to_text(0);
      }
    }
    EXPECT_LT(run_gpu(engine, c, s.pass, pr, g), pr.tolerance) << pass_name(s.pass) << " " << c.name();
  }
  // 26 tiles of 128x128 for 132 SMs: that tile split 2 ways in a cluster (choose_vector_tile).
  Case c{make(8, 256, 14, 14, 256, 3, 3, 1)};
  c.xl = c.wl = c.yl = Layout::NHWC;
  c = backward_case(c, Pass::BackwardData);
  BackwardTensors bt(c, Pass::BackwardData, DType::Float32, g);
  PlanOptions o;
  o.math = MathMode::TF32;
  auto plan = plan_pass(engine, c, Pass::BackwardData, bt, o);
  EXPECT_EQ(division_name(plan->plans.at(0)->division()), "mma128x128_8w_128B_cs2") << plan->plans[0]->to_text(0);
  EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, kPrecisions[1], g, o), kPrecisions[1].tolerance) << c.name();
}

// The dgrad step of a 1x1, stride-1 layer in plane order: dy as runs of pixels (Note [mma tf32 pixel
// runs]) and w transposed, in every tensor-core precision: on the wgmma tiles in fp16/bf16 (dy
// M-major, w N-major), on mma.sync in TF32. Planes of 8x12 (whole runs of 8) and 10x10 (of 4 only:
// 16-bit steps gather dy element by element), 200 channels (edge tiles), stride 2 (a phase step
// writing every other pixel of dx), groups; alpha and beta.
TEST_F(BackwardGpu, PlaneOrderOneByOneDgradPixelRunsWithTransposedFilters) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 968);
  std::vector<Case> cases{{make(4, 200, 8, 12, 48, 1, 1)},
                          {make(3, 64, 10, 10, 32, 1, 1)},
                          {make(2, 64, 16, 16, 128, 1, 1, 0, 2)},
                          {make(2, 128, 8, 8, 64, 1, 1, 0, 1, 1, 2)}};
  for (const Precision& pr : {kPrecisions[1], kPrecisions[2], kPrecisions[3]})
    for (Case c : cases) {
      c.alpha = 0.5f;
      c.beta = 0.25f;
      c = backward_case(c, Pass::BackwardData);
      const int64_t v = 16 / dtype_size(pr.dtype);
      {
        BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
        PlanOptions o;
        o.math = pr.math;
        auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, o);
        for (const auto& step : plan->plans) {
          if (step->algorithm() != Algorithm::ImplicitMma) continue;
          const auto& d = std::get<ImplicitMmaDivision>(step->division());
          const int64_t pq = step->problem().p() * step->problem().q();
          EXPECT_EQ(d.a_gather, pq % v == 0 ? GatherForm::Transposed : GatherForm::Element)
              << c.name() << ": " << step->to_text(0);
          EXPECT_EQ(d.b_gather, GatherForm::Transposed) << c.name() << ": " << step->to_text(0);
          EXPECT_FALSE(d.images_fastest) << c.name();
          EXPECT_EQ(plan->deterministic(), true) << c.name();  // a dgrad step adds no atomics
        }
      }
      EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g), pr.tolerance)
          << dtype_name(pr.dtype) << " " << math_mode_name(pr.math) << " " << c.name();
    }
}

// Note [depthwise wgrad]: the wgrad of layers with one input channel per group runs depthwise_wgrad
// in every precision and layout: square 3/5/7 filters at strides 1 and 2 (P * stride != H), a
// rectangular and a dilated filter (the tap-chunk kernel), column stride 3 and dilation 2 (the
// window kernel's runs down a column in plane order), a channel multiplier, a single-channel
// layer, 40 channels (no vector of 16 bytes divides them in 16-bit dtypes), alpha and beta. Plans
// are deterministic: two runs give the same bytes. A layer of few channels and a long reduction
// splits over clusters adding with atomics by default (checked against the reference too).
TEST_F(BackwardGpu, DepthwiseWgradEveryPrecisionAndLayout) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 963);
  std::vector<Case> cases{{make(3, 24, 15, 17, 24, 3, 3, 1, 1, 1, 24)},
                          {make(2, 16, 19, 18, 16, 3, 3, 1, 2, 1, 16)},
                          {make(2, 32, 14, 14, 32, 5, 5, 2, 1, 1, 32)},
                          {make(2, 8, 13, 13, 8, 5, 5, 2, 2, 1, 8)},
                          {make(2, 16, 12, 12, 16, 7, 7, 3, 1, 1, 16)},
                          {make(2, 8, 11, 12, 8, 3, 5, 1, 1, 1, 8)},
                          {make(2, 8, 12, 12, 8, 3, 3, 2, 1, 2, 8)},
                          {make(2, 8, 10, 10, 16, 3, 3, 1, 1, 1, 8)},
                          {make(3, 1, 20, 20, 8, 3, 3, 1)},
                          {make(2, 40, 9, 9, 40, 3, 3, 1, 1, 1, 40)}};
  // Runs down a column read columns at any stride and dilation: 3 and 2 here.
  Case columns{make(2, 8, 13, 20, 8, 3, 3, 1, 1, 1, 8)};
  columns.p.stride_w = 3;
  columns.p.dil_w = 2;
  cases.push_back(columns);
  Case scaled{make(2, 16, 10, 10, 16, 3, 3, 1, 2, 1, 16)};
  scaled.alpha = 0.5f;
  scaled.beta = 0.75f;
  cases.push_back(scaled);
  PlanOptions det;
  det.deterministic = true;
  for (const Precision& pr : kPrecisions)
    for (Case c : cases)
      for (Layout l : {Layout::NCHW, Layout::NHWC, Layout::CNHW}) {
        c.xl = c.wl = c.yl = l;
        BackwardTensors bt(c, Pass::BackwardFilter, pr.dtype, g);
        PlanOptions o;
        o.math = pr.math;
        auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
        ASSERT_EQ(plan->plans.size(), 1u) << c.name();
        EXPECT_EQ(plan->plans[0]->algorithm(), Algorithm::DepthwiseWgrad) << c.name() << plan->plans[0]->to_text(0);
        EXPECT_TRUE(plan->deterministic()) << c.name();
        const uint64_t seed = g();
        std::mt19937_64 g1(seed), g2(seed);
        std::vector<unsigned char> first, second;
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g1, {}, &first), pr.tolerance)
            << dtype_name(pr.dtype) << " " << math_mode_name(pr.math) << " " << c.name();
        run_gpu(engine, c, Pass::BackwardFilter, pr, g2, {}, &second);
        EXPECT_EQ(first, second) << dtype_name(pr.dtype) << " " << c.name();
      }
  // 8 channels, N*P*Q = 131072: in plane order 8 filter chunks, channels-last one; both take
  // clusters and slices adding with atomics; deterministic plans keep one slice.
  Case few{make(32, 8, 64, 64, 8, 3, 3, 1, 1, 1, 8)};
  for (const Precision& pr : kPrecisions)
    for (Layout l : {Layout::NCHW, Layout::NHWC}) {
      few.xl = few.wl = few.yl = l;
      BackwardTensors bt(few, Pass::BackwardFilter, pr.dtype, g);
      auto atomic = engine.plan_backward_filter(few.p, bt.ad, bt.bd, bt.outd);
      const auto& d = std::get<DepthwiseWgradDivision>(atomic->plans.at(0)->division());
      EXPECT_GT(d.atomic_slices, 1) << atomic->to_text(0);
      EXPECT_FALSE(atomic->deterministic());
      EXPECT_LT(run_gpu(engine, few, Pass::BackwardFilter, pr, g), pr.tolerance)
          << dtype_name(pr.dtype) << " " << few.name();
      auto ordered = engine.plan_backward_filter(few.p, bt.ad, bt.bd, bt.outd, det);
      EXPECT_EQ(std::get<DepthwiseWgradDivision>(ordered->plans.at(0)->division()).atomic_slices, 1);
      EXPECT_LT(run_gpu(engine, few, Pass::BackwardFilter, pr, g, det), pr.tolerance)
          << dtype_name(pr.dtype) << " deterministic " << few.name();
    }
}

// A case with x, w and y channels-last.
Case channels_last(Problem p) {
  Case c{p};
  c.xl = c.wl = c.yl = Layout::NHWC;
  return c;
}

// Note [few-channel wgrad]: the wgrad of layers of at most 4 input channels in fp16 and bf16 with
// channels-last dy. A scaled-down ResNet stem (7x7, stride 2: atomic slices by default), 2 channels
// and 72 filters (a partial second block of filters; Q = 37 leaves masked columns in an item), 4
// channels with dilation 2, a 1x1 stride-2 layer, 12 filters (dy rows not 16-byte vectors: element
// copies), alpha and beta, and x and dw in plane order under channels-last dy. Every case runs its
// default plan and a deterministic one, which gives the same bytes twice. A single-channel layer runs
// when forced.
TEST_F(BackwardGpu, FewChannelWgradEveryShape) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 977);
  std::vector<Case> cases{
      channels_last(make(4, 3, 64, 64, 64, 7, 7, 3, 2)), channels_last(make(2, 2, 20, 37, 72, 3, 3, 1)),
      channels_last(make(1, 4, 30, 30, 16, 5, 5, 4, 1, 2)), channels_last(make(3, 3, 17, 19, 32, 1, 1, 0, 2)),
      channels_last(make(2, 3, 23, 21, 12, 3, 3, 1, 1))};
  Case scaled = channels_last(make(2, 3, 33, 35, 64, 5, 5, 2, 2));
  scaled.alpha = 0.5f;
  scaled.beta = 0.75f;
  cases.push_back(scaled);
  Case mixed = channels_last(make(2, 3, 40, 40, 64, 7, 7, 3, 2));
  mixed.xl = mixed.wl = Layout::NCHW;  // x and dw in plane order; dy (the y layout) channels-last
  cases.push_back(mixed);
  PlanOptions det;
  det.deterministic = true;
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (const Case& c : cases) {
      BackwardTensors bt(c, Pass::BackwardFilter, pr.dtype, g);
      for (const PlanOptions& o : {PlanOptions{}, det}) {
        auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd, o);
        ASSERT_EQ(plan->plans.size(), 1u) << c.name();
        EXPECT_EQ(plan->plans[0]->algorithm(), Algorithm::FewChannelWgrad) << c.name() << plan->plans[0]->to_text(0);
        const uint64_t seed = g();
        std::mt19937_64 g1(seed), g2(seed);
        std::vector<unsigned char> first, second;
        EXPECT_LT(run_gpu(engine, c, Pass::BackwardFilter, pr, g1, o, &first), pr.tolerance)
            << dtype_name(pr.dtype) << (o.deterministic ? " deterministic " : " ") << c.name();
        if (!o.deterministic) continue;
        EXPECT_TRUE(plan->deterministic()) << c.name();
        run_gpu(engine, c, Pass::BackwardFilter, pr, g2, o, &second);
        EXPECT_EQ(first, second) << dtype_name(pr.dtype) << " " << c.name();
      }
    }
  const Case single = channels_last(make(3, 1, 40, 40, 16, 5, 5, 2));
  PlanOptions forced;
  forced.algorithm = Algorithm::FewChannelWgrad;
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    EXPECT_LT(run_gpu(engine, single, Pass::BackwardFilter, pr, g, forced), pr.tolerance)
        << dtype_name(pr.dtype) << " forced " << single.name();
}

// Note [few-filter forward]: the dgrad of layers of at most 8 input channels (an RGB stem) in fp16
// and bf16 with channels-last dy runs its phase steps on few_filter: a scaled-down ResNet stem (7x7
// stride 2: four phase steps of 3x3 to 4x4 taps), 8 channels and 3x3 stride 1 (one step), 2
// channels with dilation 2, 5x5 stride 2 with alpha and beta, and dx and w in plane order under
// channels-last dy.
TEST_F(BackwardGpu, FewFilterDgradSteps) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 978);
  std::vector<Case> cases{channels_last(make(2, 3, 40, 38, 64, 7, 7, 3, 2)),
                          channels_last(make(2, 8, 21, 19, 32, 3, 3, 1)),
                          channels_last(make(1, 2, 30, 30, 16, 5, 5, 4, 1, 2))};
  Case scaled = channels_last(make(2, 3, 33, 35, 64, 5, 5, 2, 2));
  scaled.alpha = 0.5f;
  scaled.beta = 0.75f;
  cases.push_back(scaled);
  Case mixed = channels_last(make(2, 3, 30, 30, 64, 7, 7, 3, 2));
  mixed.xl = mixed.wl = Layout::NCHW;  // dx and w in plane order; dy (the y layout) channels-last
  cases.push_back(mixed);
  for (const Precision& pr : {kPrecisions[2], kPrecisions[3]})
    for (const Case& c : cases) {
      BackwardTensors bt(c, Pass::BackwardData, pr.dtype, g);
      auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd, PlanOptions{});
      ASSERT_FALSE(plan->plans.empty()) << c.name();
      for (const auto& step : plan->plans)
        EXPECT_EQ(step->algorithm(), Algorithm::FewFilter) << c.name() << step->to_text(0);
      EXPECT_LT(run_gpu(engine, c, Pass::BackwardData, pr, g), pr.tolerance) << dtype_name(pr.dtype) << " " << c.name();
    }
}

}  // namespace
}  // namespace mconv::test
