// The planner's choices (src/selection/heuristics.cpp and the families' planners), checked without a GPU: each rule
// fires where its measured evidence says it should, and every choice carries a reason.
#include <algorithm>
#include <map>
#include <set>

#include "../src/algorithms/direct_block/planner.hpp"
#include "../src/algorithms/implicit_precomp/planner.hpp"
#include "../src/selection/heuristics.hpp"
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

const HardwareModel kH100 = HardwareModel::reference_h100();

/// The implicit-GEMM tile the planner picks for `p` (`rows_gather`: channels innermost;
/// `filters_contiguous`: w's filter stride is 1).
std::string tile_of(const Problem& p, bool rows_gather, bool filters_contiguous = false) {
  std::vector<std::string> why;
  const auto d = detail::plan_implicit_precomp(p, p.c_per_group() * p.r * p.s, {rows_gather, filters_contiguous}, kH100,
                                               "", 0, false, why);
  EXPECT_FALSE(why.empty()) << "every choice gives its reason";
  return d.tile_name;
}
/// The split-K slices the planner picks for `p` with `tile`.
int split_of(const Problem& p, const std::string& tile) {
  std::vector<std::string> why;
  return detail::plan_implicit_precomp(p, p.c_per_group() * p.r * p.s, {}, kH100, tile, 0, false, why).split_k;
}

Algorithm pick(const Problem& p, Layout x_layout = Layout::NCHW) {
  std::vector<std::string> why;
  Algorithm a = detail::choose_algorithm(p, p.x_desc(x_layout), kH100, why);
  EXPECT_EQ(why.size(), 1u);
  return a;
}

TEST(Heuristics, AlgorithmChoice) {
  EXPECT_EQ(pick(make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32)), Algorithm::SingleChannel);  // depthwise: planes
  EXPECT_EQ(pick(make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32), Layout::CNHW), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32), Layout::NHWC), Algorithm::DirectBlock);  // strided rows
  EXPECT_EQ(pick(make(32, 32, 112, 112, 32, 3, 3, 1, 3, 1, 32)), Algorithm::DirectBlock);                // stride 3
  EXPECT_EQ(pick(make(32, 96, 112, 112, 192, 3, 3, 1, 2, 1, 96)), Algorithm::DirectBlock);               // multiplier 2
  // Single channel: the paper's division, reshaped where the kernel needs it (Note [single-channel block shape]).
  EXPECT_EQ(pick(make(1, 1, 56, 56, 256, 3, 3)), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 28, 28, 512, 3, 3)), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 28, 28, 512, 1, 1)), Algorithm::SingleChannel);  // 1x1 on a small map too
  EXPECT_EQ(pick(make(1, 1, 112, 112, 128, 1, 1)), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 224, 224, 64, 1, 1)), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 1024, 1024, 32, 1, 1)), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 56, 56, 256, 5, 5)), Algorithm::SingleChannel);    // method 1: runs of 4
  EXPECT_EQ(pick(make(1, 1, 112, 112, 128, 5, 5)), Algorithm::SingleChannel);  // reshaped, column pairs
  // Without pairs too: the reshaped blocks (Note [single-channel block shape]) give runs of 4 rows.
  EXPECT_EQ(pick(make(1, 1, 112, 112, 128, 5, 5), Layout::NHWC), Algorithm::SingleChannel);
  EXPECT_EQ(pick(make(1, 1, 224, 224, 64, 5, 5)), Algorithm::SingleChannel);            // runs of 2
  EXPECT_EQ(pick(make(4, 8, 56, 56, 64, 3, 3, 1, 1, 1, 8)), Algorithm::SingleChannel);  // grouped, K/G = 8
  EXPECT_EQ(pick(make(32, 64, 56, 56, 64, 3, 3, 1)), Algorithm::ImplicitPrecomp);
  EXPECT_EQ(pick(make(32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 2)), Algorithm::ImplicitPrecomp);  // grouped, C/G = 32
  // Few filters over many channels: an RGB first layer's dgrad phase step (K/G = 3), an output head.
  EXPECT_EQ(pick(make(32, 64, 115, 115, 3, 4, 4)), Algorithm::DirectBlock);
  EXPECT_EQ(pick(make(8, 64, 256, 256, 1, 1, 1)), Algorithm::DirectBlock);
  // Channels-last: the 3x3 ones too, a 1x1 one the GEMM (direct_block reads x C elements apart).
  EXPECT_EQ(pick(make(32, 64, 115, 115, 3, 4, 4), Layout::NHWC), Algorithm::DirectBlock);
  EXPECT_EQ(pick(make(8, 64, 256, 256, 1, 1, 1), Layout::NHWC), Algorithm::ImplicitPrecomp);
  EXPECT_EQ(pick(make(16, 256, 64, 64, 8, 1, 1)), Algorithm::ImplicitPrecomp);  // K/G = 8: the GEMM
  EXPECT_EQ(pick(make(8, 8, 64, 64, 3, 3, 3, 1)), Algorithm::ImplicitPrecomp);  // C/G = 8: the GEMM
  // Multi channel: stride_fixed where it measured faster (Note [stride-fixed on Hopper] rules).
  EXPECT_EQ(pick(make(1, 64, 224, 224, 64, 3, 3)), Algorithm::StrideFixed);      // few channels, large map
  EXPECT_EQ(pick(make(32, 64, 224, 224, 64, 3, 3, 1)), Algorithm::StrideFixed);  // vgg16_1
  EXPECT_EQ(pick(make(1, 64, 112, 112, 64, 5, 5)), Algorithm::StrideFixed);
  EXPECT_EQ(pick(make(1, 64, 112, 112, 64, 3, 3)), Algorithm::StrideFixed);  // 4 pixels a thread
  EXPECT_EQ(pick(make(1, 128, 56, 56, 128, 3, 3)), Algorithm::StrideFixed);
  EXPECT_EQ(pick(make(1, 256, 28, 28, 256, 3, 3)), Algorithm::ImplicitPrecomp);        // C = 256: the GEMM
  EXPECT_EQ(pick(make(1, 128, 56, 56, 128, 5, 5)), Algorithm::ImplicitPrecomp);        // C = 128
  EXPECT_EQ(pick(make(32, 3, 224, 224, 64, 7, 7, 3, 2)), Algorithm::ImplicitPrecomp);  // resnet50 conv1: stride 2
  EXPECT_EQ(pick(make(1, 256, 28, 28, 256, 1, 1)), Algorithm::StrideFixed);            // 1x1, 784 outputs
  EXPECT_EQ(pick(make(1, 64, 112, 112, 64, 1, 1)), Algorithm::ImplicitPrecomp);
  EXPECT_EQ(pick(make(1, 64, 224, 224, 64, 1, 1)), Algorithm::StrideFixed);  // Note [stride-fixed 1x1 rounds]
  EXPECT_EQ(pick(make(1, 64, 512, 512, 64, 1, 1)), Algorithm::StrideFixed);
  EXPECT_EQ(pick(make(32, 64, 56, 56, 64, 1, 1)), Algorithm::ImplicitPrecomp);    // resnet50_l1_1x1a
  EXPECT_EQ(pick(make(32, 256, 28, 28, 256, 1, 1)), Algorithm::ImplicitPrecomp);  // batch 32 fills the GEMM
  EXPECT_EQ(pick(make(32, 512, 7, 7, 2048, 1, 1)), Algorithm::ImplicitPrecomp);   // resnet50_l4_1x1b: 208 tiles
  EXPECT_EQ(pick(make(32, 2048, 7, 7, 512, 1, 1)), Algorithm::ImplicitPrecomp);   // resnet50_l4_1x1c
  EXPECT_EQ(pick(make(1, 512, 14, 14, 512, 3, 3)), Algorithm::StrideFixed);       // small map, many channels
  EXPECT_EQ(pick(make(32, 512, 7, 7, 512, 3, 3, 1)), Algorithm::ImplicitPrecomp);
}

TEST(Heuristics, TileChoice) {
  std::vector<std::string> why;
  EXPECT_EQ(tile_of(make(32, 512, 7, 7, 512, 3, 3, 1), false), "128x128x16");
  EXPECT_EQ(tile_of(make(32, 512, 7, 7, 512, 3, 3, 1), true), "128x128x8");
  EXPECT_EQ(tile_of(make(32, 64, 56, 56, 64, 3, 3, 1), false), "128x64x16");
  EXPECT_EQ(tile_of(make(32, 64, 56, 56, 64, 3, 3, 1), true), "128x64x8");
  EXPECT_EQ(tile_of(make(1, 512, 7, 7, 512, 3, 3, 1), false), "64x32x8");
  // 1x1 steps reading w's filters contiguously (resnet50's 1x1 dgrad steps at batch 32): the 8-row
  // tiles, 128x64 where 128x128 fills a wave of 264 blocks and leaves the last one emptier.
  EXPECT_EQ(tile_of(make(32, 512, 28, 28, 256, 1, 1), false, true), "128x64x8");       // l2_ds: 392 vs 784 blocks
  EXPECT_EQ(tile_of(make(32, 128, 28, 28, 512, 1, 1), false, true), "128x128x8");      // l2_1x1c: 784 blocks
  EXPECT_EQ(tile_of(make(32, 1024, 14, 14, 256, 1, 1), false, true), "128x128x8");     // l3_1x1b: 98, split
  EXPECT_EQ(tile_of(make(32, 64, 56, 56, 64, 1, 1), false, true), "128x64x8");         // l1_1x1a: K/G = 64
  EXPECT_EQ(tile_of(make(32, 512, 28, 28, 256, 1, 1), false), "128x128x16");           // filters apart
  EXPECT_EQ(tile_of(make(32, 512, 28, 28, 256, 3, 3, 1), false, true), "128x128x16");  // not 1x1
}

TEST(Heuristics, SplitKOnlyWhenTheGridIsSmall) {
  std::vector<std::string> why;
  EXPECT_GT(split_of(make(1, 512, 7, 7, 512, 3, 3, 1), "64x32x8"), 1);
  EXPECT_EQ(split_of(make(32, 256, 56, 56, 256, 3, 3, 1), "128x128x16"), 1);
  EXPECT_EQ(split_of(make(1, 4, 7, 7, 8, 1, 1), "64x32x8"), 1);  // too few rows to split
}

TEST(Heuristics, DirectShapeFitsOrSaysWhy) {
  std::vector<std::string> why;
  EXPECT_EQ(detail::plan_direct_block(make(1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 8), kH100, why).shape_name,
            "direct_16x8_r1x1_f1");
  EXPECT_EQ(detail::plan_direct_block(make(1, 1, 56, 56, 64, 3, 3), kH100, why).shape_name, "direct_32x8_r2x2_f4");
  // 2 or 3 filters a group: the 4-filter shape on maps wider than 16 (resnet50 conv1's dgrad phases).
  EXPECT_EQ(detail::plan_direct_block(make(32, 64, 112, 112, 3, 4, 4, 3, 1, 1), kH100, why).shape_name,
            "direct_32x8_r2x2_f4");
  EXPECT_EQ(detail::plan_direct_block(make(1, 8, 17, 17, 16, 3, 3, 1, 1, 1, 8), kH100, why).shape_name,
            "direct_32x8_r2x2_f4");
  EXPECT_EQ(detail::plan_direct_block(make(1, 8, 16, 16, 16, 3, 3, 1, 1, 1, 8), kH100, why).shape_name,
            "direct_16x8_r1x1_f1");
  EXPECT_EQ(detail::plan_direct_block(make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960), kH100, why).shape_name,
            "direct_8x8_r1x1_f1_g4");
  EXPECT_EQ(detail::plan_direct_block(make(32, 576, 14, 14, 576, 3, 3, 1, 1, 1, 576), kH100, why).shape_name,
            "direct_16x8_r2x1_f1_g2");
  EXPECT_THROW(detail::plan_direct_block(make(1, 1, 3000, 3000, 1, 7, 7, 0, 1, 400), kH100, why), Error);
}

}  // namespace
}  // namespace mconv::test

#include "../src/algorithms/single_channel/planner.hpp"

namespace mconv::test {
namespace {

HardwareModel h100_model() {
  HardwareModel m;
  m.name = "H100 (test)";
  m.sm_count = 132;
  m.cores_per_sm = 128;
  m.smem_per_sm = 228 * 1024;
  m.smem_per_block_optin = 227 * 1024;
  m.max_threads_per_sm = 2048;
  m.regs_per_sm = 65536;
  m.clock_mhz = 1980;
  m.latency_cycles = 291;
  m.bandwidth = 3.0e12;
  return m;
}

TEST(SingleChannelPlanner, PicksTheMethodWithTheSmallerD) {
  std::vector<std::string> why;
  // 28x28 map, 512 3x3 filters: method 1 (4 filters per SM, whole map) has the smaller D.
  auto d = detail::plan_single_channel(make(1, 1, 28, 28, 512, 3, 3), h100_model(), why, false);
  EXPECT_EQ(d.method, 1);
  EXPECT_FALSE(d.shaped);
  EXPECT_EQ(d.filters_per_block, 4);  // ceil(512 / 132)
  EXPECT_LE(d.d_bytes, detail::single_channel_smem_budget(h100_model()));
  EXPECT_FALSE(why.empty());
}

TEST(SingleChannelPlanner, SmallMapsTakeTheVsFallback) {
  std::vector<std::string> why;
  auto d = detail::plan_single_channel(make(1, 1, 28, 28, 512, 1, 1), h100_model(), why, false);
  EXPECT_TRUE(d.vs_fallback);  // Th = 4 * 28 * 28 FMAs per block, far below N_FMA = 74,496
  EXPECT_GE(double(d.blocks) * d.d_bytes, std::min(h100_model().v_s(), double(d.blocks) * d.d_bytes));
  EXPECT_TRUE(
      std::any_of(why.begin(), why.end(), [](const std::string& w) { return w.find("V_s") != std::string::npos; }));
}

// Note [single-channel runs]: the longest run that idles at most a quarter of the computed rows, up
// to the measured limit of Note [single-channel run length]; and a D that is the kernel's own layout
// (whole runs, padded filter rows, bias values).
TEST(SingleChannelPlanner, RunsIdleAtMostAQuarterOfTheRows) {
  const Problem k5 = make(1, 1, 64, 64, 8, 5, 5), k3 = make(1, 1, 64, 64, 8, 3, 3), k7 = make(1, 1, 64, 64, 8, 7, 7);
  EXPECT_EQ(detail::single_channel_run(k5, 2, 8), 4);
  EXPECT_EQ(detail::single_channel_run(k5, 2, 26), 4);  // 28 rows computed for 26
  EXPECT_EQ(detail::single_channel_run(k5, 2, 9), 2);   // 4 runs of 4 would compute 12
  EXPECT_EQ(detail::single_channel_run(k5, 2, 2), 2);
  EXPECT_EQ(detail::single_channel_run(k5, 2, 3), 1);
  EXPECT_EQ(detail::single_channel_run(k5, 2, 1), 1);
  EXPECT_EQ(detail::single_channel_run(k5, 32, 8), 2);  // 32 filters x 8 rows: at most 2
  EXPECT_EQ(detail::single_channel_run(k7, 32, 8), 4);  // measured only up to 5x5
  // The register window (kSingleChannelWindowFloats): 7x7 at stride 2 with runs of 4 would hold
  // 13 x 8 floats; runs of 2 hold 9 x 8. A 9x9 filter reads the strip per tap (no window).
  const Problem k7s2 = make(1, 1, 64, 64, 8, 7, 7, 0, 2), k9 = make(1, 1, 64, 64, 8, 9, 9);
  EXPECT_EQ(detail::single_channel_longest_run(k7s2, 2, 8), 2);
  EXPECT_EQ(detail::single_channel_run(k7s2, 2, 8), 2);
  EXPECT_FALSE(detail::single_channel_register_window(k9));
  EXPECT_EQ(detail::single_channel_run(k9, 2, 8), 4);
  EXPECT_EQ(detail::single_channel_run(k3, 2, 26), 2);  // 3x3: at most 2
  EXPECT_EQ(detail::single_channel_run(k3, 32, 4), 2);
  EXPECT_EQ(detail::single_channel_run(k3, 32, 8), 1);  // and 1 in blocks of 32 x 8
  const Problem p = make(1, 1, 30, 20, 10, 5, 5, 2);    // strip 24 columns, filter rows padded to 8
  EXPECT_EQ(detail::single_channel_filter_pitch(p), 8);
  // 9 output rows: runs of 2, so 10 rows computed from 14 input rows.
  EXPECT_EQ(detail::single_channel_smem_bytes(p, 10, 9), (10 * 5 * 8 + 12 + 14 * 24) * 4);
  EXPECT_EQ(detail::single_channel_threads(p, 10, 9), 320);  // 5 runs x 20 columns x 3 lanes of <= 4 filters
  EXPECT_EQ(detail::single_channel_threads(p, 1, 1), 64);
  std::vector<std::string> why;
  const auto d = detail::plan_single_channel(p, h100_model(), why);
  EXPECT_EQ(d.d_bytes, detail::single_channel_smem_bytes(p, d.filters_per_block, d.rows_per_block));
  EXPECT_NE(why.back().find("runs of"), std::string::npos) << why.back();
}

// Note [single-channel block shape]: blocks of fewer than 4 rows or 8 filters become 4 rows and the
// fewest equal filter groups that give 3/4 of the SMs a block; the others keep the paper's division.
TEST(SingleChannelPlanner, ReshapesBlocksTheKernelCannotUseWell) {
  const HardwareModel hw = h100_model();
  struct Expect {
    Problem p;
    int filters, rows;
  };
  for (const Expect& e : {Expect{make(1, 1, 28, 28, 512, 3, 3), 32, 4},    // method 1: 4 filters x 26 rows
                          Expect{make(1, 1, 28, 28, 512, 5, 5), 16, 4},    // 6 row pieces: 32 groups for 99 blocks
                          Expect{make(1, 1, 112, 112, 128, 5, 5), 32, 4},  // method 2: 128 filters x 1 row
                          Expect{make(1, 1, 224, 224, 64, 3, 3), 32, 4},   // 64 x 2
                          Expect{make(32, 1, 28, 28, 512, 3, 3), 512, 4},  // 32 images fill the SMs
                          Expect{make(1, 1, 5, 5, 3, 3, 3), 1, 3}}) {      // 3 rows, 3 filters: 3 blocks
    std::vector<std::string> why;
    const auto d = detail::plan_single_channel(e.p, hw, why);
    EXPECT_TRUE(d.shaped) << e.p.to_string();
    EXPECT_EQ(d.filters_per_block, e.filters) << e.p.to_string();
    EXPECT_EQ(d.rows_per_block, e.rows) << e.p.to_string();
    EXPECT_EQ(d.d_bytes, detail::single_channel_smem_bytes(e.p, d.filters_per_block, d.rows_per_block));
    EXPECT_NE(why.back().find("block shape"), std::string::npos) << why.back();
  }
  for (const Problem& p : {make(1, 1, 512, 512, 32, 3, 3), make(1, 1, 1024, 1024, 32, 5, 5)}) {
    std::vector<std::string> why;
    const auto d = detail::plan_single_channel(p, hw, why);
    EXPECT_FALSE(d.shaped) << p.to_string();
    EXPECT_EQ(d.filters_per_block, 32) << p.to_string();
  }
}

TEST(SingleChannelPlanner, WideMapsSplitRowsUntilDFits) {
  std::vector<std::string> why;
  auto d = detail::plan_single_channel(make(1, 1, 1024, 1024, 32, 5, 5), h100_model(), why);
  EXPECT_LE(d.d_bytes, detail::single_channel_smem_budget(h100_model()));
  EXPECT_GT(d.blocks, 1);
}

// Note [plane stream]: small maps pack whole planes, large maps cut bands, every block near the Th
// target, within its share of shared memory, and enough blocks for every SM's resident set.
TEST(PlaneStreamPlanner, PacksSmallPlanesAndBandsLargeOnes) {
  const HardwareModel hw = h100_model();
  const int resident = detail::plane_stream_resident_blocks(3);
  for (Problem p : {make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960), make(32, 384, 14, 14, 384, 3, 3, 1, 1, 1, 384),
                    make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32), make(32, 96, 112, 112, 96, 3, 3, 1, 2, 1, 96),
                    make(32, 144, 56, 56, 144, 3, 3, 1, 2, 1, 144)}) {
    SCOPED_TRACE(p.to_string());
    std::vector<std::string> why;
    const auto d = detail::plan_plane_stream(p, p.x_desc(Layout::NCHW), hw, why);
    EXPECT_LE(d.d_bytes, hw.smem_per_sm / resident);
    EXPECT_GE(d.blocks * 10, int64_t(hw.sm_count) * resident * 9);   // a resident wave, within 10%
    if (d.planes_per_block > 1) EXPECT_EQ(d.rows_per_block, p.p());  // packing needs whole planes
    if (d.rows_per_block < p.p()) EXPECT_EQ(d.rows_per_block % detail::plane_stream_run(p), 0);
    if (p.w % 4 == 0) EXPECT_EQ(d.layout.pitch % 4, 0);  // 16-byte copies need aligned rows
    EXPECT_GE(d.layout.pitch, d.layout.lpad + p.w);
    EXPECT_GE(d.layout.plane, d.layout.rows * d.layout.pitch);
    EXPECT_NE(why.back().find("plane stream"), std::string::npos);
  }
  std::vector<std::string> why;
  const Problem small = make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960);
  EXPECT_GT(detail::plan_plane_stream(small, small.x_desc(Layout::NCHW), hw, why).planes_per_block, 4);
  const Problem large = make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32);
  const auto band = detail::plan_plane_stream(large, large.x_desc(Layout::NCHW), hw, why);
  EXPECT_EQ(band.planes_per_block, 1);
  EXPECT_LT(band.rows_per_block, 112);
  EXPECT_GE(band.th * resident, hw.n_fma());  // the resident blocks of an SM hold N_FMA
}

// Note [plane stream banks]: with 7x7 planes a warp reads 4-5 planes at once; the chosen strides
// put its 32 first reads on 32 different banks.
TEST(PlaneStreamPlanner, SmallPlanesSpreadOverTheBanks) {
  const Problem p = make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960);
  const auto l = detail::plane_stream_layout(p, 7, 4);
  std::set<int64_t> banks;
  for (int64_t it = 0; it < 32; ++it) banks.insert(((it / 7) * l.plane + it % 7) % 32);  // one run per plane
  EXPECT_EQ(banks.size(), 32u) << "pitch " << l.pitch << " plane " << l.plane;
  // 2-byte elements: a word holds two, so the warp reads 4 planes x 4 words; no bank serves two
  // of those words, and pitch and plane stay even (4-byte copies of rows of even W).
  const Problem even = make(32, 960, 14, 14, 960, 3, 3, 1, 2, 1, 960);
  for (const Problem& q : {p, even}) {
    const auto h = detail::plane_stream_layout(q, 7, 2);
    std::map<int64_t, std::set<int64_t>> words;  // bank -> the words it serves
    for (int64_t it = 0; it < 32; ++it) {
      const int64_t word = ((it / q.q()) * h.plane + it % q.q() * q.stride_w) / 2;
      words[word % 32].insert(word);
    }
    for (const auto& [bank, w] : words) EXPECT_EQ(w.size(), 1u) << "bank " << bank << " plane " << h.plane;
    EXPECT_EQ(h.pitch % 2, 0);
    EXPECT_EQ(h.plane % 2, 0);
    EXPECT_EQ(h.lpad % 8, 0);
  }
}

TEST(PlaneStreamPlanner, RefusesWhatTheKernelDoesNotRun) {
  const HardwareModel hw = h100_model();
  std::vector<std::string> why;
  const Problem mult2 = make(2, 8, 14, 14, 16, 3, 3, 1, 1, 1, 8), dil = make(2, 8, 14, 14, 8, 3, 3, 2, 1, 2, 8),
                s3 = make(2, 8, 14, 14, 8, 3, 3, 1, 3, 1, 8), k4 = make(2, 8, 14, 14, 8, 4, 4, 1, 1, 1, 8),
                dw = make(2, 8, 14, 14, 8, 3, 3, 1, 1, 1, 8);
  EXPECT_NE(detail::plane_stream_unsupported(mult2, mult2.x_desc(Layout::NCHW)).find("K/G"), std::string::npos);
  EXPECT_NE(detail::plane_stream_unsupported(dil, dil.x_desc(Layout::NCHW)).find("dilated"), std::string::npos);
  EXPECT_NE(detail::plane_stream_unsupported(s3, s3.x_desc(Layout::NCHW)).find("stride_h"), std::string::npos);
  EXPECT_NE(detail::plane_stream_unsupported(k4, k4.x_desc(Layout::NCHW)).find("square"), std::string::npos);
  EXPECT_NE(detail::plane_stream_unsupported(dw, dw.x_desc(Layout::NHWC)).find("contiguous"), std::string::npos);
  EXPECT_EQ(detail::plane_stream_unsupported(dw, dw.x_desc(Layout::CNHW)), "");
  EXPECT_THROW(detail::plan_plane_stream(mult2, mult2.x_desc(Layout::NCHW), hw, why), Error);
}

// Note [plane bulk]: MobileNetV2's depthwise layers get segments of 7, blocks whose items fill 85%
// of their passes or more, chunks within a resident block's share of shared memory, whole planes only
// on small maps; what the bulk kernel does not run is refused with the reason.
TEST(PlaneBulkPlanner, FillsTheBlocksOfMobileNetLayers) {
  const HardwareModel hw = h100_model();
  for (int64_t h : {112, 56, 28, 14, 7})
    for (int64_t stride : {1, 2}) {
      if (h == 7 && stride == 2) continue;  // not a MobileNet layer (4x4 outputs)
      const Problem p = make(32, 144, h, h, 144, 3, 3, 1, stride, 1, 144);
      std::vector<std::string> why;
      const auto d = detail::plan_plane_bulk(p, p.x_desc(Layout::NCHW), p.y_desc(Layout::NCHW), hw, why);
      SCOPED_TRACE(p.to_string() + ": " + why.back());
      EXPECT_EQ(d.segment, 7);
      EXPECT_GE(d.fill, 0.85);
      const int resident = detail::plane_bulk_resident_blocks(3);
      EXPECT_LE((d.d_bytes + 1024) * d.blocks_per_sm, hw.smem_per_sm);
      EXPECT_GE(d.blocks_per_sm, resident / 2);
      EXPECT_EQ(d.launch.grid_x, std::min<int64_t>(d.chunks, hw.sm_count * d.blocks_per_sm));  // one resident wave
      if (d.planes_per_chunk > 1) EXPECT_EQ(d.rows_per_chunk, p.p());
      if (p.p() * ((p.q() + 6) / 7) > 4 * 128) EXPECT_LT(d.rows_per_chunk, p.p());  // large maps: bands
      EXPECT_NE(why.back().find("bulk"), std::string::npos);
    }
  // Rows whose width 7 does not divide take segments of 4 when that idles fewer outputs.
  EXPECT_EQ(detail::plane_bulk_segment(make(1, 4, 16, 16, 4, 3, 3, 1, 1, 1, 4)), 4);
  EXPECT_EQ(detail::plane_bulk_segment(make(1, 4, 14, 14, 4, 3, 3, 1, 1, 1, 4)), 7);
  // Stride 2 takes the bulk kernel up to 7 outputs wide, and up to 14 where W is even (paired
  // reads); wider maps keep the plane stream (measured faster there).
  EXPECT_TRUE(detail::plane_bulk_preferred(make(32, 576, 14, 14, 576, 3, 3, 1, 2, 1, 576)));
  EXPECT_TRUE(detail::plane_bulk_preferred(make(32, 192, 28, 28, 192, 3, 3, 1, 2, 1, 192)));
  EXPECT_FALSE(detail::plane_bulk_preferred(make(32, 192, 27, 27, 192, 3, 3, 1, 2, 1, 192)));  // 14 wide, W odd
  EXPECT_TRUE(detail::plane_bulk_preferred(make(32, 192, 13, 13, 192, 3, 3, 1, 2, 1, 192)));   // 7 wide
  EXPECT_FALSE(detail::plane_bulk_preferred(make(32, 144, 56, 56, 144, 3, 3, 1, 2, 1, 144)));
  EXPECT_TRUE(detail::plane_bulk_preferred(make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32)));
  // Whole planes (read-once inputs, Note [bulk read-once inputs]) against bands, whose halo rows two
  // chunks read; a whole plane's chunk reads all H rows of x.
  const Problem p14 = make(32, 384, 14, 14, 384, 3, 3, 1, 1, 1, 384);
  EXPECT_TRUE(detail::plane_bulk_whole_planes(p14, 8, 14));
  EXPECT_TRUE(detail::plane_bulk_whole_planes(p14, 1, 14));
  EXPECT_FALSE(detail::plane_bulk_whole_planes(p14, 1, 7));
  EXPECT_EQ(detail::plane_bulk_chunk_elements(p14, 1, 14, 4).in, 14 * 14 + 3);
  EXPECT_EQ(detail::plane_bulk_chunk_elements(p14, 1, 7, 4).in, 9 * 14 + 3);  // 7 outputs read 6 + 3 rows
  // 2-byte elements: a 16-byte vector holds 8, so up to 7 lie before the aligned middle; the
  // block's bytes are those of the elements.
  const auto half = detail::plane_bulk_chunk_elements(p14, 1, 14, 2);
  EXPECT_EQ(half.in, 14 * 14 + 7);
  EXPECT_EQ(half.out, 14 * 14 + 7);
  EXPECT_EQ(detail::plane_bulk_smem_bytes(half),
            (detail::kPlaneBulkGuard + 2 * (2 * detail::kPlaneBulkGuard + 2 * (14 * 14 + 7 + 7) / 8 * 8)) * 2);
}

TEST(PlaneBulkPlanner, RefusesWhatTheKernelDoesNotRun) {
  const HardwareModel hw = h100_model();
  std::vector<std::string> why;
  const Problem dw = make(2, 8, 14, 14, 8, 3, 3, 1, 1, 1, 8);
  Problem unequal = dw;
  unequal.stride_w = 2;
  EXPECT_NE(detail::plane_bulk_unsupported(unequal, unequal.x_desc(Layout::NCHW), unequal.y_desc(Layout::NCHW))
                .find("stride_w"),
            std::string::npos);
  TensorDesc padded_rows = dw.x_desc(Layout::NCHW);
  padded_rows.strides = {8 * 14 * 16, 14 * 16, 16, 1};
  EXPECT_NE(detail::plane_bulk_unsupported(dw, padded_rows, dw.y_desc(Layout::NCHW)).find("packed input rows"),
            std::string::npos);
  EXPECT_NE(
      detail::plane_bulk_unsupported(dw, dw.x_desc(Layout::NCHW), dw.y_desc(Layout::NHWC)).find("packed output rows"),
      std::string::npos);
  EXPECT_EQ(detail::plane_bulk_unsupported(dw, dw.x_desc(Layout::CNHW), dw.y_desc(Layout::NCHW)), "");
  EXPECT_THROW(detail::plan_plane_bulk(unequal, unequal.x_desc(Layout::NCHW), unequal.y_desc(Layout::NCHW), hw, why),
               Error);
  // Packed rows in planes with gaps between them still run, one plane per block.
  TensorDesc gaps = dw.x_desc(Layout::NCHW);
  gaps.strides = {8 * (14 * 14 + 8), 14 * 14 + 8, 14, 1};
  EXPECT_EQ(detail::plane_bulk_unsupported(dw, gaps, dw.y_desc(Layout::NCHW)), "");
  EXPECT_EQ(detail::plan_plane_bulk(dw, gaps, dw.y_desc(Layout::NCHW), hw, why).planes_per_chunk, 1);
  EXPECT_GT(detail::plan_plane_bulk(dw, dw.x_desc(Layout::NCHW), dw.y_desc(Layout::NCHW), hw, why).planes_per_chunk, 1);
}

TEST(SingleChannelPlanner, RefusesMultiChannel) {
  std::vector<std::string> why;
  EXPECT_THROW(detail::plan_single_channel(make(1, 4, 28, 28, 8, 3, 3), h100_model(), why), Error);
}

}  // namespace
}  // namespace mconv::test

#include "../src/algorithms/stride_fixed/planner.hpp"

namespace mconv::test {
namespace {

TEST(StrideFixedPlanner, SegmentFromTheInequalityThenSharedMemory) {
  std::vector<std::string> why;
  const HardwareModel hw = h100_model();
  auto d3 = detail::plan_stride_fixed(make(1, 512, 28, 28, 512, 3, 3, 0), hw, why, 8);
  // The paper's M' >= N_FMA*4/(S*W'x) with M' = 64 and 128 pixels asks S >= 36 B: 64 B, but two
  // rounds of 16 channels (106 KB) leave room for fewer than three blocks per SM, so 32 B.
  EXPECT_NEAR(d3.segment_needed, hw.n_fma() * 4 / (64.0 * 128), 1e-6);
  EXPECT_EQ(d3.segment_channels, 8);
  EXPECT_LE(d3.launch.smem_bytes * detail::stride_fixed_resident_blocks(d3.thread_pixels), hw.smem_per_sm);
  // 26 x 26 outputs: 32-pixel lines x 4 pad the map least (28 x 32 = 896 slots for 676 pixels).
  EXPECT_EQ(d3.tile_cols, 32);
  EXPECT_EQ(d3.tile_rows, 4);
  EXPECT_EQ(d3.tile_cols * d3.tile_rows, detail::stride_fixed_block_pixels(d3.thread_pixels));
  auto d7 = detail::plan_stride_fixed(make(1, 64, 28, 28, 64, 7, 7, 3), hw, why, 8);
  EXPECT_LT(d7.segment_channels, d3.segment_channels);  // 7x7 filters: smaller segments to fit
  EXPECT_LE(d7.launch.smem_bytes * detail::stride_fixed_resident_blocks(d7.thread_pixels), hw.smem_per_sm);
  // 4 pixels a thread: 64-pixel blocks, so the inequality asks twice the segment.
  auto d4 = detail::plan_stride_fixed(make(1, 512, 28, 28, 512, 1, 1, 0), hw, why, 4);
  EXPECT_EQ(d4.tile_cols * d4.tile_rows, 64);
  EXPECT_NEAR(d4.segment_needed, 2 * hw.n_fma() * 4 / (64.0 * 128), 1e-6);
  EXPECT_GE(d4.segment_channels * 4, d4.segment_needed);
  EXPECT_EQ(why.size(), 3u);
}

TEST(StrideFixedPlanner, UnslicedOneByOneLayersTakeTwiceTheSegment) {
  // Note [stride-fixed 1x1 rounds]: the paper's segment is 16 channels for 8 pixels a thread, 32 for 4.
  std::vector<std::string> why;
  const HardwareModel hw = h100_model();
  auto plan = [&](const Problem& p) { return detail::plan_stride_fixed(p, hw, why); };
  const auto big = plan(make(1, 64, 512, 512, 64, 1, 1));
  EXPECT_EQ(big.thread_pixels, 8);
  EXPECT_EQ(big.segment_channels, 32);
  EXPECT_EQ(big.splits, 1);
  const auto mid = plan(make(1, 128, 56, 56, 128, 1, 1));  // sliced in two with 32, unsliced with 64
  EXPECT_EQ(mid.thread_pixels, 4);
  EXPECT_EQ(mid.segment_channels, 64);
  EXPECT_EQ(mid.splits, 1);
  const auto sliced = plan(make(1, 512, 7, 7, 512, 1, 1));  // keeps 32 and its slices
  EXPECT_EQ(sliced.segment_channels, 32);
  EXPECT_GT(sliced.splits, 1);
  EXPECT_EQ(plan(make(1, 64, 512, 512, 64, 3, 3)).segment_channels, 8);   // 3x3: the paper's, halved to fit
  EXPECT_EQ(plan(make(1, 12, 512, 512, 64, 1, 1)).segment_channels, 16);  // no round of only empty channels
}

TEST(StrideFixedPlanner, SmallMapsTakeFourPixelsAThread) {
  // Note [stride-fixed thread pixels]: 4 where the 8-pixel blocks are fewer than the SMs (132),
  // or fewer than half of them for filters wider than 3x3.
  std::vector<std::string> why;
  const HardwareModel hw = h100_model();
  auto pixels = [&](const Problem& p) { return detail::plan_stride_fixed(p, hw, why).thread_pixels; };
  EXPECT_EQ(pixels(make(1, 64, 112, 112, 64, 1, 1)), 4);    // 98 blocks of 8
  EXPECT_EQ(pixels(make(1, 64, 112, 112, 64, 3, 3)), 4);    // 98
  EXPECT_EQ(pixels(make(1, 64, 112, 112, 64, 5, 5)), 8);    // 98 of 5x5 filters
  EXPECT_EQ(pixels(make(1, 128, 56, 56, 128, 5, 5)), 4);    // 52 of 5x5 filters
  EXPECT_EQ(pixels(make(1, 64, 224, 224, 64, 3, 3)), 8);    // 392
  EXPECT_EQ(pixels(make(32, 64, 56, 56, 64, 3, 3, 1)), 8);  // a batch fills the SMs
  EXPECT_EQ(pixels(make(1, 512, 7, 7, 512, 1, 1)), 4);      // 8
}

TEST(StrideFixedPlanner, LayoutCoversEveryWindow) {
  for (int px : {4, 8})
    for (int stride : {1, 2})
      for (int k : {1, 3, 5, 7}) {
        Problem p = make(1, 8, 64, 64, 8, k, k, k / 2);
        p.stride_h = p.stride_w = stride;
        const int pixels = detail::stride_fixed_block_pixels(px);
        for (int cols = px; cols <= pixels; cols *= 2) {
          const auto l = detail::stride_fixed_layout(p, pixels / cols, cols, px);
          EXPECT_EQ(l.cols, (cols - 1) * stride + k);
          EXPECT_EQ(l.pitch % 4, 0);
          // The last thread's float4 window starts at (cols - px) * stride and must stay in its line.
          const int window = (px - 1) * stride + k;
          EXPECT_LE((cols - px) * stride + (window + 3) / 4 * 4, l.pitch);
        }
      }
}

TEST(StrideFixedPlanner, SmallMapsSplitTheChannels) {
  std::vector<std::string> why;
  // 5 x 5 outputs, 512 filters: 8 blocks for 132 SMs unless the 64 rounds of 8 channels are sliced.
  auto d = detail::plan_stride_fixed(make(1, 512, 7, 7, 512, 3, 3, 0), h100_model(), why, 8);
  EXPECT_EQ(d.tile_cols, 16);  // every width pads 5 x 5 to 128 slots; 8 and 16 read least, 16 is wider
  EXPECT_EQ(d.blocks, 8);
  EXPECT_EQ(d.splits, 32);  // two rounds per slice keep the prefetch overlapping
  // Whole waves only: 98 blocks of 4 pixels, 4 resident per SM (528 a wave) take 5 slices, not 6.
  auto mid = detail::plan_stride_fixed(make(1, 128, 56, 56, 128, 3, 3, 0), h100_model(), why);
  EXPECT_EQ(mid.thread_pixels, 4);
  EXPECT_EQ(mid.blocks, 98);
  EXPECT_LE(mid.blocks * mid.splits, 132 * 4);
  // A large map fills the SMs unsliced.
  auto big = detail::plan_stride_fixed(make(1, 64, 224, 224, 64, 3, 3, 1), h100_model(), why);
  EXPECT_EQ(big.splits, 1);
  // Too few rounds to slice.
  auto few = detail::plan_stride_fixed(make(1, 16, 7, 7, 16, 3, 3, 0), h100_model(), why);
  EXPECT_EQ(few.splits, 1);
}

}  // namespace
}  // namespace mconv::test

#include "../src/algorithms/common/fast_divmod.cuh"

namespace mconv::test {
namespace {

// The kernels split flat indices with FastDivmod; it must equal / and % for every divisor and index
// they can see (indices below 2^31).
TEST(FastDivmod, MatchesIntegerDivision) {
  std::mt19937_64 g(test_seed() + 40);
  std::vector<unsigned> divisors{1, 2, 3, 5, 7, 14, 49, 56, 112, 196, 960, 12544, 65535, 65536, 1u << 20, 0x7fffffffu};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + unsigned(g() % 0x7fffffffu));
  for (unsigned d : divisors) {
    const cuda::FastDivmod f(d);
    std::vector<unsigned> ns{0, 1, d - 1, d, d + 1, 0x7fffffffu, 0x7fffffffu - 1};
    for (int i = 0; i < 2000; ++i) ns.push_back(unsigned(g() % 0x80000000u));
    for (unsigned k = 1; k < 64; ++k) ns.push_back(std::min<uint64_t>(uint64_t(d) * k, 0x7fffffffu));
    for (unsigned n : ns) {
      if (n > 0x7fffffffu) continue;
      unsigned q, r;
      f.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
  }
}

}  // namespace
}  // namespace mconv::test
