// Plan::build: the offset table, start-address and output rules, and the planner's decisions.
#include "mconv/plan.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

#include "../cuda/cuda_backend.hpp"
#include "heuristics.hpp"
#include "mconv/engine.hpp"
#include "mconv/hardware.hpp"
#include "single_channel_planner.hpp"
#include "stride_fixed_planner.hpp"

namespace mconv {

const char* target_name(Target t) {
  switch (t) {
    case Target::Auto:
      return "auto";
    case Target::Cpu:
      return "cpu";
    case Target::Cuda:
      return "cuda";
  }
  return "?";
}

Target parse_target(const std::string& s) {
  if (s == "auto") return Target::Auto;
  if (s == "cpu") return Target::Cpu;
  if (s == "cuda" || s == "gpu") return Target::Cuda;
  throw Error(Status::BadParam, "target: unknown name '" + s + "' (expected auto, cpu or cuda)");
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Auto:
      return "auto";
    case Algorithm::Reference:
      return "reference";
    case Algorithm::ImplicitPrecomp:
      return "implicit_precomp";
    case Algorithm::DirectBlock:
      return "direct_block";
    case Algorithm::SingleChannel:
      return "single_channel";
    case Algorithm::StrideFixed:
      return "stride_fixed";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& s) {
  for (Algorithm a : {Algorithm::Auto, Algorithm::Reference, Algorithm::ImplicitPrecomp, Algorithm::DirectBlock,
                      Algorithm::SingleChannel, Algorithm::StrideFixed})
    if (s == algorithm_name(a)) return a;
  throw Error(Status::BadParam, "algorithm: unknown name '" + s +
                                    "' (expected auto, reference, implicit_precomp, direct_block, "
                                    "single_channel or stride_fixed)");
}

namespace {

int32_t to_offset32(int64_t v, const char* field) {
  if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min())
    throw Error(Status::Overflow,
                std::string(field) + ": an offset-table entry exceeds 32 bits (" + std::to_string(v) + " elements)");
  return static_cast<int32_t>(v);
}

// (c, r, s) of row `i` in the given order.
void row_coords(RowOrder order, int64_t i, int64_t r_, int64_t s_, int64_t cg, int64_t& c, int64_t& r, int64_t& s) {
  if (order == RowOrder::CRS) {
    s = i % s_;
    r = (i / s_) % r_;
    c = i / (s_ * r_);
  } else {
    c = i % cg;
    s = (i / cg) % s_;
    r = i / (cg * s_);
  }
}

/// The tile names a direct kernel family takes: its variants, to compare or test them (direct_block
/// takes none). direct_tile below reads them.
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

/// The division of a direct kernel family (direct_block, single_channel with its plane stream,
/// stride_fixed), as the TileChoice its launcher reads. Throws Error when the family cannot run `pr`.
TileChoice direct_tile(Algorithm algo, const Problem& pr, const TensorDesc& x, const TensorDesc& y,
                       const std::string& forced_tile, std::vector<std::string>& why) {
  TileChoice t;
  if (algo == Algorithm::DirectBlock) {
    t.name = detail::choose_direct_shape(pr, detail::current_device_summary(), why).name;
  } else if (algo == Algorithm::StrideFixed) {
    const int thread_pixels = forced_tile == detail::kStrideFixedTile4   ? 4
                              : forced_tile == detail::kStrideFixedTile8 ? 8
                                                                         : 0;
    const auto div = detail::plan_stride_fixed(pr, detail::planning_hardware_model(why), why, thread_pixels);
    t.name = "stride_fixed_" + std::to_string(div.tile_cols) + "x" + std::to_string(div.tile_rows) + "_s" +
             std::to_string(div.segment_channels * 4) + (div.thread_pixels == 4 ? "_p4" : "");
    t.segment_channels = div.segment_channels;
    t.thread_pixels = div.thread_pixels;
    t.block_rows = div.tile_rows;
    t.block_cols = div.tile_cols;
    t.split_k = div.splits;
  } else {
    const HardwareModel hw = detail::planning_hardware_model(why);
    const bool bulk =
        forced_tile == detail::kPlaneBulkTile ||
        (forced_tile.empty() && detail::plane_bulk_unsupported(pr, x, y).empty() && detail::plane_bulk_preferred(pr));
    if (bulk) {
      const auto div = detail::plan_plane_bulk(pr, x, y, hw, why);
      t.name = detail::kPlaneBulkTile;
      t.block_planes = div.planes_per_chunk;
      t.block_rows = div.rows_per_chunk;
      t.block_cols = div.segment;
      t.grid_blocks = int(div.grid_blocks);
    } else if (forced_tile == detail::kPlaneStreamTile ||
               (forced_tile.empty() && detail::plane_stream_unsupported(pr, x).empty())) {
      const auto div = detail::plan_plane_stream(pr, x, hw, why);
      t.name = detail::kPlaneStreamTile;
      t.block_planes = div.planes_per_block;
      t.block_pitch = div.layout.pitch;
      t.block_plane_floats = div.layout.plane;
      t.block_rows = div.rows_per_block;
    } else {
      const auto div = detail::plan_single_channel(pr, hw, why, forced_tile != detail::kSingleChannelPaperTile);
      t.name = "single_channel_m" + std::to_string(div.method) + (div.shaped ? "_shaped" : "");
      t.block_filters = div.filters_per_block;
      t.block_rows = div.rows_per_block;
    }
  }
  t.reason = why.back();
  return t;
}

}  // namespace

Plan Plan::build(const Problem& pr, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                 const PlanOptions& options) {
  pr.validate(x, w, y);
  Plan plan;
  plan.problem_ = pr;
  plan.x_ = x;
  plan.w_ = w;
  plan.y_ = y;

  Target target = options.target;
  if (target == Target::Auto) target = cuda_available() ? Target::Cuda : Target::Cpu;
  if (target == Target::Cuda && !built_with_cuda())
    throw Error(Status::NoDevice, "target: cuda requested but mconv was built without CUDA");
  plan.target_ = target;

  Algorithm algo = options.algorithm;
  if (algo == Algorithm::Auto && target == Target::Cuda && (!options.tile.empty() || options.split_k > 0)) {
    algo = Algorithm::ImplicitPrecomp;  // a forced tile or split names the implicit GEMM
    plan.decisions_.push_back("algorithm implicit_precomp: a tile or split_k was forced");
  } else if (algo == Algorithm::Auto) {
    algo = target == Target::Cuda ? detail::choose_algorithm(pr, x, plan.decisions_) : Algorithm::ImplicitPrecomp;
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

  // Row order: the one in which consecutive rows are closest in x (Note [row order]): with channels
  // innermost (NHWC) consecutive c are adjacent, otherwise consecutive s are.
  plan.row_order_ = x.strides[1] < x.strides[3] && pr.c_per_group() > 1 ? RowOrder::RSC : RowOrder::CRS;

  const int64_t cg = pr.c_per_group();
  plan.valid_rows_ = cg * pr.r * pr.s;
  const int64_t padded = (plan.valid_rows_ + kOffsetTableRowAlign - 1) / kOffsetTableRowAlign * kOffsetTableRowAlign;
  plan.rows_.reserve(padded);
  for (int64_t i = 0; i < plan.valid_rows_; ++i) {
    int64_t c, r, s;
    row_coords(plan.row_order_, i, pr.r, pr.s, cg, c, r, s);
    const int64_t fr = pr.mode == Mode::Convolution ? pr.r - 1 - r : r;
    const int64_t fs = pr.mode == Mode::Convolution ? pr.s - 1 - s : s;
    OffsetRow row;
    row.x_offset = to_offset32(c * x.strides[1] + r * pr.dil_h * x.strides[2] + s * pr.dil_w * x.strides[3], "x");
    row.dh = static_cast<int32_t>(r * pr.dil_h);
    row.dw = static_cast<int32_t>(s * pr.dil_w);
    row.w_offset = to_offset32(c * w.strides[1] + fr * w.strides[2] + fs * w.strides[3], "w");
    plan.rows_.push_back(row);
  }
  while (static_cast<int64_t>(plan.rows_.size()) < padded)
    plan.rows_.push_back({0, kDisabledRowDisplacement, kDisabledRowDisplacement, 0});

  plan.start_ = {x.strides[0], x.strides[2], x.strides[3], pr.stride_h, pr.stride_w,
                 pr.pad_h,     pr.pad_w,     pr.p(),       pr.q()};
  plan.out_ = {y.strides[0], y.strides[1], y.strides[2], y.strides[3]};
  plan.group_ = {cg * x.strides[1], pr.k_per_group() * w.strides[0], pr.k_per_group() * y.strides[1]};

  if (plan.algorithm_ == Algorithm::DirectBlock || plan.algorithm_ == Algorithm::SingleChannel ||
      plan.algorithm_ == Algorithm::StrideFixed) {
    // single_channel's tile names one of its variants, stride_fixed's a thread's pixels.
    const auto variants = direct_variant_tiles(plan.algorithm_);
    const bool variant = std::find(variants.begin(), variants.end(), options.tile) != variants.end();
    if ((!options.tile.empty() && !variant) || options.split_k > 1)
      throw Error(Status::BadParam, "tile: tiles and split_k apply to implicit_precomp only (single_channel also takes " +
                                        one_of(direct_variant_tiles(Algorithm::SingleChannel)) + "; stride_fixed " +
                                        one_of(direct_variant_tiles(Algorithm::StrideFixed)) + ")");
    if (plan.algorithm_ == Algorithm::DirectBlock && pr.n > 65535)
      throw Error(Status::Unsupported, "n: direct_block launches one grid row per image, at most 65535");
    try {
      plan.tile_ = direct_tile(plan.algorithm_, pr, x, y, options.tile, plan.decisions_);
      return plan;
    } catch (const Error& e) {
      if (options.algorithm != Algorithm::Auto) throw;  // forced: say why it cannot run
      // Auto falls back to the implicit GEMM, which runs every problem (also when there is no
      // device memory to measure the hardware model with).
      plan.decisions_.push_back(std::string("algorithm implicit_precomp: fallback, ") + e.what());
      plan.algorithm_ = Algorithm::ImplicitPrecomp;
    }
  }
  if (target == Target::Cuda) {
    const detail::TileShape* tile = nullptr;
    if (!options.tile.empty()) {
      tile = detail::find_tile(options.tile);
      if (!tile) {
        std::string names;
        for (const auto& t : detail::kTileCatalog)
          names += std::string(names.empty() ? "" : ", ") + std::string(t.name);
        throw Error(Status::BadParam, "tile: unknown tile '" + options.tile + "' (known: " + names + ")");
      }
      plan.decisions_.push_back("tile " + options.tile + ": forced");
    } else {
      tile = &detail::choose_implicit_precomp_tile(pr, detail::current_device_summary(),
                                                   plan.row_order_ == RowOrder::RSC, plan.decisions_);
    }
    plan.tile_.name = std::string(tile->name);
    plan.tile_.reason = plan.decisions_.back();
    const int64_t k_tiles = (plan.valid_rows_ + tile->block_k - 1) / tile->block_k;
    if (options.split_k < 0 || options.split_k > k_tiles)
      throw Error(Status::BadParam, "split_k: " + std::to_string(options.split_k) + " is outside 0.." +
                                        std::to_string(k_tiles) + " (the row tiles of this problem)");
    if (options.split_k > 0) {
      plan.tile_.split_k = options.split_k;
      plan.decisions_.push_back("split_k " + std::to_string(options.split_k) + ": forced");
    } else {
      plan.tile_.split_k = detail::choose_split_k(pr, *tile, detail::current_device_summary(), plan.decisions_);
    }
  } else if (!options.tile.empty() || options.split_k > 1) {
    throw Error(Status::BadParam, "tile: tiles and split_k apply to the cuda target only");
  }
  return plan;
}

CompiledRepresentation Plan::compile(int64_t threads, int64_t block) const {
  if (threads <= 0) throw Error(Status::BadParam, "threads: must be >= 1");
  if (block < 0) throw Error(Status::BadParam, "block: must be >= 0");
  CompiledRepresentation cr;
  cr.threads = threads;
  cr.block = block;
  const int64_t pq = start_.p * start_.q, cols = problem_.n * pq;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t col = block * threads + t;
    if (col >= cols) break;
    cr.base.push_back(start_.start(col / pq, (col % pq) / start_.q, col % start_.q));
  }
  int64_t prev = 0;
  for (int64_t i = 0; i < valid_rows_; ++i) {
    cr.relo.push_back(rows_[i].x_offset - prev);
    prev = rows_[i].x_offset;
  }
  return cr;
}

std::string Plan::key() const {
  std::ostringstream os;
  os << problem_.to_string() << " mode" << int(problem_.mode) << " a" << problem_.alpha << " b" << problem_.beta
     << " | x " << x_.to_string() << " | w " << w_.to_string() << " | y " << y_.to_string() << " | "
     << target_name(target_) << " " << algorithm_name(algorithm_) << " " << tile_.name << " split" << tile_.split_k;
  return os.str();
}

}  // namespace mconv
