// Plan::build: the geometry (src/plan), the algorithm (heuristics.cpp, or forced) and the division
// its family's planner makes (src/algorithms/<family>/planner). Pure: no device, no file.
#include <algorithm>

#include "../algorithms/depthwise_wgrad/planner.hpp"
#include "../algorithms/direct_block/planner.hpp"
#include "../algorithms/few_channel/planner.hpp"
#include "../algorithms/few_channel_wgrad/planner.hpp"
#include "../algorithms/few_filter/planner.hpp"
#include "../algorithms/implicit_mma/planner.hpp"
#include "../algorithms/implicit_precomp/planner.hpp"
#include "../algorithms/single_channel/planner.hpp"
#include "../algorithms/stride_fixed/planner.hpp"
#include "../algorithms/window_mma/planner.hpp"
#include "heuristics.hpp"
#include "mconv/plan.hpp"

namespace mconv {
namespace {

/// The tile names that pick a variant of a direct family, to compare or test them (direct_block
/// takes none).
std::vector<std::string> direct_variant_tiles(Algorithm algo) {
  if (algo == Algorithm::SingleChannel)
    return {detail::kPlaneStreamTile, detail::kPlaneBulkTile, detail::kSingleChannelPaperTile};
  if (algo == Algorithm::StrideFixed) return {detail::kStrideFixedTile4, detail::kStrideFixedTile8};
  return {};
}

/// "a, b or c".
std::string one_of(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

/// The division of a direct family (direct_block, single_channel and its plane streams,
/// stride_fixed). Throws Error when the family cannot run `pr`.
Division direct_division(Algorithm algo, const Problem& pr, const TensorDesc& x, const TensorDesc& y,
                         const HardwareModel& hw, const std::string& forced_tile, bool deterministic,
                         std::vector<std::string>& why) {
  if (algo == Algorithm::DirectBlock) return detail::plan_direct_block(pr, hw, why, dtype_size(x.dtype));
  if (algo == Algorithm::StrideFixed) {
    const int thread_pixels = forced_tile == detail::kStrideFixedTile4   ? 4
                              : forced_tile == detail::kStrideFixedTile8 ? 8
                                                                         : 0;
    return detail::plan_stride_fixed(pr, hw, why, thread_pixels, !deterministic);
  }
  const bool bulk =
      forced_tile == detail::kPlaneBulkTile ||
      (forced_tile.empty() && detail::plane_bulk_unsupported(pr, x, y).empty() && detail::plane_bulk_preferred(pr));
  if (bulk) return detail::plan_plane_bulk(pr, x, y, hw, why);
  if (forced_tile == detail::kPlaneStreamTile ||
      (forced_tile.empty() && detail::plane_stream_unsupported(pr, x).empty()))
    return detail::plan_plane_stream(pr, x, hw, why);
  return detail::plan_single_channel(pr, hw, why, forced_tile != detail::kSingleChannelPaperTile);
}

}  // namespace

Plan Plan::build(const Problem& pr, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                 const HardwareModel& hw, const PlanOptions& options) {
  return build(pr, x, w, y, hw, options, StepContext{});
}

Plan Plan::build(const Problem& pr, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                 const HardwareModel& hw, const PlanOptions& requested, const StepContext& step) {
  Plan plan = geometry(pr, x, w, y);
  if (step.group_strides) plan.group_ = *step.group_strides;
  PlanOptions options = requested;

  Target target = options.target;
  if (target == Target::Auto) target = hw.sm_count > 0 ? Target::Cuda : Target::Cpu;
  if (target == Target::Cuda && hw.sm_count <= 0)
    throw Error(Status::BadParam, "target: a cuda plan needs the hardware model of a GPU (sm_count is 0)");
  plan.target_ = target;

  // fp64 tensors: the CPU's double reference loops only (gradient checks in float64).
  if (x.dtype == DType::Float64) {
    if (target == Target::Cuda)
      throw Error(Status::Unsupported, "dtype: fp64 runs on the cpu target only (its reference loops)");
    if (options.algorithm != Algorithm::Auto && options.algorithm != Algorithm::Reference)
      throw Error(Status::Unsupported, std::string("algorithm: ") + algorithm_name(options.algorithm) +
                                           " runs fp32/fp16/bf16; fp64 runs on reference");
    plan.algorithm_ = Algorithm::Reference;
    plan.decisions_.push_back("algorithm reference: fp64 tensors run the double reference loops");
    return plan;
  }
  // The shared-memory families below (depthwise_wgrad, few_channel_wgrad, few_channel, few_filter)
  // run when forced or by Auto's rule for them, on the cuda target only and without a tile or split.
  // `wrong_step` (null where any step fits) refuses the step when forced; `unsupported` says why
  // the family cannot run the problem ("" when it can): a clear error when forced, a recorded
  // refusal under Auto. `accept` fills the taken plan's math and division. Returns whether the
  // plan took the family.
  const auto offer = [&](Algorithm a, const char* wrong_step, const char* divides, const std::string& auto_reason,
                         auto&& unsupported, auto&& accept) {
    const bool forced = options.algorithm == a;
    const std::string name = algorithm_name(a);
    if (target != Target::Cuda)
      throw Error(Status::Unsupported, "algorithm: " + name + " runs on the cuda target only");
    if (wrong_step) throw Error(Status::Unsupported, "algorithm: " + name + " runs " + wrong_step);
    if (!options.tile.empty() || options.split_k > 1)
      throw Error(Status::BadParam,
                  "tile: tiles and split_k apply to the implicit GEMMs (" + name + " plans its own " + divides + ")");
    const std::string no = unsupported();
    if (!no.empty()) {
      if (forced) throw Error(Status::Unsupported, "algorithm: " + name + " cannot run this problem: " + no);
      plan.decisions_.push_back("refused " + name + ": " + no);
      return false;
    }
    plan.algorithm_ = a;
    plan.decisions_.push_back("algorithm " + name + ": " + (forced ? std::string("forced") : auto_reason));
    accept();
    return true;
  };
  const bool auto_direct =
      target == Target::Cuda && options.algorithm == Algorithm::Auto && options.tile.empty() && options.split_k <= 1;
  const bool forward_step = !step.filter_gradient && !step.group_strides;
  // A wgrad step of a layer with one input channel per group: depthwise_wgrad reduces it directly in
  // every dtype (exact fp32, which TF32 permits), where a GEMM tile would hold one filter (Note
  // [depthwise wgrad]). split_k 1 ("off, bitwise reproducible") plans it without atomic slices.
  if ((options.algorithm == Algorithm::DepthwiseWgrad || (step.filter_gradient && auto_direct)) &&
      offer(
          Algorithm::DepthwiseWgrad, nullptr, "split",
          "the wgrad step of a layer with one input channel per group, reduced directly",
          [&] { return detail::depthwise_wgrad_unsupported(pr, x, w, y); },
          [&] {
            plan.division_ = detail::plan_depthwise_wgrad(
                pr, x, w, plan.group_, hw, options.deterministic || options.split_k == 1, plan.decisions_);
          }))
    return plan;
  // A wgrad step of a layer with a few input channels (an RGB stem) in fp16/bf16: each item's x
  // window is read once into shared memory, where implicit_mma would gather every element from
  // global memory (Note [few-channel wgrad]).
  if ((options.algorithm == Algorithm::FewChannelWgrad ||
       (step.filter_gradient && auto_direct && pr.n <= detail::kFewChannelWgradMaxChannels)) &&
      offer(
          Algorithm::FewChannelWgrad, nullptr, "split",
          "the wgrad step of a layer with at most " + std::to_string(detail::kFewChannelWgradMaxChannels) +
              " input channels, each item's x window read once",
          [&] { return detail::few_channel_wgrad_unsupported(pr, x, w, y, step.group_strides.has_value()); },
          [&] {
            plan.division_ =
                detail::plan_few_channel_wgrad(pr, hw, options.deterministic || options.split_k == 1, plan.decisions_);
          }))
    return plan;
  // A forward layer with a few input channels (an RGB stem) in fp16/bf16 or TF32: each block reads its x
  // window once into shared memory and multiplies it with the columns padded only to the MMA's 16,
  // where implicit_mma pads each pixel's channels to an 8-element vector and gathers every element
  // from global memory (Note [few-channel forward]). Single-channel layers (C = 1) keep
  // single_channel's kernels, which are made for them.
  if ((options.algorithm == Algorithm::FewChannel ||
       (forward_step && auto_direct && (x.dtype != DType::Float32 || options.math == MathMode::TF32) &&
        pr.groups == 1 && pr.c > 1 && pr.c <= detail::kFewChannelMaxChannels)) &&
      offer(
          Algorithm::FewChannel,
          forward_step ? nullptr : "forward layers (a wgrad step of few channels runs few_channel_wgrad)", "blocks",
          "a layer of at most " + std::to_string(detail::kFewChannelMaxChannels) +
              " input channels, each block's x window read once",
          [&] {
            const std::string no = detail::few_channel_unsupported(pr, x, w, y);
            return no.empty() && x.dtype == DType::Float32 && options.math != MathMode::TF32
                       ? std::string("fp32 runs on it in TF32 math only (math tf32)")
                       : no;
          },
          [&] {
            plan.math_ = x.dtype == DType::Float32 ? MathMode::TF32 : MathMode::Exact;
            plan.division_ = detail::plan_few_channel(pr, dtype_size(x.dtype), hw, plan.decisions_);
          }))
    return plan;
  // A layer of at most 8 filters (an output head; the dgrad phase steps of an RGB stem) in fp16/bf16:
  // each block reads its x window once into shared memory, a chunk of channels at a time, against
  // one MMA tile of 8 filters, where implicit_mma's narrowest tile holds 16 and gathers each (pixel,
  // tap) row from global memory (Note [few-filter forward]); which layers, as measured:
  // few_filter_preferred.
  if ((options.algorithm == Algorithm::FewFilter ||
       (forward_step && auto_direct && x.dtype != DType::Float32 && pr.groups == 1 &&
        pr.k <= detail::kFewFilterMaxFilters && detail::few_filter_preferred(pr, x))) &&
      offer(
          Algorithm::FewFilter,
          forward_step ? nullptr : "forward layers and dgrad steps of one group (not wgrad steps)", "blocks",
          "a layer of at most " + std::to_string(detail::kFewFilterMaxFilters) +
              " filters, each block's x window read once",
          [&] { return detail::few_filter_unsupported(pr, x, w, y); },
          [&] {
            plan.math_ = MathMode::Exact;
            plan.division_ = detail::plan_few_filter(pr, hw, plan.decisions_);
          }))
    return plan;
  // window_mma (Note [window mma]): an fp32 layer in TF32 math with x in plane order, each block's
  // window of x's rows read once into shared memory. It runs only when forced: on the H100 it ran
  // resnet50's 3x3 layers 1.0-2.0x slower than implicit_mma (docs/PERFORMANCE.md, "Window MMA").
  if (options.algorithm == Algorithm::WindowMma &&
      offer(
          Algorithm::WindowMma,
          forward_step ? nullptr : "forward layers and dgrad steps of one group (not wgrad steps)", "blocks", "",
          [&] {
            const std::string no = detail::window_mma_unsupported(pr, x, w, y);
            if (!no.empty()) return no;
            if (options.math != MathMode::TF32) return std::string("fp32 runs on it in TF32 math only (math tf32)");
            if (hw.cc_major != 9 || hw.cc_minor != 0) return std::string("its wgmma kernel runs on sm_90 only");
            return no;
          },
          [&] {
            plan.math_ = MathMode::TF32;
            plan.division_ = detail::plan_window_mma(pr, hw, plan.decisions_);
          }))
    return plan;
  // Only the implicit GEMMs read the Plan's group strides; the direct families address groups
  // through the descriptors' channel strides.
  if (step.group_strides) {
    if (options.algorithm == Algorithm::Auto) {
      options.algorithm = x.dtype != DType::Float32 || options.math == MathMode::TF32 ? Algorithm::ImplicitMma
                                                                                      : Algorithm::ImplicitPrecomp;
      plan.decisions_.push_back(std::string("algorithm ") + algorithm_name(options.algorithm) +
                                ": the step's groups are not its views' channel blocks (group strides)");
    } else if (options.algorithm != Algorithm::ImplicitPrecomp && options.algorithm != Algorithm::ImplicitMma) {
      throw Error(Status::Unsupported, std::string("algorithm: ") + algorithm_name(options.algorithm) +
                                           " cannot run this backward step (its groups are not the views' "
                                           "channel blocks; implicit_precomp and implicit_mma can)");
    }
  }
  // fp16/bf16 tensors, and fp32 ones in TF32 math, run on the tensor cores (implicit_mma) on the GPU;
  // the CPU converts them and computes in fp32.
  const bool half = x.dtype != DType::Float32;
  plan.math_ = half ? MathMode::Exact : options.math;
  // TF32 allows the tensor cores; it does not require them. Layers with one channel per group
  // (depthwise, single channel) are bandwidth-bound and have no reduction for an MMA to speed up: Auto
  // keeps their FFMA family (exact, which TF32 permits) rather than a GEMM whose filter tiles would
  // hold one filter each.
  // Likewise layers of few filters in plane order (Note [few filters off the tensor cores]); not
  // wgrad steps, whose filter is dy's P x Q planes.
  bool tensor_cores = half || options.math == MathMode::TF32;
  const bool few_filters = !step.filter_gradient && detail::few_filters_leave_tensor_cores(pr, x);
  if (!half && tensor_cores && target == Target::Cuda && options.algorithm == Algorithm::Auto && options.tile.empty() &&
      (pr.c_per_group() == 1 || few_filters)) {
    std::vector<std::string> why;
    const Algorithm a = detail::choose_algorithm(pr, x, hw, why);
    if (a == Algorithm::DirectBlock || a == Algorithm::SingleChannel) {
      plan.decisions_.push_back(std::string("math tf32 allowed, ") + algorithm_name(a) + " kept: " +
                                (pr.c_per_group() == 1
                                     ? "C/G = 1 layers are bandwidth-bound"
                                     : "a few filters in plane order (Note [few filters off the tensor cores])") +
                                " (exact FFMA, which tf32 permits)");
      plan.math_ = MathMode::Exact;
      tensor_cores = false;
    }
  }
  if (tensor_cores) {
    const std::string what = half ? std::string(dtype_name(x.dtype)) + " tensors" : "math tf32";
    if (target == Target::Cpu) {
      if (options.algorithm == Algorithm::ImplicitMma)
        throw Error(Status::Unsupported, "algorithm: implicit_mma runs on the cuda target only");
      if (!half)
        plan.decisions_.push_back("math tf32: the CPU executor computes in exact fp32 (tf32 only allows less)");
    } else {
      // fp16/bf16 layers with one channel per group (depthwise, channel multipliers, single channel)
      // run the direct families in x's dtype: channels-last ones single_channel's channels-last kernel;
      // in plane order (NCHW, CNHW) depthwise ones its plane streams, else direct_block (at most 4
      // filters a group) or its strip kernel (more). They have no reduction over channels for an MMA
      // to speed up: a depthwise GEMM tile would hold one filter, a single-channel one a reduction of
      // R*S rows padded to the MMA's depth.
      const bool auto_pick = options.algorithm == Algorithm::Auto && options.tile.empty() && options.split_k <= 1;
      const bool forced_single = options.algorithm == Algorithm::SingleChannel;
      const bool forced_direct = options.algorithm == Algorithm::DirectBlock;
      if (half && (auto_pick || forced_single || forced_direct)) {
        const std::string& tile = options.tile;
        const std::vector<std::string> single_tiles{detail::kChannelsLastDepthwiseTile, detail::kPlaneStreamTile,
                                                    detail::kPlaneBulkTile, detail::kSingleChannelPaperTile};
        if (forced_single && !tile.empty() &&
            std::find(single_tiles.begin(), single_tiles.end(), tile) == single_tiles.end())
          throw Error(Status::Unsupported,
                      "tile: single_channel runs fp16/bf16 as " + one_of(single_tiles) + ", not " + tile);
        if (forced_direct && (!tile.empty() || options.split_k > 1))
          throw Error(Status::BadParam, "tile: tiles and split_k apply to implicit_precomp only");
        std::vector<std::string> refusals;  // why each kernel the layer could have taken did not take it
        // Runs `division` for `algo` and returns true, or notes why it refused.
        auto take = [&](Algorithm algo, const std::string& name, auto&& division) {
          const size_t decisions = plan.decisions_.size();
          try {
            plan.division_ = division();
            plan.algorithm_ = algo;
            return true;
          } catch (const Error& e) {
            if (options.algorithm == algo && (!tile.empty() || algo == Algorithm::DirectBlock)) throw;
            plan.decisions_.resize(decisions);
            refusals.push_back(name + ": " + e.what());
            return false;
          }
        };
        auto wants = [&](const char* t) { return tile.empty() || tile == t; };
        // channels-last x and y: the channels-last kernel.
        if (!forced_direct && wants(detail::kChannelsLastDepthwiseTile)) {
          const std::string no = detail::channels_last_depthwise_unsupported(pr, x, y);
          if (no.empty()) {
            plan.algorithm_ = Algorithm::SingleChannel;
            plan.division_ = detail::plan_channels_last_depthwise(pr, hw, plan.decisions_);
            return plan;
          }
          refusals.push_back("channels-last kernel: " + no);
        }
        // Depthwise in plane order (NCHW, CNHW): the plane streams, in x's dtype.
        const bool plane_tile = tile == detail::kPlaneStreamTile || tile == detail::kPlaneBulkTile;
        if (!forced_direct && (tile.empty() || plane_tile)) {
          const std::string no = detail::plane_stream_unsupported(pr, x);
          if (no.empty()) {
            if (take(Algorithm::SingleChannel, "plane streams", [&] {
                  plan.decisions_.push_back("algorithm single_channel: " + std::string(dtype_name(x.dtype)) +
                                            " depthwise layer in plane order: the plane streams, in x's dtype");
                  return direct_division(Algorithm::SingleChannel, pr, x, y, hw, tile, false, plan.decisions_);
                }))
              return plan;
          } else {
            refusals.push_back("plane streams: " + no);
          }
        }
        // Contiguous x rows, one channel per group: direct_block for multipliers of at most 4 (as fp32
        // Auto picks it: rectangular or dilated depthwise filters, strides above 2, a strided dgrad's
        // phase steps) or when forced; the paper's strip kernel for more filters (single-channel
        // layers). (Channels-last layers the channels-last kernel does not run stay on implicit_mma:
        // these would read x an element at a time, C elements apart.)
        // Layers of few filters in plane order likewise (Note [few filters off the tensor cores]).
        const bool one_channel = pr.c_per_group() == 1 && x.strides[3] == 1;
        const bool depthwise = one_channel && pr.groups > 1 && pr.k_per_group() <= 4;
        if (forced_direct || (auto_pick && (depthwise || few_filters))) {
          if (take(Algorithm::DirectBlock, "direct_block", [&] {
                plan.decisions_.push_back(std::string("algorithm direct_block: ") + dtype_name(x.dtype) +
                                          (forced_direct ? " forced"
                                           : depthwise   ? " depthwise layer (K/G <= 4) in plane order"
                                                       : " layer of K/G <= 4 filters over C/G >= 16 channels in plane "
                                                         "order (Note [few filters off the tensor cores])"));
                return direct_division(Algorithm::DirectBlock, pr, x, y, hw, "", false, plan.decisions_);
              }))
            return plan;
        }
        if (!forced_direct && wants(detail::kSingleChannelPaperTile) && one_channel) {
          if (take(Algorithm::SingleChannel, "strip kernel", [&] {
                plan.decisions_.push_back("algorithm single_channel: " + std::string(dtype_name(x.dtype)) +
                                          " single-channel layer in plane order: the paper's strip kernel");
                const SingleChannelDivision d =
                    detail::plan_single_channel(pr, hw, plan.decisions_, tile != detail::kSingleChannelPaperTile);
                // Auto, as in fp32: not where every output would reload its taps.
                if (!forced_single &&
                    detail::single_channel_reloads_taps(pr, d, detail::single_channel_column_pairs(pr, y)))
                  throw Error(Status::Unsupported, "1-row runs would reload " + std::to_string(pr.r * pr.s) + " taps");
                return Division{d};
              }))
            return plan;
        } else if (!forced_direct && wants(detail::kSingleChannelPaperTile)) {
          refusals.push_back("strip kernel: needs C/G = 1 and contiguous x rows");
        }
        if (forced_single) {
          std::string why;
          for (const auto& r : refusals) why += (why.empty() ? "" : "; ") + r;
          throw Error(Status::Unsupported, "algorithm: single_channel cannot run this fp16/bf16 layer: " + why);
        }
        if (auto_pick && pr.c_per_group() == 1)
          for (const auto& r : refusals) plan.decisions_.push_back("refused: " + r);
      }
      if (options.algorithm != Algorithm::Auto && options.algorithm != Algorithm::ImplicitMma)
        throw Error(Status::Unsupported, std::string("algorithm: ") + algorithm_name(options.algorithm) +
                                             " has fp32 FFMA kernels only; " + what + " run on implicit_mma");
      plan.decisions_.push_back(options.algorithm == Algorithm::Auto
                                    ? "algorithm implicit_mma: " + what + " run on the tensor cores"
                                    : "algorithm implicit_mma: forced");
      // Note [tf32 wgrad steps]: TF32 wgrad steps run here too, every gather form split over the
      // SMs (atomic groups). Measured on an H100 (resnet50 tf32 NCHW wgrad, against the FFMA GEMM's
      // split-K, which TF32 permits): 4.75 -> 3.55 ms, the element-gathered layers from 12% slower
      // (l4_ds) to 2.4x faster (l2_ds; conv1 1.9x); runs of taps (Note [mma reduction runs]) had
      // taken it 7.25 -> 4.73 ms; channels-last steps (both transposed, Note [mma tf32 transposed
      // filters]) 6.82 -> 2.70 ms.
      plan.algorithm_ = Algorithm::ImplicitMma;
      plan.division_ = detail::plan_implicit_mma(pr, x, w, y, plan.valid_rows_, plan.row_order_ == RowOrder::RSC, hw,
                                                 options.tile, options.split_k, options.deterministic,
                                                 step.filter_gradient, step.sm_share, plan.decisions_);
      return plan;
    }
  } else if (options.algorithm == Algorithm::ImplicitMma) {
    throw Error(Status::Unsupported,
                "algorithm: implicit_mma runs fp16 or bf16 tensors, or fp32 tensors with math tf32 (fp32 exact runs "
                "on the FFMA families)");
  }

  Algorithm algo = options.algorithm;
  if (algo == Algorithm::Auto && target == Target::Cuda && (!options.tile.empty() || options.split_k > 0)) {
    algo = Algorithm::ImplicitPrecomp;  // a forced tile or split names the implicit GEMM
    plan.decisions_.push_back("algorithm implicit_precomp: a tile or split_k was forced");
  } else if (algo == Algorithm::Auto) {
    algo = target == Target::Cuda ? detail::choose_algorithm(pr, x, hw, plan.decisions_) : Algorithm::ImplicitPrecomp;
    if (target != Target::Cuda) plan.decisions_.push_back("algorithm implicit_precomp: the CPU executor of the Plan");
  } else {
    plan.decisions_.push_back(std::string("algorithm ") + algorithm_name(algo) + ": forced");
  }
  if (algo == Algorithm::Reference && target != Target::Cpu)
    throw Error(Status::Unsupported, "algorithm: reference runs on the CPU only");
  if ((algo == Algorithm::DirectBlock || algo == Algorithm::SingleChannel || algo == Algorithm::StrideFixed) &&
      target != Target::Cuda)
    throw Error(Status::Unsupported,
                std::string("algorithm: ") + algorithm_name(algo) + " runs on the cuda target only");
  plan.algorithm_ = algo;

  if (algo == Algorithm::DirectBlock || algo == Algorithm::SingleChannel || algo == Algorithm::StrideFixed) {
    // single_channel's tile names one of its variants, stride_fixed's a thread's pixels.
    const auto variants = direct_variant_tiles(algo);
    const bool variant = std::find(variants.begin(), variants.end(), options.tile) != variants.end();
    if ((!options.tile.empty() && !variant) || options.split_k > 1)
      throw Error(Status::BadParam,
                  "tile: tiles and split_k apply to implicit_precomp only (single_channel also takes " +
                      one_of(direct_variant_tiles(Algorithm::SingleChannel)) + "; stride_fixed " +
                      one_of(direct_variant_tiles(Algorithm::StrideFixed)) + ")");
    try {
      plan.division_ = direct_division(algo, pr, x, y, hw, options.tile, options.deterministic, plan.decisions_);
      return plan;
    } catch (const Error& e) {
      if (options.algorithm != Algorithm::Auto) throw;  // forced: say why it cannot run
      // Auto falls back to the implicit GEMM, which runs every problem.
      plan.decisions_.push_back(std::string("algorithm implicit_precomp: fallback, ") + e.what());
      plan.algorithm_ = Algorithm::ImplicitPrecomp;
    }
  }
  if (target == Target::Cuda) {
    plan.division_ =
        detail::plan_implicit_precomp(pr, plan.valid_rows_, {plan.row_order_ == RowOrder::RSC, w.strides[0] == 1}, hw,
                                      options.tile, options.split_k, options.deterministic, plan.decisions_);
  } else if (!options.tile.empty() || options.split_k > 1) {
    throw Error(Status::BadParam, "tile: tiles and split_k apply to the cuda target only");
  }
  return plan;
}

}  // namespace mconv
