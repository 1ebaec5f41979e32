// The 16-bit dtypes and the TF32 math mode on the host: conversions, planning, the CPU executor and
// .npy float16 files.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "../src/algorithms/few_filter/planner.hpp"
#include "../src/algorithms/implicit_mma/tiles.hpp"
#include "../src/algorithms/single_channel/planner.hpp"
#include "../src/algorithms/window_mma/planner.hpp"
#include "dtype_tensors.hpp"
#include "mconv/backward.hpp"
#include "mconv/npy.hpp"

namespace mconv::test {
namespace {

TEST(Numeric, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);  // below the halfway point to 65536
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);         // tie to even: zero
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -26)), 0x0001);         // 0.75 units: up
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units: tie to even 2
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie to even (up)
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  // Every finite half survives float and back.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(uint16_t(b))), b) << std::hex << b;
  }
}

TEST(Numeric, Bfloat16AndTf32Rounding) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.5f, -8)), 0x3f81);  // 0.75 of a unit: up
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(NAN))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80) == 0x7f80) continue;
    ASSERT_EQ(float_to_bfloat16_bits(bfloat16_bits_to_float(uint16_t(b))), b) << std::hex << b;
  }
  EXPECT_EQ(round_to_tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10));  // tie: away from zero
  EXPECT_EQ(round_to_tf32(1.0f + std::ldexp(1.0f, -12)), 1.0f);
  EXPECT_EQ(round_to_tf32(-1.0f - std::ldexp(1.0f, -11)), -1.0f - std::ldexp(1.0f, -10));
}

Plan plan_for(const Problem& p, Layout l, DType t, PlanOptions o = {}) {
  if (o.target == Target::Auto) o.target = Target::Cuda;
  return Plan::build(p, p.x_desc(l, t), p.w_desc(l, t), p.y_desc(l, t), HardwareModel::reference_h100(), o);
}

TEST(PlanDtypes, HalfAndTf32RunOnTensorCores) {
  const Problem p = make(32, 64, 56, 56, 64, 3, 3, 1);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    const Plan nhwc = plan_for(p, Layout::NHWC, t);
    EXPECT_EQ(nhwc.algorithm(), Algorithm::ImplicitMma);
    const auto& d = std::get<ImplicitMmaDivision>(nhwc.division());
    EXPECT_EQ(d.a_gather, GatherForm::Vector);
    EXPECT_EQ(d.b_gather, GatherForm::Vector);
    EXPECT_EQ(d.cluster_split, 1);  // 1568 tiles fill the SMs
    EXPECT_EQ(d.block_k, 64);       // a 128-byte stage of 16-bit rows
    EXPECT_EQ(d.launch.grid_z, 1);
    EXPECT_NE(nhwc.to_text(0).find("tensor cores, fp32 accumulation"), std::string::npos);
    EXPECT_EQ(std::get<ImplicitMmaDivision>(plan_for(p, Layout::NCHW, t).division()).a_gather, GatherForm::Element);
    EXPECT_TRUE(nhwc.deterministic());
  }
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  const Plan t = plan_for(p, Layout::NHWC, DType::Float32, tf32);
  EXPECT_EQ(t.algorithm(), Algorithm::ImplicitMma);
  EXPECT_EQ(t.math(), MathMode::TF32);
  EXPECT_EQ(std::get<ImplicitMmaDivision>(t.division()).block_k, 32);  // a 128-byte stage of fp32 rows
  // fp32 stays exact unless asked: the FFMA families.
  EXPECT_NE(plan_for(p, Layout::NHWC, DType::Float32).algorithm(), Algorithm::ImplicitMma);
  EXPECT_NE(t.key(), plan_for(p, Layout::NHWC, DType::Float32).key());
}

// Note [mma tf32 pixel runs]: a 1x1 layer of stride 1 without padding in NCHW copies x as 16-byte
// runs of a plane's pixels (numbered image by image) and w as vectors of channels, where H*W, C and
// the strides are whole runs; others keep the element gather.
TEST(PlanDtypes, OneByOnePlanesCopyRunsOfPixels) {
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  auto division = [&](const Problem& p, DType t) {
    const Plan plan = plan_for(p, Layout::NCHW, t, t == DType::Float32 ? tf32 : PlanOptions{});
    EXPECT_EQ(plan.algorithm(), Algorithm::ImplicitMma) << plan.to_text();
    return std::get<ImplicitMmaDivision>(plan.division());
  };
  const Problem l3 = make(32, 256, 14, 14, 1024, 1, 1);  // H*W = 196: runs of 4, not of 8
  const auto d = division(l3, DType::Float32);
  EXPECT_EQ(d.a_gather, GatherForm::Transposed);
  EXPECT_EQ(d.b_gather, GatherForm::Vector);
  EXPECT_FALSE(d.images_fastest);
  EXPECT_TRUE(detail::kMmaTileCatalog.at(d.tile).warpgroup) << d.tile_name;  // sm_90: wgmma, A in registers
  EXPECT_EQ(division(l3, DType::BFloat16).a_gather, GatherForm::Element);
  const Problem l1 = make(32, 64, 56, 56, 256, 1, 1);
  for (DType t : {DType::Float16, DType::BFloat16, DType::Float32})
    EXPECT_EQ(division(l1, t).a_gather, GatherForm::Transposed) << dtype_name(t);
  for (const Problem& p :
       {make(32, 64, 56, 56, 64, 3, 3, 1), make(32, 256, 56, 56, 512, 1, 1, 0, 2), make(32, 64, 56, 56, 64, 1, 1, 1),
        make(32, 2048, 7, 7, 512, 1, 1), make(32, 6, 16, 16, 64, 1, 1)}) {
    EXPECT_EQ(division(p, DType::Float32).a_gather, GatherForm::Element) << p.to_string();
    EXPECT_NE(plan_for(p, Layout::NCHW, DType::Float32, tf32).to_text().find("not as pixel runs"), std::string::npos);
  }
  // Channels-last keeps the vectors of channels.
  EXPECT_EQ(std::get<ImplicitMmaDivision>(plan_for(l1, Layout::NHWC, DType::Float32, tf32).division()).a_gather,
            GatherForm::Vector);
}

// Note [mma filter rows]: in plane order (NCHW) the images stay single elements, but a KCRS filter's
// rows are V consecutive elements of w, so the filter operand copies 16-byte vectors where
// C/G*R*S is whole vectors; a flipped filter, a C*R*S off the vector or a w not dense along C, R
// and S keeps the element gather. Channels-last keeps the vectors of channels.
TEST(PlanDtypes, ElementImagesTakeFilterRowVectors) {
  auto options = [](DType t) {
    PlanOptions o;
    o.target = Target::Cuda;
    o.algorithm = Algorithm::ImplicitMma;  // Auto gives 16-bit layers of C <= 4 to few_channel
    if (t == DType::Float32) o.math = MathMode::TF32;
    return o;
  };
  auto plan_nchw = [&](const Problem& p, DType t, const TensorDesc& w) {
    Plan plan = Plan::build(p, p.x_desc(Layout::NCHW, t), w, p.y_desc(Layout::NCHW, t), HardwareModel::reference_h100(),
                            options(t));
    EXPECT_EQ(plan.algorithm(), Algorithm::ImplicitMma) << plan.to_text();
    return plan;
  };
  auto filter_form = [&](const Problem& p, DType t) {
    return std::get<ImplicitMmaDivision>(plan_nchw(p, t, p.w_desc(Layout::NCHW, t)).division()).b_gather;
  };
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16}) {
    // resnet50's 3x3 (C*R*S = 576), a strided 3x3, a 7x7 map's 1x1 (H*W = 49: no pixel runs), and
    // groups of 8 channels (72 rows a filter).
    for (const Problem& p : {make(32, 64, 56, 56, 64, 3, 3, 1), make(32, 128, 56, 56, 128, 3, 3, 1, 2),
                             make(32, 2048, 7, 7, 512, 1, 1), make(2, 24, 8, 8, 36, 3, 3, 1, 1, 1, 3)}) {
      const Plan plan = plan_nchw(p, t, p.w_desc(Layout::NCHW, t));
      const auto& d = std::get<ImplicitMmaDivision>(plan.division());
      EXPECT_EQ(d.a_gather, GatherForm::Element) << dtype_name(t) << " " << p.to_string();
      EXPECT_EQ(d.b_gather, GatherForm::Vector) << dtype_name(t) << " " << p.to_string();
      EXPECT_TRUE(detail::kMmaTileCatalog.at(d.tile).element_gather) << d.tile_name;
      const std::string v = std::to_string(16 / dtype_size(t));
      EXPECT_NE(plan.to_text().find("w as 16-byte vectors of " + v + " consecutive rows"), std::string::npos)
          << plan.to_text();
    }
    EXPECT_EQ(filter_form(make(2, 3, 32, 32, 64, 3, 3, 1), t), GatherForm::Element);  // C*R*S = 27
    Problem flipped = make(2, 64, 16, 16, 64, 3, 3, 1);
    flipped.mode = Mode::Convolution;
    const Plan f = plan_nchw(flipped, t, flipped.w_desc(Layout::NCHW, t));
    EXPECT_EQ(std::get<ImplicitMmaDivision>(f.division()).b_gather, GatherForm::Element) << dtype_name(t);
    EXPECT_NE(f.to_text().find("filter runs backwards"), std::string::npos) << f.to_text();
    // w with its filter rows padded (R stride S + 1): not dense along C, R and S.
    const Problem p = make(2, 64, 16, 16, 64, 3, 3, 1);
    TensorDesc padded = p.w_desc(Layout::NCHW, t);
    padded.strides = {64 * 12, 12, 4, 1};
    const Plan pad = plan_nchw(p, t, padded);
    EXPECT_EQ(std::get<ImplicitMmaDivision>(pad.division()).b_gather, GatherForm::Element) << dtype_name(t);
    EXPECT_NE(pad.to_text().find("not dense"), std::string::npos) << pad.to_text();
    EXPECT_EQ(std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, t, options(t)).division()).a_gather,
              GatherForm::Vector);
  }
  // The tile rule (measured on the H100): by how much resnet50's 128x128 tiles fill the 132 SMs.
  struct Expect {
    Problem p;
    DType t;
    const char* tile;
    int split;
  };
  const Problem stage2 = make(32, 128, 28, 28, 128, 3, 3, 1), stage3 = make(32, 256, 14, 14, 256, 3, 3, 1),
                stage4 = make(32, 512, 7, 7, 512, 3, 3, 1), short_rows = make(32, 256, 14, 14, 1024, 1, 1, 0, 2);
  for (const Expect& e :
       {Expect{stage2, DType::Float32, "mma128x128_8w_64B", 1}, Expect{stage3, DType::Float32, "mma128x128_8w_64B", 2},
        Expect{stage4, DType::Float32, "mma64x128_8w_64B", 2}, Expect{stage2, DType::BFloat16, "mma128x128_8w_64B", 1},
        Expect{stage3, DType::BFloat16, "mma64x128_8w_64B", 1}, Expect{stage4, DType::Float16, "mma64x128_8w_64B", 2},
        Expect{short_rows, DType::BFloat16, "mma64x128_8w_64B", 1}}) {
    const auto d = std::get<ImplicitMmaDivision>(plan_nchw(e.p, e.t, e.p.w_desc(Layout::NCHW, e.t)).division());
    EXPECT_EQ(d.tile_name, e.tile) << dtype_name(e.t) << " " << e.p.to_string();
    EXPECT_EQ(d.cluster_split, e.split) << dtype_name(e.t) << " " << e.p.to_string();
  }
  // C/G*R*S = 36: whole vectors of four TF32 rows, not of eight 16-bit ones.
  const Problem c4 = make(2, 4, 16, 16, 32, 3, 3, 1);
  EXPECT_EQ(filter_form(c4, DType::Float32), GatherForm::Vector);
  EXPECT_EQ(filter_form(c4, DType::BFloat16), GatherForm::Element);
}

// Note [mma element tiles]: dgrad steps in plane order gather dy element by element under w flipped
// or transposed, and take the forward filter rows' tile rule (TF32 element filters their own, split 2
// ways where 128x128 fills more than half the SMs); short reductions of about one wave keep 128x128;
// batch-1 grids of fewer than 17 tiles take the general split rule.
TEST(PlanDtypes, ElementImageStepsTakeTheElementTileRule) {
  PlanOptions o;
  o.target = Target::Cuda;
  auto first_step = [&](const Problem& p, DType t) {
    o.math = t == DType::Float32 ? MathMode::TF32 : MathMode::Exact;
    const BackwardDecomposition d =
        decompose_backward_data(p, p.y_desc(Layout::NCHW, t), p.w_desc(Layout::NCHW, t), p.x_desc(Layout::NCHW, t));
    const ForwardStep& s = d.steps.at(0);
    return std::get<ImplicitMmaDivision>(
        Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o).division());
  };
  struct Expect {
    Problem p;
    DType t;
    const char* tile;
    int split;
  };
  const Problem l2_3x3s2 = make(32, 128, 56, 56, 128, 3, 3, 1, 2), l3_3x3 = make(32, 256, 14, 14, 256, 3, 3, 1),
                l4_3x3 = make(32, 512, 7, 7, 512, 3, 3, 1), l4_ds = make(32, 1024, 14, 14, 2048, 1, 1, 0, 2),
                l4_1x1b = make(32, 512, 7, 7, 2048, 1, 1);
  for (const Expect& e :
       {Expect{l3_3x3, DType::BFloat16, "mma64x128_8w_64B", 1}, Expect{l4_3x3, DType::BFloat16, "mma64x128_8w_64B", 2},
        Expect{l4_ds, DType::BFloat16, "mma64x128_8w_64B", 1}, Expect{l2_3x3s2, DType::Float16, "mma128x128_8w_64B", 1},
        Expect{l3_3x3, DType::Float32, "mma128x128_8w_64B", 2}, Expect{l4_3x3, DType::Float32, "mma128x128_8w_64B", 3},
        Expect{l4_1x1b, DType::Float32, "mma64x128_8w_64B", 2}}) {
    const ImplicitMmaDivision d = first_step(e.p, e.t);
    EXPECT_EQ(d.tile_name, e.tile) << dtype_name(e.t) << " " << e.p.to_string();
    EXPECT_EQ(d.cluster_split, e.split) << dtype_name(e.t) << " " << e.p.to_string();
  }
  // A batch-1 layer's 4 tiles of 128x128: the general rule's tile, split to fill the SMs.
  const ImplicitMmaDivision one = first_step(make(1, 512, 7, 7, 512, 3, 3, 1), DType::BFloat16);
  EXPECT_EQ(one.tile_name, "mma64x64_4w_64B");
  EXPECT_GT(one.cluster_split, 2);
  // 25 tiles (a batch-1 56x56 map of 128 filters, forward with w's rows as vectors): the rule's.
  const auto h56 = std::get<ImplicitMmaDivision>(
      plan_for(make(1, 128, 56, 56, 128, 3, 3, 1), Layout::NCHW, DType::BFloat16).division());
  EXPECT_EQ(division_name(h56), "mma64x128_8w_64B_cs2");
}

// TF32 channels-last dgrad steps read w with its filters contiguous on mma.sync tiles; where their
// 128x128 tiles leave SMs idle (but fill an eighth of them) the tile splits 2 ways in a cluster.
TEST(PlanDtypes, Tf32TransposedFilterStepsSplitWhereTheyLeaveSmsIdle) {
  PlanOptions o;
  o.target = Target::Cuda;
  o.math = MathMode::TF32;
  auto first_step = [&](const Problem& p) {
    const BackwardDecomposition d =
        decompose_backward_data(p, p.y_desc(Layout::NHWC), p.w_desc(Layout::NHWC), p.x_desc(Layout::NHWC));
    const ForwardStep& s = d.steps.at(0);
    return std::get<ImplicitMmaDivision>(
        Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o).division());
  };
  for (const Problem& p : {make(32, 256, 14, 14, 256, 3, 3, 1), make(32, 512, 7, 7, 512, 3, 3, 1),
                           make(32, 1024, 14, 14, 2048, 1, 1, 0, 2)}) {
    const ImplicitMmaDivision d = first_step(p);
    EXPECT_EQ(division_name(d), "mma128x128_8w_128B_cs2") << p.to_string();
    EXPECT_EQ(d.b_gather, GatherForm::Transposed) << p.to_string();
  }
  EXPECT_EQ(first_step(make(32, 128, 28, 28, 128, 3, 3, 1)).cluster_split, 1);  // 196 tiles
  EXPECT_GT(first_step(make(1, 512, 7, 7, 512, 3, 3, 1)).cluster_split, 2);     // 4 tiles: the general rule
}

TEST(PlanDtypes, Tf32KeepsTheFfmaFamiliesOfDepthwiseLayers) {
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  const Problem depthwise = make(32, 144, 56, 56, 144, 3, 3, 1, 1, 1, 144);
  const Plan d = plan_for(depthwise, Layout::NCHW, DType::Float32, tf32);
  EXPECT_EQ(d.algorithm(), Algorithm::SingleChannel);
  EXPECT_EQ(d.math(), MathMode::Exact);  // what it runs: exact fp32
  EXPECT_NE(d.to_text(0).find("math tf32 allowed, single_channel kept"), std::string::npos);
  // Forced, it runs on the tensor cores all the same.
  tf32.algorithm = Algorithm::ImplicitMma;
  EXPECT_EQ(plan_for(depthwise, Layout::NCHW, DType::Float32, tf32).algorithm(), Algorithm::ImplicitMma);
}

// fp16/bf16 depthwise layers in plane order (NCHW, CNHW) run single_channel's plane streams, with x's
// dtype in shared memory: chunks at least as large as fp32's, in fewer bytes a row.
TEST(PlanDtypes, HalfDepthwisePlanesRunThePlaneStreams) {
  const Problem s1 = make(32, 144, 56, 56, 144, 3, 3, 1, 1, 1, 144);   // bulk (stride 1)
  const Problem s2 = make(32, 144, 56, 56, 144, 3, 3, 1, 2, 1, 144);   // plane stream (wide stride 2)
  const Problem small = make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960);  // whole planes
  const Problem odd = make(32, 576, 14, 14, 576, 5, 5, 2, 2, 1, 576);  // 14 wide, stride 2
  const Problem mult = make(2, 16, 9, 9, 32, 3, 3, 1, 1, 1, 16);       // K/G = 2: no plane stream
  for (DType t : {DType::Float16, DType::BFloat16}) {
    for (Layout l : {Layout::NCHW, Layout::CNHW}) {
      const Plan bulk = plan_for(s1, l, t), bulk32 = plan_for(s1, l, DType::Float32);
      ASSERT_EQ(bulk.algorithm(), Algorithm::SingleChannel) << bulk.to_text();
      const auto& b = std::get<PlaneBulkDivision>(bulk.division());
      const auto& b32 = std::get<PlaneBulkDivision>(bulk32.division());
      EXPECT_EQ(b.in_elements % 8, 7);  // 7 elements of alignment slack
      // Two passes of items a chunk where fp32 takes one: about fp32's bytes in flight.
      EXPECT_GE(int64_t(b.rows_per_chunk) * b.planes_per_chunk,
                2 * int64_t(b32.rows_per_chunk) * b32.planes_per_chunk - b.run);
      EXPECT_LT(b.d_bytes, b32.d_bytes * 5 / 4);
      const Plan planes = plan_for(s2, l, t);
      ASSERT_EQ(planes.algorithm(), Algorithm::SingleChannel);
      const auto& d = std::get<PlaneStreamDivision>(planes.division());
      const Plan planes32 = plan_for(s2, l, DType::Float32);
      const auto& d32 = std::get<PlaneStreamDivision>(planes32.division());
      EXPECT_EQ(d.layout.lpad % 8, 0);   // 16-byte copies of 8 elements land aligned
      EXPECT_EQ(d.layout.pitch % 8, 0);  // W = 56: whole vectors
      EXPECT_EQ(d.filter_offset % 16, 0);
      EXPECT_EQ(d.filter_offset, d.planes_per_block * d.layout.plane * 2);
      // Fewer bytes a plane row, so at least fp32's rows and planes a chunk (here 2 planes where fp32
      // fits 1 of the 3 the resident wave asks for).
      const int64_t rows = int64_t(d.rows_per_block) * d.planes_per_block;
      const int64_t rows32 = int64_t(d32.rows_per_block) * d32.planes_per_block;
      EXPECT_GT(rows, rows32);
      EXPECT_LT(d.d_bytes / rows, d32.d_bytes / rows32);
      EXPECT_NE(planes.to_text().find("fp32 arithmetic"), std::string::npos) << planes.to_text();
      EXPECT_EQ(plan_for(small, l, t).algorithm(), Algorithm::SingleChannel);
      const auto odd_plan = plan_for(odd, l, t);
      ASSERT_EQ(odd_plan.algorithm(), Algorithm::SingleChannel);
      if (const auto* od = std::get_if<PlaneStreamDivision>(&odd_plan.division())) {
        EXPECT_EQ(od->layout.pitch % 2, 0);  // 4-byte copies of rows of 14 elements
        EXPECT_EQ(od->layout.plane % 2, 0);
      }
    }
    // Forced: either plane stream; the fp32-only strip variant and a K/G = 2 layer are refused, saying why.
    PlanOptions o;
    o.algorithm = Algorithm::SingleChannel;
    o.tile = detail::kPlaneStreamTile;
    EXPECT_TRUE(std::holds_alternative<PlaneStreamDivision>(plan_for(s1, Layout::NCHW, t, o).division()));
    o.tile = detail::kPlaneBulkTile;
    EXPECT_TRUE(std::holds_alternative<PlaneBulkDivision>(plan_for(s1, Layout::NCHW, t, o).division()));
    o.tile = detail::kSingleChannelPaperTile;  // the strip kernel takes any C/G = 1 layer, widening to fp32
    EXPECT_TRUE(std::holds_alternative<SingleChannelDivision>(plan_for(s1, Layout::NCHW, t, o).division()));
    o.tile = "";
    EXPECT_TRUE(std::holds_alternative<SingleChannelDivision>(plan_for(mult, Layout::NCHW, t, o).division()));
    const Problem two_channels = make(2, 16, 9, 9, 16, 3, 3, 1, 1, 1, 8);
    try {
      plan_for(two_channels, Layout::NCHW, t, o);
      ADD_FAILURE() << "C/G = 2 planned on single_channel";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("plane stream needs C/G = 1 and K/G = 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("strip kernel: needs C/G = 1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(plan_for(mult, Layout::NCHW, t).algorithm(), Algorithm::DirectBlock);  // Auto: as fp32
    // direct_block's tiles in 2-byte elements: a pitch of whole 16-byte vectors, the filters after both
    // tiles, each packed group 16-byte aligned.
    const Plan direct = plan_for(mult, Layout::NCHW, t);
    const auto& db = std::get<DirectBlockDivision>(direct.division());
    EXPECT_EQ(db.pitch % 8, 0);
    EXPECT_EQ(db.group_smem_bytes % 16, 0);
    EXPECT_LT(db.group_smem_bytes,
              std::get<DirectBlockDivision>(plan_for(mult, Layout::NCHW, DType::Float32).division()).group_smem_bytes);
  }
}

TEST(PlanDtypes, HalfDepthwiseChannelsLastRunsTheChannelsLastKernel) {
  const Problem depthwise = make(32, 144, 56, 56, 144, 3, 3, 1, 1, 1, 144);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    const Plan nhwc = plan_for(depthwise, Layout::NHWC, t);
    EXPECT_EQ(nhwc.algorithm(), Algorithm::SingleChannel);
    const auto& d = std::get<ChannelsLastDepthwiseDivision>(nhwc.division());
    EXPECT_EQ(d.chunk_channels, 16);  // 18 vectors of 8 channels: chunks of 2 vectors divide them
    EXPECT_EQ(d.outputs_per_thread, 4);
    EXPECT_EQ(d.rows_per_thread, 1);  // stride 1: one row a thread
    // Note [channels-last staged tile]: 128 slots of four outputs as 8 x 64 tiles, one across the
    // map's 56 columns and seven down its rows, whose 10 x 66 input windows load the fewest pixels;
    // the window's rows padded from 132 to 134 units, so a quarter warp's four slots, on rows 134
    // units apart, read bank groups 0, 6, 4, 2 (and their second lanes 1, 7, 5, 3).
    EXPECT_EQ(d.tile_rows, 8);
    EXPECT_EQ(d.tile_cols, 64);
    EXPECT_EQ(d.blocks_per_sm, 3);  // 80 registers (3x3 filters)
    const detail::ChannelsLastWindow window = detail::channels_last_window(depthwise, 2, 8, 64);
    EXPECT_EQ(window.rows, 10);
    EXPECT_EQ(window.cols, 66);
    EXPECT_EQ(window.pitch, 134);
    EXPECT_EQ(d.window_pitch, 134);  // carried to the launcher
    // Note [channels-last persistent tiles]: 32 * 7 tiles a chunk for 3 * 132 / 9 = 44 resident blocks
    // a chunk: 44 blocks walk them, each with two window buffers.
    EXPECT_EQ(d.launch.smem_bytes, 9 * 16 * 4 + 2 * 10 * 134 * 16);
    EXPECT_EQ(d.launch.grid_x, 44);
    EXPECT_EQ(d.launch.grid_y, 9);
    EXPECT_NE(nhwc.to_text(0).find("tiles of 8 x 64 outputs"), std::string::npos) << nhwc.to_text(0);
    // Chunks of 8 vectors need no padding (a quarter warp reads one pixel's 128 bytes); one vector at
    // stride 2 has none that helps and keeps the bare width.
    EXPECT_EQ(detail::channels_last_window(depthwise, 8, 8, 16).pitch, 18 * 8);
    EXPECT_EQ(detail::channels_last_window(make(2, 8, 64, 64, 8, 3, 3, 1, 2, 1, 8), 1, 8, 64).pitch, 129);
    // Dilated, the same layer walks pixel groups reading x through L1. Note [channels-last grid]: 196
    // blocks of pixels per chunk capped at two waves of three blocks an SM (Note [channels-last
    // occupancy]: a 3x3 depthwise row) over 9 chunks (88); a 1x1 layer keeps all of them.
    const Plan dilated = plan_for(make(32, 144, 56, 56, 144, 3, 3, 2, 1, 2, 144), Layout::NHWC, t);
    const auto& walk = std::get<ChannelsLastDepthwiseDivision>(dilated.division());
    EXPECT_EQ(walk.tile_rows, 0);
    EXPECT_EQ(walk.pixel_groups, 32 * 56 * 14);
    EXPECT_EQ(walk.launch.smem_bytes, 9 * 16 * 4);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(dilated.problem(), walk.rows_per_thread), 3);
    EXPECT_EQ(walk.blocks_per_sm, 3);
    EXPECT_EQ(walk.launch.grid_x, 2 * 3 * 132 / 9);
    EXPECT_EQ(std::get<ChannelsLastDepthwiseDivision>(
                  plan_for(make(32, 144, 56, 56, 144, 1, 1, 0, 1, 1, 144), Layout::NHWC, t).division())
                  .launch.grid_x,
              196);
    EXPECT_EQ(division_name(nhwc.division()), "single_channel_channels_last");
    // Stride 2: two outputs a thread; 7x7 filters of 64 channels: 12.25 KB of shared memory.
    // (A 6 x 6 output map: tiles of 8 x 8 would idle 28 of their 64 outputs.)
    const Plan s2 = plan_for(make(1, 768, 12, 12, 768, 7, 7, 3, 2, 1, 768), Layout::NHWC, t);
    const auto& s = std::get<ChannelsLastDepthwiseDivision>(s2.division());
    EXPECT_EQ(s.tile_rows, 0);
    EXPECT_EQ(s.outputs_per_thread, 2);
    EXPECT_EQ(s.rows_per_thread, 1);  // two rows a thread would leave 12 blocks
    // Stride 2 on a larger grid of maps no tile fits (9 x 9 outputs): two rows of two outputs a
    // thread, 450 blocks for 132 SMs.
    const Plan s2_plan = plan_for(make(256, 144, 18, 18, 144, 3, 3, 1, 2, 1, 144), Layout::NHWC, t);
    const auto& s2_rows = std::get<ChannelsLastDepthwiseDivision>(s2_plan.division());
    EXPECT_EQ(s2_rows.tile_rows, 0);
    EXPECT_EQ(s2_rows.rows_per_thread, 2);
    // The same layer on 56 x 56 maps: 16 x 16 tiles of two outputs a thread, three blocks an SM.
    const Plan s2_tiled_plan = plan_for(make(32, 144, 56, 56, 144, 3, 3, 1, 2, 1, 144), Layout::NHWC, t);
    const auto& s2_tiled = std::get<ChannelsLastDepthwiseDivision>(s2_tiled_plan.division());
    EXPECT_EQ(s2_tiled.tile_rows, 16);
    EXPECT_EQ(s2_tiled.tile_cols, 16);
    EXPECT_EQ(s2_tiled.rows_per_thread, 1);
    EXPECT_EQ(s2_tiled.blocks_per_sm, 3);
    // A tiled plan's division: outputs a thread, tile, window pitch, three blocks an SM, grid, shared bytes.
    auto expect_tile = [](const Plan& plan, int outputs, int rows, int cols, int pitch, int64_t grid_x, int64_t grid_y,
                          int64_t smem_bytes) {
      const auto& d = std::get<ChannelsLastDepthwiseDivision>(plan.division());
      EXPECT_EQ(d.outputs_per_thread, outputs);
      EXPECT_EQ(d.tile_rows, rows);
      EXPECT_EQ(d.tile_cols, cols);
      EXPECT_EQ(d.window_pitch, pitch);
      EXPECT_EQ(d.blocks_per_sm, 3);
      EXPECT_EQ(d.launch.grid_x, grid_x);
      EXPECT_EQ(d.launch.grid_y, grid_y);
      EXPECT_EQ(d.launch.smem_bytes, smem_bytes);
    };
    // A 7 x 7 map at stride 1: every tile of four outputs a thread would idle more than a quarter of
    // its outputs (8 x 16 covers 49 of 128), so tiles of two: 8 x 8, one an image, 15 of its 64 idle;
    // chunks of 8 vectors need no padding. 32 tiles a chunk for 3 * 132 / 15 = 26 resident blocks: 26
    // persistent blocks with two window buffers.
    expect_tile(plan_for(make(32, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960), Layout::NHWC, t), 2, 8, 8, 10 * 8, 26, 15,
                9 * 64 * 4 + 2 * 10 * 80 * 16);
    // A batch-1 layer whose tiles of four (8 x 16: 28 tiles x 2 chunks) leave most of the 132 SMs
    // without a block takes tiles of two: 8 x 8, 49 tiles x 2 chunks.
    expect_tile(plan_for(make(1, 128, 56, 56, 128, 7, 7, 3, 1, 1, 128), Layout::NHWC, t), 2, 8, 8, 14 * 8, 49, 2,
                49 * 64 * 4 + 14 * 112 * 16);
    // At batch 32 the same layer's 1792 tiles of four fill the SMs and keep four outputs a thread.
    const Plan batch32_plan = plan_for(make(32, 128, 56, 56, 128, 7, 7, 3, 1, 1, 128), Layout::NHWC, t);
    const auto& batch32 = std::get<ChannelsLastDepthwiseDivision>(batch32_plan.division());
    EXPECT_EQ(batch32.outputs_per_thread, 4);
    EXPECT_EQ(batch32.tile_rows * batch32.tile_cols, 128);
    // Three blocks an SM only for 1x1, 3x3 and 5x5 rows (a channel multiplier's shared x value too):
    // two rows a thread and 7x7 filters keep two.
    EXPECT_EQ(detail::channels_last_blocks_per_sm(s2_plan.problem(), s2_rows.rows_per_thread), 2);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(s2.problem(), s.rows_per_thread), 2);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(make(32, 240, 28, 28, 240, 5, 5, 2, 1, 1, 240), 1), 3);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(make(32, 16, 28, 28, 256, 3, 3, 1, 1, 1, 16), 1), 3);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(make(1, 96, 56, 56, 96, 7, 7, 3, 1, 1, 96), 1), 2);
    EXPECT_EQ(detail::channels_last_blocks_per_sm(make(1, 1, 1024, 1024, 32, 1, 1), 1), 3);
    EXPECT_EQ(s2_rows.pixel_groups, 256 * 5 * 5);
    EXPECT_EQ(s.chunk_channels, 64);
    EXPECT_EQ(s.launch.smem_bytes, 49 * 64 * 4);
    EXPECT_EQ(s.launch.grid_x * s.launch.grid_y, 1 * 12);  // 6 rows x 3 pairs = 18 groups, 32 slots
    // C not a multiple of 8, and channel multipliers of no whole vector stay on implicit_mma (NCHW
    // planes run the plane streams: the next test); a single-channel x is contiguous in either
    // layout, so 12 filters (no whole vector) go to the strip kernel.
    EXPECT_EQ(plan_for(make(2, 12, 9, 9, 12, 3, 3, 1, 1, 1, 12), Layout::NHWC, t).algorithm(), Algorithm::ImplicitMma);
    EXPECT_EQ(plan_for(make(2, 16, 9, 9, 32, 3, 3, 1, 1, 1, 16), Layout::NHWC, t).algorithm(), Algorithm::ImplicitMma);
    EXPECT_TRUE(std::holds_alternative<SingleChannelDivision>(
        plan_for(make(1, 1, 64, 64, 12, 3, 3, 1), Layout::NHWC, t).division()));
    // Note [channels-last shared input]: a single-channel layer (C = 1, 64 filters) and a multiplier of
    // 16 take the kernel, a vector of filters sharing one x value; 64 filters: one chunk of 8 vectors.
    for (const Problem& shared : {make(1, 1, 224, 224, 64, 3, 3, 1), make(2, 4, 9, 9, 64, 3, 3, 1, 1, 1, 4)}) {
      const Plan plan = plan_for(shared, Layout::NHWC, t);
      EXPECT_EQ(plan.algorithm(), Algorithm::SingleChannel) << shared.to_string();
      EXPECT_EQ(std::get<ChannelsLastDepthwiseDivision>(plan.division()).chunk_channels, 64);
      EXPECT_NE(plan.to_text(0).find("a vector of filters sharing one x value"), std::string::npos) << plan.to_text(0);
    }
    // Forced on a layer it cannot run, single_channel says why.
    PlanOptions forced;
    forced.algorithm = Algorithm::SingleChannel;
    EXPECT_EQ(plan_for(depthwise, Layout::NHWC, t, forced).algorithm(), Algorithm::SingleChannel);
    try {
      plan_for(make(2, 16, 9, 9, 16, 3, 3, 1), Layout::NHWC, t, forced);
      ADD_FAILURE() << "a dense layer forced onto single_channel in " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported);
      EXPECT_NE(std::string(e.what()).find("not one input channel per group"), std::string::npos) << e.what();
    }
  }
}

TEST(PlanDtypes, VectorGatherNeedsWholeVectorsOfChannels) {
  for (auto [c, groups, vector] :
       {std::tuple{64, 1, true}, {12, 1, false}, {3, 1, false}, {64, 8, true}, {48, 8, false}}) {
    const Problem p = make(2, c, 9, 9, 16, 3, 3, 1, 1, 1, groups);
    PlanOptions o;
    o.algorithm = Algorithm::ImplicitMma;  // Auto gives C = 3 to few_channel
    const Plan plan = plan_for(p, Layout::NHWC, DType::Float16, o);
    EXPECT_EQ(std::get<ImplicitMmaDivision>(plan.division()).a_gather == GatherForm::Vector, vector) << p.to_string();
  }
}

// Note [wgmma tensor-map loads]: Auto loads the stages through tensor maps where a stage is 64
// channels at one filter tap and the copy engine's limits hold, and says why not elsewhere.
TEST(PlanDtypes, TensorMapLoadsWhereTheCopyEngineCanLoadTheStages) {
  auto maps = [](const Problem& p, Layout l, DType t, PlanOptions o = {}) {
    const Plan plan = plan_for(p, l, t, o);
    const auto& d = std::get<ImplicitMmaDivision>(plan.division());
    EXPECT_EQ(d.tensor_maps, division_name(d).find("_tma") != std::string::npos);
    return d.tensor_maps;
  };
  const Problem resnet = make(32, 64, 56, 56, 64, 3, 3, 1);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    EXPECT_TRUE(maps(resnet, Layout::NHWC, t));
    EXPECT_TRUE(maps(make(32, 256, 56, 56, 128, 1, 1, 0, 2), Layout::NHWC, t));   // 1x1, stride 2
    EXPECT_TRUE(maps(make(32, 64, 30, 30, 64, 3, 3, 2, 1, 2), Layout::NHWC, t));  // dilation 2
    EXPECT_FALSE(maps(resnet, Layout::NCHW, t));
    EXPECT_FALSE(maps(make(32, 32, 56, 56, 64, 3, 3, 1), Layout::NHWC, t));             // C = 32
    EXPECT_FALSE(maps(make(32, 128, 28, 28, 128, 3, 3, 1, 1, 1, 2), Layout::NHWC, t));  // groups
    EXPECT_FALSE(maps(make(2, 64, 80, 80, 64, 3, 3, 1, 9), Layout::NHWC, t));           // stride 9
    EXPECT_FALSE(maps(make(1, 64, 300, 300, 64, 3, 3, 0, 1, 130), Layout::NHWC, t));    // taps 260 apart
    PlanOptions gather;
    gather.algorithm = Algorithm::ImplicitMma;
    gather.tile = "wgmma128x128_s3";
    EXPECT_FALSE(maps(resnet, Layout::NHWC, t, gather));
    gather.tile = "wgmma128x128_s3_tma";
    EXPECT_TRUE(maps(resnet, Layout::NHWC, t, gather));
    EXPECT_THROW(plan_for(make(32, 32, 56, 56, 64, 3, 3, 1), Layout::NHWC, t, gather), Error);
  }
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  EXPECT_TRUE(maps(resnet, Layout::NHWC, DType::Float32, tf32));  // Note [wgmma tf32 stages]
  EXPECT_FALSE(maps(resnet, Layout::NCHW, DType::Float32, tf32));
}

// Note [wgmma persistent tiles]: Auto walks 128x64 tiles with persistent blocks on 1x1 layers of
// few channels and filters and many tiles, and 64x64 tiles on 1x1 layers of few channels and fewer
// tiles, never with a split. Note [wgmma warp-specialized tiles]: forward layers of more channels or
// larger filters take the ping-pong form (64x64 on few tiles, 128x128 on 1x1 layers of K/G >= 128
// and two waves of its tiles or more, else 64x128 on 1x1 layers of 512 and more channels, 128x64 for
// K/G <= 64, 128x128 or 64x128 by the rounds of tiles on the SMs; cooperative 128x128 on larger
// filters' reductions of 1024 rows and more, vgg16's c128-c512 layers); stage 4's 1x1 layer of 2048
// filters and stage 4's split 3x3 layers keep their tiles, as do batch-1 7x7 3x3 layers; in plane
// order the loads gather and nothing walks. `mconv plan` shows the persistent grid.
TEST(PlanDtypes, PersistentTilesOnManyOrFewShortTiles) {
  auto division = [](const Problem& p, Layout l = Layout::NHWC) {
    return std::get<ImplicitMmaDivision>(plan_for(p, l, DType::BFloat16).division());
  };
  auto expect_persistent = [&](const Problem& p, const char* name, int64_t wave, int threads) {
    const ImplicitMmaDivision d = division(p);
    EXPECT_TRUE(d.persistent) << p.to_string();
    EXPECT_EQ(division_name(d), name) << p.to_string();
    EXPECT_EQ(d.cluster_split, 1);
    EXPECT_LE(d.launch.grid_x, wave) << p.to_string();  // one wave on the H100 model
    EXPECT_EQ(d.launch.grid_y, 1);
    EXPECT_EQ(d.launch.threads, threads) << p.to_string();
    EXPECT_GT(d.launch.smem_bytes, detail::kMmaTileCatalog[d.tile].smem_bytes);
  };
  for (const Problem& p : {make(32, 64, 56, 56, 64, 1, 1), make(32, 256, 56, 56, 64, 1, 1)})
    expect_persistent(p, "wgmma128x64_s3_tma_persistent", 2 * 132, 256);
  for (const Problem& p : {make(1, 128, 56, 56, 128, 1, 1), make(1, 64, 224, 224, 64, 1, 1)})
    expect_persistent(p, "wgmma64x64_s3_tma_persistent", 3 * 132, 128);
  const int pingpong_threads = 3 * 128;
  expect_persistent(make(1, 512, 7, 7, 512, 1, 1), "wgmma64x64_s3_tma_pingpong", 132, pingpong_threads);
  for (const Problem& p : {make(32, 512, 28, 28, 128, 1, 1), make(32, 2048, 7, 7, 512, 1, 1),
                           make(32, 1024, 14, 14, 512, 1, 1), make(32, 128, 28, 28, 128, 3, 3, 1)})
    expect_persistent(p, "wgmma64x128_s4_tma_pingpong", 132, pingpong_threads);
  expect_persistent(make(32, 64, 56, 56, 64, 3, 3, 1), "wgmma128x64_s3_tma_pingpong", 132, pingpong_threads);
  expect_persistent(make(32, 64, 112, 112, 128, 3, 3, 1), "wgmma128x128_s3_tma_pingpong", 132, pingpong_threads);
  // Note [output buffer stores]: vgg16's 3x3 layers of K/G >= 128 and reductions of 1024 rows or
  // more, the c512 ones' 4608 rows included, on cooperative 128x128.
  for (const Problem& p : {make(32, 128, 56, 56, 256, 3, 3, 1), make(32, 256, 28, 28, 512, 3, 3, 1),
                           make(32, 512, 28, 28, 512, 3, 3, 1), make(32, 512, 14, 14, 512, 3, 3, 1)})
    expect_persistent(p, "wgmma128x128_s3_tma_cooperative", 132, pingpong_threads);
  // Note [output buffer stores]: 1x1 layers of K/G >= 128 and two waves or more of 128x128 tiles
  // (resnet50's l1_1x1b, l2_1x1a, l2_1x1b, l2_ds, l3_1x1a, l3_1x1b, l3_ds).
  for (const Problem& p :
       {make(32, 64, 56, 56, 256, 1, 1), make(32, 256, 56, 56, 128, 1, 1), make(32, 128, 28, 28, 512, 1, 1),
        make(32, 256, 56, 56, 512, 1, 1, 0, 2), make(32, 512, 28, 28, 256, 1, 1), make(32, 256, 14, 14, 1024, 1, 1)})
    expect_persistent(p, "wgmma128x128_s3_tma_pingpong", 132, pingpong_threads);
  // Cooperative where a ping-pong block would have one tile: 98 tiles of 128x128 (stage 3's 3x3 and
  // 1x1c), and up to three waves of 128x64 tiles of K/G <= 64 (batch-1 112x112 and 224x224 maps).
  for (const Problem& p : {make(32, 256, 14, 14, 256, 3, 3, 1), make(32, 1024, 14, 14, 256, 1, 1)})
    expect_persistent(p, "wgmma128x128_s3_tma_cooperative", 98, pingpong_threads);
  for (const Problem& p : {make(1, 64, 112, 112, 64, 3, 3, 1), make(1, 64, 224, 224, 64, 5, 5, 2)})
    expect_persistent(p, "wgmma128x64_s3_tma_cooperative", 132, pingpong_threads);
  EXPECT_FALSE(division(make(1, 512, 7, 7, 512, 3, 3)).persistent);
  // (Stage 4's 2048-filter 1x1 layers: PlanDtypes.WaveFittedFilterTiles.)
  // Cooperative tiles split between two blocks of a cluster: stage 4's 3x3 layers (52 tiles of
  // 128x128) and batch-1 3x3 layers of K/G 128-256 on few 128x64 tiles; a cluster a tile.
  for (const auto& [p, name] :
       {std::pair{make(32, 512, 7, 7, 512, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
        std::pair{make(32, 512, 14, 14, 512, 3, 3, 1, 2), "wgmma128x128_s3_tma_cooperative_cs2"},
        std::pair{make(1, 128, 56, 56, 128, 3, 3, 1), "wgmma128x64_s3_tma_cooperative_cs2"},
        std::pair{make(1, 256, 28, 28, 256, 3, 3, 1), "wgmma128x64_s3_tma_cooperative_cs2"}}) {
    const ImplicitMmaDivision d = division(p);
    EXPECT_EQ(division_name(d), name) << p.to_string();
    EXPECT_EQ(d.cluster_split, 2);
    EXPECT_EQ(d.launch.grid_z, 2);
    EXPECT_LE(d.launch.grid_x * 2, 132) << p.to_string();
  }
  EXPECT_FALSE(division(make(32, 64, 56, 56, 256, 1, 1), Layout::NCHW).persistent);
  // dgrad: a stride-1 1x1 layer's one step writes dense dx and walks; the phase steps of a stride-2
  // 3x3 layer (and a stride-2 1x1 layer's one step) write strided views of dx, which a tensor map of y
  // cannot store, and do not.
  auto dgrad_steps = [](const Problem& p) {
    const DType t = DType::BFloat16;
    const BackwardDecomposition dg =
        decompose_backward_data(p, p.y_desc(Layout::NHWC, t), p.w_desc(Layout::NHWC, t), p.x_desc(Layout::NHWC, t));
    PlanOptions o;
    o.target = Target::Cuda;
    std::vector<ImplicitMmaDivision> v;
    const std::vector<double> shares = step_sm_shares(dg);
    for (size_t i = 0; i < dg.steps.size(); ++i) {
      // As the engine plans them: each step on its share of the SMs.
      const ForwardStep& s = dg.steps[i];
      const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o,
                                    StepContext{s.group_strides, false, shares[i]});
      v.push_back(std::get<ImplicitMmaDivision>(step.division()));
    }
    return v;
  };
  const auto one_by_one = dgrad_steps(make(32, 64, 56, 56, 64, 1, 1));
  ASSERT_EQ(one_by_one.size(), 1u);
  EXPECT_TRUE(one_by_one[0].persistent);
  EXPECT_EQ(one_by_one[0].consumers, ConsumerSchedule::None);  // a reduction of 64 rows, 64 filters
  // Short reductions (at most 128 rows) into 256 filters or more over two waves of 128x128 tiles:
  // ping-pong 128x128 (resnet50's l1_1x1c, l2_1x1a and l2_1x1c dgrad).
  for (const Problem& p :
       {make(32, 256, 56, 56, 64, 1, 1), make(32, 256, 56, 56, 128, 1, 1), make(32, 512, 28, 28, 128, 1, 1)}) {
    const auto steps = dgrad_steps(p);
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(division_name(steps[0]), "wgmma128x128_s3_tma_pingpong") << p.to_string();
  }
  // Stride-1 steps of 256-2304 rows: cooperative 128x128 where K/G >= 256 or the reduction is 1024
  // rows and more (split between two blocks of a cluster over half a wave of its tiles and less),
  // 128x64 otherwise; stage 4's 3x3 (4608 rows) as the forward layer, split 2 ways; a 1x1 step of
  // 64 rows keeps its tile.
  for (const auto& [p, name] : {std::pair{make(32, 256, 14, 14, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative"},
                                std::pair{make(32, 512, 7, 7, 512, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
                                std::pair{make(32, 1024, 14, 14, 512, 1, 1), "wgmma128x128_s3_tma_cooperative"},
                                std::pair{make(32, 512, 7, 7, 2048, 1, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
                                std::pair{make(32, 128, 28, 28, 512, 1, 1), "wgmma128x64_s3_tma_cooperative"},
                                std::pair{make(32, 64, 56, 56, 64, 3, 3, 1), "wgmma128x64_s3_tma_cooperative"}}) {
    const auto steps = dgrad_steps(p);
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(division_name(steps[0]), name) << p.to_string();
    EXPECT_EQ(steps[0].launch.threads, pingpong_threads);
  }
  EXPECT_EQ(dgrad_steps(make(32, 64, 56, 56, 256, 1, 1))[0].consumers, ConsumerSchedule::None);
  // A strided 3x3 layer's phases, which run beside each other, on ping-pong 128x128 (Note [phase
  // steps' SM shares]), the one-tap phases included; a 1x1 layer's one strided step on cooperative
  // 128x128 over one round of the SMs (stage 4's, 104 tiles; Note [wgmma strided dgrad stores]).
  for (const auto& [p, name] :
       {std::pair{make(32, 128, 56, 56, 128, 3, 3, 1, 2), "wgmma128x128_s3_tma_pingpong"},
        std::pair{make(32, 512, 14, 14, 512, 3, 3, 1, 2), "wgmma128x128_s3_tma_pingpong"},
        std::pair{make(32, 256, 28, 28, 256, 3, 3, 1, 2), "wgmma128x128_s3_tma_pingpong"},
        std::pair{make(32, 1024, 14, 14, 2048, 1, 1, 0, 2), "wgmma128x128_s3_tma_cooperative"}}) {
    const auto phases = dgrad_steps(p);
    EXPECT_EQ(phases.size(), p.r == 3 ? 4u : 1u);
    for (const ImplicitMmaDivision& d : phases) {
      EXPECT_TRUE(d.persistent) << division_name(d);
      EXPECT_EQ(division_name(d), name) << p.to_string();
    }
  }
  // Note [wgmma pixel-row maps]: 1x1 stride-1 layers and steps read pixel rows of a tiled map;
  // strided, padded and larger filters keep the im2col map, and the gather takes neither.
  EXPECT_TRUE(division(make(32, 1024, 14, 14, 256, 1, 1)).image_pixel_rows);
  EXPECT_TRUE(dgrad_steps(make(32, 1024, 14, 14, 2048, 1, 1, 0, 2))[0].image_pixel_rows);  // over dense dy
  for (const Problem& p : {make(32, 256, 14, 14, 256, 3, 3, 1), make(32, 256, 56, 56, 512, 1, 1, 0, 2),
                           make(32, 256, 14, 14, 256, 1, 1, 1)}) {
    const ImplicitMmaDivision d = division(p);
    EXPECT_TRUE(d.tensor_maps) << p.to_string();
    EXPECT_FALSE(d.image_pixel_rows) << p.to_string();
  }
  EXPECT_FALSE(division(make(32, 256, 14, 14, 256, 1, 1), Layout::NCHW).image_pixel_rows);
}

// Note [wgmma warp-specialized tiles]: a forced "<wgmma tile>_tma_pingpong" or "_tma_cooperative"
// plans one block an SM of a producer warpgroup and two consumer warpgroups, as many stages as fit,
// walking every tile; other tiles (and a cooperative 64-pixel tile), the name without "_tma", a layer
// without tensor maps and a split are refused, and a y the store cannot take gets the tile's plain
// form, named as such.
TEST(PlanDtypes, ForcedWarpSpecializedTiles) {
  auto status_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.status();
    }
    return Status::Success;
  };
  const Problem p = make(32, 64, 56, 56, 256, 1, 1);
  PlanOptions o;
  o.tile = "wgmma64x128_s4_tma_pingpong";
  const auto d = std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::BFloat16, o).division());
  EXPECT_EQ(d.consumers, ConsumerSchedule::PingPong);
  EXPECT_TRUE(d.persistent);
  EXPECT_EQ(division_name(d), "wgmma64x128_s4_tma_pingpong");
  EXPECT_EQ(d.launch.grid_x, 132);  // one block an SM of the H100 model, 3136 tiles
  EXPECT_EQ(d.launch.grid_y, 1);
  EXPECT_EQ(d.launch.threads, 3 * 128);
  EXPECT_EQ(d.stages, 8);
  EXPECT_EQ(d.launch.smem_bytes, 8 * (64 + 128) * 128 + 2 * 64 * 128 * 2 + 1024);
  EXPECT_EQ(d.cluster_split, 1);
  // A layer of fewer tiles than SMs: a block a tile.
  o.tile = "wgmma64x64_s3_tma_pingpong";
  const auto small = std::get<ImplicitMmaDivision>(
      plan_for(make(1, 64, 14, 14, 64, 1, 1), Layout::NHWC, DType::BFloat16, o).division());
  EXPECT_EQ(small.consumers, ConsumerSchedule::PingPong);
  EXPECT_EQ(small.launch.grid_x, 4);
  // Cooperative: both consumer warpgroups on each 128-pixel tile, the same blocks and shared memory.
  o.tile = "wgmma128x64_s3_tma_cooperative";
  const auto coop = std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::BFloat16, o).division());
  EXPECT_EQ(coop.consumers, ConsumerSchedule::Cooperative);
  EXPECT_EQ(division_name(coop), "wgmma128x64_s3_tma_cooperative");
  EXPECT_EQ(coop.launch.grid_x, 132);
  EXPECT_EQ(coop.launch.threads, 3 * 128);
  EXPECT_EQ(coop.stages, 8);
  EXPECT_EQ(coop.launch.smem_bytes, 8 * (128 + 64) * 128 + 2 * 128 * 64 * 2 + 1024);
  // A cooperative tile splits its rows among a cluster: a cluster an SM pair, one tile each.
  o.tile = "wgmma128x128_s3_tma_cooperative";
  o.split_k = 2;
  const auto split = std::get<ImplicitMmaDivision>(
      plan_for(make(32, 2048, 7, 7, 512, 1, 1), Layout::NHWC, DType::BFloat16, o).division());
  EXPECT_EQ(division_name(split), "wgmma128x128_s3_tma_cooperative_cs2");
  EXPECT_EQ(split.cluster_split, 2);
  EXPECT_EQ(split.launch.grid_x, 13 * 4);  // 52 tiles, 52 clusters
  EXPECT_EQ(split.launch.grid_z, 2);
  o.split_k = 5;
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::BFloat16, o); }), Status::Unsupported);
  o.split_k = 0;
  for (const char* bad : {"wgmma128x256_s4_tma_pingpong", "wgmma64x128_s4_pingpong", "mma128x16_4w_128B_tma_pingpong",
                          "wgmma64x128_s4_tma_cooperative", "wgmma128x256_s4_tma_cooperative"}) {
    o.tile = bad;
    EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::BFloat16, o); }), Status::BadParam) << bad;
  }
  o.tile = "wgmma64x128_s4_tma_pingpong";
  // y in plane order cannot take the tensor-map store: the plan names the plain form that runs,
  // one block a tile, unsplit.
  const Problem planes = make(32, 64, 56, 56, 256, 1, 1);
  o.target = Target::Cuda;
  const Plan plain =
      Plan::build(planes, planes.x_desc(Layout::NHWC, DType::BFloat16), planes.w_desc(Layout::NHWC, DType::BFloat16),
                  planes.y_desc(Layout::NCHW, DType::BFloat16), HardwareModel::reference_h100(), o);
  const auto& dp = std::get<ImplicitMmaDivision>(plain.division());
  EXPECT_FALSE(dp.persistent);
  EXPECT_EQ(dp.consumers, ConsumerSchedule::None);
  EXPECT_EQ(division_name(dp), "wgmma64x128_s4_tma");
  EXPECT_EQ(dp.launch.grid_x, 32 * 56 * 56 / 64);  // one block a 64-pixel tile
  EXPECT_EQ(dp.launch.threads, 128);
  EXPECT_NE(plain.to_text(0).find("which needs a dense channels-last y"), std::string::npos) << plain.to_text(0);
  EXPECT_EQ(status_of([&] { plan_for(make(32, 32, 56, 56, 256, 1, 1), Layout::NHWC, DType::BFloat16, o); }),
            Status::Unsupported);
  o.split_k = 2;
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::BFloat16, o); }), Status::Unsupported);
}

// Note [wgmma wave-fitted filter tiles]: the 128x208 tile plans as unsplit cooperative blocks only,
// its stages of 208 K-major filter rows, and the planner takes it for stage 4's 2048-filter 1x1
// layers (130 tiles, one a block), not for the stage's 512-filter or stage 3's layers. Its other
// names and a split are refused, and a layer the form cannot take (y in plane order) runs
// 128x128's forms, named as such.
TEST(PlanDtypes, WaveFittedFilterTiles) {
  const Problem wide = make(32, 512, 7, 7, 2048, 1, 1);  // resnet50's l4_1x1b: 1568 pixels, 2048 filters
  for (const std::string& forced : {std::string("wgmma128x208_s4_tma_cooperative"), std::string()}) {
    PlanOptions o;
    o.tile = forced;
    const Plan plan = plan_for(wide, Layout::NHWC, DType::BFloat16, o);
    const auto d = std::get<ImplicitMmaDivision>(plan.division());
    EXPECT_EQ(division_name(d), "wgmma128x208_s4_tma_cooperative") << plan.to_text(0);
    EXPECT_EQ(d.consumers, ConsumerSchedule::Cooperative);
    EXPECT_EQ(d.block_n, 208);
    EXPECT_EQ(d.cluster_split, 1);
    EXPECT_EQ(d.launch.grid_x, 13 * 10);
    EXPECT_EQ(d.stages, 4);
    EXPECT_EQ(d.launch.smem_bytes, 4 * (128 + 208) * 128 + 2 * 64 * 208 * 2 + 1024);
  }
  EXPECT_EQ(division_name(std::get<ImplicitMmaDivision>(
                plan_for(make(32, 1024, 14, 14, 2048, 1, 1, 0, 2), Layout::NHWC, DType::BFloat16).division())),
            "wgmma128x208_s4_tma_cooperative");  // l4_ds
  for (const Problem& p : {make(32, 2048, 7, 7, 512, 1, 1), make(32, 256, 14, 14, 1024, 1, 1)})
    EXPECT_NE(std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::BFloat16).division()).block_n, 208)
        << p.to_string();
  PlanOptions o;
  o.tile = "wgmma128x208_s4_tma_cooperative";
  o.split_k = 2;  // the whole reduction a tile
  try {
    (void)plan_for(wide, Layout::NHWC, DType::BFloat16, o);
    ADD_FAILURE() << "a wave-fitted tile was split";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
  }
  o.split_k = 0;
  for (const char* bad :
       {"wgmma128x208_s4", "wgmma128x208_s4_tma", "wgmma128x208_s4_tma_persistent", "wgmma128x208_s4_tma_pingpong"}) {
    o.tile = bad;
    try {
      (void)plan_for(wide, Layout::NHWC, DType::BFloat16, o);
      ADD_FAILURE() << bad << " was planned";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::BadParam) << e.what();
    }
  }
  o.tile = "wgmma128x208_s4_tma_cooperative";
  o.target = Target::Cuda;
  const Plan planes =
      Plan::build(wide, wide.x_desc(Layout::NHWC, DType::BFloat16), wide.w_desc(Layout::NHWC, DType::BFloat16),
                  wide.y_desc(Layout::NCHW, DType::BFloat16), HardwareModel::reference_h100(), o);
  const auto& dp = std::get<ImplicitMmaDivision>(planes.division());
  EXPECT_EQ(division_name(dp), "wgmma128x128_s3_tma");
  EXPECT_NE(planes.to_text(0).find("runs only as cooperative blocks"), std::string::npos) << planes.to_text(0);
  // TF32 (Note [wgmma tf32 stages]): the 208-filter tile has no fp32 form; 128x128's cooperative one runs.
  PlanOptions tf32 = o;
  tf32.math = MathMode::TF32;
  EXPECT_EQ(division_name(std::get<ImplicitMmaDivision>(plan_for(wide, Layout::NHWC, DType::Float32, tf32).division())),
            "wgmma128x128_s3_tma_cooperative");
}

// Planning `p` channels-last in `t` with `o` fails with `status`.
void expect_error(const Problem& p, DType t, PlanOptions o, Status status, const char* what) {
  try {
    (void)plan_for(p, Layout::NHWC, t, o);
    ADD_FAILURE() << what << " was planned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << what << ": " << e.what();
  }
}

// Note [wgmma tf32 stages]: TF32 channels-last layers of K-major operands load through tensor maps
// on warp-specialized tiles only: 128x128 over more than a wave of its tiles, ping-pong on short
// reductions and cooperative on long ones (split 2 ways over one to two waves of reductions of 4096
// rows and more), cooperative over half a wave to one, split 2 ways below, 128x64 for K/G <= 64. The plain and
// persistent tensor-map forms are refused; a y the consumers cannot store from their accumulators
// (K/G not a multiple of 4) keeps the gather, and a forced tensor-map tile is refused there.
TEST(PlanDtypes, Tf32LoadsThroughTensorMapsOnWarpSpecializedTilesOnly) {
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  auto division = [&](const Problem& p, PlanOptions o) {
    return std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::Float32, o).division());
  };
  for (auto [p, name] : {std::pair{make(32, 256, 56, 56, 128, 1, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 64, 56, 56, 256, 1, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 64, 112, 112, 128, 3, 3, 1), "wgmma128x128_s3_tma_pingpong"},
                         {make(32, 128, 112, 112, 128, 3, 3, 1), "wgmma128x128_s3_tma_pingpong"},
                         {make(32, 128, 56, 56, 256, 3, 3, 1), "wgmma128x128_s3_tma_pingpong"},
                         {make(32, 128, 28, 28, 128, 3, 3, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 256, 56, 56, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 512, 28, 28, 256, 1, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 512, 14, 14, 512, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
                         {make(32, 256, 14, 14, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative"},
                         {make(32, 512, 7, 7, 512, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
                         {make(32, 64, 56, 56, 64, 3, 3, 1), "wgmma128x64_s3_tma_pingpong"}}) {
    const Plan plan = plan_for(p, Layout::NHWC, DType::Float32, tf32);
    const auto& d = std::get<ImplicitMmaDivision>(plan.division());
    EXPECT_EQ(division_name(d), name) << p.to_string();
    EXPECT_TRUE(d.tf32_stages()) << p.to_string();
    EXPECT_NE(plan.to_text(0).find("rounding each stage to TF32"), std::string::npos) << plan.to_text(0);
  }
  const Problem layer = make(8, 64, 28, 28, 128, 3, 3, 1);
  PlanOptions forced = tf32;
  forced.algorithm = Algorithm::ImplicitMma;
  for (const char* name : {"wgmma128x128_s3_tma_pingpong", "wgmma64x128_s4_tma_pingpong",
                           "wgmma128x64_s3_tma_cooperative", "wgmma64x64_s3_tma_pingpong"}) {
    forced.tile = name;
    const ImplicitMmaDivision d = division(layer, forced);
    EXPECT_EQ(division_name(d), name);
    EXPECT_TRUE(d.tensor_maps && d.persistent && d.tf32_stages()) << name;
  }
  // The 208-filter tile has 16-bit forms only: its cooperative name runs 128x128's.
  forced.tile = "wgmma128x208_s4_tma_cooperative";
  EXPECT_EQ(division_name(division(layer, forced)), "wgmma128x128_s3_tma_cooperative");
  for (const char* name : {"wgmma128x128_s3_tma", "wgmma128x64_s3_tma_persistent"}) {
    forced.tile = name;
    expect_error(layer, DType::Float32, forced, Status::Unsupported, name);
  }
  // K/G = 34: no store from the accumulators in pairs; the gather, and a forced tensor-map tile refused.
  const Problem odd = make(8, 64, 28, 28, 34, 3, 3, 1);
  const ImplicitMmaDivision gather = division(odd, tf32);
  EXPECT_FALSE(gather.tensor_maps);
  EXPECT_FALSE(gather.tf32_stages());
  forced.tile = "wgmma128x128_s3_tma_pingpong";
  expect_error(odd, DType::Float32, forced, Status::Unsupported, "a TF32 tensor-map tile on K/G = 34");
  // Exact fp32 never reaches the tensor cores.
  EXPECT_NE(plan_for(layer, Layout::NHWC, DType::Float32).algorithm(), Algorithm::ImplicitMma);
}

// Note [few-channel forward]: fp16/bf16 forward layers of 2 to 4 input channels and one group run
// few_channel in every layout, and fp32 ones in TF32 math; exact fp32, 8 channels and groups do
// not, and forcing it there, on the CPU target, with a tile or a split, or onto a wgrad step, is a
// clear error.
TEST(PlanDtypes, FewChannelForwardLayers) {
  const Problem stem = make(32, 3, 224, 224, 64, 7, 7, 3, 2);  // resnet50's conv1
  for (DType t : {DType::Float16, DType::BFloat16})
    for (Layout l : {Layout::NHWC, Layout::NCHW, Layout::CNHW}) {
      const Plan plan = plan_for(stem, l, t);
      ASSERT_EQ(plan.algorithm(), Algorithm::FewChannel) << plan.to_text(0);
      const auto& d = std::get<FewChannelDivision>(plan.division());
      EXPECT_EQ(division_name(d), "few_channel_4x112_c160");  // 147 columns; 512 / 112 rows of pixels
      EXPECT_EQ(d.launch.grid_x, 2 * 132);                    // persistent over 32 * 28 tiles
      EXPECT_EQ(d.launch.grid_y, 1);
      // 64 filter rows of 336 bytes, the offset table, two windows of 13 rows of 688 elements, 8
      // warps' 32 staging rows of 144 bytes
      EXPECT_EQ(d.launch.smem_bytes, 64 * 336 + 160 * 4 + 2 * 13 * 688 * 2 + 8 * 32 * 144);
      EXPECT_TRUE(plan.deterministic());
    }
  // Few blocks: the rows of a block halve until every SM has two.
  const Plan small_plan = plan_for(make(1, 3, 64, 64, 64, 3, 3, 1), Layout::NHWC, DType::BFloat16);
  const auto& small = std::get<FewChannelDivision>(small_plan.division());
  EXPECT_EQ(small.tile_q, 64);
  EXPECT_EQ(small.tile_p, 1);  // 64 blocks of one row: fewer than 264 either way
  EXPECT_EQ(
      std::get<FewChannelDivision>(plan_for(make(2, 4, 30, 30, 130, 3, 3, 1), Layout::NHWC, DType::Float16).division())
          .launch.grid_y,
      3);
  EXPECT_NE(plan_for(stem, Layout::NHWC, DType::Float32).algorithm(), Algorithm::FewChannel);
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    const Plan t = plan_for(stem, l, DType::Float32, tf32);
    ASSERT_EQ(t.algorithm(), Algorithm::FewChannel) << t.to_text(0);
    EXPECT_EQ(t.math(), MathMode::TF32);
    // 64 filter rows of 656 bytes, the offset table, two windows of 13 rows of 688 fp32 elements, no
    // staging rows
    EXPECT_EQ(std::get<FewChannelDivision>(t.division()).launch.smem_bytes, 64 * 656 + 160 * 4 + 2 * 13 * 688 * 4);
  }
  EXPECT_EQ(plan_for(make(2, 8, 30, 30, 64, 3, 3, 1), Layout::NHWC, DType::BFloat16).algorithm(),
            Algorithm::ImplicitMma);
  EXPECT_EQ(plan_for(make(2, 4, 30, 30, 64, 3, 3, 1, 1, 1, 2), Layout::NHWC, DType::BFloat16).algorithm(),
            Algorithm::ImplicitMma);
  EXPECT_EQ(plan_for(make(2, 1, 30, 30, 64, 3, 3, 1), Layout::NHWC, DType::BFloat16).algorithm(),
            Algorithm::SingleChannel);  // C = 1: single_channel's kernels
  const Plan refused = plan_for(make(2, 3, 30, 30, 64, 29, 29, 14), Layout::NHWC, DType::BFloat16);
  EXPECT_EQ(refused.algorithm(), Algorithm::ImplicitMma);
  EXPECT_NE(refused.to_text(0).find("refused few_channel: C * R * S above 640"), std::string::npos)
      << refused.to_text(0);

  PlanOptions forced;
  forced.algorithm = Algorithm::FewChannel;
  expect_error(stem, DType::Float32, forced, Status::Unsupported, "exact fp32");
  expect_error(make(2, 8, 30, 30, 64, 3, 3, 1), DType::BFloat16, forced, Status::Unsupported, "8 channels");
  expect_error(make(1, 3, 8, 8, 65536 * 64, 1, 1), DType::BFloat16, forced, Status::Unsupported, "2^22 filters");
  PlanOptions cpu = forced;
  cpu.target = Target::Cpu;
  expect_error(stem, DType::BFloat16, cpu, Status::Unsupported, "the cpu target");
  PlanOptions tiled = forced;
  tiled.tile = "mma128x64_4w_64B";
  expect_error(stem, DType::BFloat16, tiled, Status::BadParam, "a tile");
  PlanOptions split = forced;
  split.split_k = 2;
  expect_error(stem, DType::BFloat16, split, Status::BadParam, "a split");
  StepContext wgrad;
  wgrad.filter_gradient = true;
  try {
    (void)Plan::build(stem, stem.x_desc(Layout::NHWC, DType::BFloat16), stem.w_desc(Layout::NHWC, DType::BFloat16),
                      stem.y_desc(Layout::NHWC, DType::BFloat16), HardwareModel::reference_h100(), forced, wgrad);
    ADD_FAILURE() << "a wgrad step ran few_channel";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
  }
}

// Note [few-filter forward]: fp16/bf16 layers of at most 8 filters, one group and at least 8
// channels run few_filter (few_filter_preferred): an RGB output head channels-last and in plane
// order, every phase step of ResNet conv1's dgrad, many channels (two chunk buffers), few channels
// (a 16-channel chunk), a 1x1 layer of one chunk channels-last. TF32, 9 filters, groups, 6
// channels and other 1x1 layers do not under Auto; forcing it onto what it cannot run, on the CPU
// target, with a tile or a split, or onto a wgrad step, is a clear error.
TEST(PlanDtypes, FewFilterLayers) {
  auto division = [](const Plan& plan) { return std::get<FewFilterDivision>(plan.division()); };
  const Problem head = make(8, 64, 256, 256, 3, 3, 3, 1);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    const Plan plan = plan_for(head, Layout::NHWC, t);
    ASSERT_EQ(plan.algorithm(), Algorithm::FewFilter) << plan.to_text(0);
    const FewFilterDivision d = division(plan);
    EXPECT_EQ(d.chunk_c, 64);
    EXPECT_EQ(d.buffers, 1);
    EXPECT_EQ(d.tile_q % 16, 0);
    EXPECT_LE(d.tile_p * d.tile_q / 16, 32);  // 8 warps of at most 4 row steps
    // the window of the tile's pixels (144 bytes each: 64 channels and 16) and 8 filter rows of 9 taps
    EXPECT_EQ(d.smem_bytes, (d.tile_p + 2) * (d.tile_q + 2) * 144 + 8 * (9 * 128 + 16));
    EXPECT_LE(d.smem_bytes, 228 * 1024 / detail::kFewFilterBlocksPerSm - 1024);  // that many blocks an SM
    EXPECT_EQ(d.launch.grid_x, 8 * ((256 + d.tile_p - 1) / d.tile_p) * ((256 + d.tile_q - 1) / d.tile_q));
    EXPECT_TRUE(plan.deterministic());
  }
  const Problem conv1 = make(32, 3, 224, 224, 64, 7, 7, 3, 2);
  const DType bf16 = DType::BFloat16;
  const BackwardDecomposition dg = decompose_backward_data(
      conv1, conv1.y_desc(Layout::NHWC, bf16), conv1.w_desc(Layout::NHWC, bf16), conv1.x_desc(Layout::NHWC, bf16));
  ASSERT_EQ(dg.steps.size(), 4u);
  PlanOptions cuda;
  cuda.target = Target::Cuda;
  for (const ForwardStep& s : dg.steps) {
    const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), cuda);
    ASSERT_EQ(step.algorithm(), Algorithm::FewFilter) << step.to_text(0);
    EXPECT_EQ(division(step).chunk_c, 64);
    EXPECT_EQ(division(step).buffers, 1);
  }
  const FewFilterDivision many = division(plan_for(make(2, 200, 30, 30, 4, 3, 3, 1), Layout::NHWC, bf16));
  EXPECT_EQ(many.chunk_c, 64);
  EXPECT_EQ(many.buffers, 2);
  EXPECT_EQ(division(plan_for(make(2, 8, 30, 30, 4, 3, 3, 1), Layout::NHWC, bf16)).chunk_c, 16);
  // Few blocks: the rows of a block halve until every SM has its resident blocks.
  const FewFilterDivision small = division(plan_for(make(1, 64, 32, 32, 3, 3, 3, 1), Layout::NHWC, bf16));
  EXPECT_EQ(small.tile_p, 1);

  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  EXPECT_NE(plan_for(head, Layout::NHWC, DType::Float32, tf32).algorithm(), Algorithm::FewFilter);
  EXPECT_EQ(plan_for(head, Layout::NCHW, bf16).algorithm(), Algorithm::FewFilter);  // element copies
  EXPECT_NE(plan_for(make(8, 64, 64, 64, 9, 3, 3, 1), Layout::NHWC, bf16).algorithm(), Algorithm::FewFilter);
  EXPECT_NE(plan_for(make(8, 64, 64, 64, 4, 3, 3, 1, 1, 1, 2), Layout::NHWC, bf16).algorithm(), Algorithm::FewFilter);
  EXPECT_NE(plan_for(make(8, 6, 64, 64, 3, 3, 3, 1), Layout::NHWC, bf16).algorithm(), Algorithm::FewFilter);
  // 1x1 layers: channels-last over one chunk only
  EXPECT_EQ(plan_for(make(8, 64, 64, 64, 3, 1, 1), Layout::NHWC, bf16).algorithm(), Algorithm::FewFilter);
  EXPECT_NE(plan_for(make(8, 256, 64, 64, 3, 1, 1), Layout::NHWC, bf16).algorithm(), Algorithm::FewFilter);
  EXPECT_NE(plan_for(make(8, 64, 64, 64, 3, 1, 1), Layout::NCHW, bf16).algorithm(), Algorithm::FewFilter);

  PlanOptions forced;
  forced.algorithm = Algorithm::FewFilter;
  EXPECT_EQ(plan_for(make(8, 256, 64, 64, 3, 1, 1), Layout::NHWC, bf16, forced).algorithm(), Algorithm::FewFilter);
  expect_error(head, DType::Float32, forced, Status::Unsupported, "fp32");
  expect_error(make(8, 64, 64, 64, 9, 3, 3, 1), bf16, forced, Status::Unsupported, "9 filters");
  expect_error(make(8, 64, 64, 64, 4, 3, 3, 1, 1, 1, 2), bf16, forced, Status::Unsupported, "groups");
  expect_error(make(1, 64, 300, 300, 3, 61, 61, 30), bf16, forced, Status::Unsupported, "a 61x61 filter");
  PlanOptions cpu = forced;
  cpu.target = Target::Cpu;
  expect_error(head, bf16, cpu, Status::Unsupported, "the cpu target");
  PlanOptions tiled = forced;
  tiled.tile = "mma128x16_4w_128B";
  expect_error(head, bf16, tiled, Status::BadParam, "a tile");
  PlanOptions split = forced;
  split.split_k = 2;
  expect_error(head, bf16, split, Status::BadParam, "a split");
  StepContext wgrad;
  wgrad.filter_gradient = true;
  try {
    (void)Plan::build(head, head.x_desc(Layout::NHWC, bf16), head.w_desc(Layout::NHWC, bf16),
                      head.y_desc(Layout::NHWC, bf16), HardwareModel::reference_h100(), forced, wgrad);
    ADD_FAILURE() << "a wgrad step ran few_filter";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
  }
}

// Note [window mma]: window_mma runs fp32 layers in TF32 math when forced (Auto keeps implicit_mma,
// which measured faster): ResNet's 3x3 stages (256 x 64 blocks for 64 filters, 128 x 128 otherwise;
// the late stages split over clusters), their window rows against every block's own count, the
// stages one block an SM holds, and every refusal.
TEST(PlanDtypes, WindowMmaLayers) {
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  const DType f32 = DType::Float32;
  auto division = [](const Plan& plan) { return std::get<WindowMmaDivision>(plan.division()); };
  // The most rows any block's window spans, block by block.
  auto rows_of_blocks = [](const Problem& p, int64_t block) {
    const int64_t q = p.q(), pq = p.p() * q, hv = (p.p() - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
    auto row = [&](int64_t m) { return m / pq * hv + m % pq / q * p.stride_h; };
    int64_t most = 0, npq = p.n * pq;
    for (int64_t m0 = 0; m0 < npq; m0 += block)
      most = std::max(most, row(std::min(m0 + block, npq) - 1) - row(m0) + (p.r - 1) * p.dil_h + 1);
    return most;
  };
  struct Want {
    Problem p;
    int pixels, filters, split;
  };
  const Want stages[] = {{make(32, 64, 56, 56, 64, 3, 3, 1), 256, 64, 1},
                         {make(32, 128, 28, 28, 128, 3, 3, 1), 128, 128, 1},
                         {make(32, 256, 14, 14, 256, 3, 3, 1), 128, 128, 1},
                         {make(32, 512, 7, 7, 512, 3, 3, 1), 128, 128, 2},
                         {make(32, 256, 28, 28, 256, 3, 3, 1, 2), 128, 128, 1}};
  PlanOptions forced = tf32;
  forced.algorithm = Algorithm::WindowMma;
  for (const Want& want : stages) {
    EXPECT_EQ(plan_for(want.p, Layout::NCHW, f32, tf32).algorithm(), Algorithm::ImplicitMma) << want.p.to_string();
    const Plan plan = plan_for(want.p, Layout::NCHW, f32, forced);
    ASSERT_EQ(plan.algorithm(), Algorithm::WindowMma) << plan.to_text(0);
    EXPECT_EQ(plan.math(), MathMode::TF32);
    const WindowMmaDivision d = division(plan);
    EXPECT_EQ(d.block_pixels, want.pixels) << want.p.to_string();
    EXPECT_EQ(d.block_filters, want.filters) << want.p.to_string();
    EXPECT_EQ(d.cluster_split, want.split) << want.p.to_string();
    EXPECT_EQ(d.chunk_c, 8);
    EXPECT_GE(d.window_rows, rows_of_blocks(want.p, d.block_pixels)) << want.p.to_string();
    EXPECT_LE(d.window_rows, rows_of_blocks(want.p, d.block_pixels) + want.p.r * want.p.dil_h) << want.p.to_string();
    EXPECT_EQ(d.window_columns, (want.p.q() - 1) * want.p.stride_w + want.p.s);
    EXPECT_GE(d.stages, 2);
    EXPECT_EQ(d.smem_bytes,
              detail::window_mma_smem_bytes(want.p, d.block_pixels, d.block_filters, d.stages, d.cluster_split));
    EXPECT_LE(d.smem_bytes, 227 * 1024);
    const int64_t npq = want.p.n * want.p.p() * want.p.q();
    EXPECT_EQ(d.launch.grid_x, (npq + d.block_pixels - 1) / d.block_pixels);
    EXPECT_EQ(d.launch.grid_y, (want.p.k + d.block_filters - 1) / d.block_filters);
    EXPECT_EQ(d.launch.grid_z, d.cluster_split);
    EXPECT_TRUE(plan.deterministic());
  }
  // A channel's window plane starts 8 banks past the one before.
  EXPECT_EQ(detail::window_mma_channel_pitch(15, 16) % 32, 8);
  EXPECT_GE(detail::window_mma_channel_pitch(15, 16), 240);
  // A 3x3 chunk: three row blocks of 128 filter rows of 128 bytes, then 8 window planes.
  const Problem l3 = stages[2].p;
  EXPECT_EQ(detail::window_mma_stage_bytes(l3, 128, 128) % 1024, 0);
  EXPECT_GE(detail::window_mma_stage_bytes(l3, 128, 128),
            3 * 128 * 128 + 8 * 4 * detail::window_mma_rows(l3, 128) * detail::window_mma_columns(l3));

  const Problem l2 = stages[1].p;
  EXPECT_EQ(plan_for(make(8, 256, 14, 14, 64, 1, 1), Layout::NHWC, f32, forced).algorithm(), Algorithm::WindowMma);
  expect_error(l2, DType::BFloat16, forced, Status::Unsupported, "fp32");
  PlanOptions exact = forced;
  exact.math = MathMode::Exact;
  expect_error(l2, f32, exact, Status::Unsupported, "TF32 math");
  expect_error(make(8, 64, 28, 28, 64, 3, 3, 1, 1, 1, 2), f32, forced, Status::Unsupported, "groups");
  expect_error(make(1, 64, 2000, 2000, 64, 3, 3, 1, 1, 40), f32, forced, Status::Unsupported, "a window too wide");
  expect_error(make(2, 3, 224, 224, 64, 7, 7, 3, 2), f32, forced, Status::Unsupported, "49 taps of 64 filters");
  PlanOptions cpu = forced;
  cpu.target = Target::Cpu;
  expect_error(l2, f32, cpu, Status::Unsupported, "the cpu target");
  HardwareModel a100 = HardwareModel::reference_h100();
  a100.cc_major = 8;
  try {
    (void)Plan::build(l2, l2.x_desc(Layout::NCHW, f32), l2.w_desc(Layout::NCHW, f32), l2.y_desc(Layout::NCHW, f32),
                      a100, forced);
    ADD_FAILURE() << "window_mma planned for sm_80";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
  }

  PlanOptions tiled = forced;
  tiled.tile = "mma128x64_4w_64B";
  expect_error(l2, f32, tiled, Status::BadParam, "a tile");
  StepContext wgrad;
  wgrad.filter_gradient = true;
  try {
    (void)Plan::build(l2, l2.x_desc(Layout::NCHW, f32), l2.w_desc(Layout::NCHW, f32), l2.y_desc(Layout::NCHW, f32),
                      HardwareModel::reference_h100(), forced, wgrad);
    ADD_FAILURE() << "a wgrad step ran window_mma";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
  }
}

// Note [mma narrow filter tiles]: forward layers and dgrad steps of at most 16 filters a group take the
// 128x16 tile, in every precision and layout: an RGB output layer, a one-channel head, 16 filters,
// groups of 8 (on sm_90 and on an sm_80 model) and every phase of a first layer's dgrad (its filters
// are the image's 3 channels). 17 filters, a channels-last 16-bit 1x1 layer (persistent wgmma tiles),
// and a wgrad step (its columns are the layer's C*R*S) do not.
TEST(PlanDtypes, NarrowFilterTilesOnLayersOfFewFilters) {
  const std::string narrow = "mma128x16_4w_128B";
  auto division = [](const Problem& p, Layout l, DType t, PlanOptions o = {}) {
    return std::get<ImplicitMmaDivision>(plan_for(p, l, t, o).division());
  };
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  // (In plane order the 3x3 layers of at most 4 filters leave for direct_block: below.)
  for (const Problem& p : {make(8, 64, 64, 64, 3, 3, 3, 1), make(8, 64, 64, 64, 1, 3, 3, 1),
                           make(32, 256, 28, 28, 16, 3, 3, 1), make(4, 64, 28, 28, 64, 3, 3, 1, 1, 1, 8)})
    for (Layout l : {Layout::NHWC, Layout::NCHW}) {
      if (l == Layout::NCHW && p.k_per_group() <= 4) continue;
      // (16-bit channels-last layers of at most 8 filters and one group run few_filter: below.)
      const bool few_filter = l == Layout::NHWC && p.k <= 8 && p.groups == 1;
      if (!few_filter) {
        EXPECT_EQ(division(p, l, DType::BFloat16).tile_name, narrow) << p.to_string();
        EXPECT_EQ(division(p, l, DType::Float16).tile_name, narrow) << p.to_string();
      }
      EXPECT_EQ(division(p, l, DType::Float32, tf32).tile_name, narrow) << p.to_string();
    }
  HardwareModel ampere = HardwareModel::reference_h100();
  ampere.cc_major = 8;
  const Problem rgb = make(8, 64, 64, 64, 3, 3, 3, 1);
  PlanOptions cuda;
  cuda.target = Target::Cuda;
  PlanOptions mma = cuda;
  mma.algorithm = Algorithm::ImplicitMma;
  const Plan on_ampere =
      Plan::build(rgb, rgb.x_desc(Layout::NHWC, DType::BFloat16), rgb.w_desc(Layout::NHWC, DType::BFloat16),
                  rgb.y_desc(Layout::NHWC, DType::BFloat16), ampere, mma);
  EXPECT_EQ(std::get<ImplicitMmaDivision>(on_ampere.division()).tile_name, narrow);
  EXPECT_NE(division(make(8, 64, 64, 64, 17, 3, 3, 1), Layout::NHWC, DType::BFloat16).tile_name, narrow);
  // 1x1 heads, of many tiles or few, take the persistent wgmma tile's rule channels-last (its plain
  // form where K is no whole 16-byte run of filters), the narrow tile in plane order (and in TF32,
  // which has no tensor maps).
  // (A 1x1 head over at most 64 channels runs few_filter channels-last: FewFilterLayers.)
  for (const Problem& head : {make(8, 64, 256, 256, 1, 1, 1), make(16, 256, 64, 64, 8, 1, 1)}) {
    if (head.c > 64)
      EXPECT_EQ(division_name(division(head, Layout::NHWC, DType::BFloat16)), "wgmma128x64_s3_tma_persistent")
          << head.to_string();
    EXPECT_EQ(division(head, Layout::NCHW, DType::BFloat16).tile_name, narrow) << head.to_string();
    EXPECT_EQ(division(head, Layout::NHWC, DType::Float32, tf32).tile_name, narrow) << head.to_string();
  }
  EXPECT_EQ(division(make(8, 64, 256, 256, 3, 3, 3, 1), Layout::NHWC, DType::Float32, tf32).tile_name, narrow);
  const Problem conv1 = make(32, 3, 224, 224, 64, 7, 7, 3, 2);
  const DType t = DType::BFloat16;
  const BackwardDecomposition dg = decompose_backward_data(
      conv1, conv1.y_desc(Layout::NHWC, t), conv1.w_desc(Layout::NHWC, t), conv1.x_desc(Layout::NHWC, t));
  ASSERT_EQ(dg.steps.size(), 4u);
  for (const ForwardStep& s : dg.steps) {  // (Auto gives them to few_filter: FewFilterLayers)
    const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), mma);
    EXPECT_EQ(std::get<ImplicitMmaDivision>(step.division()).tile_name, narrow) << s.problem.to_string();
  }
  const BackwardDecomposition wg = decompose_backward_filter(
      conv1, conv1.x_desc(Layout::NHWC, t), conv1.y_desc(Layout::NHWC, t), conv1.w_desc(Layout::NHWC, t));
  for (const ForwardStep& s : wg.steps) {
    const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), cuda);
    EXPECT_NE(std::get<ImplicitMmaDivision>(step.division()).tile_name, narrow) << s.problem.to_string();
  }
}

// Note [few filters off the tensor cores]: layers of at most 4 filters over 16 or more channels,
// larger than 1x1, with x in plane order run direct_block in TF32 math (exact): output heads and an
// RGB first layer's dgrad phase steps; in fp16/bf16 those of one group run few_filter. Channels-last
// ones (few_filter in fp16/bf16), 1x1 ones and those of more filters or fewer channels stay on the
// tensor cores.
TEST(PlanDtypes, FewFiltersInPlaneOrderLeaveTheTensorCores) {
  PlanOptions tf32;
  tf32.math = MathMode::TF32;
  auto algorithm = [&](const Problem& p, Layout l, DType t) {
    return plan_for(p, l, t, t == DType::Float32 ? tf32 : PlanOptions{}).algorithm();
  };
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float16}) {
    // (fp16/bf16 layers of one group run few_filter first: Note [few-filter forward])
    const bool half = t != DType::Float32;
    for (const Problem& p : {make(8, 64, 256, 256, 3, 3, 3, 1), make(8, 128, 128, 128, 1, 3, 3, 1),
                             make(2, 32, 40, 40, 4, 5, 3, 2, 2), make(2, 64, 40, 40, 6, 3, 3, 1, 1, 1, 2)}) {
      EXPECT_EQ(algorithm(p, Layout::NCHW, t), half && p.groups == 1 ? Algorithm::FewFilter : Algorithm::DirectBlock)
          << p.to_string() << " " << dtype_name(t);
      // (channels-last in fp16/bf16 with one group: few_filter, Note [few-filter forward])
      const Algorithm nhwc = t != DType::Float32 && p.groups == 1 ? Algorithm::FewFilter : Algorithm::ImplicitMma;
      EXPECT_EQ(algorithm(p, Layout::NHWC, t), nhwc) << p.to_string() << " " << dtype_name(t);
    }
    for (const Problem& p :
         {make(8, 64, 256, 256, 1, 1, 1), make(8, 64, 64, 64, 5, 3, 3, 1), make(8, 8, 64, 64, 3, 3, 3, 1)})
      EXPECT_EQ(algorithm(p, Layout::NCHW, t), half && p.r * p.s > 1 ? Algorithm::FewFilter : Algorithm::ImplicitMma)
          << p.to_string() << " " << dtype_name(t);
    const Problem conv1 = make(32, 3, 224, 224, 64, 7, 7, 3, 2);
    const BackwardDecomposition dg = decompose_backward_data(
        conv1, conv1.y_desc(Layout::NCHW, t), conv1.w_desc(Layout::NCHW, t), conv1.x_desc(Layout::NCHW, t));
    ASSERT_EQ(dg.steps.size(), 4u);
    PlanOptions o = t == DType::Float32 ? tf32 : PlanOptions{};
    o.target = Target::Cuda;
    for (const ForwardStep& s : dg.steps) {
      const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o);
      EXPECT_EQ(step.math(), MathMode::Exact) << s.problem.to_string();
      if (half) {
        EXPECT_EQ(step.algorithm(), Algorithm::FewFilter) << s.problem.to_string() << " " << dtype_name(t);
        continue;
      }
      EXPECT_EQ(step.algorithm(), Algorithm::DirectBlock) << s.problem.to_string() << " " << dtype_name(t);
      EXPECT_EQ(division_name(step.division()), "direct_32x8_r2x2_f4") << s.problem.to_string();
    }
    // Not wgrad steps: their filter is dy's planes.
    const Problem head = make(32, 64, 64, 64, 3, 3, 3, 1);
    const BackwardDecomposition wg = decompose_backward_filter(
        head, head.x_desc(Layout::NCHW, t), head.y_desc(Layout::NCHW, t), head.w_desc(Layout::NCHW, t));
    for (const ForwardStep& s : wg.steps) {
      const Plan step =
          Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o, StepContext{s.group_strides, true});
      EXPECT_EQ(step.algorithm(), Algorithm::ImplicitMma) << s.problem.to_string() << " " << dtype_name(t);
    }
  }
}

// Stage 4's 3x3 layers (long reductions, a quarter of a wave of 128x256 tiles) split each tile in a
// cluster: forward and dgrad on cooperative 128x128 tiles split 2 ways; stage 3's (49 such tiles)
// and short reductions do not.
TEST(PlanDtypes, LongReductionsOnFewLargeTilesSplitInACluster) {
  auto division = [](const Problem& p) {
    return std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::BFloat16).division());
  };
  for (const Problem& p : {make(32, 512, 7, 7, 512, 3, 3, 1), make(32, 256, 14, 14, 512, 3, 3, 1, 2)}) {
    const ImplicitMmaDivision d = division(p);
    EXPECT_EQ(division_name(d), "wgmma128x128_s3_tma_cooperative_cs2") << p.to_string();
    EXPECT_EQ(d.cluster_split, 2) << p.to_string();
    EXPECT_EQ(d.atomic_slices, 1);
    EXPECT_TRUE(d.tensor_maps);
  }
  // A batch-1 map, one mostly empty 128x256 tile: 64x128 tiles, split by the split rule.
  EXPECT_EQ(division(make(1, 512, 7, 7, 512, 3, 3)).tile_name, "wgmma64x128_s4");
  for (const Problem& p : {make(32, 256, 14, 14, 256, 3, 3, 1), make(32, 512, 7, 7, 2048, 1, 1)}) {
    const ImplicitMmaDivision d = division(p);
    EXPECT_NE(d.tile_name, "wgmma128x256_s4") << p.to_string();
    EXPECT_EQ(d.cluster_split, 1) << p.to_string();
  }
  // dgrad of stage 4's 3x3 layer: one step, the same division.
  const Problem l4 = make(32, 512, 7, 7, 512, 3, 3, 1);
  const BackwardDecomposition dg =
      decompose_backward_data(l4, l4.y_desc(Layout::NHWC, DType::BFloat16), l4.w_desc(Layout::NHWC, DType::BFloat16),
                              l4.x_desc(Layout::NHWC, DType::BFloat16));
  ASSERT_EQ(dg.steps.size(), 1u);
  PlanOptions o;
  o.target = Target::Cuda;
  const ForwardStep& s = dg.steps[0];
  const Plan step = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o);
  const auto& d = std::get<ImplicitMmaDivision>(step.division());
  EXPECT_EQ(division_name(d), "wgmma128x128_s3_tma_cooperative_cs2");
  EXPECT_EQ(d.cluster_split, 2);
  // A forced split still wins over the tile's.
  o.split_k = 3;
  EXPECT_EQ(std::get<ImplicitMmaDivision>(plan_for(l4, Layout::NHWC, DType::BFloat16, o).division()).cluster_split, 3);
}

TEST(PlanDtypes, UnsupportedCombinationsAreClearErrors) {
  const Problem p = make(1, 16, 8, 8, 16, 3, 3, 1);
  auto status_of = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.status();
    }
    return Status::Success;
  };
  PlanOptions ffma;
  ffma.algorithm = Algorithm::StrideFixed;  // fp32 kernels only
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::Float16, ffma); }), Status::Unsupported);
  PlanOptions mma;
  mma.algorithm = Algorithm::ImplicitMma;
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::Float32, mma); }), Status::Unsupported);
  mma.target = Target::Cpu;
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::Float16, mma); }), Status::Unsupported);
  PlanOptions split;
  split.split_k = 17;  // implicit_mma splits among at most the 16 blocks of a cluster
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::BFloat16, split); }), Status::BadParam);
  split.split_k = 2;
  EXPECT_EQ(std::get<ImplicitMmaDivision>(plan_for(p, Layout::NHWC, DType::BFloat16, split).division()).cluster_split,
            2);
  PlanOptions bad_tile;
  bad_tile.tile = "128x128x8";
  EXPECT_EQ(status_of([&] { plan_for(p, Layout::NHWC, DType::BFloat16, bad_tile); }), Status::BadParam);
  // One dtype for x, w and y.
  EXPECT_EQ(status_of([&] {
              Plan::build(p, p.x_desc(Layout::NHWC, DType::Float16), p.w_desc(Layout::NHWC, DType::BFloat16),
                          p.y_desc(Layout::NHWC, DType::Float16), HardwareModel::reference_h100());
            }),
            Status::Unsupported);
  TensorDesc bogus = p.x_desc(Layout::NHWC);
  bogus.dtype = static_cast<DType>(7);
  EXPECT_EQ(status_of([&] {
              Plan::build(p, bogus, p.w_desc(Layout::NHWC), p.y_desc(Layout::NHWC), HardwareModel::reference_h100());
            }),
            Status::BadParam);
}

TEST(CpuDtypes, HalfPrecisionMatchesTheReference) {
  Engine engine(Target::Cpu);
  std::mt19937_64 g(test_seed() + 200);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    for (int i = 0; i < 40; ++i) {
      const Case c = random_case(g, 200000);
      DtypeTensors d(c, g, t);
      const std::vector<float> ref = d.reference(c);
      auto plan = engine.plan(c.p, d.xd, d.wd, d.yd);
      std::vector<unsigned char> y = d.y;
      Epilogue e{c.alpha, c.beta, d.f.bias.empty() ? nullptr : d.f.bias.data(), c.act};
      engine.conv2d_forward(*plan, d.x.data(), d.w.data(), y.data(), e);
      EXPECT_LT(rel_error(d.values(y), ref), 1e-2) << dtype_name(t) << " " << c.name();
    }
  }
}

TEST(CpuDtypes, StridedHalfOutputLeavesTheGapsAlone) {
  Engine engine(Target::Cpu);
  const Problem p = make(1, 4, 5, 5, 3, 3, 3, 1);
  const TensorDesc xd = p.x_desc(Layout::NCHW, DType::Float16), wd = p.w_desc(Layout::NCHW, DType::Float16);
  TensorDesc yd = p.y_desc(Layout::NCHW, DType::Float16);
  yd.strides = {200, 60, 12, 2};  // every other element of every row is not y's
  std::vector<uint16_t> x(xd.span_elements(), float_to_half_bits(1.0f)),
      w(wd.span_elements(), float_to_half_bits(0.5f));
  std::vector<uint16_t> y(yd.span_elements() + 1, 0x7e00);  // NaN; one past the span for the last gap
  auto plan = engine.plan(p, xd, wd, yd);
  engine.conv2d_forward(*plan, x.data(), w.data(), y.data());
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        const int64_t at = k * 60 + i * 12 + j * 2;
        EXPECT_FALSE(std::isnan(half_bits_to_float(y[at])));
        EXPECT_EQ(y[at + 1], 0x7e00) << "a gap element was written";
      }
  EXPECT_EQ(half_bits_to_float(y[60 + 12 + 2]), 18.0f);  // interior: 4 channels x 9 taps x 0.5
}

TEST(Activations, SiluAndReluOnTheCpu) {
  // A 1x1 layer of one channel: y = act(alpha * x * w + bias), checked element by element.
  Engine engine(Target::Cpu);
  const Problem p = make(1, 1, 1, 4, 1, 1, 1);
  auto plan = engine.plan(p, p.x_desc(Layout::NCHW), p.w_desc(Layout::NCHW), p.y_desc(Layout::NCHW));
  const std::vector<float> x{-3.0f, -0.5f, 0.0f, 2.0f};
  const float w = 1.5f, bias = 0.25f;
  for (Activation a : {Activation::Identity, Activation::ReLU, Activation::SiLU}) {
    std::vector<float> y(4, NAN);
    engine.conv2d_forward(*plan, x.data(), &w, y.data(), Epilogue{2.0f, 0.0f, &bias, a});
    for (int i = 0; i < 4; ++i) {
      const double v = 2.0 * x[i] * w + bias;
      const double want = a == Activation::ReLU ? std::max(v, 0.0) : a == Activation::SiLU ? v / (1 + std::exp(-v)) : v;
      EXPECT_NEAR(y[i], want, 1e-6) << activation_name(a) << " at " << v;
    }
  }
  std::vector<float> y(4, NAN);
  try {
    engine.conv2d_forward(*plan, x.data(), &w, y.data(), Epilogue{1.0f, 0.0f, nullptr, static_cast<Activation>(9)});
    FAIL() << "an unknown activation was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::BadParam);
  }
  EXPECT_TRUE(std::isnan(y[0]));  // untouched
  EXPECT_EQ(parse_activation("silu"), Activation::SiLU);
  EXPECT_THROW(parse_activation("gelu"), Error);
}

TEST(NpyDtypes, Float16DataAtAnOddOffsetIsRead) {
  // A header of odd length puts the data at an odd address (fuzzing found the misaligned read).
  std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
  header.append(63 - header.size() - 1, ' ');
  header += '\n';
  ASSERT_EQ(header.size() % 2, 1u);
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  const uint16_t one = float_to_half_bits(1.0f), minus_half = float_to_half_bits(-0.5f);
  bytes.append(reinterpret_cast<const char*>(&one), 2);
  bytes.append(reinterpret_cast<const char*>(&minus_half), 2);
  const npy::Array a = npy::parse(bytes);
  EXPECT_EQ(a.data, (std::vector<float>{1.0f, -0.5f}));
}

TEST(NpyDtypes, Float16FilesRoundTrip) {
  const std::string path = (std::filesystem::temp_directory_path() / "mconv_test_f2.npy").string();
  const std::vector<float> v{1.0f, -0.5f, 65504.0f, 0.1f};
  npy::save(path, {2, 2}, v.data(), DType::Float16);
  const npy::Array a = npy::load(path);
  EXPECT_EQ(a.dtype, DType::Float16);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(a.data.size(), 4u);
  EXPECT_EQ(a.data[0], 1.0f);
  EXPECT_EQ(a.data[2], 65504.0f);
  EXPECT_EQ(a.data[3], round_to_dtype(0.1f, DType::Float16));
  EXPECT_EQ(std::filesystem::file_size(path), 128u + 8u);  // 128-byte header, 4 x 2 bytes
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mconv::test
