// The CUDA implicit-GEMM executor against the CPU double reference, output poisoned with NaN on the
// device before every run. Skipped (with a message) where no GPU is visible.
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <set>

#include "../src/algorithms/single_channel/planner.hpp"
#include "../src/algorithms/stride_fixed/planner.hpp"
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

class CudaExecutor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible: GPU tests skipped";
  }
};

// Random cases per test: `full` normally, `few` under compute-sanitizer (MCONV_GPU_TEST_FEW), or
// exactly MCONV_GPU_TEST_RANDOM (racecheck of the slowest kernels runs with a handful).
int random_case_count(int full, int few) {
  if (const char* n = std::getenv("MCONV_GPU_TEST_RANDOM")) return std::atoi(n);
  return std::getenv("MCONV_GPU_TEST_FEW") ? few : full;
}

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
};

// Runs one case on the GPU with the given tile ("" = planner's choice); compares with the reference.
void run_case(Engine& engine, Case c, std::mt19937_64& g, bool integers, const std::string& tile = "", int split_k = 0,
              Algorithm algo = Algorithm::Auto, bool deterministic = false) {
  // SiLU's exponential is not an exact integer operation: the bit-exact checks take ReLU in its place.
  if (integers && c.act == Activation::SiLU) c.act = Activation::ReLU;
  SCOPED_TRACE(c.name() + (tile.empty() ? "" : " tile " + tile) +
               (split_k ? " split_k " + std::to_string(split_k) : "") + " algo " + algorithm_name(algo));
  HostTensors t(c, g, integers);
  std::vector<float> ref = t.y, got(t.y.size());
  Epilogue host_e{c.alpha, c.beta, t.bias.empty() ? nullptr : t.bias.data(), c.act};
  cpu::reference_forward(c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, ref.data(), host_e);

  DeviceBuffer<float> dx(t.x.size() + c.x_offset), dw(t.w.size()), dy(t.y.size()),
      db(std::max<size_t>(t.bias.size(), 1));
  ASSERT_TRUE(dx.ptr && dw.ptr && dy.ptr && db.ptr);
  float* x_dev = dx.ptr + c.x_offset;  // cudaMalloc's pointers are 256-byte aligned
  CUDA_OK(cudaMemcpy(x_dev, t.x.data(), t.x.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw.ptr, t.w.data(), t.w.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy.ptr, t.y.data(), t.y.size() * 4, cudaMemcpyHostToDevice));  // NaN poison or beta input
  if (!t.bias.empty()) CUDA_OK(cudaMemcpy(db.ptr, t.bias.data(), t.bias.size() * 4, cudaMemcpyHostToDevice));
  PlanOptions o;
  o.tile = tile;
  o.split_k = split_k;
  o.algorithm = algo;
  o.deterministic = deterministic;
  auto plan = engine.plan(c.p, t.xd, t.wd, t.yd, o);
  if (deterministic && split_k > 1)
    EXPECT_TRUE(std::get<ImplicitPrecompDivision>(plan->division()).ordered_split) << plan->to_text(0);
  Epilogue e{c.alpha, c.beta, t.bias.empty() ? nullptr : db.ptr, c.act};
  engine.conv2d_forward(*plan, x_dev, dw.ptr, dy.ptr, e);
  engine.synchronize();
  CUDA_OK(cudaMemcpy(got.data(), dy.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
  if (integers) {
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
  } else {
    EXPECT_LT(rel_error(got, ref), 1e-5);
  }
}

TEST_F(CudaExecutor, EdgeCasesExactEveryTile) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed());
  for (const char* tile : {"128x128x8", "128x64x8", "64x64x8", "128x32x8", "64x32x8", "128x128x16", "128x64x16"})
    for (const Case& c : edge_cases()) run_case(engine, c, g, true, tile);
}

TEST_F(CudaExecutor, EdgeCasesFloatEveryLayout) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 1);
  for (Case c : edge_cases())
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      run_case(engine, c, g, false);
    }
}

TEST_F(CudaExecutor, RandomProblemsFloat) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 2);
  const int count = random_case_count(250, 30);
  for (int i = 0; i < count; ++i) run_case(engine, random_case(g), g, false);
}

TEST_F(CudaExecutor, RandomProblemsExact) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 3);
  for (int i = 0; i < 60; ++i) {
    Case c = random_case(g);
    c.alpha = 1.0f;
    c.beta = c.beta != 0.0f ? 1.0f : 0.0f;
    run_case(engine, c, g, true);
  }
}

TEST_F(CudaExecutor, SplitKExactWithBetaBiasAndReluFallback) {
  // Note [split-k without workspace]: integer inputs keep every partial sum exact, so the atomics'
  // order cannot change the bits and the comparison stays exact. y starts poisoned (NaN) where beta
  // is 0, so an element the pre-pass missed fails.
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 6);
  for (int split : {2, 3, 7}) {
    for (Case c : {Case{make(2, 40, 7, 9, 70, 3, 3, 1)}, Case{make(1, 64, 8, 8, 33, 1, 1)},
                   Case{make(2, 24, 9, 9, 24, 3, 3, 1, 1, 1, 3)}}) {
      for (bool epilogue : {true, false}) {  // false: beta = 0 without bias, the pre-pass's zero fill
        c.alpha = epilogue ? 2.0f : 1.0f;
        c.beta = epilogue ? 1.0f : 0.0f;
        c.bias = epilogue;
        for (int l = 0; l < 3; ++l) {
          c.xl = c.wl = c.yl = Layout(l);
          c.act = (epilogue && l == 2) ? Activation::ReLU : Activation::Identity;  // ReLU runs unsplit
          run_case(engine, c, g, true, "", split);
        }
      }
    }
  }
}

// Note [ordered split-k]: the deterministic split, up to the 16 blocks of a cluster, with beta, bias
// and ReLU (which the ordered split keeps split: its epilogue has the whole sum), in every layout
// and in tiles of every thread shape. Integer inputs: exact.
TEST_F(CudaExecutor, OrderedSplitKExactWithBetaBiasAndRelu) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 9);
  const bool few = std::getenv("MCONV_GPU_TEST_FEW") != nullptr;  // under the sanitizers
  const std::vector<int> splits = few ? std::vector<int>{16} : std::vector<int>{2, 5, 16};
  const std::vector<const char*> tiles = few ? std::vector<const char*>{"128x128x8", "64x32x8"}
                                             : std::vector<const char*>{"128x128x8", "64x32x8", "128x64x16"};
  for (int split : splits)
    for (const char* tile : tiles)  // rows for 18+ row tiles of 16 (C/G*R*S = 864 and 288)
      for (Case c : {Case{make(2, 96, 7, 9, 70, 3, 3, 1)}, Case{make(2, 96, 9, 9, 48, 3, 3, 1, 1, 1, 3)}})
        for (int l = 0; l < 3; ++l) {
          c.xl = c.wl = c.yl = Layout(l);
          c.alpha = l == 0 ? 1.0f : 2.0f;
          c.beta = l == 0 ? 0.0f : 1.0f;
          c.bias = l != 0;
          c.act = l == 2 ? Activation::ReLU : Activation::Identity;
          run_case(engine, c, g, true, tile, split, Algorithm::ImplicitPrecomp, true);
        }
}

TEST_F(CudaExecutor, DirectBlockEdgeCasesExact) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 7);
  for (Case c : edge_cases())
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      run_case(engine, c, g, true, "", 0, Algorithm::DirectBlock);
    }
}

TEST_F(CudaExecutor, DirectBlockRandomProblemsFloat) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 8);
  const int count = random_case_count(200, 30);
  for (int i = 0; i < count; ++i) {
    Case c = random_case(g);
    PlanOptions o;
    o.algorithm = Algorithm::DirectBlock;
    try {  // direct_block claims every problem whose tile and halo fit shared memory
      engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
    } catch (const Error& e) {
      ASSERT_EQ(e.status(), Status::Unsupported) << e.what();
      continue;
    }
    run_case(engine, c, g, false, "", 0, Algorithm::DirectBlock);
  }
}

TEST_F(CudaExecutor, DirectBlockDepthwiseShapesAndAutoChoice) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 9);
  // Large map (64-wide tile), small map (16-wide tile), multiplier 2, stride 2, 5x5 and 7x7.
  for (Case c : {Case{make(2, 6, 40, 70, 6, 3, 3, 1, 1, 1, 6)}, Case{make(3, 5, 7, 7, 5, 3, 3, 1, 1, 1, 5)},
                 Case{make(2, 4, 20, 19, 8, 5, 5, 2, 2, 1, 4)}, Case{make(1, 3, 30, 33, 3, 7, 7, 3, 1, 1, 3)},
                 Case{make(2, 6, 24, 28, 6, 3, 3, 1, 2, 1, 6)},
                 Case{make(3, 5, 40, 68, 5, 3, 3, 1, 1, 1, 5)},  // W % 4 == 0: 16-byte halo copies
                 // Note [packed groups]: slot counts not divisible by the groups per block.
                 Case{make(2, 601, 7, 7, 601, 3, 3, 1, 1, 1, 601)}, Case{make(2, 265, 14, 14, 265, 3, 3, 1, 1, 1, 265)},
                 Case{make(2, 530, 14, 14, 530, 3, 3, 1, 2, 1, 530)}}) {
    Problem& p = c.p;
    auto plan = engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
    // Auto: the plane stream for one filter per group, direct_block for multipliers above 1.
    EXPECT_EQ(plan->algorithm(), p.k_per_group() == 1 ? Algorithm::SingleChannel : Algorithm::DirectBlock)
        << p.to_string();
    EXPECT_EQ(engine.plan_device_bytes(*plan), 0);
    c.bias = true;
    c.act = Activation::ReLU;
    run_case(engine, c, g, false, "", 0, Algorithm::DirectBlock);
    run_case(engine, c, g, false);
  }
}

TEST_F(CudaExecutor, DirectBlockTileTooLargeIsAnError) {
  Engine engine(Target::Cuda);
  Problem p = make(1, 1, 3000, 3000, 1, 7, 7, 0, 1, 400);  // halo of 2400 rows and columns
  PlanOptions o;
  o.algorithm = Algorithm::DirectBlock;
  try {
    engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW), o);
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

// Note [filter vectors] and [bounded taps]: 2 and 3 filters a group on maps wider than 16 take the
// 4-filter shape (idle filter lanes); filters of at most 4 taps an axis other than 1x1 and 3x3 (4x4,
// 4x3, 3x4, 2x2, 1x3, the steps a strided dgrad splits 7x7 and 5x5 filters into) the kernel unrolled
// to 4 taps, with stride, dilation and groups; 5x4 and 6x2 the generic kernel. Bit-exact on integers,
// every layout, NaN-poisoned y; the whole epilogue on one.
TEST_F(CudaExecutor, DirectBlockFewFiltersAndBoundedTaps) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 11);
  std::vector<Case> cases{{make(2, 16, 30, 40, 3, 4, 4, 1)},      {make(2, 16, 29, 37, 3, 4, 3, 1)},
                          {make(2, 8, 25, 37, 2, 3, 4, 1, 2)},    {make(1, 12, 20, 33, 6, 2, 2, 0, 1, 2, 2)},
                          {make(2, 8, 24, 35, 3, 1, 3, 0)},       {make(2, 8, 24, 35, 3, 5, 4, 2)},
                          {make(2, 8, 26, 34, 3, 6, 2, 2, 1, 1)}, {make(1, 64, 19, 70, 3, 3, 3, 1)}};
  cases.push_back(with_whole_epilogue(Case{make(2, 16, 18, 44, 3, 4, 4, 1)}));
  for (Case c : cases)
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      PlanOptions o;
      o.algorithm = Algorithm::DirectBlock;
      auto plan = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      EXPECT_EQ(division_name(plan->division()), "direct_32x8_r2x2_f4") << c.name();
      run_case(engine, c, g, true, "", 0, Algorithm::DirectBlock);
    }
}

TEST_F(CudaExecutor, SingleChannelExactAndFloat) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 10);
  std::vector<Case> cases{{make(1, 1, 28, 28, 70, 3, 3)},
                          {make(2, 1, 33, 17, 9, 5, 5, 2)},
                          {make(1, 1, 64, 40, 32, 1, 1, 0, 2)},
                          {make(1, 1, 30, 30, 5, 7, 7, 3, 2, 2)},
                          {make(3, 4, 20, 19, 8, 3, 3, 1, 1, 1, 4)},
                          {make(2, 6, 9, 9, 6, 2, 4, 1, 1, 1, 6)},
                          {make(1, 1, 300, 260, 3, 3, 3, 1)}};
  for (Case c : cases)
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
      c.bias = l == 2;
      run_case(engine, c, g, true, "", 0, Algorithm::SingleChannel);
      run_case(engine, c, g, false, "", 0, Algorithm::SingleChannel);
    }
  Problem multi = make(1, 3, 8, 8, 4, 3, 3);
  PlanOptions o;
  o.algorithm = Algorithm::SingleChannel;
  EXPECT_THROW(
      engine.plan(multi, multi.x_desc(Layout::NCHW), multi.w_desc(Layout::NCHW), multi.y_desc(Layout::NCHW), o), Error);
}

// The single-channel kernel (Note [single-channel runs]) under the reshaped division and the paper's
// own (the single_channel_paper tile), on every variant it instantiates: runs of
// 1, 2 and 4 rows (Note [single-channel run length]), 1x1-7x7 at stride_h 1 and 2 with the window in registers, the
// generic path (dilation, stride 3, non-square filters), more filters than threads, several filter lanes on small maps,
// rows wider than a block's threads, runs of 1 and 2 columns (Note [single-channel column pairs]), multiplier-2 groups,
// every layout, alpha/beta, bias and ReLU.
TEST_F(CudaExecutor, SingleChannelRunsEveryVariant) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 13);
  const std::vector<Case> cases{{make(1, 1, 28, 28, 70, 3, 3)},
                                {make(1, 1, 57, 45, 40, 7, 7, 3, 2)},
                                {make(1, 1, 23, 31, 33, 3, 3, 1, 2)},
                                {make(2, 1, 18, 21, 600, 5, 5, 2)},
                                {make(1, 1, 19, 23, 7, 2, 4, 1)},
                                {make(1, 1, 50, 50, 16, 3, 3, 1, 3)},
                                {make(1, 1, 30, 30, 5, 7, 7, 3, 2, 2)},
                                {make(1, 1, 1024, 40, 8, 3, 3, 1)},
                                {make(3, 4, 20, 19, 8, 3, 3, 1, 1, 1, 4)},
                                {make(1, 1, 9, 300, 24, 1, 1)},
                                {make(1, 1, 130, 70, 48, 5, 5, 0)},
                                {make(2, 1, 7, 7, 300, 3, 3, 1)},
                                {make(1, 1, 1056, 66, 32, 3, 3, 1)},
                                {make(1, 1, 40, 700, 6, 3, 3, 1)},
                                {make(2, 1, 30, 150, 40, 5, 5, 2, 2)},
                                {make(1, 1, 200, 130, 64, 3, 3, 1)},
                                {make(1, 1, 1056, 140, 8, 3, 3, 1)},
                                {make(1, 1, 1040, 48, 8, 5, 5, 2)}};
  std::set<int> runs;
  std::set<bool> pairs;   // Note [single-channel column pairs]: both run widths
  std::set<bool> shaped;  // Note [single-channel block shape]: reshaped and the paper's own divisions
  for (const std::string tile : {"", detail::kSingleChannelPaperTile}) {
    PlanOptions o;
    o.algorithm = Algorithm::SingleChannel;
    o.tile = tile;
    for (Case c : cases)
      for (int l = 0; l < 3; ++l) {
        c.xl = c.wl = c.yl = Layout(l);
        c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
        c.alpha = l == 0 ? 2.0f : 1.0f;
        c.beta = l == 0 ? 1.0f : 0.0f;
        c.bias = l == 2;
        c.act = (l != 1) ? Activation::ReLU : Activation::Identity;
        auto plan = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
        ASSERT_EQ(division_name(plan->division()).rfind("single_channel_m", 0), 0u)
            << c.name() << ": " << division_name(plan->division());
        runs.insert(std::get<SingleChannelDivision>(plan->division()).run);
        pairs.insert(detail::single_channel_column_pairs(c.p, c.p.y_desc(c.yl)));
        shaped.insert(std::get<SingleChannelDivision>(plan->division()).shaped);
        run_case(engine, c, g, true, tile, 0, Algorithm::SingleChannel);
        run_case(engine, c, g, false, tile, 0, Algorithm::SingleChannel);
      }
  }
  EXPECT_EQ(runs, (std::set<int>{1, 2, 4})) << "the cases no longer reach every run length";
  EXPECT_EQ(pairs, (std::set<bool>{false, true})) << "the cases no longer reach both run widths";
  EXPECT_EQ(shaped, (std::set<bool>{false, true})) << "the cases no longer reach both divisions";
}

// The plane stream (Note [plane stream]): packed small planes (scalar copies when W % 4 != 0), bands
// of large planes (16-byte copies), strides 1 and 2 (also unequal), paired reads at stride 2 and
// their fallback, padding wider than the halo, every filter size it runs, the CNHW plane order,
// mixed layouts, beta, bias and ReLU.
TEST_F(CudaExecutor, SingleChannelPlaneStream) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 12);
  std::vector<Case> cases{{make(2, 6, 9, 9, 6, 3, 3, 1, 1, 1, 6)},
                          {make(3, 5, 16, 20, 5, 3, 3, 1, 2, 1, 5)},
                          {make(1, 3, 130, 64, 3, 5, 5, 2, 1, 1, 3)},
                          {make(2, 4, 37, 41, 4, 7, 7, 3, 2, 1, 4)},
                          {make(2, 8, 10, 10, 8, 3, 3, 0, 2, 1, 8)},
                          {make(1, 2, 12, 12, 2, 1, 1, 0, 1, 1, 2)},
                          {make(4, 1, 30, 28, 1, 3, 3, 1, 1)},
                          {make(2, 3, 11, 11, 3, 3, 3, 2, 1, 1, 3)},
                          {make(2, 601, 7, 7, 601, 3, 3, 1, 1, 1, 601)},
                          {make(2, 16, 112, 112, 16, 3, 3, 1, 1, 1, 16)},
                          {make(2, 12, 112, 112, 12, 3, 3, 1, 2, 1, 12)},
                          {make(3, 40, 14, 14, 40, 5, 5, 2, 2, 1, 40)},
                          // Note [plane stream stride-2 pairs]: even (5x5) and odd (7x7) first columns;
                          // pad 0 at 3x3 (not "same") reads singly.
                          {make(2, 6, 24, 28, 6, 5, 5, 2, 2, 1, 6)},
                          {make(1, 3, 30, 32, 3, 7, 7, 3, 2, 1, 3)},
                          {make(2, 4, 16, 16, 4, 3, 3, 0, 2, 1, 4)}};
  Case wide_stride{make(2, 4, 20, 33, 4, 3, 3, 1, 1, 1, 4)};
  wide_stride.p.stride_w = 3;
  cases.push_back(wide_stride);
  Case rows_only{make(2, 4, 20, 24, 4, 3, 3, 1, 2, 1, 4)};  // stride_h 2, stride_w 1: no pairs
  rows_only.p.stride_w = 1;
  cases.push_back(rows_only);
  for (size_t i = 0; i < cases.size(); ++i) {
    Case c = cases[i];
    for (int l = 0; l < 4; ++l) {
      const Layout plane_order = l == 1 ? Layout::CNHW : Layout::NCHW;
      c.xl = c.wl = c.yl = plane_order;
      if (l == 3) c.yl = Layout::NHWC;  // y may be any layout: the stores are scalar
      c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
      c.beta = l == 2 ? 0.5f : 0.0f;
      c.bias = l >= 2;
      c.act = (l == 3) ? Activation::ReLU : Activation::Identity;
      PlanOptions o;
      o.algorithm = Algorithm::SingleChannel;
      o.tile = detail::kPlaneStreamTile;  // the bulk variant takes these layouts by default
      auto plan = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      ASSERT_EQ(division_name(plan->division()), detail::kPlaneStreamTile) << c.name();
      EXPECT_EQ(engine.plan_device_bytes(*plan), 0);
      run_case(engine, c, g, true, detail::kPlaneStreamTile, 0, Algorithm::SingleChannel);
      run_case(engine, c, g, false, detail::kPlaneStreamTile, 0, Algorithm::SingleChannel);
    }
    // Planes at no constant distance: the copies split every index instead of stepping (and the
    // bulk variant, which needs packed rows, leaves the layer to this kernel).
    c = cases[i];
    c.strided_x = true;
    run_case(engine, c, g, true, "", 0, Algorithm::SingleChannel);
  }
}

// The bulk plane stream (Note [plane bulk]): whole packed planes and bands, segments of 7 and of 4
// (partial at the row's end; rows of one segment with "same" padding, 3x3 to 7x7: Note [bulk
// whole rows]), strides 1 and 2 with odd and even W,
// padding wider than the halo, no padding, 1x1 to 7x7, rows wider than 4 passes of the block, x 0-3 floats past a
// 16-byte boundary (head and tail copies; at stride 2 with W even, paired reads where x is 8-byte aligned and 4-byte
// reads where it is not), the CNHW plane order, y in another plane order, beta, bias and ReLU.
TEST_F(CudaExecutor, SingleChannelBulkPlaneStream) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 13);
  const std::vector<Case> cases{{make(2, 601, 7, 7, 601, 3, 3, 1, 1, 1, 601)},
                                {make(2, 16, 112, 112, 16, 3, 3, 1, 1, 1, 16)},
                                {make(2, 12, 112, 112, 12, 3, 3, 1, 2, 1, 12)},
                                {make(3, 40, 14, 14, 40, 5, 5, 2, 2, 1, 40)},
                                {make(2, 6, 9, 9, 6, 3, 3, 1, 1, 1, 6)},
                                {make(2, 8, 10, 10, 8, 3, 3, 0, 2, 1, 8)},
                                {make(2, 3, 11, 11, 3, 3, 3, 2, 1, 1, 3)},
                                {make(2, 4, 37, 41, 4, 7, 7, 3, 2, 1, 4)},
                                {make(1, 2, 12, 12, 2, 1, 1, 0, 1, 1, 2)},
                                {make(1, 3, 130, 64, 3, 5, 5, 2, 1, 1, 3)},
                                {make(1, 1, 300, 260, 1, 3, 3, 1)},
                                {make(1, 2, 5, 3000, 2, 3, 3, 1, 1, 1, 2)},
                                {make(3, 5, 16, 20, 5, 3, 3, 1, 2, 1, 5)},
                                {make(4, 96, 28, 28, 96, 3, 3, 1, 2, 1, 96)},
                                {make(2, 6, 7, 7, 6, 5, 5, 2, 1, 1, 6)},
                                {make(1, 5, 7, 7, 5, 7, 7, 3, 1, 1, 5)},
                                {make(2, 3, 4, 4, 3, 3, 3, 1, 1, 1, 3)},
                                {make(2, 3, 9, 7, 3, 3, 3, 1, 1, 1, 3)},
                                {make(2, 4, 28, 28, 4, 7, 7, 3, 1, 1, 4)}};
  for (size_t i = 0; i < cases.size(); ++i) {
    Case c = cases[i];
    for (int l = 0; l < 4; ++l) {
      c.xl = c.wl = c.yl = l == 1 ? Layout::CNHW : Layout::NCHW;
      if (l == 3) c.yl = Layout::CNHW;  // y in the other plane order
      c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
      c.beta = l == 2 ? 0.5f : 0.0f;
      c.bias = l >= 2;
      c.act = (l == 3) ? Activation::ReLU : Activation::Identity;
      c.x_offset = static_cast<int>((i + l) % 4);
      PlanOptions o;
      o.algorithm = Algorithm::SingleChannel;
      o.tile = detail::kPlaneBulkTile;  // forced: wide stride-2 maps default to the plane stream
      auto plan = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      ASSERT_EQ(division_name(plan->division()), detail::kPlaneBulkTile) << c.name();
      EXPECT_EQ(engine.plan_device_bytes(*plan), 0);
      run_case(engine, c, g, true, detail::kPlaneBulkTile, 0, Algorithm::SingleChannel);
      run_case(engine, c, g, false, detail::kPlaneBulkTile, 0, Algorithm::SingleChannel);
      o.tile.clear();  // the default variant
      const auto chosen = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      EXPECT_EQ(division_name(chosen->division()),
                detail::plane_bulk_preferred(c.p) ? detail::kPlaneBulkTile : detail::kPlaneStreamTile);
    }
  }
  // Forced on what it does not run: a clear error naming the reason.
  Problem unequal = make(2, 4, 20, 33, 4, 3, 3, 1, 1, 1, 4);
  unequal.stride_w = 3;
  PlanOptions o;
  o.algorithm = Algorithm::SingleChannel;
  o.tile = detail::kPlaneBulkTile;
  try {
    engine.plan(unequal, unequal.x_desc(Layout::NCHW), unequal.w_desc(Layout::NCHW), unequal.y_desc(Layout::NCHW), o);
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("stride_w"), std::string::npos) << e.what();
  }
}

// The bulk plane stream's resident wave with more chunks than blocks: 1-2 chunks per block (the
// second stage's copy issued late, after the first chunk lands) and 3-4 per block (both stages
// reused, the barriers' parity flipping), sized from the device's SMs. The kernel holds at most
// plane_bulk_resident_blocks(3) blocks per SM, so these counts bound the grid from below.
TEST_F(CudaExecutor, SingleChannelBulkPlaneStreamSeveralChunksPerBlock) {
  int device = 0, sms = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t most_blocks = int64_t(sms) * detail::plane_bulk_resident_blocks(3);
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 17);
  for (const double per_block : {1.5, 3.5}) {
    for (int l = 0; l < 2; ++l) {
      // 7x7 maps, 32 planes per chunk (7 output rows in runs of 2, 1 segment: 128 items). 999
      // channels per image (groups are at most 65535) leave a short last chunk.
      const int64_t images = int64_t(per_block * double(most_blocks) * 32 / 999) + 1, planes = images * 999;
      Case c{make(images, 999, 7, 7, 999, 3, 3, 1, 1, 1, 999)};
      c.x_offset = 1 + l;  // head and tail copies on every chunk
      c.bias = l == 1;
      c.act = (l == 1) ? Activation::ReLU : Activation::Identity;
      if (l == 1) c.xl = c.wl = c.yl = Layout::CNHW;
      PlanOptions o;
      o.algorithm = Algorithm::SingleChannel;
      auto plan = engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      ASSERT_EQ(division_name(plan->division()), detail::kPlaneBulkTile) << c.name();
      const int64_t chunks =
          std::get<PlaneBulkDivision>(plan->division()).chunks / std::get<PlaneBulkDivision>(plan->division()).bands;
      EXPECT_GT(chunks, int64_t(per_block) * most_blocks) << c.name();
      if (per_block < 2) EXPECT_LT(chunks, 2 * most_blocks) << c.name();
      run_case(engine, c, g, true, detail::kPlaneBulkTile, 0, Algorithm::SingleChannel);
    }
  }
}

TEST_F(CudaExecutor, StrideFixedEdgeCasesAndRandom) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 11);
  auto claims = [&](const Case& c) {
    PlanOptions o;
    o.algorithm = Algorithm::StrideFixed;
    try {
      engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o);
      return true;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
      return false;
    }
  };
  std::vector<Case> cases = edge_cases();
  cases.push_back({make(1, 40, 9, 300, 70, 3, 3, 1)});  // Q > 128: several pixel segments per row
  // Convolution (flipped taps) with KCRS filters: rounds of 1, 2, 4 and 8 channels (the filter walk
  // of Note [filter walk]), a partial last round, and a partial second filter block.
  for (int64_t c : {1, 2, 3, 9, 33})
    for (int64_t r : {3, 5}) {
      Case flipped{make(1, c, 10, 12, 70, r, r, 1)};
      flipped.p.mode = Mode::Convolution;
      cases.push_back(flipped);
    }
  // Every case with 4 and with 8 pixels a thread (Note [stride-fixed thread pixels]).
  for (Case c : cases)
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      if (!claims(c)) continue;
      for (const char* tile : {detail::kStrideFixedTile4, detail::kStrideFixedTile8})
        run_case(engine, c, g, true, tile, 0, Algorithm::StrideFixed);
    }
  // The planner's choice: small maps take 4 pixels, a map of more 8-pixel blocks than SMs 8.
  std::set<int> chosen;
  std::vector<Case> planned;
  const int count = random_case_count(120, 20);
  for (int i = 0; i < count; ++i) planned.push_back(random_case(g));
  planned.push_back({make(1, 24, 200, 200, 40, 3, 3, 1)});
  for (const Case& c : planned) {
    if (!claims(c)) continue;
    PlanOptions o;
    o.algorithm = Algorithm::StrideFixed;
    chosen.insert(std::get<StrideFixedDivision>(
                      engine.plan(c.p, c.p.x_desc(c.xl), c.p.w_desc(c.wl), c.p.y_desc(c.yl), o)->division())
                      .thread_pixels);
    run_case(engine, c, g, false, "", 0, Algorithm::StrideFixed);
  }
  EXPECT_EQ(chosen, (std::set<int>{4, 8}));
}

TEST_F(CudaExecutor, SplitKOutOfRangeIsAnError) {
  Engine engine(Target::Cuda);
  Problem p = make(1, 8, 5, 5, 4, 1, 1);  // 8 rows: one row tile
  PlanOptions o;
  o.split_k = 2;
  EXPECT_THROW(engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW), o), Error);
}

TEST_F(CudaExecutor, LargeChannelAndFilterCounts) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 4);
  run_case(engine, {make(2, 256, 9, 9, 200, 3, 3, 1)}, g, false);
  run_case(engine, {make(1, 64, 30, 30, 64, 3, 3, 1, 1, 1, 1)}, g, false);
  run_case(engine, {make(1, 512, 7, 7, 512, 3, 3, 1)}, g, false);  // the planner splits this one
}

TEST_F(CudaExecutor, HostPointersAreRefused) {
  Engine engine(Target::Cuda);
  Problem p = make(1, 2, 5, 5, 2, 3, 3);
  auto plan = engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  std::vector<float> hx(50, 0.0f), hw(18, 0.0f), hy(18, 0.0f);
  try {
    engine.conv2d_forward(*plan, hx.data(), hw.data(), hy.data());
    FAIL() << "expected an error for host pointers";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::BadParam);
    EXPECT_NE(std::string(e.what()).find("x"), std::string::npos);
  }
}

// A device buffer shorter than its descriptor: refused before the launch, y untouched.
TEST_F(CudaExecutor, BuffersShorterThanTheirDescriptorsAreRefused) {
  Engine engine(Target::Cuda);
  Problem p = make(1, 4, 8, 8, 4, 3, 3, 1);
  auto plan = engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  DeviceBuffer<float> dx(256), dw(144), dy(256), short_x(100);
  ASSERT_TRUE(dx.ptr && dw.ptr && dy.ptr && short_x.ptr);
  CUDA_OK(cudaMemset(dy.ptr, 0, 256 * 4));
  try {
    engine.conv2d_forward(*plan, short_x.ptr, dw.ptr, dy.ptr);
    FAIL() << "expected an error for a short x";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::BadParam);
    EXPECT_NE(std::string(e.what()).find("x: the tensor spans 1024 bytes"), std::string::npos) << e.what();
  }
  try {
    engine.conv2d_forward(*plan, dx.ptr, dw.ptr, dy.ptr + 1);  // y one element in: its last element past the end
    FAIL() << "expected an error for y past the end of its allocation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y:"), std::string::npos) << e.what();
  }
  std::vector<float> y(256, 1.0f);
  CUDA_OK(cudaMemcpy(y.data(), dy.ptr, 256 * 4, cudaMemcpyDeviceToHost));
  for (float v : y) ASSERT_EQ(v, 0.0f);
}

// An input of more than 2^31 elements: start addresses must be 64-bit; every output is checked.

TEST_F(CudaExecutor, InputBeyond2To31Elements) {
  if (std::getenv("MCONV_GPU_TEST_FEW")) GTEST_SKIP() << "large test skipped under compute-sanitizer";
  // x: 3 images x 1 ch x 27000 x 27000 = 2.19e9 elements (8.7 GB); 1x1 filter, stride 1000.
  Problem p = make(3, 1, 27000, 27000, 2, 1, 1, 0, 1000);
  const TensorDesc xd = p.x_desc(Layout::NCHW), wd = p.w_desc(Layout::NCHW), yd = p.y_desc(Layout::NCHW);
  ASSERT_GT(xd.span_elements(), int64_t(1) << 31);
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < size_t(xd.span_elements()) * 4 + (1 << 30)) GTEST_SKIP() << "not enough device memory";
  std::vector<float> hx(xd.span_elements());
  for (int64_t i = 0; i < xd.span_elements(); ++i) hx[i] = float(int((i * 2654435761ll) >> 7 & 15) - 8);
  std::vector<float> hw{2.0f, -1.0f}, hy(yd.span_elements(), NAN), ref(hy.size());
  DeviceBuffer<float> dx(hx.size()), dw(2), dy(hy.size());
  ASSERT_TRUE(dx.ptr && dw.ptr && dy.ptr);
  CUDA_OK(cudaMemcpy(dx.ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw.ptr, hw.data(), 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy.ptr, hy.data(), hy.size() * 4, cudaMemcpyHostToDevice));
  Engine engine(Target::Cuda);
  auto plan = engine.plan(p, xd, wd, yd);
  engine.conv2d_forward(*plan, dx.ptr, dw.ptr, dy.ptr);
  engine.synchronize();
  CUDA_OK(cudaMemcpy(hy.data(), dy.ptr, hy.size() * 4, cudaMemcpyDeviceToHost));
  cpu::reference_forward(p, xd, hx.data(), wd, hw.data(), yd, ref.data());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(hy[i], ref[i]) << "element " << i;
}

}  // namespace
}  // namespace mconv::test

namespace mconv::test {
namespace {

// A sequence of conv2d_forward calls captured into a CUDA graph (global capture mode: any
// allocation, synchronous copy or synchronisation inside a call would invalidate the capture) and
// replayed twice, every family and split-K among them, each against the double reference.
TEST_F(CudaExecutor, GraphCapturedSequenceReplays) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 g(test_seed() + 40);
  struct Step {
    Case c;
    Algorithm algo;
    int split_k;
  };
  std::vector<Step> steps;
  {
    Case gemm{make(2, 64, 7, 7, 64, 3, 3, 1)};
    gemm.alpha = 2.0f;
    gemm.beta = 0.5f;
    gemm.bias = true;
    steps.push_back({gemm, Algorithm::ImplicitPrecomp, 4});  // split-K: pre-pass, then atomics
    Case nhwc{make(2, 32, 9, 9, 48, 3, 3, 1)};
    nhwc.xl = nhwc.wl = nhwc.yl = Layout::NHWC;
    nhwc.act = Activation::ReLU;
    steps.push_back({nhwc, Algorithm::Auto, 0});
    steps.push_back({Case{make(1, 64, 20, 20, 64, 3, 3, 1)}, Algorithm::StrideFixed, 0});
    steps.push_back({Case{make(2, 1, 28, 28, 32, 3, 3, 1)}, Algorithm::SingleChannel, 0});             // strip kernel
    steps.push_back({Case{make(2, 24, 14, 14, 24, 3, 3, 1, 1, 1, 24)}, Algorithm::SingleChannel, 0});  // planes
    steps.push_back({Case{make(2, 8, 12, 12, 16, 3, 3, 1, 1, 1, 8)}, Algorithm::DirectBlock, 0});
  }
  for (bool check_pointers : {true, false}) {
    SCOPED_TRACE(check_pointers ? "pointer checks on" : "pointer checks off");
    EngineOptions eo;
    eo.check_device_pointers = check_pointers;
    Engine engine(Target::Cuda, 0, stream, eo);
    std::vector<HostTensors> host;
    std::vector<std::vector<float>> refs;
    std::vector<std::unique_ptr<DeviceBuffer<float>>> buffers;
    std::vector<std::shared_ptr<const Plan>> plans;
    for (const Step& s : steps) {
      host.emplace_back(s.c, g, false);
      HostTensors& t = host.back();
      refs.push_back(t.y);
      cpu::reference_forward(s.c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, refs.back().data(),
                             Epilogue{s.c.alpha, s.c.beta, t.bias.empty() ? nullptr : t.bias.data(), s.c.act});
      PlanOptions o;
      o.algorithm = s.algo;
      o.split_k = s.split_k;
      plans.push_back(engine.plan(s.c.p, t.xd, t.wd, t.yd, o));  // plans (and their tables) before the capture
      for (const auto* v : {&t.x, &t.w, &t.y, &t.bias}) {
        buffers.push_back(std::make_unique<DeviceBuffer<float>>(v->size()));
        ASSERT_TRUE(buffers.back()->ptr);
        if (!v->empty()) CUDA_OK(cudaMemcpy(buffers.back()->ptr, v->data(), v->size() * 4, cudaMemcpyHostToDevice));
      }
    }
    engine.synchronize();
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (size_t i = 0; i < steps.size(); ++i) {
      const Case& c = steps[i].c;
      Epilogue e{c.alpha, c.beta, host[i].bias.empty() ? nullptr : buffers[4 * i + 3]->ptr, c.act};
      engine.conv2d_forward(*plans[i], buffers[4 * i]->ptr, buffers[4 * i + 1]->ptr, buffers[4 * i + 2]->ptr, e);
    }
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      // y back to its start (NaN poison, or the beta input) before each replay.
      for (size_t i = 0; i < steps.size(); ++i)
        CUDA_OK(cudaMemcpyAsync(buffers[4 * i + 2]->ptr, host[i].y.data(), host[i].y.size() * 4, cudaMemcpyHostToDevice,
                                stream));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      for (size_t i = 0; i < steps.size(); ++i) {
        std::vector<float> got(host[i].y.size());
        CUDA_OK(cudaMemcpy(got.data(), buffers[4 * i + 2]->ptr, got.size() * 4, cudaMemcpyDeviceToHost));
        EXPECT_LT(rel_error(got, refs[i]), 1e-5)
            << steps[i].c.name() << " replay " << replay << " " << algorithm_name(plans[i]->algorithm());
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

// A framework launches each call on its current stream: plan on the engine (default stream), then run
// at once on a non-blocking stream, which does not wait for the legacy one. The table must be there.
TEST_F(CudaExecutor, PerCallStreamFindsTheTableUploaded) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 g(test_seed() + 41);
  Engine engine(Target::Cuda);
  for (int i = 0; i < 4; ++i) {
    Case c{make(2, 16 + 8 * i, 9, 9, 24, 3, 3, 1)};
    c.bias = true;
    HostTensors t(c, g, false);
    std::vector<float> ref = t.y;
    cpu::reference_forward(c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, ref.data(),
                           Epilogue{1.0f, 0.0f, t.bias.data(), Activation::Identity});
    PlanOptions o;
    o.algorithm = Algorithm::ImplicitPrecomp;
    auto plan = engine.plan(c.p, t.xd, t.wd, t.yd, o);
    DeviceBuffer<float> x(t.x.size()), w(t.w.size()), y(t.y.size()), bias(t.bias.size());
    for (auto [d, v] : {std::pair{&x, &t.x}, {&w, &t.w}, {&y, &t.y}, {&bias, &t.bias}})
      CUDA_OK(cudaMemcpy(d->ptr, v->data(), v->size() * 4, cudaMemcpyHostToDevice));
    engine.conv2d_forward(*plan, x.ptr, w.ptr, y.ptr, Epilogue{1.0f, 0.0f, bias.ptr, Activation::Identity}, stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> got(t.y.size());
    CUDA_OK(cudaMemcpy(got.data(), y.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_LT(rel_error(got, ref), 1e-5) << c.name();
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace mconv::test

namespace mconv::test {
namespace {

// Deterministic plans: every family twice on the same inputs gives bitwise the same y, and the
// layers that split by default (small maps, many channels) are among them.
TEST_F(CudaExecutor, DeterministicPlansAreBitwiseReproducible) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 70);
  const std::vector<std::pair<Case, Algorithm>> cases = {
      {Case{make(1, 512, 7, 7, 64, 3, 3, 1)}, Algorithm::ImplicitPrecomp},  // split-K by default
      {Case{make(1, 256, 7, 7, 64, 3, 3, 1)}, Algorithm::StrideFixed},      // channel slices by default
      {Case{make(2, 1, 28, 28, 32, 3, 3, 1)}, Algorithm::SingleChannel},
      {Case{make(2, 24, 14, 14, 24, 3, 3, 1, 1, 1, 24)}, Algorithm::SingleChannel},
      {Case{make(2, 8, 12, 12, 16, 3, 3, 1, 1, 1, 8)}, Algorithm::DirectBlock}};
  for (const auto& [c, algo] : cases) {
    HostTensors t(c, g, false);
    std::vector<float> ref = t.y;
    cpu::reference_forward(c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, ref.data(), Epilogue{});
    PlanOptions o;
    o.algorithm = algo;
    o.deterministic = true;
    auto plan = engine.plan(c.p, t.xd, t.wd, t.yd, o);
    ASSERT_TRUE(plan->deterministic()) << c.name();
    DeviceBuffer<float> dx(t.x.size()), dw(t.w.size()), dy(t.y.size());
    CUDA_OK(cudaMemcpy(dx.ptr, t.x.data(), t.x.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw.ptr, t.w.data(), t.w.size() * 4, cudaMemcpyHostToDevice));
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      CUDA_OK(cudaMemcpy(dy.ptr, t.y.data(), t.y.size() * 4, cudaMemcpyHostToDevice));  // NaN poison
      engine.conv2d_forward(*plan, dx.ptr, dw.ptr, dy.ptr);
      engine.synchronize();
      runs.emplace_back(t.y.size());
      CUDA_OK(cudaMemcpy(runs.back().data(), dy.ptr, t.y.size() * 4, cudaMemcpyDeviceToHost));
    }
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4), 0)
        << c.name() << " " << algorithm_name(algo) << ": two runs differ";
    EXPECT_LT(rel_error(runs[0], ref), 1e-5) << c.name();
  }
}

// Hundreds of random layers through an engine with a small plan cache: results right, and the device
// memory the plans hold (offset tables) does not grow.
TEST_F(CudaExecutor, RandomLayersInBoundedDeviceMemory) {
  EngineOptions eo;
  eo.plan_cache_capacity = 16;
  Engine engine(Target::Cuda, 0, nullptr, eo);
  std::mt19937_64 g(test_seed() + 80);
  const int layers = random_case_count(300, 40);
  size_t free_mid = 0, free_end = 0, total = 0;
  for (int i = 0; i < layers; ++i) {
    // Taken before any skip, so an invalid layer at the midpoint cannot leave the baseline unset.
    if (i == layers / 2) CUDA_OK(cudaMemGetInfo(&free_mid, &total));
    Case c = random_case(g);
    c.p.n = 1;
    try {
      c.p.validate();
    } catch (const Error&) {
      continue;
    }
    run_case(engine, c, g, false);
  }
  ASSERT_GT(free_mid, 0u);
  CUDA_OK(cudaMemGetInfo(&free_end, &total));
  EXPECT_LE(engine.cached_plans(), 16u);
  EXPECT_LT(std::abs(double(free_end) - double(free_mid)), double(8 << 20)) << "device memory moved";
}

}  // namespace
}  // namespace mconv::test
