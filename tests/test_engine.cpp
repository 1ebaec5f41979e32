// The Engine's plan cache and its use from several threads (the ThreadSanitizer build runs these),
// deterministic plans, and a long run of random layers with bounded memory.
#include <cmath>
#include <fstream>
#include <thread>

#include "problem_gen.hpp"

namespace mconv::test {
namespace {

// Runs case `c` on `engine` and returns its error against the double reference, relative to the norm
// of the magnitudes summed.
double run_and_compare(Engine& engine, const Case& c, uint64_t seed) {
  std::mt19937_64 g(seed);
  HostTensors t(c, g, false);
  std::vector<float> ref = t.y, got = t.y;
  const Epilogue e{c.alpha, c.beta, t.bias.empty() ? nullptr : t.bias.data(), c.act};
  cpu::reference_forward(c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, ref.data(), e);
  auto plan = engine.plan(c.p, t.xd, t.wd, t.yd);
  engine.conv2d_forward(*plan, t.x.data(), t.w.data(), got.data(), e);
  // fp32 accumulation errs in proportion to the magnitudes it sums, not to the result: a layer of one
  // output whose terms cancel has a tiny norm. So the error is measured against the norm of the same
  // convolution of |x|, |w|, |bias| and |y|, the scale fp32 summation's error bound is stated in.
  auto magnitudes = [](std::vector<float> v) {
    for (float& f : v) f = std::fabs(f);
    return v;
  };
  const std::vector<float> ax = magnitudes(t.x), aw = magnitudes(t.w), ab = magnitudes(t.bias);
  std::vector<float> scale = magnitudes(t.y);
  cpu::reference_forward(c.p, t.xd, ax.data(), t.wd, aw.data(), t.yd, scale.data(),
                         Epilogue{std::fabs(c.alpha), std::fabs(c.beta), ab.empty() ? nullptr : ab.data()});
  double e2 = 0, s2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) return INFINITY;
    e2 += double(got[i] - ref[i]) * (got[i] - ref[i]);
    s2 += double(scale[i]) * scale[i];
  }
  return s2 > 0 ? std::sqrt(e2 / s2) : std::sqrt(e2);
}

TEST(Engine, SharedAndOwnEnginesAcrossThreads) {
  // Four threads share one engine (its plan cache, under contention: the same problems in different
  // orders), four more each use their own.
  Engine shared(Target::Cpu, 0, nullptr, EngineOptions{true, 8});
  std::vector<Case> cases;
  std::mt19937_64 g(test_seed() + 50);
  while (cases.size() < 12) {
    Case c = random_case(g);
    if (c.p.n * c.p.c * c.p.h * c.p.w <= 20000) cases.push_back(c);
  }
  std::vector<double> worst(8, 0.0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Engine own(Target::Cpu);
      Engine& engine = t < 4 ? shared : own;
      for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < cases.size(); ++i) {
          const Case& c = cases[(i + t) % cases.size()];
          worst[t] = std::max(worst[t], run_and_compare(engine, c, test_seed() + i));
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_LT(worst[t], 1e-5) << "thread " << t;
  EXPECT_LE(shared.cached_plans(), 8u);
}

TEST(Engine, PlanCacheDropsTheLeastRecentlyUsed) {
  Engine e(Target::Cpu, 0, nullptr, EngineOptions{true, 3});
  std::vector<std::shared_ptr<const Plan>> held;
  for (int64_t c = 1; c <= 6; ++c) {
    const Problem p = make(1, c, 6, 6, 2, 3, 3, 1);
    held.push_back(e.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW)));
    if (c == 3) {  // touch the first: the second becomes the least recently used
      const Problem p1 = make(1, 1, 6, 6, 2, 3, 3, 1);
      EXPECT_EQ(e.plan(p1, p1.x_desc(Layout::NCHW), p1.w_desc(Layout::NCHW), p1.y_desc(Layout::NCHW)), held[0]);
    }
  }
  EXPECT_EQ(e.cached_plans(), 3u);
  // A dropped plan stays valid for its holder, and plan() builds it again.
  const Problem p2 = make(1, 2, 6, 6, 2, 3, 3, 1);
  std::vector<float> x(72, 1.0f), w(36, 1.0f), y(72, NAN);
  e.conv2d_forward(*held[1], x.data(), w.data(), y.data());
  EXPECT_EQ(y[7], 18.0f);  // an interior output: 2 channels x 9 taps of 1
  EXPECT_NE(e.plan(p2, p2.x_desc(Layout::NCHW), p2.w_desc(Layout::NCHW), p2.y_desc(Layout::NCHW)), held[1]);
  EXPECT_THROW(Engine(Target::Cpu, 0, nullptr, EngineOptions{true, 0}), Error);
}

TEST(Plan, DeterministicPlansUseNoAtomics) {
  const HardwareModel hw = HardwareModel::reference_h100();
  const Problem small_map = make(1, 512, 7, 7, 512, 3, 3, 1);  // split-K / channel slices by default
  for (Algorithm a : {Algorithm::ImplicitPrecomp, Algorithm::StrideFixed}) {
    PlanOptions o{Target::Cuda, a};
    const Plan free = Plan::build(small_map, small_map.x_desc(Layout::NCHW), small_map.w_desc(Layout::NCHW),
                                  small_map.y_desc(Layout::NCHW), hw, o);
    EXPECT_GT(free.split_k(), 1) << algorithm_name(a);
    EXPECT_FALSE(free.deterministic());
    o.deterministic = true;
    const Plan det = Plan::build(small_map, small_map.x_desc(Layout::NCHW), small_map.w_desc(Layout::NCHW),
                                 small_map.y_desc(Layout::NCHW), hw, o);
    if (a == Algorithm::StrideFixed) {
      EXPECT_EQ(det.split_k(), 1);
    } else {  // Note [ordered split-k]: the slices are one cluster, summed in rank order
      EXPECT_GT(det.split_k(), 1);
      EXPECT_LE(det.split_k(), 16);
      EXPECT_TRUE(std::get<ImplicitPrecompDivision>(det.division()).ordered_split);
      EXPECT_NE(det.to_text(0).find("summed in rank order"), std::string::npos);
    }
    EXPECT_TRUE(det.deterministic()) << algorithm_name(a);
    EXPECT_NE(det.to_text(0).find("deterministic yes"), std::string::npos);
  }
  PlanOptions forced{Target::Cuda, Algorithm::ImplicitPrecomp, "", 17, true};  // beyond one cluster
  EXPECT_THROW(Plan::build(small_map, small_map.x_desc(Layout::NCHW), small_map.w_desc(Layout::NCHW),
                           small_map.y_desc(Layout::NCHW), hw, forced),
               Error);
  forced.split_k = 4;
  EXPECT_TRUE(Plan::build(small_map, small_map.x_desc(Layout::NCHW), small_map.w_desc(Layout::NCHW),
                          small_map.y_desc(Layout::NCHW), hw, forced)
                  .deterministic());
}

// Resident set size in bytes (Linux).
int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

TEST(Engine, ThousandsOfRandomLayersInBoundedMemory) {
  Engine e(Target::Cpu, 0, nullptr, EngineOptions{true, 64});
  std::mt19937_64 g(test_seed() + 60);
  int64_t rss_half = 0;
  const int layers = 2000;
  for (int i = 0; i < layers; ++i) {
    // Taken before any skip: a layer drawn invalid at the midpoint must not leave the baseline at zero.
    if (i == layers / 2) rss_half = rss_bytes();
    Case c = random_case(g);
    c.p.n = 1;
    c.p.h = std::min<int64_t>(c.p.h, 12);
    c.p.w = std::min<int64_t>(c.p.w, 12);
    try {
      c.p.validate();
    } catch (const Error&) {
      continue;
    }
    ASSERT_LT(run_and_compare(e, c, i), 1e-5) << c.name();
  }
  ASSERT_GT(rss_half, 0);
  EXPECT_LE(e.cached_plans(), 64u);
  // The second thousand layers (new problems all) add no more than a few MB: the cache is bounded.
  EXPECT_LT(rss_bytes() - rss_half, int64_t(16) << 20);
}

}  // namespace
}  // namespace mconv::test
