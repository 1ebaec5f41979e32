// Benchmark results: one record per layer, printed as a table, CSV or JSON (docs/BENCHMARKING.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "mconv/problem.hpp"

namespace mconv::tools {

/// One cuDNN peer's result on a layer (docs/BENCHMARKING.md: fastest / memory-matched).
struct PeerTime {
  bool valid = false;
  std::string algo;
  double ms = 0;
  int64_t workspace = 0;
  double rel_err = 0;  ///< its output against mconv's sampled double reference
};

struct LayerResult {
  std::string name;
  Problem problem;
  std::string target, algorithm, tile;
  double ms = 0;
  int64_t extra_bytes = 0;
  double rel_err = 0;  ///< norm-relative error of sampled outputs against the double reference
  bool correct = false;
  PeerTime fastest, matched;
  /// Every mconv algorithm that ran on the layer (with --all-algos): name and ms (< 0: wrong result).
  std::vector<std::pair<std::string, double>> alternatives;
  double floor_ms = 0;  ///< roofline floor from the measured peaks (0: unknown)
  /// False when mconv could not run the layer (`note` says why); the suite goes on without it.
  bool ran = true;
  std::string note;  ///< what was skipped or failed on this layer (mconv, or a cuDNN candidate), else empty
};

/// Peaks measured in the same run (GPU); zero where not measured.
struct Peaks {
  std::string device;
  double gemm_flops = 0;   ///< FLOP/s of a large cuBLAS GEMM in the suite's precision
  std::string gemm_name;   ///< which GEMM, e.g. "SGEMM (FFMA)" or "bf16 GEMM (tensor cores)"
  double bytes_per_s = 0;  ///< device copy, bytes read + written
  std::string timing;      ///< how the layers were timed (host loop or CUDA graph), for the report
};

/// Minimum bytes a layer must move: x and w read once, y written once, `element_bytes` each.
double min_bytes(const Problem& p, int element_bytes = 4);

/// The CSV header and one layer's row (print_report's "csv" format), so that rows can be written as
/// they finish.
void print_csv_header(std::ostream& os);
void print_csv_row(std::ostream& os, const std::string& suite, const LayerResult& r);

void print_report(std::ostream& os, const std::string& format, const std::string& suite,
                  const std::vector<LayerResult>& rows, const Peaks& peaks);

}  // namespace mconv::tools
