// `mconv bench`: runs every layer of a suite on a target, checks it, and times it.
#pragma once

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench_report.hpp"
#include "mconv/engine.hpp"
#include "mconv/plan.hpp"
#include "suite.hpp"

namespace mconv::tools {

struct BenchOptions {
  int64_t batch = 0;             ///< overrides n when > 0
  Layout layout = Layout::NCHW;  ///< of x, w (KCRS/KRSC/CKRS) and y
  DType dtype = DType::Float32;  ///< of x, w and y (plan.math says whether fp32 may use TF32)
  Pass pass = Pass::Forward;     ///< fwd, or a backward pass (CUDA; its peer: cuDNN's Find of that pass)
  PlanOptions plan;              ///< algorithm / tile overrides
  /// Fused into mconv's forward calls and applied by the check; the cuDNN peers time the convolution
  /// alone (a framework runs the activation as a kernel of its own after it).
  Activation activation = Activation::Identity;
  bool vs_cudnn = false;  ///< time the two cuDNN peers too (CUDA builds with cuDNN)
  /// cuDNN peers: how many of Find's candidates of each class (any workspace, within 64 KiB) are
  /// timed here; each peer is the fastest timed of its class (cudnn_peer.hpp). The default, 8, times
  /// every fp32 algorithm Find returns: docs/BENCHMARKING.md's "fastest algorithm" as this benchmark times
  /// it. 1 = Find's own picks, which on the H100 were up to 3x slower than another algorithm of the
  /// same call on single-channel and multi-channel layers (docs/PERFORMANCE.md).
  int peer_candidates = 8;
  bool all_algorithms = false;   ///< also time every mconv algorithm that supports the layer
  int launches = 20;             ///< back-to-back launches per timed loop
  int repeats = 5;               ///< timed loops; the median is reported
  bool graph = true;             ///< time a captured CUDA graph of the launches (no per-call host overhead)
  bool dependent_launch = true;  ///< EngineOptions::dependent_launch
  int64_t check_samples = 4096;
  uint64_t seed = 1;
  /// cuDNN candidates Find timed slower than this many times the best of their peer class (and
  /// above 1 ms) are not timed again: a grouped layer's GEMM or FFT candidates can take seconds a
  /// launch, and timing them held whole suites for minutes. Skipped candidates are named in the row.
  double peer_cap_factor = 20;
  /// Called with each layer's row as soon as it is finished (rows written as they come).
  std::function<void(const LayerResult&)> on_row;
};

/// The plan of one suite layer on `engine`, with `row` started (name, problem, target); or, where mconv
/// cannot run the layer, null with `row` marked not run (and why), handed to opt.on_row and appended to
/// `out`, so that the suite goes on.
inline std::shared_ptr<const Plan> plan_layer(Engine& engine, const Layer& layer, const Problem& p, PlanOptions po,
                                              const BenchOptions& opt, LayerResult& row,
                                              std::vector<LayerResult>& out) {
  row.name = layer.name;
  row.problem = p;
  row.target = target_name(engine.target());
  po.target = engine.target();
  try {
    p.validate();  // before any size is computed from the fields
    return engine.plan(p, p.x_desc(opt.layout, opt.dtype), p.w_desc(opt.layout, opt.dtype),
                       p.y_desc(opt.layout, opt.dtype), po);
  } catch (const Error& e) {
    row.ran = false;
    row.note = std::string("mconv: ") + e.what();
    std::cerr << "  not run: " << e.what() << "\n";
    if (opt.on_row) opt.on_row(row);
    out.push_back(row);
    return nullptr;
  }
}

std::vector<LayerResult> bench_cpu(const std::vector<Layer>& layers, const BenchOptions& opt);

/// Also measures the peaks (SGEMM, copy) into `peaks`. Defined in bench_cuda.cpp (CUDA builds).
std::vector<LayerResult> bench_cuda(const std::vector<Layer>& layers, const BenchOptions& opt, Peaks& peaks);

/// `mconv run` on a CUDA engine: copies x, w and y (beta reads it) to the device, runs `plan` once,
/// and copies y back. Defined in bench_cuda.cpp (CUDA builds).
void run_on_cuda(Engine& engine, const Plan& plan, const std::vector<unsigned char>& x,
                 const std::vector<unsigned char>& w, std::vector<unsigned char>& y, const Epilogue& e);
/// A backward pass on device copies of the host buffers (a, b: its inputs; out read for beta, written back).
void run_backward_on_cuda(Engine& engine, const BackwardPlan& plan, const std::vector<unsigned char>& a,
                          const std::vector<unsigned char>& b, std::vector<unsigned char>& out, float alpha,
                          float beta);

}  // namespace mconv::tools
