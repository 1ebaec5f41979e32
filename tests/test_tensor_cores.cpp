// The tensor-core implicit GEMM (implicit_mma) in fp16, bf16 and TF32 against the CPU double
// reference on the rounded inputs, y poisoned with NaN on the device before every run. Skipped (with
// a message) where no GPU is visible.
#include <cuda_runtime.h>

#include <algorithm>

#include "../src/algorithms/implicit_mma/tiles.hpp"
#include "../src/algorithms/single_channel/planner.hpp"
#include "device_bytes.hpp"
#include "dtype_tensors.hpp"

namespace mconv::test {
namespace {

class TensorCores : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible: GPU tests skipped";
  }
};

bool few() {
  return std::getenv("MCONV_GPU_TEST_FEW") != nullptr;
}

struct Precision {
  DType dtype;
  MathMode math;
  const char* name;
};
constexpr Precision kPrecisions[] = {{DType::Float16, MathMode::Exact, "fp16"},
                                     {DType::BFloat16, MathMode::Exact, "bf16"},
                                     {DType::Float32, MathMode::TF32, "tf32"}};

// Whether the engine's GPU runs the wgmma tiles (sm_90).
bool wgmma_device(Engine& engine) {
  return engine.hardware().cc_major == 9 && engine.hardware().cc_minor == 0;
}

// Runs one case in one precision (tile "" = the planner's), returns the norm-relative error.
// `algorithm`: ImplicitMma (forced), or Auto to run the planner's choice.
double run_mma(Engine& engine, const Case& c, std::mt19937_64& g, const Precision& pr, const std::string& tile = "",
               std::string* division = nullptr, Algorithm algorithm = Algorithm::ImplicitMma, int split_k = 0) {
  DtypeTensors t(c, g, pr.dtype);
  const int esz = dtype_size(pr.dtype);
  DeviceBytes dx(t.x.size() + size_t(c.x_offset) * esz), dw(t.w.size()), dy(t.y.size() + size_t(c.y_offset) * esz),
      db(t.f.bias.size() * 4);
  EXPECT_TRUE(dx.ptr && dw.ptr && dy.ptr && db.ptr);
  if (!dx.ptr || !dw.ptr || !dy.ptr || !db.ptr) return INFINITY;
  void* x_dev = static_cast<char*>(dx.ptr) + c.x_offset * esz;  // x_offset elements past 256-byte alignment
  void* y_dev = static_cast<char*>(dy.ptr) + c.y_offset * esz;
  EXPECT_EQ(cudaMemcpy(x_dev, t.x.data(), t.x.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dw.ptr, t.w.data(), t.w.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(y_dev, t.y.data(), t.y.size(), cudaMemcpyHostToDevice), cudaSuccess);
  if (!t.f.bias.empty())
    EXPECT_EQ(cudaMemcpy(db.ptr, t.f.bias.data(), t.f.bias.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  PlanOptions o;
  o.tile = tile;
  o.math = pr.math;
  o.algorithm = algorithm;  // under TF32 Auto keeps the FFMA families of C/G = 1 layers
  o.split_k = split_k;
  auto plan = engine.plan(c.p, t.xd, t.wd, t.yd, o);
  if (algorithm != Algorithm::Auto) EXPECT_EQ(plan->algorithm(), algorithm);
  if (division) *division = division_name(plan->division()) + "\n" + division_text(plan->division());
  Epilogue e{c.alpha, c.beta, t.f.bias.empty() ? nullptr : static_cast<const float*>(db.ptr), c.act};
  engine.conv2d_forward(*plan, x_dev, dw.ptr, y_dev, e);
  engine.synchronize();
  std::vector<unsigned char> out(t.y.size());
  EXPECT_EQ(cudaMemcpy(out.data(), y_dev, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return t.error(c, pr.math, t.values(out));
}

// The tile edges a tensor-core tile must take: C = 3, 8, 12, 264 (RGB, one vector, a vector and a half, many
// stages), K off the tile, P*Q = 1, N*P*Q below one tile, groups with C/G a vector and not.
std::vector<Case> mma_edge_cases() {
  std::vector<Case> v;
  for (int64_t c : {3, 8, 12, 264})
    for (int64_t k : {8, 24, 72, 136}) v.push_back({make(2, c, 9, 11, k, 3, 3, 1)});
  v.push_back({make(1, 64, 3, 3, 40, 3, 3, 0)});           // P*Q = 1
  v.push_back({make(1, 32, 5, 5, 16, 1, 1)});              // N*P*Q = 25, one partial tile
  v.push_back({make(2, 64, 8, 8, 64, 3, 3, 1, 1, 1, 8)});  // groups of 8 channels (ResNeXt)
  v.push_back({make(2, 24, 8, 8, 36, 3, 3, 1, 1, 1, 3)});  // groups of 8 in, 12 out
  v.push_back({make(1, 18, 9, 9, 18, 3, 3, 1, 2, 1, 3)});  // groups of 6: no vector
  v.push_back({make(3, 16, 12, 13, 32, 3, 3, 2, 1, 2)});   // dilation 2
  v.push_back({make(2, 16, 14, 14, 24, 7, 7, 3, 2)});      // stride 2, 7x7
  v.push_back(with_whole_epilogue(Case{make(2, 32, 8, 8, 48, 1, 1)}));
  Case conv{make(1, 16, 7, 9, 16, 3, 5, 1)};
  conv.p.mode = Mode::Convolution;
  v.push_back(conv);
  return v;
}

TEST_F(TensorCores, EdgeCasesEveryTilePrecisionAndLayout) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 100);
  // Every tile; under the sanitizers one with and one without its own element gather, the narrow one
  // (Note [mma narrow filter tiles]) and a wgmma one.
  std::vector<std::string> tiles;
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.plain_forms) tiles.push_back(t.name());
  if (few()) tiles = {detail::kMmaTileCatalog[0].name(), "mma64x64_4w_64B", "mma128x16_4w_128B", "wgmma128x256_s4"};
  for (const Precision& pr : kPrecisions)
    for (const std::string& tile : tiles)
      for (Case c : mma_edge_cases())
        for (Layout l : {Layout::NHWC, Layout::NCHW, Layout::CNHW}) {
          c.xl = c.wl = c.yl = l;
          EXPECT_LT(run_mma(engine, c, g, pr, tile), tolerance(pr.dtype, pr.math))
              << pr.name << " " << tile << " " << c.name();
        }
}

// Every case channels-last on every tile in each precision, the last case with a cluster split of
// `last_split`; under the sanitizers every `few_stride`-th case. The division must name the tile
// and say `loads` (its gather or its tensor maps).
void check_tiles(Engine& engine, std::mt19937_64& g, const std::vector<Case>& cases,
                 const std::vector<std::string>& tiles, const std::vector<Precision>& precisions, size_t few_stride,
                 int last_split, const std::string& loads) {
  for (const Precision& pr : precisions)
    for (const std::string& tile : tiles)
      for (size_t i = 0; i < cases.size(); ++i) {
        if (few() && i % few_stride != 0) continue;
        Case c = cases[i];
        c.xl = c.wl = c.yl = Layout::NHWC;
        std::string division;
        const int split = i + 1 == cases.size() ? last_split : 0;
        EXPECT_LT(run_mma(engine, c, g, pr, tile, &division, Algorithm::ImplicitMma, split),
                  tolerance(pr.dtype, pr.math))
            << pr.name << " " << tile << " " << c.name();
        EXPECT_NE(division.find(tile), std::string::npos) << division;
        EXPECT_NE(division.find(loads), std::string::npos) << division;
      }
}

// Note [wgmma mainloop]: the warpgroup tiles on channels-last layers that take them (both operands
// vector): reductions of 1 to 40 stages (the pipeline's fill, wrap and drain), partial pixel and filter
// tiles, groups, the whole epilogue, a cluster split, and Auto's choice on a layer of each tile.
TEST_F(TensorCores, WarpgroupTilesMatchTheReference) {
  Engine engine(Target::Cuda);
  if (!wgmma_device(engine)) GTEST_SKIP() << "wgmma tiles run on sm_90 only";
  std::mt19937_64 g(test_seed() + 106);
  std::vector<Case> cases;
  for (int64_t c : {8, 64, 264})
    for (int64_t k : {8, 72, 136, 264}) cases.push_back({make(2, c, 9, 11, k, 3, 3, 1)});
  cases.push_back({make(3, 512, 7, 7, 256, 3, 3, 1)});         // 72 (bf16) or 144 (TF32) stages
  cases.push_back({make(1, 16, 5, 5, 64, 1, 1)});              // one stage, N*P*Q = 25
  cases.push_back({make(2, 64, 8, 8, 64, 3, 3, 1, 1, 1, 8)});  // groups of 8 channels
  cases.push_back({make(2, 32, 14, 14, 48, 3, 3, 1, 2)});      // stride 2
  cases.push_back(with_whole_epilogue(Case{make(2, 96, 8, 8, 80, 3, 3, 1)}));
  std::vector<std::string> tiles;
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.warpgroup && t.plain_forms) tiles.push_back(t.name());
  check_tiles(engine, g, cases, tiles, {std::begin(kPrecisions), std::end(kPrecisions)}, 3, 3, "gather vector/vector");
  // The planner's own picks on sm_90: warpgroup tiles for a layer each of its rules.
  for (const Case& c : {Case{make(32, 256, 28, 28, 256, 3, 3, 1)}, Case{make(8, 128, 28, 28, 128, 3, 3, 1)},
                        Case{make(32, 64, 28, 28, 64, 3, 3, 1)}, Case{make(1, 128, 14, 14, 128, 3, 3, 1)}}) {
    Case nhwc = c;
    nhwc.xl = nhwc.wl = nhwc.yl = Layout::NHWC;
    std::string division;
    EXPECT_LT(run_mma(engine, nhwc, g, kPrecisions[1], "", &division), tolerance(DType::BFloat16, MathMode::Exact))
        << c.name();
    EXPECT_NE(division.find("tile wgmma"), std::string::npos) << division;
  }
}

// Note [wgmma tensor-map loads]: every warpgroup tile loading through the copy engine, on layers that
// stress the im2col map: non-square images with partial pixel and filter tiles, columns that wrap
// rows and images, strides 2 and 3 (also unequal), dilation, asymmetric padding, 1x1 and 7x7
// filters, true convolution, one to many stages, the whole epilogue and a cluster split. A forced
// tensor-map tile on a layer it cannot load is refused, one on an unaligned x runs the gather, and
// Auto takes the tensor maps on a resnet-like layer.
// Layers that stress the im2col map (the tensor-map and persistent tests below).
std::vector<Case> tensor_map_cases() {
  std::vector<Case> cases = {Case{make(2, 64, 9, 11, 72, 3, 3, 1)},      Case{make(3, 128, 7, 7, 264, 3, 3, 1)},
                             Case{make(2, 64, 14, 13, 136, 3, 3, 1, 2)}, Case{make(2, 128, 13, 13, 64, 1, 1, 0, 2)},
                             Case{make(1, 64, 20, 18, 64, 7, 7, 3, 2)},  Case{make(2, 64, 12, 13, 80, 3, 3, 2, 1, 2)},
                             Case{make(1, 64, 5, 5, 64, 3, 3, 1)},       Case{make(4, 192, 6, 5, 128, 1, 1)},
                             Case{make(2, 64, 17, 15, 64, 3, 3, 0, 3)}};
  Case uneven{make(2, 64, 15, 12, 48, 3, 5, 1)};
  uneven.p.pad_w = 2;
  uneven.p.pad_h_end = 0;
  uneven.p.stride_w = 2;
  cases.push_back(uneven);
  Case conv{make(2, 64, 7, 9, 64, 3, 5, 1)};
  conv.p.mode = Mode::Convolution;
  cases.push_back(conv);
  cases.push_back(with_whole_epilogue(Case{make(2, 64, 8, 8, 80, 3, 3, 1)}));
  return cases;
}

TEST_F(TensorCores, TensorMapLoadsMatchTheReference) {
  Engine engine(Target::Cuda);
  if (!wgmma_device(engine)) GTEST_SKIP() << "wgmma tiles run on sm_90 only";
  std::mt19937_64 g(test_seed() + 107);
  const std::vector<Case> cases = tensor_map_cases();
  std::vector<std::string> tiles;
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.warpgroup && t.plain_forms) tiles.push_back(t.name() + "_tma");
  check_tiles(engine, g, cases, tiles, {kPrecisions[0], kPrecisions[1]}, 4, 2, "tensor map, w tiled tensor map");
  Case nhwc{make(2, 64, 9, 11, 72, 3, 3, 1)};
  nhwc.xl = nhwc.wl = nhwc.yl = Layout::NHWC;
  // x 16-byte misaligned: the call runs the element gather on the fallback tile, still exact.
  Case shifted = nhwc;
  shifted.x_offset = 1;
  EXPECT_LT(run_mma(engine, shifted, g, kPrecisions[1], "wgmma128x128_s3_tma"),
            tolerance(DType::BFloat16, MathMode::Exact));
  // Layers the copy engine cannot load, and a tile without the warpgroup MMA.
  Case narrow{make(2, 32, 9, 11, 72, 3, 3, 1)};
  narrow.xl = narrow.wl = narrow.yl = Layout::NHWC;
  Case grouped{make(2, 128, 9, 11, 64, 3, 3, 1, 1, 1, 2)};
  grouped.xl = grouped.wl = grouped.yl = Layout::NHWC;
  for (const Case& c : {narrow, grouped}) {
    DtypeTensors t(c, g, DType::BFloat16);
    PlanOptions o;
    o.algorithm = Algorithm::ImplicitMma;
    o.tile = "wgmma128x128_s3_tma";
    try {
      (void)engine.plan(c.p, t.xd, t.wd, t.yd, o);
      ADD_FAILURE() << "a tensor-map tile was planned for " << c.name();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("tensor maps"), std::string::npos) << e.what();
    }
    o.tile = "mma128x128_8w_128B_tma";
    try {
      (void)engine.plan(c.p, t.xd, t.wd, t.yd, o);
      ADD_FAILURE() << "an mma.sync tile took tensor maps";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::BadParam) << e.what();
    }
  }
  // Auto on a resnet-like layer.
  Case layer{make(8, 64, 28, 28, 128, 3, 3, 1)};
  layer.xl = layer.wl = layer.yl = Layout::NHWC;
  std::string division;
  EXPECT_LT(run_mma(engine, layer, g, kPrecisions[1], "", &division), tolerance(DType::BFloat16, MathMode::Exact));
  EXPECT_NE(division.find("_tma"), std::string::npos) << division;
}

// Note [wgmma persistent tiles], [wgmma warp-specialized tiles]: every tile with the persistent or a
// warp-specialized form on the tensor-map layers above (tensor_map_cases), and on 1x1 and 3x3 layers of
// more tiles than one wave of blocks holds (each block walks several, its stages running into the
// next tile's) with partial pixel and filter tiles and the whole epilogue (beta reading y); y in
// plane order runs the plain form of the tile. A persistent tile is refused on a layer without
// tensor maps and with a split.
TEST_F(TensorCores, PersistentTilesMatchTheReference) {
  Engine engine(Target::Cuda);
  if (!wgmma_device(engine)) GTEST_SKIP() << "wgmma tiles run on sm_90 only";
  std::mt19937_64 g(test_seed() + 108);
  std::vector<Case> cases = tensor_map_cases();
  for (const Case& c : {Case{make(8, 128, 28, 28, 512, 1, 1)}, Case{make(8, 64, 27, 29, 200, 3, 3, 1)},
                        with_whole_epilogue(Case{make(8, 128, 28, 28, 512, 1, 1)})})
    cases.push_back(c);
  std::vector<std::string> tiles;
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.persistent_smem_bytes > 0) tiles.push_back(t.name() + "_tma_persistent");
  ASSERT_GE(tiles.size(), 3u);
  // Note [wgmma warp-specialized tiles]: the same layers, two consumer warpgroups on alternate tiles
  // (one tile a block on the small layers, several a warpgroup on the large ones) or on both halves
  // of every 128-pixel tile (a second half past the last pixel on the partial tiles). Note [wgmma
  // wave-fitted filter tiles]: the 208-filter tiles among them, their last filter block partial (K
  // = 48-264: a tail of 8-16 filters, or none inside K).
  for (const auto& t : detail::kMmaTileCatalog) {
    if (t.specialized_smem_bytes > 0 && t.plain_forms) tiles.push_back(t.name() + "_tma_pingpong");
    if (t.cooperative) tiles.push_back(t.name() + "_tma_cooperative");
  }
  ASSERT_GE(tiles.size(), 11u);
  EXPECT_NE(std::find(tiles.begin(), tiles.end(), "wgmma128x208_s4_tma_cooperative"), tiles.end());
  check_tiles(engine, g, cases, tiles, {kPrecisions[0], kPrecisions[1]}, 3, 0, "through a tensor map of y");
  // Cooperative tiles split among a cluster (2 and 3 slices: unequal row tiles a slice, a slice of
  // none where a layer has fewer), block 0 adding the others' partial sums: one tile a cluster on
  // the small layers, several on the large ones (the handshake's phases wrap).
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.cooperative && t.plain_forms)
      for (int split : {2, 3})
        for (size_t i = 0; i < cases.size(); ++i) {
          if (few() && i % 3 != 0) continue;
          Case c = cases[i];
          c.xl = c.wl = c.yl = Layout::NHWC;
          const std::string tile = t.name() + "_tma_cooperative";
          std::string division;
          EXPECT_LT(run_mma(engine, c, g, kPrecisions[1], tile, &division, Algorithm::ImplicitMma, split),
                    tolerance(DType::BFloat16, MathMode::Exact))
              << tile << " split " << split << " " << c.name();
          EXPECT_NE(division.find(tile), std::string::npos) << division;
        }
  // y in plane order: the plan and the call run the plain form.
  Case planes{make(4, 128, 14, 14, 256, 1, 1)};
  planes.xl = planes.wl = Layout::NHWC;
  planes.yl = Layout::NCHW;
  EXPECT_LT(run_mma(engine, planes, g, kPrecisions[1], tiles[0]), tolerance(DType::BFloat16, MathMode::Exact));
  // Refusals: no tensor maps (C = 32), and a split of a persistent tile.
  Case narrow{make(2, 32, 9, 11, 72, 3, 3, 1)};
  narrow.xl = narrow.wl = narrow.yl = Layout::NHWC;
  Case wide{make(2, 64, 9, 11, 72, 3, 3, 1)};
  wide.xl = wide.wl = wide.yl = Layout::NHWC;
  for (const auto& [c, split] : {std::pair{narrow, 0}, std::pair{wide, 2}}) {
    DtypeTensors t(c, g, DType::BFloat16);
    PlanOptions o;
    o.algorithm = Algorithm::ImplicitMma;
    o.tile = tiles[0];
    o.split_k = split;
    try {
      (void)engine.plan(c.p, t.xd, t.wd, t.yd, o);
      ADD_FAILURE() << "a persistent tile was planned for " << c.name() << " split " << split;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
    }
  }
}

// Note [wgmma tf32 stages]: TF32 on every warp-specialized tile through tensor maps, in both
// schedules, on the tensor-map layers above and one of several tiles a block (partial pixel and
// filter tiles, strides, dilation, true convolution, the whole epilogue), cooperative tiles split 2
// and 3 ways among a cluster, and SiLU. Unsplit tiles have an even count of 32-row stages (C is a
// multiple of 64); a block's slice of a split tile may not (18 stages split 2 ways: 9), which leaves
// a cooperative warpgroup's last stage without its pair in the other register set. The consumers
// round each stage to nearest: an output then lies within fp32 accumulation error of the exact
// result of the rounded inputs, where truncated inputs would put it about 1e-3 away (under the TF32
// tolerance, so that bound is the test's own).
TEST_F(TensorCores, Tf32WarpSpecializedTilesRoundTheirStages) {
  Engine engine(Target::Cuda);
  if (!wgmma_device(engine)) GTEST_SKIP() << "wgmma tiles run on sm_90 only";
  std::mt19937_64 g(test_seed() + 112);
  const Precision& tf32 = kPrecisions[2];
  ASSERT_EQ(tf32.math, MathMode::TF32);
  constexpr double kRoundedInputsBound = 2e-5;
  std::vector<Case> cases = tensor_map_cases();
  cases.push_back(Case{make(8, 128, 28, 28, 512, 1, 1)});
  Case silu{make(2, 64, 9, 11, 72, 3, 3, 1)};
  silu.act = Activation::SiLU;
  cases.push_back(silu);
  std::vector<std::pair<std::string, int>> runs;
  for (const auto& t : detail::kMmaTileCatalog) {
    if (t.specialized_smem_bytes == 0 || !t.plain_forms) continue;
    runs.push_back({t.name() + "_tma_pingpong", 0});
    if (t.cooperative)
      for (int split : {0, 2, 3}) runs.push_back({t.name() + "_tma_cooperative", split});
  }
  ASSERT_GE(runs.size(), 8u);
  for (const auto& [tile, split] : runs)
    for (size_t i = 0; i < cases.size(); ++i) {
      if (few() && i % 4 != 0) continue;
      Case c = cases[i];
      c.xl = c.wl = c.yl = Layout::NHWC;
      std::string division;
      EXPECT_LT(run_mma(engine, c, g, tf32, tile, &division, Algorithm::ImplicitMma, split), kRoundedInputsBound)
          << tile << " split " << split << " " << c.name();
      EXPECT_NE(division.find(tile), std::string::npos) << division;
      EXPECT_NE(division.find("rounding each stage to TF32"), std::string::npos) << division;
    }
  // y 16-byte misaligned: the call gathers on the same tile, still within the bound.
  Case shifted{make(2, 64, 9, 11, 72, 3, 3, 1)};
  shifted.xl = shifted.wl = shifted.yl = Layout::NHWC;
  shifted.y_offset = 2;
  EXPECT_LT(run_mma(engine, shifted, g, tf32, "wgmma128x128_s3_tma_pingpong"), kRoundedInputsBound);
  // Auto on a resnet-like layer takes the form.
  Case layer{make(8, 64, 28, 28, 128, 3, 3, 1)};
  layer.xl = layer.wl = layer.yl = Layout::NHWC;
  std::string division;
  EXPECT_LT(run_mma(engine, layer, g, tf32, "", &division), kRoundedInputsBound);
  EXPECT_NE(division.find("rounding each stage to TF32"), std::string::npos) << division;
}

// Note [wgmma wave-fitted filter tiles]: the cooperative 128x208 tile on small layers for the
// sanitizers: a tail of one 16-byte run (K = 200) and of two (K = 416: two whole tiles), a second
// tile of 8 filters (K = 216) with the whole epilogue, a second half past the last pixel (N*P*Q =
// 147), fp16 and bf16, each against the double reference.
TEST_F(TensorCores, WaveFittedFilterTileMatchesTheReference) {
  Engine engine(Target::Cuda);
  if (!wgmma_device(engine)) GTEST_SKIP() << "wgmma tiles run on sm_90 only";
  std::mt19937_64 g(test_seed() + 109);
  const std::vector<Case> cases = {Case{make(2, 64, 9, 11, 200, 3, 3, 1)}, Case{make(3, 128, 7, 7, 416, 1, 1)},
                                   with_whole_epilogue(Case{make(2, 64, 8, 8, 216, 3, 3, 1)})};
  check_tiles(engine, g, cases, {"wgmma128x208_s4_tma_cooperative"}, {kPrecisions[0], kPrecisions[1]}, 1, 0,
              "through a tensor map of y");
}

// Note [mma cluster split]: tiles' rows split among 2 to 16 blocks of a cluster, in the vector and the
// element forms, with the whole epilogue (alpha, beta, bias, ReLU), groups and partial tiles.
TEST_F(TensorCores, ClusterSplitsMatchTheReference) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 105);
  const std::vector<Case> cases = mma_edge_cases();
  const std::vector<int> splits = few() ? std::vector<int>{3, 16} : std::vector<int>{2, 3, 8, 16};
  for (const Precision& pr : kPrecisions)
    for (const char* tile : {"mma128x256_8w_128B", "mma64x64_4w_64B"})
      for (int split : splits)
        for (size_t i = few() ? cases.size() - 2 : 0; i < cases.size(); ++i)
          for (Layout l : {Layout::NHWC, Layout::NCHW}) {
            Case c = cases[i];
            c.xl = c.wl = c.yl = l;
            std::string division;
            EXPECT_LT(run_mma(engine, c, g, pr, tile, &division, Algorithm::ImplicitMma, split),
                      tolerance(pr.dtype, pr.math))
                << pr.name << " " << tile << " split " << split << " " << c.name();
            EXPECT_NE(division.find("cluster split " + std::to_string(split)), std::string::npos) << division;
          }
}

// Stage 4's 3x3 layer (a long reduction, few 128x256 tiles) at batch 8: the 128x256 tile the planner
// picks at batch 32 (PlanDtypes.LongReductionsOnFewLargeTilesSplitInACluster), split 4 ways in a
// cluster over tensor-map loads, with and without the whole epilogue.
TEST_F(TensorCores, LongReductionsSplitTheLargestTile) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 106);
  Case c{make(8, 512, 7, 7, 512, 3, 3, 1)};
  c.xl = c.wl = c.yl = Layout::NHWC;
  for (const Precision& pr : {kPrecisions[0], kPrecisions[1]})
    for (const Case& k : {c, with_whole_epilogue(c)}) {
      std::string division;
      EXPECT_LT(run_mma(engine, k, g, pr, "wgmma128x256_s4_tma", &division, Algorithm::ImplicitMma, 4),
                tolerance(pr.dtype, pr.math))
          << pr.name << " " << k.name();
      EXPECT_NE(division.find("wgmma128x256_s4_tma_cs4"), std::string::npos) << division;
    }
}

// fp16/bf16 depthwise layers with channels-last x and y: Auto picks single_channel's channels-last
// kernel (Note [channels-last depthwise]); with x one element off 16 bytes it goes a channel at a time.
TEST_F(TensorCores, ChannelsLastDepthwiseKernel) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 104);
  std::vector<Case> cases;
  for (int64_t c : {8, 24, 96, 136})
    for (auto [r, s] : {std::pair{3, 3}, {5, 5}, {7, 7}, {1, 1}, {3, 5}})
      for (int64_t stride : {1, 2}) cases.push_back({make(2, c, 13, 11, c, r, s, r / 2, stride, 1, c)});
  cases.push_back({make(1, 16, 9, 9, 16, 3, 3, 2, 1, 2, 16)});      // dilation 2
  cases.push_back({make(3, 32, 7, 5, 32, 3, 3, 0, 1, 1, 32)});      // no padding, Q = 3: a partial group
  cases.push_back({make(1, 64, 1, 1, 64, 3, 3, 1, 1, 1, 64)});      // 1x1 map, all padding around it
  cases.push_back({make(1, 576, 5, 30, 576, 7, 7, 3, 1, 1, 576)});  // many channels, 9 chunks
  cases.push_back({make(2, 12, 6, 6, 12, 3, 3, 1, 1, 1, 12)});      // C not a multiple of 8
  // Note [channels-last row window]: stride-2 grids large enough for two output rows a thread, odd P
  // and Q (a last row group and a last column group half outside y), 3x3 to 7x7; a stride-1 grid of
  // the same size (one row a thread).
  cases.push_back({make(8, 256, 65, 65, 256, 3, 3, 1, 1, 1, 256)});
  cases.push_back({make(8, 256, 129, 129, 256, 3, 3, 1, 2, 1, 256)});
  cases.push_back({make(8, 128, 133, 125, 128, 5, 5, 2, 2, 1, 128)});
  cases.push_back({make(16, 64, 131, 131, 64, 7, 7, 3, 2, 1, 64)});
  // The whole epilogue, on one row a thread and on two.
  for (const Problem& p : {make(2, 40, 8, 8, 40, 3, 3, 1, 1, 1, 40), make(8, 256, 129, 129, 256, 3, 3, 1, 2, 1, 256)})
    cases.push_back(with_whole_epilogue(Case{p}));
  Case conv{make(1, 16, 7, 9, 16, 3, 5, 1, 1, 1, 16)};
  conv.p.mode = Mode::Convolution;
  cases.push_back(conv);
  // Note [channels-last staged tile]: maps the tiles cover with the last ones partly outside y, chunks
  // of 1, 2, 4 and 8 vectors (each its own padded window pitch) and three chunks, 3x3 to 7x7 at
  // strides 1 and 2, the whole epilogue and a true convolution; 7 x 7 maps at stride 1 on tiles of
  // two outputs a thread (3x3 to 7x7 filters, many chunks).
  Case tiled_conv{make(2, 64, 28, 28, 64, 7, 7, 3, 1, 1, 64)};
  tiled_conv.p.mode = Mode::Convolution;
  const std::vector<Case> tiled{Case{make(1, 8, 30, 120, 8, 3, 3, 1, 1, 1, 8)},
                                Case{make(2, 16, 30, 60, 16, 5, 5, 2, 1, 1, 16)},
                                Case{make(2, 32, 61, 63, 32, 7, 7, 3, 2, 1, 32)},
                                Case{make(2, 64, 29, 29, 64, 3, 3, 1, 2, 1, 64)},
                                Case{make(1, 192, 28, 28, 192, 5, 5, 2, 1, 1, 192)},
                                Case{make(2, 64, 30, 30, 64, 5, 5, 2, 2, 1, 64)},
                                with_whole_epilogue(Case{make(2, 48, 56, 56, 48, 3, 3, 1, 1, 1, 48)}),
                                tiled_conv,
                                Case{make(4, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960)},
                                Case{make(2, 1152, 7, 7, 1152, 5, 5, 2, 1, 1, 1152)},
                                Case{make(1, 768, 7, 7, 768, 7, 7, 3, 1, 1, 768)}};
  cases.insert(cases.end(), tiled.begin(), tiled.end());
  // Note [channels-last shared input]: single-channel layers (C = 1, K filters) and channel
  // multipliers of 8 and 16, where a vector of filters shares one x value: 1x1 to 7x7, strides 1 and
  // 2 (two rows a thread on the large grid), dilation, many filters (several chunks), the whole
  // epilogue, and a multiplier of 2, which runs on implicit_mma.
  for (auto [r, stride] : {std::pair{1, 1}, {3, 1}, {5, 1}, {7, 2}, {3, 2}})
    cases.push_back({make(2, 1, 23, 19, 32, r, r, r / 2, stride)});
  cases.push_back({make(16, 1, 131, 129, 16, 3, 3, 1, 2)});
  cases.push_back({make(1, 1, 17, 30, 520, 5, 5, 2, 1, 2)});
  cases.push_back(with_whole_epilogue(Case{make(2, 1, 12, 12, 64, 3, 3, 1)}));
  cases.push_back({make(2, 4, 11, 9, 32, 3, 3, 1, 1, 1, 4)});
  cases.push_back({make(2, 6, 10, 10, 96, 5, 5, 2, 2, 1, 6)});
  cases.push_back({make(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 8)});
  Case single_conv{make(1, 1, 9, 7, 24, 3, 5, 1)};
  single_conv.p.mode = Mode::Convolution;
  cases.push_back(single_conv);
  for (const Precision& pr : kPrecisions) {
    if (pr.dtype == DType::Float32) continue;
    for (Case c : cases)
      for (int offset : {0, 1, 2}) {
        // x one element off 16 bytes; then y (a channel at a time, a shared x value or not).
        c.xl = c.wl = c.yl = Layout::NHWC;
        c.x_offset = offset == 1;
        c.y_offset = offset == 2;
        std::string division;
        EXPECT_LT(run_mma(engine, c, g, pr, "", &division, Algorithm::Auto), tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name();
        // C = 12 is no whole number of 16-byte vectors, and a multiplier of 2 no whole vector of filters
        // sharing one x value: implicit_mma runs them.
        const int64_t kg = c.p.k_per_group();
        const bool channels_last = c.p.k % 8 == 0 && (kg == 1 || kg % 8 == 0);
        const std::string want = channels_last ? "single_channel_channels_last\n" : "mma";
        EXPECT_EQ(division.rfind(want, 0), 0u) << c.name() << ": " << division;
        if (offset == 0 &&
            std::any_of(tiled.begin(), tiled.end(), [&](const Case& t) { return t.p.to_string() == c.p.to_string(); }))
          EXPECT_NE(division.find("tiles of"), std::string::npos) << c.name() << ": " << division;
      }
  }
}

// fp16/bf16 depthwise layers in plane order run single_channel's plane streams with x's dtype in
// shared memory (Note [plane stream], [plane bulk]): both variants forced, and the default, on whole
// planes and bands, strides 1 and 2 (paired reads at 2), W a multiple of 8 (16-byte copies), even
// (4-byte copies) and odd (element copies), x 0-7 elements past 16 bytes (the bulk copy's head and
// tail, the plane stream's narrower copies), 1x1 to 7x7, padding wider than the halo, the CNHW plane
// order, y in the other one, a true convolution, beta, bias and ReLU; then planes at no constant
// distance.
TEST_F(TensorCores, PlaneStreamsInHalfPrecision) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 105);
  std::vector<Problem> shapes{
      make(2, 601, 7, 7, 601, 3, 3, 1, 1, 1, 601),  make(2, 16, 112, 112, 16, 3, 3, 1, 1, 1, 16),
      make(2, 12, 112, 112, 12, 3, 3, 1, 2, 1, 12), make(3, 40, 14, 14, 40, 5, 5, 2, 2, 1, 40),
      make(2, 6, 9, 9, 6, 3, 3, 1, 1, 1, 6),        make(2, 8, 10, 10, 8, 3, 3, 0, 2, 1, 8),
      make(2, 3, 11, 11, 3, 3, 3, 2, 1, 1, 3),      make(2, 4, 37, 41, 4, 7, 7, 3, 2, 1, 4),
      make(1, 2, 12, 12, 2, 1, 1, 0, 1, 1, 2),      make(1, 3, 130, 64, 3, 5, 5, 2, 1, 1, 3),
      make(4, 96, 28, 28, 96, 3, 3, 1, 2, 1, 96),   make(2, 6, 24, 28, 6, 5, 5, 2, 2, 1, 6),
      make(2, 4, 28, 28, 4, 7, 7, 3, 1, 1, 4),      make(1, 2, 5, 3000, 2, 3, 3, 1, 1, 1, 2)};
  if (few()) shapes.resize(8);
  for (const Precision& pr : kPrecisions) {
    if (pr.dtype == DType::Float32) continue;
    for (size_t i = 0; i < shapes.size(); ++i)
      for (int l = 0; l < 4; ++l) {
        Case c{shapes[i]};
        c.xl = c.wl = c.yl = l == 1 ? Layout::CNHW : Layout::NCHW;
        if (l == 3) c.yl = Layout::CNHW;  // y in the other plane order
        c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
        c.beta = l == 2 ? 0.5f : 0.0f;
        c.bias = l >= 2;
        c.act = l == 3 ? Activation::ReLU : Activation::Identity;
        c.x_offset = static_cast<int>((i + l) % 8);
        for (const std::string tile : {detail::kPlaneStreamTile, detail::kPlaneBulkTile, ""}) {
          std::string division;
          EXPECT_LT(
              run_mma(engine, c, g, pr, tile, &division, tile.empty() ? Algorithm::Auto : Algorithm::SingleChannel),
              tolerance(pr.dtype, pr.math))
              << pr.name << " " << tile << " " << c.name();
          const std::string want = !tile.empty()                       ? tile
                                   : detail::plane_bulk_preferred(c.p) ? detail::kPlaneBulkTile
                                                                       : detail::kPlaneStreamTile;
          EXPECT_EQ(division.rfind(want + "\n", 0), 0u) << c.name() << ": " << division;
        }
      }
    // Planes at no constant distance: the plane stream splits every copy's index (the bulk variant
    // needs packed rows).
    for (size_t i = 0; i < 4; ++i) {
      Case c{shapes[i]};
      c.strided_x = true;
      std::string division;
      EXPECT_LT(run_mma(engine, c, g, pr, "", &division, Algorithm::Auto), tolerance(pr.dtype, pr.math))
          << pr.name << " " << c.name();
      EXPECT_EQ(division.rfind(std::string(detail::kPlaneStreamTile) + "\n", 0), 0u) << c.name() << ": " << division;
    }
  }
}

// direct_block in fp16/bf16 (Note [vector halo], [packed groups]): channel multipliers of 2-4 in
// plane order, rectangular and dilated depthwise filters, stride 3, every thread shape (wide maps,
// maps of at most 16 and of at most 8 with packed groups, 4 filters a thread), x 0-7 elements past
// 16 bytes (16-byte copies only at 0 with W a multiple of 8), the CNHW order, y in another layout, a
// true convolution, beta, bias and ReLU; Auto picks it for the multipliers.
TEST_F(TensorCores, DirectBlockInHalfPrecision) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 106);
  std::vector<Problem> shapes{make(2, 8, 40, 48, 16, 3, 3, 1, 1, 1, 8),    make(2, 6, 14, 14, 18, 3, 3, 1, 1, 1, 6),
                              make(2, 300, 7, 7, 600, 3, 3, 1, 1, 1, 300), make(1, 4, 24, 32, 16, 5, 5, 2, 1, 1, 4),
                              make(2, 8, 21, 19, 8, 2, 3, 1, 1, 1, 8),     make(2, 8, 20, 20, 8, 3, 3, 2, 1, 2, 8),
                              make(2, 8, 22, 22, 8, 3, 3, 1, 3, 1, 8),     make(1, 16, 64, 72, 32, 7, 7, 3, 2, 1, 16)};
  for (const Precision& pr : kPrecisions) {
    if (pr.dtype == DType::Float32) continue;
    for (size_t i = 0; i < shapes.size(); ++i)
      for (int l = 0; l < (few() ? 2 : 4); ++l) {
        Case c{shapes[i]};
        c.xl = c.wl = c.yl = l == 1 ? Layout::CNHW : Layout::NCHW;
        if (l == 3) c.yl = Layout::NHWC;  // y may be any layout: the stores are scalar
        c.p.mode = l == 1 ? Mode::Convolution : Mode::CrossCorrelation;
        c.beta = l == 2 ? 0.5f : 0.0f;
        c.bias = l >= 2;
        c.act = l == 3 ? Activation::ReLU : Activation::Identity;
        c.x_offset = static_cast<int>((i + l) % 8);
        std::string division;
        EXPECT_LT(run_mma(engine, c, g, pr, "", &division, Algorithm::DirectBlock), tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name();
        EXPECT_EQ(division.rfind("direct_", 0), 0u) << c.name() << ": " << division;
        if (c.p.k_per_group() > 1) {  // Auto: the multipliers in plane order
          EXPECT_LT(run_mma(engine, c, g, pr, "", &division, Algorithm::Auto), tolerance(pr.dtype, pr.math))
              << pr.name << " " << c.name();
          EXPECT_EQ(division.rfind("direct_", 0), 0u) << c.name() << ": " << division;
        }
      }
  }
}

// few_channel (Note [few-channel forward]), which Auto gives fp16/bf16/TF32 layers of 2 to 4 input
// channels: a scaled-down ResNet stem (7x7 stride 2, a partial tile of columns), 1 to 4 channels,
// dilation, 11x11 at stride 4 (363 columns: 23 MMA steps), a 1x1 layer (one step, mostly masked
// columns), filters past one and two 64-filter blocks and an odd K (element stores), in every
// layout and channels-last x under plane-order y; x one element off (the window's word shift) and
// strided (element copies), y one element off, the whole epilogue and a true convolution.
TEST_F(TensorCores, FewChannelForwardMatchesTheReference) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 108);
  const std::vector<Problem> shapes{
      make(2, 3, 40, 38, 64, 7, 7, 3, 2),  make(2, 1, 20, 21, 16, 3, 3, 1), make(1, 2, 17, 33, 72, 5, 5, 4, 1, 2),
      make(2, 4, 12, 12, 130, 3, 3, 1, 2), make(1, 3, 9, 9, 8, 1, 1),       make(2, 3, 47, 51, 24, 11, 11, 5, 4),
      make(2, 3, 15, 15, 5, 3, 3, 1)};
  for (const Precision& pr : kPrecisions)  // fp16, bf16 and TF32
    for (size_t i = 0; i < shapes.size(); ++i)
      for (int l = 0; l < (few() ? 2 : 6); ++l) {
        Case c{shapes[i]};
        const Layout layouts[] = {Layout::NHWC, Layout::NCHW, Layout::CNHW};
        c.xl = c.wl = c.yl = layouts[l % 3];
        if (l == 3) c.yl = Layout::NCHW;  // channels-last x and w under plane-order y
        if (l == 4) c = with_whole_epilogue(c), c.x_offset = 1, c.y_offset = 1;
        if (l == 5) c.strided_x = true, c.p.mode = Mode::Convolution;
        std::string division;
        // (Auto keeps single-channel layers on single_channel's kernels)
        const Algorithm a = c.p.c == 1 ? Algorithm::FewChannel : Algorithm::Auto;
        EXPECT_LT(run_mma(engine, c, g, pr, "", &division, a), tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name();
        EXPECT_EQ(division.rfind("few_channel_", 0), 0u) << c.name() << ": " << division;
      }
}

// few_filter (Note [few-filter forward]), which Auto gives fp16/bf16 layers of at most 8 filters
// (few_filter_preferred): an RGB output head (3x3, K = 3), one filter (1x1, forced), 8 filters at
// 5x5 with dilation 2, C = 8 (half a 16-channel step), C = 200 (four chunks, the last partial: both buffers), stride 2
// at 7x7 (a window at twice the pitch), K = 5 on a partial column tile; each in NHWC, x one element off (element
// copies), plane-order y with the whole epilogue, x in plane order (forced: element copies from strided channels) and a
// true convolution under channels-last x.
TEST_F(TensorCores, FewFilterMatchesTheReference) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 109);
  const std::vector<Problem> shapes{make(2, 64, 33, 35, 3, 3, 3, 1),       make(1, 32, 20, 21, 1, 1, 1),
                                    make(2, 16, 19, 23, 8, 5, 5, 4, 1, 2), make(2, 8, 12, 40, 3, 3, 3, 1),
                                    make(1, 200, 14, 15, 4, 3, 3, 1),      make(2, 24, 30, 31, 6, 7, 7, 3, 2),
                                    make(3, 48, 9, 70, 5, 3, 3, 1)};
  for (const Precision& pr : kPrecisions) {
    if (pr.dtype == DType::Float32) continue;
    for (size_t i = 0; i < shapes.size(); ++i)
      for (int v = 0; v < (few() ? 2 : 5); ++v) {
        Case c{shapes[i]};
        c.xl = c.wl = c.yl = Layout::NHWC;
        if (v == 1) c.x_offset = 1;
        if (v == 2) c = with_whole_epilogue(c), c.yl = Layout::NCHW, c.y_offset = 1;
        if (v == 3) c.xl = Layout::NCHW;
        if (v == 4) c.p.mode = Mode::Convolution, c.wl = Layout::NCHW;
        std::string division;
        // (Auto keeps 1x1 layers in plane order on implicit_mma's GEMM tiles)
        const Algorithm a = v == 3 || c.p.r * c.p.s == 1 ? Algorithm::FewFilter : Algorithm::Auto;
        EXPECT_LT(run_mma(engine, c, g, pr, "", &division, a), tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name() << " variant " << v;
        EXPECT_EQ(division.rfind("few_filter_", 0), 0u) << c.name() << ": " << division;
      }
  }
}

// window_mma (Note [window mma]), forced (Auto keeps implicit_mma): 3x3 over a 14x14 batch (the last
// block partial, a cluster split of 2), 7x7 images that a block crosses (256 x 64 blocks, K off the
// tile), stride 2 with C off the chunk, 5x5 at dilation 2, 1x1, a late stage's 256 channels (a split
// of 4), a 3x5 filter, an RGB stem (5x5 stride 2, C = 3); each in NCHW (3x3 filters: 16-byte filter
// loads), x one element off, channels-last y with the whole epilogue, a true convolution (element
// copies of rotated filters), KRSC w and channels-last x (copies from strided planes).
TEST_F(TensorCores, WindowMmaMatchesTheReference) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 110);
  const Precision tf32{DType::Float32, MathMode::TF32, "tf32"};
  const std::vector<Problem> shapes{make(2, 64, 14, 14, 128, 3, 3, 1),   make(3, 16, 7, 7, 40, 3, 3, 1),
                                    make(2, 12, 20, 23, 72, 3, 3, 1, 2), make(1, 40, 17, 19, 64, 5, 5, 4, 1, 2),
                                    make(2, 32, 9, 10, 96, 1, 1),        make(2, 256, 7, 7, 256, 3, 3, 1),
                                    make(1, 24, 11, 30, 48, 3, 5, 1),    make(2, 3, 30, 30, 64, 5, 5, 2, 2)};
  for (size_t i = 0; i < shapes.size(); ++i)
    for (int v = 0; v < (few() ? 2 : 6); ++v) {
      Case c{shapes[i]};
      c.xl = c.wl = c.yl = Layout::NCHW;
      if (v == 1) c.x_offset = 1;
      if (v == 2) c = with_whole_epilogue(c), c.yl = Layout::NHWC, c.y_offset = 1;
      if (v == 3) c.p.mode = Mode::Convolution;
      if (v == 4) c.wl = Layout::NHWC;
      if (v == 5) c.xl = Layout::NHWC;
      std::string division;
      EXPECT_LT(run_mma(engine, c, g, tf32, "", &division, Algorithm::WindowMma), tolerance(tf32.dtype, tf32.math))
          << c.name() << " variant " << v;
      EXPECT_EQ(division.rfind("window_mma_", 0), 0u) << c.name() << " variant " << v << ": " << division;
    }
}

// single_channel's strip kernel in fp16/bf16 (x and filters widened to fp32 in shared memory):
// single-channel layers (C = 1) and channel multipliers of 8 in plane order, 1x1 to 7x7 with the
// window in registers and the generic path (rectangular, dilated), strides 1 and 2, column pairs
// (2-element stores) and single columns (y one element off), 4-element strip copies (x aligned for
// 8 bytes, pad_w a multiple of 4) and element copies, several filter chunks and row strips, the
// whole epilogue, a true convolution; Auto takes it for those with filters below 5x5.
TEST_F(TensorCores, StripKernelInHalfPrecision) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 107);
  std::vector<Case> cases;
  for (auto [r, stride] : {std::pair{1, 1}, {3, 1}, {5, 1}, {7, 2}, {3, 2}})
    cases.push_back({make(2, 1, 23, 20, 32, r, r, r / 2, stride)});
  cases.push_back({make(2, 1, 64, 64, 24, 3, 3, 4)});           // pad_w 4: 4-element copies
  cases.push_back({make(1, 1, 130, 128, 96, 5, 5, 2)});         // row strips and filter chunks
  cases.push_back({make(2, 1, 17, 30, 520, 5, 5, 2, 1, 2)});    // dilation: the generic path
  cases.push_back({make(2, 1, 19, 21, 40, 2, 3, 1)});           // rectangular: the generic path
  cases.push_back({make(2, 4, 16, 16, 32, 3, 3, 1, 1, 1, 4)});  // multiplier 8 in plane order
  cases.push_back(with_whole_epilogue(Case{make(2, 1, 12, 12, 64, 3, 3, 1)}));
  Case conv{make(1, 1, 9, 8, 24, 3, 5, 1)};
  conv.p.mode = Mode::Convolution;
  cases.push_back(conv);
  for (const Precision& pr : kPrecisions) {
    if (pr.dtype == DType::Float32) continue;
    for (size_t i = 0; i < cases.size(); ++i)
      for (int v = 0; v < 3; ++v) {
        Case c = cases[i];
        c.xl = c.wl = c.yl = Layout::NCHW;
        c.x_offset = v == 1 ? 1 : 0;  // element copies
        c.y_offset = v == 2 ? 1 : 0;  // single columns
        std::string division;
        EXPECT_LT(run_mma(engine, c, g, pr, detail::kSingleChannelPaperTile, &division, Algorithm::SingleChannel),
                  tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name();
        EXPECT_EQ(division.rfind("single_channel_m", 0), 0u) << c.name() << ": " << division;
        EXPECT_LT(run_mma(engine, c, g, pr, "", &division, Algorithm::Auto), tolerance(pr.dtype, pr.math))
            << pr.name << " " << c.name();
        // (Auto keeps 5x5 and larger filters off 1-row runs without column pairs, as in fp32.)
        if (c.p.r * c.p.s < 25)
          EXPECT_EQ(division.rfind("single_channel_m", 0), 0u) << "Auto: " << c.name() << ": " << division;
      }
  }
}

TEST_F(TensorCores, VectorAndElementGathersAgree) {
  // Channels-last with C/G a multiple of a vector takes the 16-byte gather (TF32 the copy engine's
  // loads, Note [wgmma tf32 stages], on sm_90); the same layer with x one element off a 16-byte
  // boundary takes the element gather (the launcher checks the pointers).
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 101);
  for (const Precision& pr : kPrecisions) {
    Case c{make(2, 64, 10, 10, 96, 3, 3, 1)};
    c.xl = c.wl = c.yl = Layout::NHWC;
    std::string division;
    EXPECT_LT(run_mma(engine, c, g, pr, "", &division), tolerance(pr.dtype, pr.math)) << pr.name;
    const bool tf32_maps = pr.math == MathMode::TF32 && wgmma_device(engine);
    EXPECT_NE(division.find(tf32_maps ? "x im2col tensor map" : "gather vector/vector"), std::string::npos) << division;
    c.x_offset = 1;
    EXPECT_LT(run_mma(engine, c, g, pr), tolerance(pr.dtype, pr.math)) << pr.name << " misaligned x";
  }
}

// Note [mma tf32 pixel runs]: 1x1 layers in NCHW on every element-gather tile and precision: runs of
// pixels that end inside a tile (N*P*Q off the tile), K off the tile, one to many stages, C/G a run
// and a half, groups, the whole epilogue, y channels-last; where the runs do not fit (H*W or C/G not
// whole runs, x misaligned) the element gather, still exact.
TEST_F(TensorCores, OneByOnePlanesAsPixelRuns) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 108);
  std::vector<Case> cases = {
      Case{make(2, 64, 14, 14, 96, 1, 1)}, Case{make(3, 24, 8, 12, 40, 1, 1)},
      Case{make(1, 264, 4, 4, 136, 1, 1)}, Case{make(2, 64, 8, 8, 64, 1, 1, 0, 1, 1, 2)},
      Case{make(2, 12, 10, 10, 24, 1, 1)}, with_whole_epilogue(Case{make(2, 32, 16, 16, 48, 1, 1)})};
  Case channels_last_y = cases[1];
  channels_last_y.yl = Layout::NHWC;
  // The element tiles (mma.sync, fragments from padded rows) and on sm_90 the wgmma tiles (TF32 A
  // in registers, 16-bit A M-major in shared memory).
  const bool sm90 = engine.hardware().cc_major == 9 && engine.hardware().cc_minor == 0;
  std::vector<std::string> tiles;
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.element_gather || (t.warpgroup && t.plain_forms && sm90)) tiles.push_back(t.name());
  if (few()) tiles = {tiles.front(), "mma64x64_4w_64B"};
  if (few() && sm90) tiles.insert(tiles.end(), {"wgmma128x256_s4", "wgmma64x128_s3"});
  for (const Precision& pr : kPrecisions) {
    const int64_t run = 16 / dtype_size(pr.dtype);
    for (const std::string& tile : tiles)
      for (size_t i = 0; i <= cases.size(); ++i) {
        Case c = i < cases.size() ? cases[i] : channels_last_y;
        c.xl = c.wl = Layout::NCHW;
        if (i < cases.size()) c.yl = Layout::NCHW;
        std::string division;
        EXPECT_LT(run_mma(engine, c, g, pr, tile, &division), tolerance(pr.dtype, pr.math))
            << pr.name << " " << tile << " " << c.name();
        const bool runs = (c.p.h * c.p.w) % run == 0 && c.p.c_per_group() % run == 0;
        EXPECT_EQ(division.find("gather transposed/vector") != std::string::npos, runs)
            << pr.name << " " << c.name() << "\n"
            << division;
      }
    Case shifted = cases[0];
    shifted.xl = shifted.wl = shifted.yl = Layout::NCHW;
    shifted.x_offset = 1;  // the launcher runs the element gather
    EXPECT_LT(run_mma(engine, shifted, g, pr), tolerance(pr.dtype, pr.math)) << pr.name << " misaligned x";
  }
  // The planner's tile on a resnet-like layer: a wgmma one on sm_90.
  Case layer{make(4, 128, 28, 28, 256, 1, 1)};
  std::string division;
  EXPECT_LT(run_mma(engine, layer, g, kPrecisions[2], "", &division), tolerance(DType::Float32, MathMode::TF32));
  EXPECT_NE(division.find("gather transposed/vector"), std::string::npos) << division;
  if (sm90) EXPECT_NE(division.find("wgmma"), std::string::npos) << division;
}

// Note [mma filter rows] (planner.cpp): NCHW layers whose images stay single elements (3x3, strided,
// a 7x7 map's 1x1, dilation, groups) copy w's KCRS rows as 16-byte vectors on every element-gather
// tile and precision, with K off the tile, many stages, the whole epilogue and a channels-last y.
// Where C/G*R*S is not whole vectors, the filter is flipped, or x is misaligned, the other gathers
// run, still exact.
TEST_F(TensorCores, ElementImagesWithFilterRowVectors) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 109);
  std::vector<Case> cases = {
      Case{make(2, 16, 9, 11, 40, 3, 3, 1)},         Case{make(2, 64, 7, 7, 72, 1, 1)},
      Case{make(3, 8, 13, 12, 24, 3, 3, 1, 2)},      Case{make(2, 24, 8, 8, 36, 3, 3, 1, 1, 1, 3)},
      Case{make(1, 40, 10, 10, 136, 3, 3, 2, 1, 2)}, with_whole_epilogue(Case{make(2, 32, 6, 6, 48, 3, 3, 1)}),
      Case{make(2, 3, 12, 12, 16, 3, 3, 1)},         Case{make(1, 4, 11, 9, 20, 3, 3, 1)}};
  Case channels_last_y = cases[0];
  channels_last_y.yl = Layout::NHWC;
  cases.push_back(channels_last_y);
  Case flipped = cases[0];
  flipped.p.mode = Mode::Convolution;
  cases.push_back(flipped);
  std::vector<std::string> tiles = {""};  // the planner's, then every element-gather tile
  for (const auto& t : detail::kMmaTileCatalog)
    if (t.element_gather) tiles.push_back(t.name());
  if (few()) tiles = {"", "mma64x64_4w_64B", "mma128x16_4w_128B"};
  for (const Precision& pr : kPrecisions) {
    const int64_t v = 16 / dtype_size(pr.dtype);
    for (const std::string& tile : tiles)
      for (Case c : cases) {
        c.xl = c.wl = Layout::NCHW;
        std::string division;
        EXPECT_LT(run_mma(engine, c, g, pr, tile, &division), tolerance(pr.dtype, pr.math))
            << pr.name << " " << (tile.empty() ? "planner's tile" : tile) << " " << c.name();
        const bool rows = (c.p.c_per_group() * c.p.r * c.p.s) % v == 0 && c.p.mode != Mode::Convolution;
        EXPECT_EQ(division.find("gather element/vector") != std::string::npos, rows)
            << pr.name << " " << c.name() << "\n"
            << division;
      }
    Case shifted = cases[0];
    shifted.xl = shifted.wl = shifted.yl = Layout::NCHW;
    shifted.x_offset = 1;  // element images need no alignment: the filter rows stay vectors
    EXPECT_LT(run_mma(engine, shifted, g, pr), tolerance(pr.dtype, pr.math)) << pr.name << " misaligned x";
  }
}

TEST_F(TensorCores, RandomProblems) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 102);
  const int count = few() ? 20 : 150;
  for (int i = 0; i < count; ++i) {
    Case c = random_case(g);
    if (i % 2 == 0) c.xl = c.wl = c.yl = Layout::NHWC;  // the fast path half of the time
    const Precision& pr = kPrecisions[i % 3];
    EXPECT_LT(run_mma(engine, c, g, pr), tolerance(pr.dtype, pr.math)) << pr.name << " " << c.name();
  }
}

TEST_F(TensorCores, LargeReductionStaysAccurate) {
  // C*R*S = 4608 products per output: fp32 accumulation keeps the error at the inputs' rounding.
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 103);
  Case c{make(2, 512, 7, 7, 128, 3, 3, 1)};
  c.xl = c.wl = c.yl = Layout::NHWC;
  for (const Precision& pr : kPrecisions)
    EXPECT_LT(run_mma(engine, c, g, pr), tolerance(pr.dtype, pr.math) / 2) << pr.name;
}

TEST_F(TensorCores, GraphCaptureReplays) {
  // Planning sets everything up (table upload, shared-memory limits): the launch itself captures.
  Engine engine(Target::Cuda);
  const Problem p = make(2, 32, 9, 9, 48, 3, 3, 1);
  const TensorDesc xd = p.x_desc(Layout::NHWC, DType::BFloat16), wd = p.w_desc(Layout::NHWC, DType::BFloat16),
                   yd = p.y_desc(Layout::NHWC, DType::BFloat16);
  auto plan = engine.plan(p, xd, wd, yd);
  DeviceBytes dx(xd.span_elements() * 2), dw(wd.span_elements() * 2), dy(yd.span_elements() * 2);
  ASSERT_TRUE(dx.ptr && dw.ptr && dy.ptr);
  CUDA_OK(cudaMemset(dx.ptr, 0, xd.span_elements() * 2));
  CUDA_OK(cudaMemset(dw.ptr, 0, wd.span_elements() * 2));
  CUDA_OK(cudaMemset(dy.ptr, 0xff, yd.span_elements() * 2));  // NaN in bf16
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  engine.set_stream(s);
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  engine.conv2d_forward(*plan, dx.ptr, dw.ptr, dy.ptr);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<uint16_t> out(yd.span_elements());
  CUDA_OK(cudaMemcpy(out.data(), dy.ptr, out.size() * 2, cudaMemcpyDeviceToHost));
  for (uint16_t v : out) ASSERT_EQ(v, 0) << "zero inputs give +0 everywhere";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  engine.set_stream(nullptr);
  cudaStreamDestroy(s);
}

// Note [fused silu]: SiLU in every forward family and each dtype it runs. Fused: direct_block and
// single_channel's strip, plane-stream, plane-bulk and channels-last kernels (the bulk one and
// direct_block as their SiLU instances, the others through their general stores). Identity, then the
// in-place pass over y: the implicit GEMMs with their splits forced (atomic slices included, which
// run whole under a fused activation), stride_fixed where its planner splits, the tensor-core
// families on their wgmma, mma.sync and window tiles. Each with SiLU alone (the kernels' common-case
// stores) and under the whole epilogue (alpha, beta reading y, bias), against the double reference,
// y NaN-poisoned.
TEST_F(TensorCores, SiluInEveryFamily) {
  Engine engine(Target::Cuda);
  std::mt19937_64 g(test_seed() + 111);
  const Precision fp32{DType::Float32, MathMode::Exact, "fp32"}, tf32{DType::Float32, MathMode::TF32, "tf32"},
      bf16{DType::BFloat16, MathMode::Exact, "bf16"}, fp16{DType::Float16, MathMode::Exact, "fp16"};
  struct Entry {
    Problem p;
    Layout layout;
    Precision precision;
    Algorithm algorithm;
    std::string tile;
    int split_k;
  };
  std::vector<Entry> entries{
      {make(2, 16, 9, 11, 24, 3, 3, 1), Layout::NCHW, fp32, Algorithm::ImplicitPrecomp, "", 3},
      {make(2, 8, 20, 20, 8, 3, 3, 1, 1, 1, 8), Layout::NCHW, fp32, Algorithm::DirectBlock, "", 0},
      {make(2, 8, 20, 20, 8, 3, 3, 1, 1, 1, 8), Layout::NCHW, bf16, Algorithm::DirectBlock, "", 0},
      {make(2, 1, 30, 33, 8, 3, 3, 1), Layout::NCHW, fp32, Algorithm::SingleChannel, "", 0},
      {make(2, 1, 30, 33, 8, 3, 3, 1), Layout::NCHW, fp16, Algorithm::SingleChannel, "", 0},
      {make(2, 32, 40, 40, 32, 3, 3, 1, 1, 1, 32), Layout::NCHW, bf16, Algorithm::SingleChannel, "", 0},
      {make(2, 32, 40, 40, 32, 3, 3, 1, 1, 1, 32), Layout::NCHW, fp16, Algorithm::SingleChannel,
       "single_channel_planes", 0},
      {make(2, 32, 40, 40, 32, 5, 5, 2, 2, 1, 32), Layout::NCHW, fp32, Algorithm::SingleChannel, "", 0},
      {make(2, 64, 20, 20, 64, 3, 3, 1, 1, 1, 64), Layout::NHWC, bf16, Algorithm::SingleChannel, "", 0},
      {make(1, 32, 14, 14, 64, 3, 3, 1), Layout::NCHW, fp32, Algorithm::StrideFixed, "", 0},  // 2 slices
      {make(2, 64, 14, 14, 128, 3, 3, 1), Layout::NHWC, bf16, Algorithm::ImplicitMma, "", 0},
      {make(2, 64, 14, 14, 128, 3, 3, 1), Layout::NHWC, fp16, Algorithm::ImplicitMma, "", 4},
      {make(2, 24, 9, 11, 40, 3, 3, 1), Layout::NCHW, fp16, Algorithm::ImplicitMma, "mma64x64_4w_64B", 0},
      {make(2, 24, 9, 11, 40, 3, 3, 1), Layout::NCHW, tf32, Algorithm::ImplicitMma, "", 0},
      {make(2, 3, 40, 38, 64, 7, 7, 3, 2), Layout::NHWC, bf16, Algorithm::FewChannel, "", 0},
      {make(2, 64, 33, 35, 3, 3, 3, 1), Layout::NHWC, bf16, Algorithm::FewFilter, "", 0},
  };
  // Note [fused silu]: implicit_mma's tiles that store y from a shared-memory buffer apply SiLU to it:
  // persistent, ping-pong, cooperative (also split among a cluster of 2) and the 208-filter tile
  // (a partial last filter block), with partial pixel and filter tiles.
  if (wgmma_device(engine)) {
    entries.push_back({make(2, 64, 14, 14, 128, 3, 3, 1), Layout::NCHW, tf32, Algorithm::WindowMma, "", 0});
    const auto mma = Algorithm::ImplicitMma;
    entries.push_back({make(2, 64, 14, 13, 136, 3, 3, 1), Layout::NHWC, bf16, mma, "wgmma128x64_s3_tma_persistent", 0});
    entries.push_back(
        {make(2, 128, 13, 13, 64, 1, 1, 0, 2), Layout::NHWC, fp16, mma, "wgmma128x64_s3_tma_persistent", 0});
    entries.push_back({make(2, 64, 14, 13, 136, 3, 3, 1), Layout::NHWC, fp16, mma, "wgmma64x128_s4_tma_pingpong", 0});
    for (int split : {0, 2})
      entries.push_back(
          {make(2, 64, 9, 11, 72, 3, 3, 1), Layout::NHWC, bf16, mma, "wgmma128x128_s3_tma_cooperative", split});
    entries.push_back(
        {make(2, 64, 9, 11, 200, 3, 3, 1), Layout::NHWC, bf16, mma, "wgmma128x208_s4_tma_cooperative", 0});
  }
  for (const Entry& en : entries)
    for (int v = 0; v < 2; ++v) {
      Case c{en.p};
      c.xl = c.wl = c.yl = en.layout;
      if (v == 1) c = with_whole_epilogue(c);
      c.act = Activation::SiLU;
      std::string division;
      EXPECT_LT(run_mma(engine, c, g, en.precision, en.tile, &division, en.algorithm, en.split_k),
                tolerance(en.precision.dtype, en.precision.math))
          << en.precision.name << " " << algorithm_name(en.algorithm) << " " << en.tile << " split " << en.split_k
          << " " << c.name() << "\n"
          << division;
      // A buffered tile's form must be the one that ran (not the pass after another form).
      if (en.tile.find("_tma_") != std::string::npos)
        EXPECT_NE(division.find("through a tensor map of y"), std::string::npos) << division;
    }
}

TEST_F(TensorCores, UnalignedHalfPointersAreRefused) {
  Engine engine(Target::Cuda);
  const Problem p = make(1, 8, 6, 6, 8, 3, 3, 1);
  const TensorDesc xd = p.x_desc(Layout::NHWC, DType::Float16), wd = p.w_desc(Layout::NHWC, DType::Float16),
                   yd = p.y_desc(Layout::NHWC, DType::Float16);
  auto plan = engine.plan(p, xd, wd, yd);
  DeviceBytes dx(xd.span_elements() * 2 + 2), dw(wd.span_elements() * 2), dy(yd.span_elements() * 2);
  try {
    engine.conv2d_forward(*plan, static_cast<char*>(dx.ptr) + 1, dw.ptr, dy.ptr);
    FAIL() << "an odd fp16 pointer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Misaligned);
  }
}

}  // namespace
}  // namespace mconv::test
