// The tensor-core implicit-GEMM planner (host side): tile and gather form for a problem on a device.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

/// The division of the tensor-core implicit GEMM for `p` with these descriptors (their dtype fixes
/// the rows per stage; y's strides whether Auto may pick the persistent form), `rows_order_rsc`:
/// the plan's rows run channels fastest. A non-empty `forced_tile` overrides the choice, a
/// `forced_split` > 0 the slices of a tile's rows (1: none): a cluster's blocks, and for long
/// reductions (a wgrad step's, `filter_gradient`, or runs of taps) outside a `deterministic` plan
/// also groups adding into y with atomics; `sm_share`: a backward step's share of the SMs where it
/// runs beside others of its pass (StepContext; 1: alone). Appends one line per decision to `why`.
ImplicitMmaDivision plan_implicit_mma(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                                      int64_t rows, bool rows_order_rsc, const HardwareModel& hw,
                                      const std::string& forced_tile, int forced_split, bool deterministic,
                                      bool filter_gradient, double sm_share, std::vector<std::string>& why);

/// Note [wgmma persistent tiles]: whether the persistent and warp-specialized forms can store y
/// through a tensor map, for a plan whose images take gather form `a`. Forward and dgrad steps: y
/// one dense (N*P*Q) x K matrix with K/G whole 16-byte runs (a dgrad phase's view of dx is not). A
/// wgrad step (transposed images, Note [wgmma warp-specialized wgrad]): y's pixels contiguous, pixel
/// m of filter f at f * (its filter stride) + m (dw KRSC), that stride whole 16-byte steps.
bool y_takes_tensor_map_store(const Problem& p, const TensorDesc& y, GatherForm a);

/// The tile names of the family, "a, b, c".
std::string implicit_mma_tile_names();

}  // namespace mconv::detail
