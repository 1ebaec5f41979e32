// mconv: the Plan, the compiled representation of one convolution (techniques 1 and 2).
//
// A Plan is built once from (problem, descriptors, dtype, target) before any data exists and is the
// only thing an executor reads besides the tensors:
//   - the OffsetTable: one OffsetRow per row (c, r, s) of the virtual image matrix, giving the row's
//     element offset into x (the "offset sequence"), its (r*dil_h, s*dil_w) for the padding
//     predicate, and its offset into w (so filters in any layout need no table of their own);
//   - the StartAddressRule: how the start address of column (n, p, q) is formed;
//   - the OutputRule: where y[n, k, p, q] lives;
//   - for a thread tiling, the CompiledRepresentation of the compiled-representation patent:
//     per-thread base addresses plus the relative offsets from one element to the next.
// Because layouts only change the numbers in these tables, one kernel serves NCHW, NHWC and CNHW.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"
#include "mconv/types.hpp"

namespace mconv {

enum class Target : int { Auto = 0, Cpu = 1, Cuda = 2 };
const char* target_name(Target t);
Target parse_target(const std::string& s);

/// The algorithms of mconv. Auto lets the planner choose.
enum class Algorithm : int {
  Auto = 0,
  Reference = 1,        ///< CPU only: direct loops, double accumulation (the test oracle)
  ImplicitPrecomp = 2,  ///< implicit GEMM through the offset table (CPU and CUDA; fp32 on CUDA)
  DirectBlock = 3,      ///< CUDA: direct convolution on shared-memory blocks with halos (depthwise; fp32, fp16, bf16)
  SingleChannel = 4,    ///< CUDA: single-channel kernels driven by the paper's P/Q planner (C/G = 1; fp32, fp16, bf16)
  StrideFixed = 5,      ///< CUDA: multi-channel stride-fixed block kernel (paper section 3.2; fp32)
  ImplicitMma = 6,      ///< CUDA: implicit GEMM through the offset table on tensor cores (fp16, bf16, tf32)
  /// CUDA: a wgrad step of a layer with one input channel per group (depthwise, channel multipliers,
  /// single channel) as a direct reduction over images and pixels; fp32 (exact), fp16, bf16
  DepthwiseWgrad = 7,
  /// CUDA: a wgrad step of a layer with at most 4 input channels and one group (an RGB stem) on
  /// tensor cores, each item's x window read once into shared memory; fp16, bf16
  FewChannelWgrad = 8,
  /// CUDA: a forward layer with at most 4 input channels and one group (an RGB stem) on tensor
  /// cores, each block's x window read once into shared memory; fp16, bf16, fp32 in TF32 math
  FewChannel = 9,
  /// CUDA: a layer of at most 8 filters and one group (an output head; the dgrad steps of an RGB
  /// stem) on tensor cores, each block's x window read once into shared memory; fp16, bf16
  FewFilter = 10,
  /// CUDA (sm_90): a layer of fp32 tensors in TF32 math with x in plane order (NCHW) on tensor
  /// cores, each block's run of output pixels multiplied out of the window of x's rows it reads, a
  /// chunk of channels at a time; one group. Forced only: slower than ImplicitMma as measured
  WindowMma = 11,
};
const char* algorithm_name(Algorithm a);
Algorithm parse_algorithm(const std::string& s);

/// How fp32 tensors may be multiplied (cuDNN's math type). Exact is the default: fp32 products on
/// the FFMA units, results within fp32 rounding of the exact sum. TF32 lets the tensor cores round
/// x and w to TF32 (10 mantissa bits, relative error ~5e-4 per product) and accumulate in fp32, as
/// PyTorch's default for convolutions does. fp16 and bf16 tensors always run on tensor cores with
/// fp32 accumulation; the math mode does not apply to them.
enum class MathMode : int { Exact = 0, TF32 = 1 };
const char* math_mode_name(MathMode m);
MathMode parse_math_mode(const std::string& s);

/// Order of the virtual-matrix rows. The planner picks the order in which consecutive rows are
/// closest in memory (neighbouring threads touch neighbouring addresses): CRS for NCHW/CNHW, RSC
/// when channels are innermost (NHWC).
enum class RowOrder : int { CRS = 0, RSC = 1 };

/// One row (c, r, s) of the virtual image matrix. 16 bytes so a GPU thread reads it as one int4.
struct OffsetRow {
  int32_t x_offset;  ///< c*x.stride_c + r*dil_h*x.stride_h + s*dil_w*x.stride_w
  int32_t dh;        ///< r*dil_h: the row's input-row displacement, for the padding predicate
  int32_t dw;        ///< s*dil_w
  int32_t w_offset;  ///< c*w.stride_c + r'*w.stride_h + s'*w.stride_w (r' = R-1-r for true convolution)
};

/// Rows past the end of the table are padded up to a multiple of kOffsetTableRowAlign with this
/// displacement: the padding predicate fails for every column, so padded rows read as zero. 64 rows
/// cover the longest pipeline stage (implicit_mma's 128-byte stage of fp16/bf16 rows).
inline constexpr int32_t kDisabledRowDisplacement = -(1 << 30);
inline constexpr int kOffsetTableRowAlign = 64;

#if defined(__CUDACC__)
#define MCONV_HOST_DEVICE __host__ __device__
#else
#define MCONV_HOST_DEVICE
#endif

/// The input row (or column) where the window of output row (or column) o starts: o*stride - pad,
/// negative inside the padding. The one definition of a window's origin: the start-address rule
/// and every kernel family use it, in the integer type they index with.
template <class I>
MCONV_HOST_DEVICE constexpr I window_origin(I o, I stride, I pad) {
  return o * stride - pad;
}

/// start[col] for col = (n, p, q): n*x.stride_n + h0*x.stride_h + w0*x.stride_w with
/// h0 = window_origin(p, stride_h, pad_h), w0 likewise. Start addresses may exceed 2^31 (64-bit).
struct StartAddressRule {
  int64_t stride_n, stride_h, stride_w;  // x's element strides
  int64_t conv_stride_h, conv_stride_w, pad_h, pad_w;
  int64_t p, q;
  int64_t start(int64_t n, int64_t p_, int64_t q_) const {
    return n * stride_n + window_origin(p_, conv_stride_h, pad_h) * stride_h +
           window_origin(q_, conv_stride_w, pad_w) * stride_w;
  }
};

/// y[n, k, p, q] = y_base + n*stride_n + k*stride_k + p*stride_p + q*stride_q.
struct OutputRule {
  int64_t stride_n, stride_k, stride_p, stride_q;
};

/// Element offsets from one group to the next (group g starts at g * these).
struct GroupStrides {
  int64_t x, w, y;
};

/// The compiled-representation patent's form, for a tiling in which each thread owns one column:
/// thread t of block b starts at base[t] and walks the rows with addr += relo[k].
struct CompiledRepresentation {
  int64_t threads = 0;
  int64_t block = 0;
  std::vector<int64_t> base;  ///< start address of each thread's column (element units)
  std::vector<int64_t> relo;  ///< relo[0] = offset[0], relo[k] = offset[k] - offset[k-1]
};

/// Options that override the planner's choices.
struct PlanOptions {
  Target target = Target::Auto;
  Algorithm algorithm = Algorithm::Auto;
  std::string tile;  ///< CUDA tile, shape or variant name to force; empty = the planner's choice
  /// CUDA: 0 = planner's choice, 1 = off, n = force n slices of the reduction: implicit_precomp sums
  /// them with atomics, or in rank order inside a cluster (at most 16) in a deterministic plan;
  /// implicit_mma always sums at most 16 in rank order inside a cluster.
  int split_k = 0;
  /// No atomics in any family: the same inputs give bitwise the same y on every run. The implicit
  /// GEMMs split the reduction only among the blocks of one cluster, summed in rank order (sm_90);
  /// stride_fixed's channel slices are off. Slower where the planner would have split further.
  bool deterministic = false;
  /// fp32 tensors: Exact (FFMA) or TF32 (tensor cores). Ignored for fp16/bf16 tensors.
  MathMode math = MathMode::Exact;
};

/// What a step of a backward pass (include/mconv/backward.hpp) adds to Plan::build: the group strides
/// its views cannot express, whether it is a wgrad step, which Auto first offers depthwise_wgrad,
/// and its share of the SMs where it runs beside other steps of its pass (a strided dgrad's phases,
/// on side streams; `step_sm_shares`): a grid of one block an SM would hold SMs its siblings'
/// blocks could use, so a persistent grid takes that share of them.
struct StepContext {
  std::optional<GroupStrides> group_strides;
  bool filter_gradient = false;
  /// In (0, 1]; 1: the step runs alone.
  double sm_share = 1.0;
};

class Plan {
 public:
  /// Validates everything, builds the tables and the division. Pure: it reads no device and no file,
  /// so the same inputs give the same Plan on any machine. `hw` is the device planned for (from
  /// `hardware_model()`, or `HardwareModel::reference_h100()` to plan without a GPU); a target of
  /// Auto means cuda when `hw` describes a GPU (sm_count > 0), else the CPU. Throws Error naming
  /// the bad field.
  static Plan build(const Problem& problem, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                    const HardwareModel& hw, const PlanOptions& options = {});
  /// The same for a step of a backward pass (Engine::plan_backward_data / _filter make them).
  static Plan build(const Problem& problem, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                    const HardwareModel& hw, const PlanOptions& options, const StepContext& step);

  const Problem& problem() const { return problem_; }
  const TensorDesc& x_desc() const { return x_; }
  const TensorDesc& w_desc() const { return w_; }
  const TensorDesc& y_desc() const { return y_; }
  Target target() const { return target_; }
  Algorithm algorithm() const { return algorithm_; }
  /// The dtype of x, w and y (one dtype for all three).
  DType dtype() const { return x_.dtype; }
  /// The math mode the plan runs in: TF32 only for fp32 tensors planned with it.
  MathMode math() const { return math_; }
  RowOrder row_order() const { return row_order_; }
  const std::vector<OffsetRow>& offset_table() const { return rows_; }
  /// Number of real rows (C/G*R*S); offset_table() holds padded rows past it.
  int64_t rows() const { return valid_rows_; }
  const StartAddressRule& start_rule() const { return start_; }
  const OutputRule& output_rule() const { return out_; }
  const GroupStrides& group_strides() const { return group_; }
  /// The division among blocks and threads its launcher reads (std::monostate on the CPU).
  const Division& division() const { return division_; }
  /// Split-K slices of the division (1 where the family has none).
  int split_k() const;
  /// True when no kernel of the plan sums with atomics: y is bitwise the same on every run.
  bool deterministic() const;
  /// The reasons behind the algorithm and tile choices, one line each.
  const std::vector<std::string>& decisions() const { return decisions_; }

  /// The per-thread bases and relative offsets for `threads` columns starting at block*threads.
  CompiledRepresentation compile(int64_t threads, int64_t block = 0) const;

  /// Bytes the executors need besides x, w, y (the offset table copied to the device).
  int64_t table_bytes() const { return static_cast<int64_t>(rows_.size() * sizeof(OffsetRow)); }
  /// Cache key: equal keys mean interchangeable plans.
  std::string key() const;

  /// The offset table on the device, uploaded by the Engine that made this plan (null otherwise,
  /// and for algorithms that read no table), and that engine's device.
  const void* device_table() const { return device_table_.get(); }
  int device() const { return device_; }

  std::string to_text(int64_t max_rows = 64) const;
  std::string to_json(int64_t max_rows = -1) const;

 private:
  Problem problem_;
  TensorDesc x_, w_, y_;
  Target target_ = Target::Cpu;
  Algorithm algorithm_ = Algorithm::ImplicitPrecomp;
  MathMode math_ = MathMode::Exact;
  RowOrder row_order_ = RowOrder::CRS;
  std::vector<OffsetRow> rows_;
  int64_t valid_rows_ = 0;
  StartAddressRule start_{};
  OutputRule out_{};
  GroupStrides group_{};
  Division division_;
  std::vector<std::string> decisions_;
  std::shared_ptr<const void> device_table_;  // freed with the last copy of the plan
  int device_ = -1;

  friend class Engine;
  /// The problem's geometry: offset table, start-address, output and group rules.
  static Plan geometry(const Problem& problem, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y);
};

}  // namespace mconv
