// The Plan's geometry: the offset table, the start-address, output and group rules, and the
// compiled representation. (Plan::build, which adds the algorithm and its division, is the
// selection layer's: src/selection/build_plan.cpp.)
#include "mconv/plan.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

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
    case Algorithm::ImplicitMma:
      return "implicit_mma";
    case Algorithm::DepthwiseWgrad:
      return "depthwise_wgrad";
    case Algorithm::FewChannelWgrad:
      return "few_channel_wgrad";
    case Algorithm::FewChannel:
      return "few_channel";
    case Algorithm::FewFilter:
      return "few_filter";
    case Algorithm::WindowMma:
      return "window_mma";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& s) {
  for (Algorithm a :
       {Algorithm::Auto, Algorithm::Reference, Algorithm::ImplicitPrecomp, Algorithm::DirectBlock,
        Algorithm::SingleChannel, Algorithm::StrideFixed, Algorithm::ImplicitMma, Algorithm::DepthwiseWgrad,
        Algorithm::FewChannelWgrad, Algorithm::FewChannel, Algorithm::FewFilter, Algorithm::WindowMma})
    if (s == algorithm_name(a)) return a;
  throw Error(Status::BadParam, "algorithm: unknown name '" + s +
                                    "' (expected auto, reference, implicit_precomp, direct_block, "
                                    "single_channel, stride_fixed, implicit_mma, depthwise_wgrad, "
                                    "few_channel_wgrad, few_channel, few_filter or window_mma)");
}

const char* math_mode_name(MathMode m) {
  return m == MathMode::TF32 ? "tf32" : "exact";
}

MathMode parse_math_mode(const std::string& s) {
  if (s == "exact") return MathMode::Exact;
  if (s == "tf32") return MathMode::TF32;
  throw Error(Status::BadParam, "math: unknown mode '" + s + "' (expected exact or tf32)");
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

}  // namespace

Plan Plan::geometry(const Problem& pr, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) {
  pr.validate(x, w, y);
  Plan plan;
  plan.problem_ = pr;
  plan.x_ = x;
  plan.w_ = w;
  plan.y_ = y;

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
  return plan;
}

int Plan::split_k() const {
  if (const auto* d = std::get_if<ImplicitPrecompDivision>(&division_)) return d->split_k;
  if (const auto* d = std::get_if<StrideFixedDivision>(&division_)) return d->splits;
  if (const auto* d = std::get_if<ImplicitMmaDivision>(&division_)) return d->cluster_split * d->atomic_slices;
  if (const auto* d = std::get_if<DepthwiseWgradDivision>(&division_)) return d->cluster_split * d->atomic_slices;
  if (const auto* d = std::get_if<FewChannelWgradDivision>(&division_)) return d->cluster_split * d->atomic_slices;
  return 1;
}

bool Plan::deterministic() const {
  if (const auto* d = std::get_if<ImplicitPrecompDivision>(&division_)) return d->split_k == 1 || d->ordered_split;
  if (const auto* d = std::get_if<ImplicitMmaDivision>(&division_)) return d->atomic_slices == 1;
  if (const auto* d = std::get_if<DepthwiseWgradDivision>(&division_)) return d->atomic_slices == 1;
  if (const auto* d = std::get_if<FewChannelWgradDivision>(&division_)) return d->atomic_slices == 1;
  return split_k() == 1;
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
  os << problem_.to_string() << " mode" << int(problem_.mode) << " | x " << x_.to_string() << " | w " << w_.to_string()
     << " | y " << y_.to_string() << " | " << target_name(target_) << " " << algorithm_name(algorithm_) << " "
     << division_name(division_) << " split" << split_k() << " math " << math_mode_name(math_);
  return os.str();
}

}  // namespace mconv
