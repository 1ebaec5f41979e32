// The Plan: the offset-sequence patent's worked example, row orders, the compiled representation.
#include <nlohmann/json.hpp>

#include "../src/algorithms/stride_fixed/planner.hpp"
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

// N=1 C=3 H=3 W=3, K=2 R=2 S=2, NCHW fp32 (the patent's example).
Plan patent_plan() {
  Problem p = make(1, 3, 3, 3, 2, 2, 2);
  return Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW), HardwareModel{},
                     {Target::Cpu});
}

TEST(Plan, PatentExampleOffsetSequenceInBytes) {
  Plan plan = patent_plan();
  ASSERT_EQ(plan.rows(), 12);
  std::vector<int64_t> bytes;
  for (int64_t i = 0; i < plan.rows(); ++i) bytes.push_back(int64_t(plan.offset_table()[i].x_offset) * 4);
  EXPECT_EQ(bytes, (std::vector<int64_t>{0, 4, 12, 16, 36, 40, 48, 52, 72, 76, 84, 88}));
  EXPECT_EQ(plan.offset_table().size() % kOffsetTableRowAlign, 0u);
  EXPECT_EQ(plan.offset_table()[12].dh, kDisabledRowDisplacement);
}

TEST(Plan, PatentExampleVirtualMatrix) {
  // x = 0..26: the 12x4 virtual matrix Xv[row][col] = x[start[col] + offset[row]].
  Plan plan = patent_plan();
  std::vector<float> x(27);
  for (int i = 0; i < 27; ++i) x[i] = float(i);
  CompiledRepresentation cr = plan.compile(4);
  ASSERT_EQ(cr.base, (std::vector<int64_t>{0, 1, 3, 4}));
  const int expected[12][4] = {{0, 1, 3, 4},     {1, 2, 4, 5},     {3, 4, 6, 7},     {4, 5, 7, 8},
                               {9, 10, 12, 13},  {10, 11, 13, 14}, {12, 13, 15, 16}, {13, 14, 16, 17},
                               {18, 19, 21, 22}, {19, 20, 22, 23}, {21, 22, 24, 25}, {22, 23, 25, 26}};
  for (int col = 0; col < 4; ++col) {
    int64_t addr = cr.base[col];
    for (int row = 0; row < 12; ++row) {
      addr += cr.relo[row];  // the compiled representation's walk: addr += relo[k]
      EXPECT_EQ(x[addr], expected[row][col]) << "row " << row << " col " << col;
      EXPECT_EQ(x[cr.base[col] + plan.offset_table()[row].x_offset], expected[row][col]);
    }
  }
}

TEST(Plan, TextAndJsonShowTheOffsetSequence) {
  Plan plan = patent_plan();
  const std::string text = plan.to_text();
  EXPECT_NE(text.find("offset table"), std::string::npos);
  EXPECT_NE(text.find("start[n,p,q]"), std::string::npos);
  auto j = nlohmann::json::parse(plan.to_json());
  ASSERT_EQ(j["offset_table"].size(), 12u);
  EXPECT_EQ(j["offset_table"][4]["x_offset"], 9);
  EXPECT_EQ(j["table_bytes"], plan.table_bytes());
}

TEST(Plan, ChannelsInnermostGetRscRowOrder) {
  Problem p = make(1, 8, 5, 5, 4, 3, 3, 1);
  Plan nhwc = Plan::build(p, p.x_desc(Layout::NHWC), p.w_desc(Layout::NHWC), p.y_desc(Layout::NHWC), HardwareModel{},
                          {Target::Cpu});
  EXPECT_EQ(nhwc.row_order(), RowOrder::RSC);
  // consecutive rows are consecutive channels: offsets 0, 1, 2, ...
  for (int i = 0; i < 8; ++i) EXPECT_EQ(nhwc.offset_table()[i].x_offset, i);
  Plan nchw = Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW), HardwareModel{},
                          {Target::Cpu});
  EXPECT_EQ(nchw.row_order(), RowOrder::CRS);
}

TEST(Plan, UnbuiltAlgorithmsAreRefusedClearly) {
  Problem p = make(1, 1, 8, 8, 4, 3, 3);
  for (Algorithm a : {Algorithm::DirectBlock, Algorithm::SingleChannel, Algorithm::StrideFixed}) {
    PlanOptions o{Target::Cpu, a, ""};
    try {
      Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW),
                  HardwareModel::reference_h100(), o);
      FAIL() << "expected Unsupported";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported);
      EXPECT_NE(std::string(e.what()).find("algorithm"), std::string::npos);
    }
  }
}

TEST(Plan, TileNamesAreCheckedAndCpuRejectsTiles) {
  Problem p = make(1, 1, 8, 8, 4, 3, 3);
  PlanOptions o{Target::Cpu, Algorithm::Auto, "128x128x8"};
  EXPECT_THROW(Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW),
                           HardwareModel::reference_h100(), o),
               Error);
}

TEST(Engine, PlanCacheReturnsTheSamePlan) {
  Engine e(Target::Cpu);
  Problem p = make(1, 2, 8, 8, 4, 3, 3);
  auto a = e.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  auto b = e.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  EXPECT_EQ(a.get(), b.get());
  auto c = e.plan(p, p.x_desc(Layout::NHWC), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  EXPECT_NE(a.get(), c.get());
}

}  // namespace
}  // namespace mconv::test

namespace mconv::test {
namespace {

TEST(Plan, AutoFallsBackToImplicitGemmWhenTheDirectTileCannotFit) {
  // Depthwise with 2 filters per group (Auto picks direct_block; single-channel problems are checked
  // against their division before they are picked) with a stride so large its tile cannot fit.
  Problem p = make(1, 2, 27000, 27000, 4, 3, 3, 0, 1000, 1, 2);
  Plan plan = Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW),
                          HardwareModel::reference_h100(), {Target::Cuda});
  EXPECT_EQ(plan.algorithm(), Algorithm::ImplicitPrecomp);
  bool said = false;
  for (const auto& d : plan.decisions()) said = said || d.find("fallback") != std::string::npos;
  EXPECT_TRUE(said) << "the decisions should say why direct_block was not used";
}

TEST(Plan, StrideFixedTilesForceAThreadShape) {
  const Problem p = make(1, 8, 20, 20, 16, 3, 3, 1);
  for (const auto& [tile, pixels] :
       {std::pair{detail::kStrideFixedTile4, 4}, std::pair{detail::kStrideFixedTile8, 8}}) {
    const PlanOptions o{Target::Cuda, Algorithm::StrideFixed, tile};
    const Plan plan = Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW),
                                  HardwareModel::reference_h100(), o);
    const auto& d = std::get<StrideFixedDivision>(plan.division());
    EXPECT_EQ(d.thread_pixels, pixels);
    EXPECT_EQ(d.tile_rows * d.tile_cols, detail::stride_fixed_block_pixels(pixels));
  }
  // A stride_fixed tile names no GEMM tile.
  const PlanOptions gemm{Target::Cuda, Algorithm::ImplicitPrecomp, detail::kStrideFixedTile4};
  EXPECT_THROW(Plan::build(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW),
                           HardwareModel::reference_h100(), gemm),
               Error);
}

}  // namespace
}  // namespace mconv::test
