// mconv: the backward passes as forward convolutions over views of their tensors.
//
// Backward data (dgrad), dx = conv_transpose(dy, w), and backward filter (wgrad), dw = sum over n, p, q
// of dy * x gathered, are both forward convolutions once their tensors are seen through other strides
// (docs/ALGORITHMS.md, "Backward passes"):
//   - dgrad: the rows of dx fall into stride_h * stride_w phases (dx row h belongs to phase h mod
//     stride_h). Inside one phase every dx pixel meets the same subset of filter taps, so the phase is a
//     stride-1 convolution of dy with that subset of w, rotated, its channels exchanged (w viewed as
//     (C, K/G, R', S')) and written through dx's strides times the stride. No zero-inserted copy of dy;
//     a phase that meets no tap is filled with beta * dx.
//   - wgrad: x viewed as (C/G, N, H, W), dy as (K/G, N, P, Q) and dw as (C/G, K/G, R, S) make a
//     forward convolution whose filter is dy, whose reduction runs over N*P*Q (the offset table's rows
//     gather x for it), whose stride is the dilation and whose dilation is the stride.
// Each step is then planned and run by the forward machinery, every family and dtype included.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mconv/plan.hpp"

namespace mconv {

enum class Pass : int { Forward = 0, BackwardData = 1, BackwardFilter = 2 };
const char* pass_name(Pass p);          // "fwd", "dgrad", "wgrad"
Pass parse_pass(const std::string& s);  // throws Error(BadParam) on an unknown name

/// One forward convolution of a backward pass: its problem and the views it reads and writes, each a
/// descriptor plus an element offset from the base of the pass's tensor.
struct ForwardStep {
  Problem problem;
  TensorDesc x, w, y;
  int64_t x_offset = 0, w_offset = 0, y_offset = 0;
  /// Group strides the views cannot express (the group axis is not the channel axis of the view);
  /// only the implicit GEMMs, which read the Plan's group strides, run such a step.
  std::optional<GroupStrides> group_strides;
};

/// A view of the pass's output that no step writes: it becomes beta * itself (zero for beta = 0).
struct FillStep {
  TensorDesc view;
  int64_t offset = 0;
};

struct BackwardDecomposition {
  std::vector<ForwardStep> steps;
  std::vector<FillStep> fills;
};

/// How groups are laid out in the steps: one step over all groups (group strides carried by the
/// step; for the GPU's implicit GEMMs), or one step per group where the views cannot carry them.
enum class GroupSteps : int { Fused = 0, PerGroup = 1 };

/// dgrad of `problem` (whose x, w, y are dx, w, dy): the steps writing dx. Validates the problem and
/// descriptors (the same checks as a forward plan of (dx, w, dy)).
BackwardDecomposition decompose_backward_data(const Problem& problem, const TensorDesc& dy, const TensorDesc& w,
                                              const TensorDesc& dx, GroupSteps groups = GroupSteps::Fused);
/// wgrad of `problem`: the steps writing dw. True convolution (Mode::Convolution) is Error(Unsupported):
/// its dw is the cross-correlation's with r and s reversed, which no positive stride expresses.
BackwardDecomposition decompose_backward_filter(const Problem& problem, const TensorDesc& x, const TensorDesc& dy,
                                                const TensorDesc& dw, GroupSteps groups = GroupSteps::Fused);

/// Each step's share of the SMs where the GPU runs a pass's steps at once (one step: 1): its share of
/// the pass's work (multiply-adds, and a fixed cost a tile), so that a persistent grid of each fills
/// its part of the GPU and the steps end together (Note [phase steps' SM shares] in
/// src/plan/backward.cpp).
std::vector<double> step_sm_shares(const BackwardDecomposition& decomposition);

/// A backward pass made once per layer: its steps and the forward Plan of each. Made by
/// Engine::plan_backward_data / plan_backward_filter, run by conv2d_backward_data / _filter.
struct BackwardPlan {
  Pass pass = Pass::BackwardData;
  Problem problem;       ///< the forward problem whose gradient this is
  TensorDesc a, b, out;  ///< dgrad: dy, w, dx; wgrad: x, dy, dw
  BackwardDecomposition decomposition;
  std::vector<std::shared_ptr<const Plan>> plans;  ///< one per step

  /// True when no step sums with atomics: the output is bitwise the same on every run.
  bool deterministic() const;
  /// Bytes of the steps' offset tables (on the device for a cuda plan).
  int64_t table_bytes() const;
  std::string to_text(int64_t max_rows = 16) const;
};

}  // namespace mconv
