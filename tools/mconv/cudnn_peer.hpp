// The cuDNN peer of the benchmark (same process, same tensors): one Find call of the pass through the
// legacy C API (cudnnFindConvolution{Forward,BackwardData,BackwardFilter}AlgorithmEx) and, for the
// tensor-core precisions, the engine configs of the graph (backend) API's heuristics for the same
// convolution (Note [cuDNN graph peer], cudnn_peer.cpp). Every candidate is timed like mconv; the
// fastest (any workspace) and the fastest whose workspace is at most 64 KiB (memory-matched) are the
// peers, in the suite's precision: fp32 exact with CUDNN_FMA_MATH (no tensor cores, mconv's FFMA math,
// legacy API only); TF32, fp16 and bf16 with tensor-op math and fp32 accumulation, like mconv's
// implicit_mma.
#pragma once

#include <functional>
#include <vector>

#include "bench_report.hpp"
#include "gpu_timing.hpp"
#include "mconv/backward.hpp"
#include "mconv/plan.hpp"

namespace mconv::tools {

inline constexpr size_t kMemoryMatchedWorkspace = 64 * 1024;

/// as/bs/outs: rotating device copies of the pass's two inputs and its output (forward: x, w, y;
/// dgrad: dy, w, dx; wgrad: x, dy, dw), all in `layout` (NCHW or NHWC). cuDNN runs on
/// `timing.stream`. `error_of(out)` returns the norm-relative error of a device output against the
/// reference. `candidates`: how many of each API's candidates of each peer class are timed, in the
/// API's order (1: Find's and the heuristics' first picks). The fastest peer is the fastest of
/// everything timed, the memory-matched peer the fastest of those within 64 KiB of workspace. A candidate
/// whose Find time exceeds `cap_factor` times the best Find time of its class (and 1 ms) is skipped and named
/// in `note`, as is a candidate that fails.
void time_cudnn_peers(Pass pass, const Problem& p, Layout layout, DType dtype, MathMode math,
                      const std::vector<float*>& as, const std::vector<float*>& bs, const std::vector<float*>& outs,
                      const LoopTiming& timing, const std::function<double(const float*)>& error_of, int candidates,
                      double cap_factor, PeerTime& fastest, PeerTime& matched, std::string& note);

}  // namespace mconv::tools
