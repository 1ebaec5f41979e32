// The backward passes on the CPU executor against their double references: every dtype, every
// layout, the hand-picked stride/dilation/group shapes and random ones, outputs poisoned with NaN.
// Then the decomposition's own properties and the errors of bad calls.
#include <map>

#include "backward_tensors.hpp"

namespace mconv::test {
namespace {

constexpr Pass kPasses[] = {Pass::BackwardData, Pass::BackwardFilter};

double run_cpu(Engine& engine, const Case& c, Pass pass, DType t, std::mt19937_64& g) {
  BackwardTensors bt(c, pass, t, g);
  std::vector<unsigned char> out = bt.out_bytes;
  if (pass == Pass::BackwardData) {
    auto plan = engine.plan_backward_data(c.p, bt.ad, bt.bd, bt.outd);
    engine.conv2d_backward_data(*plan, bt.a_bytes.data(), bt.b_bytes.data(), out.data(), c.alpha, c.beta);
  } else {
    auto plan = engine.plan_backward_filter(c.p, bt.ad, bt.bd, bt.outd);
    engine.conv2d_backward_filter(*plan, bt.a_bytes.data(), bt.b_bytes.data(), out.data(), c.alpha, c.beta);
  }
  return bt.error(c, bt.decode(out));
}

double tolerance(DType t) {
  return t == DType::Float32 ? 1e-5 : 1e-2;
}

TEST(Backward, EdgeCasesEveryLayoutAndDtype) {
  Engine engine(Target::Cpu);
  std::mt19937_64 g(test_seed() + 900);
  for (Case c : backward_edge_cases())
    for (Pass pass : kPasses)
      for (int l = 0; l < 3; ++l)
        for (DType t : {DType::Float32, DType::Float16, DType::BFloat16}) {
          Case b = backward_case(c, pass);
          b.xl = b.yl = Layout(l);
          b.wl = Layout((l + 1) % 3);
          EXPECT_LT(run_cpu(engine, b, pass, t, g), tolerance(t))
              << pass_name(pass) << " " << dtype_name(t) << " " << b.name();
        }
}

TEST(Backward, RandomCases) {
  Engine engine(Target::Cpu);
  std::mt19937_64 g(test_seed() + 901);
  for (int i = 0; i < 160; ++i) {
    const Pass pass = kPasses[i % 2];
    const Case c = backward_case(random_case(g, 300000), pass);
    const DType t = i % 5 == 0 ? DType::BFloat16 : DType::Float32;
    EXPECT_LT(run_cpu(engine, c, pass, t, g), tolerance(t)) << pass_name(pass) << " " << c.name();
  }
}

TEST(Backward, TrueConvolutionDgrad) {
  Engine engine(Target::Cpu);
  std::mt19937_64 g(test_seed() + 902);
  for (Case c : backward_edge_cases()) {
    c.p.mode = Mode::Convolution;
    EXPECT_LT(run_cpu(engine, c, Pass::BackwardData, DType::Float32, g), 1e-5) << c.name();
  }
}

TEST(Backward, Float64RunsAtDoublePrecision) {
  // fp64 (the path gradient checks take): the steps run the double reference loops on views, checked
  // against the direct loops of the backward definitions.
  Engine engine(Target::Cpu);
  std::mt19937_64 g(test_seed() + 904);
  for (Pass pass : kPasses)
    for (Case c : backward_edge_cases()) {
      c = backward_case(c, pass);
      BackwardTensors bt(c, pass, DType::Float32, g);
      auto as64 = [](TensorDesc d) {
        d.dtype = DType::Float64;
        return d;
      };
      std::vector<double> a(bt.a.begin(), bt.a.end()), b(bt.b.begin(), bt.b.end()), out(bt.out.begin(), bt.out.end());
      if (pass == Pass::BackwardData) {
        auto plan = engine.plan_backward_data(c.p, as64(bt.ad), as64(bt.bd), as64(bt.outd));
        engine.conv2d_backward_data(*plan, a.data(), b.data(), out.data(), c.alpha, c.beta);
      } else {
        auto plan = engine.plan_backward_filter(c.p, as64(bt.ad), as64(bt.bd), as64(bt.outd));
        engine.conv2d_backward_filter(*plan, a.data(), b.data(), out.data(), c.alpha, c.beta);
      }
      const std::vector<float> got(out.begin(), out.end());
      EXPECT_LT(bt.error(c, got), 1e-7) << pass_name(pass) << " " << c.name();  // float-rounded compare
    }
  const Problem p = make(1, 2, 5, 5, 2, 3, 3);
  Engine gpu_free(Target::Cpu);
  PlanOptions o;
  o.algorithm = Algorithm::ImplicitPrecomp;
  EXPECT_THROW(gpu_free.plan(p, p.x_desc(Layout::NCHW, DType::Float64), p.w_desc(Layout::NCHW, DType::Float64),
                             p.y_desc(Layout::NCHW, DType::Float64), o),
               Error);
}

TEST(Backward, DgradPhasesPartitionDx) {
  // Every dx element is written by exactly one step or fill: count the writes of each.
  for (const Case& c : backward_edge_cases()) {
    const Problem& p = c.p;
    const TensorDesc dx = p.x_desc(Layout::NCHW), w = p.w_desc(Layout::NCHW), dy = p.y_desc(Layout::NCHW);
    const BackwardDecomposition d = decompose_backward_data(p, dy, w, dx);
    std::vector<int> writes(size_t(dx.span_elements()), 0);
    auto mark = [&](const TensorDesc& v, int64_t offset) {
      for (int64_t n = 0; n < v.dims[0]; ++n)
        for (int64_t ch = 0; ch < v.dims[1]; ++ch)
          for (int64_t h = 0; h < v.dims[2]; ++h)
            for (int64_t x = 0; x < v.dims[3]; ++x)
              ++writes.at(size_t(offset + n * v.strides[0] + ch * v.strides[1] + h * v.strides[2] + x * v.strides[3]));
    };
    for (const ForwardStep& s : d.steps) mark(s.y, s.y_offset);
    for (const FillStep& f : d.fills) mark(f.view, f.offset);
    for (int v : writes) ASSERT_EQ(v, 1) << p.to_string();
    EXPECT_LE(d.steps.size() + d.fills.size(), size_t(p.stride_h * p.stride_w)) << p.to_string();
  }
}

TEST(Backward, OneByOneStrideTwoFillsTheUnreachedPhases) {
  // The even rows' odd columns are one strided fill; the odd rows, which no tap reaches in any
  // column, one fill of whole rows (unit stride along W).
  const Problem p = make(2, 16, 9, 8, 24, 1, 1, 0, 2);
  for (Layout l : {Layout::NHWC, Layout::NCHW}) {
    const TensorDesc dx = p.x_desc(l);
    const BackwardDecomposition d = decompose_backward_data(p, p.y_desc(l), p.w_desc(l), dx);
    EXPECT_EQ(d.steps.size(), 1u);
    ASSERT_EQ(d.fills.size(), 2u);
    EXPECT_EQ(d.fills[0].offset, dx.strides[3]);
    EXPECT_EQ(d.fills[0].view.dims[3], 4);
    EXPECT_EQ(d.fills[0].view.strides[3], 2 * dx.strides[3]);
    EXPECT_EQ(d.fills[1].offset, dx.strides[2]);
    EXPECT_EQ(d.fills[1].view.dims, (std::array<int64_t, 4>{2, 16, 4, 8}));
    EXPECT_EQ(d.fills[1].view.strides[2], 2 * dx.strides[2]);
    EXPECT_EQ(d.fills[1].view.strides[3], dx.strides[3]);
  }
}

TEST(Backward, WgradIsOneStepForEveryGroupCount) {
  for (int64_t g : {1, 4, 16}) {
    const Problem p = make(2, 16, 9, 9, 16, 3, 3, 1, 1, 1, g);
    const TensorDesc x = p.x_desc(Layout::NHWC), dy = p.y_desc(Layout::NHWC), dw = p.w_desc(Layout::NHWC);
    EXPECT_EQ(decompose_backward_filter(p, x, dy, dw).steps.size(), 1u);
    EXPECT_EQ(decompose_backward_filter(p, x, dy, dw, GroupSteps::PerGroup).steps.size(), size_t(g));
  }
}

// The tensor-core plans of the steps (planned for the reference H100, no GPU needed): channels-last
// bf16 dgrad gathers dy as vectors of channels and the filter, contiguous in C, transposed; wgrad
// gathers both operands transposed and splits its few tiles' long reduction: into groups adding
// with atomics, each a cluster (Note [mma atomic slices]), or in a deterministic plan a cluster alone.
TEST(Backward, HalfStepsGatherTransposedOperandsAndSplitWgrad) {
  const Problem p = make(32, 64, 56, 56, 64, 3, 3, 1);
  const TensorDesc x = p.x_desc(Layout::NHWC, DType::BFloat16), w = p.w_desc(Layout::NHWC, DType::BFloat16),
                   y = p.y_desc(Layout::NHWC, DType::BFloat16);
  PlanOptions o;
  o.target = Target::Cuda;
  auto step_division = [&](const ForwardStep& s, bool deterministic) {
    o.deterministic = deterministic;
    const Plan plan = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o);
    EXPECT_EQ(plan.algorithm(), Algorithm::ImplicitMma);
    const auto d = std::get<ImplicitMmaDivision>(plan.division());
    EXPECT_EQ(plan.deterministic(), d.atomic_slices == 1);
    if (deterministic) EXPECT_TRUE(plan.deterministic());  // the cluster sums in rank order
    o.deterministic = false;
    return d;
  };
  const ImplicitMmaDivision dgrad = step_division(decompose_backward_data(p, y, w, x).steps.at(0), false);
  EXPECT_EQ(dgrad.a_gather, GatherForm::Vector);
  EXPECT_EQ(dgrad.b_gather, GatherForm::Transposed);
  EXPECT_FALSE(dgrad.images_fastest);
  EXPECT_EQ(dgrad.cluster_split, 1);  // 32*56*56 pixels fill the SMs
  const ForwardStep wgrad_step = decompose_backward_filter(p, x, y, w).steps.at(0);
  const ImplicitMmaDivision wgrad = step_division(wgrad_step, false);
  EXPECT_EQ(wgrad.a_gather, GatherForm::Transposed);
  EXPECT_EQ(wgrad.b_gather, GatherForm::Transposed);
  EXPECT_TRUE(wgrad.images_fastest);
  // 9 tiles (64x64 for its 64 filters, four an SM): one resident wave holds 58 slices of each, taken
  // as 8 groups adding into dw of 4-block clusters (32); dw is first set to beta*dw.
  EXPECT_EQ(wgrad.tile_name, "wgmma64x64_s3");
  EXPECT_EQ(wgrad.atomic_slices, 8);
  EXPECT_EQ(wgrad.cluster_split, 4);
  EXPECT_EQ(wgrad.launch.grid_z, 32);
  EXPECT_GT(wgrad.prepass_blocks, 0);
  // Deterministic: a cluster alone, 15 blocks (135 for 132 SMs).
  const ImplicitMmaDivision ordered = step_division(wgrad_step, true);
  EXPECT_EQ(ordered.atomic_slices, 1);
  EXPECT_EQ(ordered.cluster_split, 15);
  EXPECT_EQ(ordered.launch.grid_z, 15);
  // Note [mma tf32 transposed filters]: TF32 transposed filters (a dgrad step's w) run on mma.sync
  // tiles, which load them through registers; wgmma takes no transposed TF32 operand.
  o.math = MathMode::TF32;
  const Plan tf32 = Plan::build(p, p.x_desc(Layout::NHWC), p.w_desc(Layout::NHWC), p.y_desc(Layout::NHWC),
                                HardwareModel::reference_h100(), o);
  const auto dtf = decompose_backward_data(p, p.y_desc(Layout::NHWC), p.w_desc(Layout::NHWC), p.x_desc(Layout::NHWC));
  const Plan dgrad_tf32 = Plan::build(dtf.steps[0].problem, dtf.steps[0].x, dtf.steps[0].w, dtf.steps[0].y,
                                      HardwareModel::reference_h100(), o);
  const auto& dgrad_tf32_d = std::get<ImplicitMmaDivision>(dgrad_tf32.division());
  EXPECT_EQ(dgrad_tf32_d.a_gather, GatherForm::Vector);
  EXPECT_EQ(dgrad_tf32_d.b_gather, GatherForm::Transposed);
  EXPECT_EQ(dgrad_tf32_d.tile_name.rfind("mma", 0), 0u) << dgrad_tf32_d.tile_name;
  EXPECT_EQ(std::get<ImplicitMmaDivision>(tf32.division()).b_gather, GatherForm::Vector);
  // A forced split beyond the 16 blocks of a cluster is a clear error.
  o.math = MathMode::Exact;
  o.split_k = 17;
  EXPECT_THROW(Plan::build(p, x, w, y, HardwareModel::reference_h100(), o), Error);
  // The wgrad step's forced slices: groups of a cluster where they factor (12 = 6 x 2); 17 is
  // neither a cluster (at most 16) nor whole groups of one (at most 8): a clear error.
  o.split_k = 12;
  const ImplicitMmaDivision twelve = step_division(wgrad_step, false);
  EXPECT_EQ(twelve.atomic_slices, 6);
  EXPECT_EQ(twelve.cluster_split, 2);
  o.split_k = 17;
  try {
    step_division(wgrad_step, false);
    ADD_FAILURE() << "17 slices planned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::BadParam);
    EXPECT_NE(std::string(e.what()).find("not 17 slices"), std::string::npos) << e.what();
  }
}

// Note [mma reduction runs]: the wgrad step of a 1x1, stride-1, unpadded layer in plane order
// (NCHW) reads x and dy as 16-byte runs of taps (V = 4 in TF32, 8 in fp16/bf16) and splits its
// long reduction as the transposed steps do. Channels-last TF32 steps take both operands transposed
// on mma.sync tiles (Note [mma tf32 transposed filters]); padded, strided and 3x3 steps in plane
// order gather element by element, and split their reduction too (Note [tf32 wgrad steps]).
TEST(Backward, WgradStepsGatherRunsOfTapsOrTransposedOperands) {
  struct Want {
    Problem p;
    DType dtype;
    Layout layout;
    GatherForm form, filter_form;  // the images', and the filter's (dy's) where it differs
  };
  const GatherForm kRuns = GatherForm::Vector, kTransposed = GatherForm::Transposed, kElement = GatherForm::Element;
  // Note [mma filter rows]: element images with dy's P x Q planes as vectors of rows.
  const GatherForm kRows = GatherForm::Vector;
  const std::vector<Want> cases{
      {make(32, 256, 56, 56, 64, 1, 1), DType::Float32, Layout::NCHW, kRuns, kRuns},
      {make(32, 256, 56, 56, 64, 1, 1), DType::BFloat16, Layout::NCHW, kRuns, kRuns},
      {make(32, 1024, 14, 14, 256, 1, 1), DType::Float32, Layout::NCHW, kRuns, kRuns},            // 196 taps: runs of 4
      {make(32, 1024, 14, 14, 256, 1, 1), DType::Float16, Layout::NCHW, kElement, kElement},      // not of 8
      {make(32, 64, 56, 56, 64, 3, 3, 1), DType::BFloat16, Layout::NCHW, kElement, kRows},        // padded windows
      {make(32, 512, 7, 7, 2048, 1, 1), DType::Float32, Layout::NCHW, kElement, kElement},        // 49 taps
      {make(32, 64, 56, 56, 64, 3, 3, 1), DType::Float32, Layout::NCHW, kElement, kRows},         // padded windows
      {make(32, 256, 56, 56, 512, 1, 1, 0, 2), DType::Float32, Layout::NCHW, kElement, kRows},    // stride 2
      {make(32, 256, 56, 56, 64, 1, 1), DType::Float32, Layout::NHWC, kTransposed, kTransposed},  // channels-last
      {make(32, 64, 56, 56, 64, 3, 3, 1), DType::Float32, Layout::NHWC, kTransposed, kTransposed},
  };
  for (const Want& c : cases) {
    const TensorDesc x = c.p.x_desc(c.layout, c.dtype), y = c.p.y_desc(c.layout, c.dtype),
                     w = c.p.w_desc(c.layout, c.dtype);
    const ForwardStep s = decompose_backward_filter(c.p, x, y, w).steps.at(0);
    for (bool deterministic : {false, true}) {
      PlanOptions o;
      o.target = Target::Cuda;
      o.math = c.dtype == DType::Float32 ? MathMode::TF32 : MathMode::Exact;
      o.deterministic = deterministic;
      const Plan plan =
          Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o, StepContext{std::nullopt, true});
      const std::string text = c.p.to_string() + (deterministic ? " deterministic" : "") + "\n" + plan.to_text(0);
      ASSERT_EQ(plan.algorithm(), Algorithm::ImplicitMma) << text;
      const auto& d = std::get<ImplicitMmaDivision>(plan.division());
      EXPECT_EQ(d.a_gather, c.form) << text;
      EXPECT_EQ(d.b_gather, c.filter_form) << text;
      EXPECT_EQ(plan.deterministic(), deterministic || d.atomic_slices == 1) << text;
      // The reduction (N*P*Q rows) is split where the tiles leave SMs idle: atomic groups, or a
      // cluster in rank order.
      if (d.launch.grid_x * d.launch.grid_y < 132) EXPECT_GT(int64_t(d.cluster_split) * d.atomic_slices, 1) << text;
      if (deterministic) EXPECT_EQ(d.atomic_slices, 1) << text;
      if (c.form == kRuns) {
        EXPECT_NE(text.find("runs of"), std::string::npos) << text;
        EXPECT_EQ(d.tile_name.rfind("wgmma", 0), 0u) << text;  // sm_90: the warpgroup tiles
        EXPECT_FALSE(d.tensor_maps) << text;
      } else {
        EXPECT_EQ(d.tile_name.rfind("mma", 0), 0u) << text;  // element forms, TF32 transposed: mma.sync
        EXPECT_EQ(plan.math(), c.dtype == DType::Float32 ? MathMode::TF32 : MathMode::Exact) << text;
      }
    }
  }
}

// Note [wgmma tensor-map loads]: bf16 channels-last dgrad steps load through tensor maps (dy as an
// im2col column, w as N-major boxes) where dy has a multiple of 64 channels, every phase step of a
// stride-2 layer included; with 48 they gather, and say why.
// The steps of a bf16 channels-last backward pass.
BackwardDecomposition bf16_steps(Pass pass, const Problem& p) {
  const TensorDesc x = p.x_desc(Layout::NHWC, DType::BFloat16), y = p.y_desc(Layout::NHWC, DType::BFloat16),
                   w = p.w_desc(Layout::NHWC, DType::BFloat16);
  return pass == Pass::BackwardData ? decompose_backward_data(p, y, w, x) : decompose_backward_filter(p, x, y, w);
}

// The plans of a bf16 channels-last backward pass's steps on the reference H100.
std::vector<Plan> bf16_step_plans(Pass pass, const Problem& p, const std::string& tile = "") {
  PlanOptions o;
  o.target = Target::Cuda;
  if (!tile.empty()) {
    o.algorithm = Algorithm::ImplicitMma;
    o.tile = tile;
  }
  const BackwardDecomposition d = bf16_steps(pass, p);
  std::vector<Plan> plans;
  const std::vector<double> shares = step_sm_shares(d);
  for (size_t i = 0; i < d.steps.size(); ++i) {  // as the engine plans them: each on its share of the SMs
    const ForwardStep& s = d.steps[i];
    plans.push_back(Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o,
                                StepContext{s.group_strides, false, shares[i]}));
  }
  return plans;
}

TEST(Backward, DgradStepsLoadThroughTensorMapsWhereDyHas64Channels) {
  auto dgrad_steps = [](const Problem& p) { return bf16_step_plans(Pass::BackwardData, p); };
  for (const Problem& p : {make(32, 512, 7, 7, 512, 3, 3, 1), make(32, 256, 28, 28, 256, 3, 3, 1, 2)}) {
    const std::vector<Plan> plans = dgrad_steps(p);
    EXPECT_EQ(plans.size(), p.stride_h == 2 ? 4u : 1u) << p.to_string();
    for (const Plan& plan : plans) {
      const auto& d = std::get<ImplicitMmaDivision>(plan.division());
      EXPECT_TRUE(d.tensor_maps) << plan.to_text(0);
      EXPECT_EQ(d.b_gather, GatherForm::Transposed);
      EXPECT_NE(plan.to_text(0).find("w N-major tiled tensor map"), std::string::npos) << plan.to_text(0);
    }
  }
  for (const Plan& plan : dgrad_steps(make(32, 64, 28, 28, 48, 3, 3, 1))) {
    EXPECT_FALSE(std::get<ImplicitMmaDivision>(plan.division()).tensor_maps);
    EXPECT_NE(plan.to_text(0).find("C = 48 is not a multiple of 64"), std::string::npos) << plan.to_text(0);
  }
}

// Note [wgmma strided dgrad stores]: a stride-2 layer's dgrad phases write every other pixel of dx,
// which no tensor-map store covers; forced onto warp-specialized blocks they keep that form and
// store filter pairs from the accumulators, and say so. The persistent form without consumers
// stores only through the map, so those steps run the tile's plain form.
TEST(Backward, StridedDgradStepsOnWarpSpecializedBlocksStoreFromTheAccumulators) {
  const Problem strided = make(32, 256, 28, 28, 256, 3, 3, 1, 2);
  for (const char* tile :
       {"wgmma128x128_s3_tma_cooperative", "wgmma128x128_s3_tma_pingpong", "wgmma128x64_s3_tma_cooperative"}) {
    const std::vector<Plan> plans = bf16_step_plans(Pass::BackwardData, strided, tile);
    ASSERT_EQ(plans.size(), 4u);
    for (const Plan& plan : plans) {
      const auto& d = std::get<ImplicitMmaDivision>(plan.division());
      EXPECT_EQ(division_name(d), tile) << plan.to_text(0);
      EXPECT_TRUE(d.persistent && d.consumers != ConsumerSchedule::None) << plan.to_text(0);
      EXPECT_NE(plan.to_text(0).find("stores its rows at their pixels' addresses"), std::string::npos)
          << plan.to_text(0);
    }
  }
  // Note [phase steps' SM shares]: the four phases (4, 2, 2 and 1 of the 9 taps) run side by side,
  // each persistent grid its share of the 132 SMs, rounded down: their reductions (256 rows a tap)
  // plus a tile's fixed cost of 141 rows, 397, 653, 653 and 1165 of 2868.
  const BackwardDecomposition phases = bf16_steps(Pass::BackwardData, strided);
  const std::vector<double> shares = step_sm_shares(phases);
  ASSERT_EQ(shares.size(), 4u);
  const std::vector<Plan> cooperative = bf16_step_plans(Pass::BackwardData, strided, "wgmma128x128_s3_tma_cooperative");
  const std::map<int64_t, int64_t> grid_of_taps = {{1, 18}, {2, 30}, {4, 53}};
  int64_t blocks = 0;
  double total = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    const Problem& step = phases.steps[i].problem;
    EXPECT_NEAR(shares[i], (256.0 * step.r * step.s + 141) / 2868, 1e-12) << step.to_string();
    if (step.r * step.s == 1) EXPECT_GT(shares[i], 1.0 / 9);  // more than its multiply-adds' share
    total += shares[i];
    const auto& d = std::get<ImplicitMmaDivision>(cooperative[i].division());
    EXPECT_EQ(d.launch.grid_x, grid_of_taps.at(step.r * step.s)) << cooperative[i].to_text(0);
    EXPECT_NE(cooperative[i].to_text(0).find("this step's share"), std::string::npos) << cooperative[i].to_text(0);
    blocks += d.launch.grid_x * d.launch.grid_z;
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_LE(blocks, 132);
  // A pass of one step runs alone: its persistent grid is a whole wave.
  const Problem one_step = make(32, 256, 14, 14, 256, 3, 3, 1);
  EXPECT_EQ(step_sm_shares(bf16_steps(Pass::BackwardData, one_step)), std::vector<double>{1.0});
  for (const Plan& plan : bf16_step_plans(Pass::BackwardData, strided, "wgmma128x128_s3_tma_persistent")) {
    const auto& d = std::get<ImplicitMmaDivision>(plan.division());
    EXPECT_FALSE(d.persistent) << plan.to_text(0);
    EXPECT_NE(plan.to_text(0).find("stores through a tensor map of y"), std::string::npos) << plan.to_text(0);
  }
  // The rule: a strided 3x3 layer's phases on ping-pong 128x128, each on its share of the SMs
  // (resnet50's l2_3x3s2, l3_3x3s2, l4_3x3s2: 196, 98 and 52 tiles a phase).
  for (const Problem& p : {make(32, 128, 56, 56, 128, 3, 3, 1, 2), make(32, 256, 28, 28, 256, 3, 3, 1, 2),
                           make(32, 512, 14, 14, 512, 3, 3, 1, 2)}) {
    const BackwardDecomposition d = bf16_steps(Pass::BackwardData, p);
    const std::vector<double> share = step_sm_shares(d);
    const std::vector<Plan> plans = bf16_step_plans(Pass::BackwardData, p);
    ASSERT_EQ(plans.size(), 4u) << p.to_string();
    int64_t blocks = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
      const auto& div = std::get<ImplicitMmaDivision>(plans[i].division());
      EXPECT_EQ(division_name(div), "wgmma128x128_s3_tma_pingpong") << plans[i].to_text(0);
      EXPECT_TRUE(div.persistent && div.consumers == ConsumerSchedule::PingPong) << plans[i].to_text(0);
      const Problem& step = d.steps[i].problem;
      const int64_t tiles = (step.n * step.p() * step.q() + 127) / 128 * ((step.k + 127) / 128);
      EXPECT_EQ(div.launch.grid_x, std::min<int64_t>(tiles, static_cast<int64_t>(132 * share[i] + 1e-9)))
          << plans[i].to_text(0);
      blocks += div.launch.grid_x;
    }
    EXPECT_LE(blocks, 132) << p.to_string();
  }
  // A 1x1 stride-2 layer's step on cooperative 128x128 over one round of the SMs (l4_ds,
  // 104 tiles) or three and more (l2_ds, 392), the plain tile between (l3_ds, 196).
  for (const auto& [p, name] : {std::pair{make(32, 1024, 14, 14, 2048, 1, 1, 0, 2), "wgmma128x128_s3_tma_cooperative"},
                                {make(32, 256, 56, 56, 512, 1, 1, 0, 2), "wgmma128x128_s3_tma_cooperative"},
                                {make(32, 512, 28, 28, 1024, 1, 1, 0, 2), "wgmma128x128_s3_tma"}}) {
    int steps = 0;
    for (const Plan& plan : bf16_step_plans(Pass::BackwardData, p)) {
      const auto* d = std::get_if<ImplicitMmaDivision>(&plan.division());
      if (!d) continue;
      ++steps;
      EXPECT_EQ(division_name(*d), name) << plan.to_text(0);
    }
    EXPECT_EQ(steps, 1) << p.to_string();
  }
  // A stride-1 dgrad step's dx is dense: the tensor-map store, not the accumulators'.
  for (const Plan& plan :
       bf16_step_plans(Pass::BackwardData, make(32, 256, 14, 14, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative")) {
    EXPECT_TRUE(std::get<ImplicitMmaDivision>(plan.division()).persistent);
    EXPECT_EQ(plan.to_text(0).find("stores its rows at their pixels' addresses"), std::string::npos);
  }
}

// Note [wgmma tensor-map loads], Note [wgmma warp-specialized wgrad] and Note [mma atomic slices]:
// bf16 channels-last wgrad steps load through tensor maps where the layer's C is whole tiles of
// columns. With C whole 128-channel tiles and more than 64 filters they run on cooperative blocks,
// sliced to give every SM a block: atomic groups alone up to 8, then clusters of 2 (of 3-4 only
// on grids of at most 64 blocks); 128x64 where 128x128 tiles leave more than half the SMs idle
// and 128x64 ones fill more; 2 slices on grids of up to one and a half waves, none on one wave.
TEST(Backward, WgradStepsOnTensorMapsAndTheirSplits) {
  auto wgrad_step = [](const Problem& p) {
    return std::get<ImplicitMmaDivision>(bf16_step_plans(Pass::BackwardFilter, p).at(0).division());
  };
  struct Want {
    Problem p;
    const char* name;
  };
  const Want cases[] = {
      {make(32, 256, 14, 14, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_as3"},      // 36 tiles
      {make(32, 512, 7, 7, 2048, 1, 1), "wgmma128x128_s3_tma_cooperative_as2"},          // 64 tiles
      {make(32, 256, 14, 14, 1024, 1, 1), "wgmma128x128_s3_tma_cooperative_as8"},        // 16 tiles
      {make(32, 512, 7, 7, 512, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_as2"},        // 144 tiles
      {make(32, 1024, 14, 14, 2048, 1, 1, 0, 2), "wgmma128x128_s3_tma_cooperative"},     // 128 tiles
      {make(32, 128, 28, 28, 128, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2_as7"},  // 9 tiles
      {make(32, 256, 56, 56, 128, 1, 1), "wgmma128x128_s3_tma_cooperative_cs4_as8"},     // 2 tiles, 64 blocks
      {make(32, 128, 28, 28, 512, 1, 1), "wgmma128x64_s3_tma_cooperative_cs2_as8"}};     // 8 tiles of 128x64
  for (const Want& w : cases) {
    const ImplicitMmaDivision d = wgrad_step(w.p);
    EXPECT_EQ(division_name(d), w.name) << w.p.to_string();
    EXPECT_EQ(d.launch.grid_y, d.atomic_slices) << w.p.to_string();
    EXPECT_EQ(d.launch.grid_z, d.cluster_split) << w.p.to_string();
    EXPECT_LE(d.launch.grid_x * d.launch.grid_y * d.launch.grid_z, 132) << w.p.to_string();
  }
  // 64 filters: the plain 128x64 tile in atomic groups of clusters.
  const ImplicitMmaDivision k64 = wgrad_step(make(32, 256, 56, 56, 64, 1, 1));
  EXPECT_EQ(k64.consumers, ConsumerSchedule::None);
  EXPECT_TRUE(k64.tensor_maps);
  EXPECT_GT(k64.atomic_slices, 1);
  // C = 64: tensor maps on 64-column tiles only, the 56x56 layer's few tiles split.
  const ImplicitMmaDivision c64 = wgrad_step(make(32, 64, 56, 56, 64, 3, 3, 1));
  EXPECT_EQ(division_name(c64), "wgmma64x64_s3_tma_cs4_as8");
  // Note [wgmma deep tiles]: one tile in 64 slices on the deep tile; two 64x128 tiles stay shallow.
  EXPECT_EQ(division_name(wgrad_step(make(32, 64, 56, 56, 64, 1, 1))), "wgmma64x64_s8_tma_cs8_as8");
  EXPECT_EQ(division_name(wgrad_step(make(32, 64, 56, 56, 256, 1, 1))), "wgmma64x128_s3_tma_cs8_as8");
}

// A deterministic wgrad step on tensor maps: a cluster alone. On cooperative blocks at most 4, of
// 3-4 only on grids of at most 64 blocks (36 tiles of 128x128 split 2 ways, 16 split 4 ways; 1024
// channels into 512 filters on 64 tiles of 128x64 split 2); 128 tiles of 128x128 unsplit. Where
// such slices would keep more than 64 row tiles (a 28x28 layer's 392) or a block more than one tile
// (144 tiles split 2), the plain tiles: at least 24 row tiles a slice, the 56x56 layers' few tiles
// in clusters of up to 16, on the deep tiles where they are at most 4 (Note [wgmma deep tiles]).
TEST(Backward, DeterministicWgradSplitsKeepLongSlices) {
  auto det_step = [](const Problem& p) {
    const TensorDesc x = p.x_desc(Layout::NHWC, DType::BFloat16), y = p.y_desc(Layout::NHWC, DType::BFloat16),
                     w = p.w_desc(Layout::NHWC, DType::BFloat16);
    PlanOptions o;
    o.target = Target::Cuda;
    o.deterministic = true;
    const ForwardStep s = decompose_backward_filter(p, x, y, w).steps.at(0);
    const Plan plan = Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o);
    EXPECT_TRUE(plan.deterministic());
    return std::get<ImplicitMmaDivision>(plan.division());
  };
  const std::pair<Problem, const char*> cases[] = {
      {make(32, 256, 14, 14, 256, 3, 3, 1), "wgmma128x128_s3_tma_cooperative_cs2"},
      {make(32, 1024, 14, 14, 512, 1, 1), "wgmma128x64_s3_tma_cooperative_cs2"},
      {make(32, 256, 14, 14, 1024, 1, 1), "wgmma128x128_s3_tma_cooperative_cs4"},
      {make(32, 1024, 14, 14, 2048, 1, 1, 0, 2), "wgmma128x128_s3_tma_cooperative"},
      {make(32, 512, 7, 7, 512, 3, 3, 1), "wgmma128x64_s3_tma"},
      {make(32, 512, 28, 28, 256, 1, 1), "wgmma128x64_s4_tma_cs9"},
      {make(32, 128, 28, 28, 128, 3, 3, 1), "wgmma128x64_s4_tma_cs8"},  // 18 tiles: clusters of at most 9
      {make(32, 128, 56, 56, 128, 3, 3, 1, 2), "wgmma128x64_s4_tma_cs8"},
      {make(32, 128, 28, 28, 512, 1, 1), "wgmma64x64_s3_tma_cs9"},  // 16 tiles of 64x64
      {make(32, 512, 28, 28, 128, 1, 1), "wgmma64x64_s3_tma_cs9"},
      {make(32, 256, 56, 56, 128, 1, 1), "wgmma64x128_s8_tma_cs16"},   // Note [wgmma deep tiles]: 4 tiles
      {make(32, 64, 56, 56, 256, 1, 1), "wgmma64x64_s8_tma_cs16"},     // 4 tiles of 64x64
      {make(32, 64, 56, 56, 64, 1, 1), "wgmma64x64_s8_tma_cs16"},      // 1 tile
      {make(32, 64, 56, 56, 64, 3, 3, 1), "wgmma64x64_s3_tma_cs15"}};  // 9 tiles: the shallow tile
  for (const auto& [p, name] : cases) {
    const ImplicitMmaDivision d = det_step(p);
    EXPECT_TRUE(d.tensor_maps) << p.to_string();
    EXPECT_EQ(d.atomic_slices, 1) << p.to_string();
    EXPECT_EQ(division_name(d), name) << p.to_string();
  }
}

// Note [wgmma warp-specialized wgrad]: a bf16 channels-last wgrad step forced onto cooperative
// blocks: unsplit (64 tiles of 128x128, one block each), in atomic groups along y times a cluster
// along z (12 = 6 x 2; dw first set to beta*dw), a deterministic plan's cluster alone; clear errors
// for slices with no such form (11; more than 32, or than a deterministic plan's 4), C = 64 (no
// whole 128-channel tiles) and, falling back with a reason, a dw that is not KRSC.
TEST(Backward, WgradStepsOnCooperativeBlocks) {
  auto step_plan = [](const Problem& p, const char* tile, int split, bool deterministic,
                      Layout filters = Layout::NHWC) {
    const TensorDesc x = p.x_desc(Layout::NHWC, DType::BFloat16), y = p.y_desc(Layout::NHWC, DType::BFloat16),
                     w = p.w_desc(filters, DType::BFloat16);
    PlanOptions o;
    o.target = Target::Cuda;
    o.tile = tile;
    o.split_k = split;
    o.deterministic = deterministic;
    const ForwardStep s = decompose_backward_filter(p, x, y, w).steps.at(0);
    return Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o);
  };
  const Problem l4 = make(32, 512, 7, 7, 2048, 1, 1);
  const char* kTile = "wgmma128x128_s3_tma_cooperative";
  const Plan whole = step_plan(l4, kTile, 0, false);
  const auto& d = std::get<ImplicitMmaDivision>(whole.division());
  EXPECT_EQ(d.consumers, ConsumerSchedule::Cooperative) << whole.to_text(0);
  EXPECT_TRUE(d.persistent && d.tensor_maps);
  EXPECT_EQ(d.launch.grid_x, 64);  // 4 x 16 tiles
  EXPECT_EQ(d.launch.grid_y * d.launch.grid_z, 1);
  EXPECT_EQ(d.launch.threads, 384);
  const Plan split = step_plan(l4, kTile, 12, false);
  const auto& ds = std::get<ImplicitMmaDivision>(split.division());
  EXPECT_EQ(division_name(ds), "wgmma128x128_s3_tma_cooperative_cs2_as6");
  EXPECT_EQ(ds.launch.grid_x, 11);  // 132 SMs over 12 slices
  EXPECT_EQ(ds.launch.grid_y, 6);
  EXPECT_EQ(ds.launch.grid_z, 2);
  EXPECT_GT(ds.prepass_blocks, 0);
  EXPECT_FALSE(split.deterministic());
  const Plan ordered = step_plan(l4, kTile, 4, true);
  const auto& dd = std::get<ImplicitMmaDivision>(ordered.division());
  EXPECT_EQ(dd.cluster_split, 4);
  EXPECT_EQ(dd.atomic_slices, 1);
  EXPECT_TRUE(ordered.deterministic());
  for (const auto& [n, deterministic] : {std::pair{11, false}, std::pair{33, false}, std::pair{5, true}}) {
    try {
      step_plan(l4, kTile, n, deterministic);
      ADD_FAILURE() << n << " slices planned";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("split_k"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(step_plan(make(32, 64, 56, 56, 64, 1, 1), kTile, 0, false), Error);
  const Plan kcrs = step_plan(l4, kTile, 0, false, Layout::NCHW);
  EXPECT_EQ(std::get<ImplicitMmaDivision>(kcrs.division()).consumers, ConsumerSchedule::None);
  EXPECT_NE(kcrs.to_text(0).find("which needs dw KRSC"), std::string::npos) << kcrs.to_text(0);
}

TEST(Backward, DeterministicWgradIsBitwiseReproducible) {
  Engine engine(Target::Cpu);
  const Problem p = make(4, 16, 12, 12, 8, 3, 3, 1);
  PlanOptions o;
  o.deterministic = true;
  std::mt19937_64 g(test_seed() + 903);
  BackwardTensors bt({p}, Pass::BackwardFilter, DType::Float32, g);
  auto plan = engine.plan_backward_filter(p, bt.ad, bt.bd, bt.outd, o);
  EXPECT_TRUE(plan->deterministic());
  std::vector<unsigned char> first = bt.out_bytes, second = bt.out_bytes;
  engine.conv2d_backward_filter(*plan, bt.a_bytes.data(), bt.b_bytes.data(), first.data());
  engine.conv2d_backward_filter(*plan, bt.a_bytes.data(), bt.b_bytes.data(), second.data());
  EXPECT_EQ(first, second);
}

// The plan of a layer's wgrad step on the reference H100, with its step context as the Engine
// makes it.
Plan wgrad_step_plan(const Problem& p, Layout l, DType t, PlanOptions o = {}) {
  const TensorDesc x = p.x_desc(l, t), y = p.y_desc(l, t), w = p.w_desc(l, t);
  o.target = Target::Cuda;
  const ForwardStep s = decompose_backward_filter(p, x, y, w).steps.at(0);
  return Plan::build(s.problem, s.x, s.w, s.y, HardwareModel::reference_h100(), o, StepContext{s.group_strides, true});
}

// Whether one of the plan's decisions says `what`.
bool decided(const Plan& plan, const std::string& what) {
  for (const std::string& d : plan.decisions())
    if (d.find(what) != std::string::npos) return true;
  return false;
}

// Note [few-channel wgrad]: the plans of an RGB stem's wgrad step on the reference H100. ResNet's
// conv1 in bf16 channels-last: items of 2 x 112 output pixels, 160 columns (147 used) a block, one
// block of columns and of filters, so clusters of 16 and 8 slices adding with atomics; a
// deterministic plan keeps one slice and takes 32-column blocks, five of them, to fill more SMs.
// fp32, plane-order dy and forced misuse are refused with their reasons.
TEST(Backward, FewChannelWgradStepPlans) {
  auto division = [](const Plan& plan) { return std::get<FewChannelWgradDivision>(plan.division()); };
  const Problem conv1 = make(32, 3, 224, 224, 64, 7, 7, 3, 2);
  const Plan atomic = wgrad_step_plan(conv1, Layout::NHWC, DType::BFloat16);
  ASSERT_EQ(atomic.algorithm(), Algorithm::FewChannelWgrad) << atomic.to_text(0);
  const FewChannelWgradDivision d = division(atomic);
  EXPECT_EQ(d.tile_p, 2);
  EXPECT_EQ(d.tile_q, 112);
  EXPECT_EQ(d.column_tiles, 5);
  EXPECT_EQ(d.items, 32 * 56);
  EXPECT_EQ(d.cluster_split, 16);
  EXPECT_EQ(d.atomic_slices, 8);
  EXPECT_GT(d.prepass_blocks, 0);
  EXPECT_EQ(d.launch.grid_x * d.launch.grid_y * d.launch.grid_z, 128);
  EXPECT_LE(d.launch.smem_bytes, HardwareModel::reference_h100().smem_per_block_optin);
  EXPECT_FALSE(atomic.deterministic());
  PlanOptions det;
  det.deterministic = true;
  const Plan ordered = wgrad_step_plan(conv1, Layout::NHWC, DType::Float16, det);
  EXPECT_TRUE(ordered.deterministic());
  EXPECT_EQ(division(ordered).atomic_slices, 1);
  EXPECT_EQ(division(ordered).column_tiles, 1);
  EXPECT_EQ(division(ordered).launch.grid_x, 5);
  // Refused, with the reason in the plan: fp32 (and TF32), dy in plane order.
  const Plan fp32 = wgrad_step_plan(conv1, Layout::NHWC, DType::Float32);
  EXPECT_NE(fp32.algorithm(), Algorithm::FewChannelWgrad);
  EXPECT_TRUE(decided(fp32, "refused few_channel_wgrad: fp16 and bf16 only")) << fp32.to_text(0);
  const Plan planes = wgrad_step_plan(conv1, Layout::NCHW, DType::BFloat16);
  EXPECT_EQ(planes.algorithm(), Algorithm::ImplicitMma);
  EXPECT_TRUE(decided(planes, "dy's filters not adjacent")) << planes.to_text(0);
  // Eight channels are implicit_mma's vectors: not offered.
  const Plan eight = wgrad_step_plan(make(32, 8, 56, 56, 64, 3, 3, 1), Layout::NHWC, DType::BFloat16);
  EXPECT_EQ(eight.algorithm(), Algorithm::ImplicitMma);
  EXPECT_FALSE(decided(eight, "few_channel_wgrad"));
  // Forced: a single-channel layer runs; on the CPU, with a tile or in fp32 it is refused.
  PlanOptions forced;
  forced.algorithm = Algorithm::FewChannelWgrad;
  EXPECT_EQ(wgrad_step_plan(make(4, 1, 40, 40, 16, 5, 5, 2), Layout::NHWC, DType::BFloat16, forced).algorithm(),
            Algorithm::FewChannelWgrad);
  try {
    wgrad_step_plan(conv1, Layout::NHWC, DType::Float32, forced);
    ADD_FAILURE() << "fp32 planned on few_channel_wgrad";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("fp16 and bf16 only"), std::string::npos) << e.what();
  }
  forced.tile = "128x128x8";
  EXPECT_THROW(wgrad_step_plan(conv1, Layout::NHWC, DType::BFloat16, forced), Error);
  forced.tile.clear();
  forced.target = Target::Cpu;
  const TensorDesc x = conv1.x_desc(Layout::NHWC), y = conv1.y_desc(Layout::NHWC), w = conv1.w_desc(Layout::NHWC);
  EXPECT_THROW(Plan::build(conv1, x, w, y, HardwareModel::reference_h100(), forced), Error);
}

// Note [depthwise wgrad]: the plans of wgrad steps (with their step context, as the Engine makes
// them) on the reference H100. MobileNetV2's first depthwise layer: in plane order one filter a
// thread, threads along the pixels with runs of 4 rows down a column, 32 filters x 16 cluster blocks; channels-last
// bf16 a vector of 4 filters (36 sums a thread), 2 vectors a block (16 bytes of a pixel) so that 4 chunks, clusters of
// 16 and 4 slices adding with atomics come near four blocks an SM (one slice in a deterministic
// plan); fp32 vectors of 4, 1x1 filters of 8, 5x5 and 7x7 one filter a thread. A layer with two
// channels a group is a GEMM and says why.
TEST(Backward, DepthwiseWgradStepPlans) {
  auto division = [](const Plan& plan) { return std::get<DepthwiseWgradDivision>(plan.division()); };
  const Problem dw = make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32);
  const Plan planes = wgrad_step_plan(dw, Layout::NCHW, DType::BFloat16);
  EXPECT_EQ(planes.algorithm(), Algorithm::DepthwiseWgrad);
  EXPECT_EQ(division(planes).vector, 1);
  EXPECT_EQ(division(planes).chunk_vectors, 1);
  EXPECT_EQ(division(planes).run, 4);
  EXPECT_TRUE(division(planes).run_down);
  EXPECT_EQ(division(planes).window, 3);
  EXPECT_EQ(division(planes).cluster_split, 16);
  EXPECT_EQ(division(planes).atomic_slices, 1);
  EXPECT_TRUE(planes.deterministic());
  const DepthwiseWgradDivision last = division(wgrad_step_plan(dw, Layout::NHWC, DType::BFloat16));
  EXPECT_EQ(last.vector, 4);
  EXPECT_FALSE(last.run_down);
  EXPECT_EQ(last.chunk_vectors, 2);
  EXPECT_EQ(last.cluster_split, 16);
  EXPECT_EQ(last.atomic_slices, 4);
  EXPECT_GT(last.prepass_blocks, 0);
  PlanOptions det;
  det.deterministic = true;
  const Plan ordered = wgrad_step_plan(dw, Layout::NHWC, DType::BFloat16, det);
  EXPECT_EQ(division(ordered).atomic_slices, 1);
  EXPECT_TRUE(ordered.deterministic());
  PlanOptions unsplit;  // split_k 1: "off, bitwise reproducible"
  unsplit.split_k = 1;
  EXPECT_TRUE(wgrad_step_plan(dw, Layout::NHWC, DType::BFloat16, unsplit).deterministic());
  EXPECT_EQ(division(wgrad_step_plan(dw, Layout::NHWC, DType::Float32)).vector, 4);
  EXPECT_EQ(
      division(wgrad_step_plan(make(32, 240, 28, 28, 240, 1, 1, 0, 1, 1, 240), Layout::NHWC, DType::BFloat16)).vector,
      8);
  EXPECT_EQ(
      division(wgrad_step_plan(make(32, 240, 28, 28, 240, 5, 5, 2, 1, 1, 240), Layout::NHWC, DType::BFloat16)).vector,
      1);
  EXPECT_EQ(division(wgrad_step_plan(make(1, 96, 56, 56, 96, 7, 7, 3, 1, 1, 96), Layout::NHWC, DType::Float16)).vector,
            1);
  // A rectangular filter: taps 16 a block, one pixel an item.
  const DepthwiseWgradDivision rect =
      division(wgrad_step_plan(make(2, 8, 11, 12, 8, 3, 5, 1, 1, 1, 8), Layout::NCHW, DType::Float32));
  EXPECT_EQ(rect.window, 0);
  EXPECT_EQ(rect.taps_per_block, 16);
  EXPECT_EQ(rect.run, 1);
  const Plan grouped = wgrad_step_plan(make(2, 16, 14, 14, 16, 3, 3, 1, 1, 1, 8), Layout::NHWC, DType::BFloat16);
  EXPECT_EQ(grouped.algorithm(), Algorithm::ImplicitMma);
  EXPECT_TRUE(decided(grouped, "refused depthwise_wgrad")) << grouped.to_text(0);
  // Forced where it cannot run: on the CPU, with a tile, or on a problem of more than one image.
  PlanOptions forced;
  forced.algorithm = Algorithm::DepthwiseWgrad;
  const TensorDesc x = dw.x_desc(Layout::NCHW), y = dw.y_desc(Layout::NCHW), w = dw.w_desc(Layout::NCHW);
  forced.target = Target::Cpu;
  EXPECT_THROW(Plan::build(dw, x, w, y, HardwareModel::reference_h100(), forced), Error);
  forced.target = Target::Cuda;
  try {
    Plan::build(dw, x, w, y, HardwareModel::reference_h100(), forced);
    ADD_FAILURE() << "a forward problem of 32 images planned on depthwise_wgrad";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("more than one image"), std::string::npos) << e.what();
  }
  forced.tile = "128x128x8";
  EXPECT_THROW(wgrad_step_plan(dw, Layout::NCHW, DType::Float32, forced), Error);
}

TEST(Backward, BadCallsAreClearErrorsAndLeaveTheOutput) {
  Engine engine(Target::Cpu);
  const Problem p = make(2, 8, 9, 9, 6, 3, 3, 1, 2);
  const TensorDesc x = p.x_desc(Layout::NCHW), w = p.w_desc(Layout::NCHW), y = p.y_desc(Layout::NCHW);
  auto expect_error = [](Status s, const std::string& needle, auto&& f) {
    try {
      f();
      ADD_FAILURE() << "no error (expected " << needle << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), s) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Descriptors in the wrong roles: dy where dx belongs.
  expect_error(Status::BadParam, "dims", [&] { engine.plan_backward_data(p, x, w, y); });
  expect_error(Status::BadParam, "dims", [&] { engine.plan_backward_filter(p, y, x, w); });
  Problem conv = p;
  conv.mode = Mode::Convolution;
  expect_error(Status::Unsupported, "true convolution", [&] { engine.plan_backward_filter(conv, x, y, w); });
  Problem asym = p;
  asym.pad_h_end = 0;
  expect_error(Status::Unsupported, "symmetric",
               [&] { engine.plan_backward_data(asym, asym.y_desc(Layout::NCHW), w, asym.x_desc(Layout::NCHW)); });
  auto dgrad = engine.plan_backward_data(p, y, w, x);
  std::vector<float> dy(size_t(y.span_elements()), 1.0f), wv(size_t(w.span_elements()), 1.0f),
      dx(size_t(x.span_elements()), 7.0f);
  expect_error(Status::NullPointer, "dy", [&] { engine.conv2d_backward_data(*dgrad, nullptr, wv.data(), dx.data()); });
  expect_error(Status::BadParam, "alpha",
               [&] { engine.conv2d_backward_data(*dgrad, dy.data(), wv.data(), dx.data(), NAN); });
  expect_error(Status::BadParam, "dgrad plan given to conv2d_backward_filter",
               [&] { engine.conv2d_backward_filter(*dgrad, dx.data(), dy.data(), wv.data()); });
  expect_error(Status::BadParam, "dx: overlaps dy",
               [&] { engine.conv2d_backward_data(*dgrad, dx.data(), wv.data(), dx.data()); });
  for (float v : dx) ASSERT_EQ(v, 7.0f);
  EXPECT_THROW(parse_pass("backward"), Error);
  EXPECT_EQ(parse_pass("wgrad"), Pass::BackwardFilter);
}

}  // namespace
}  // namespace mconv::test
