#include "cudnn_peer.hpp"

#include <cudnn.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>

#include "gpu_timing.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the legacy API is the peer docs/BENCHMARKING.md names

namespace mconv::tools {
namespace {

void ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cudnnGetErrorString(s));
}

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "?";
  }
}

const char* algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "BWD_DATA_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "BWD_DATA_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "BWD_DATA_FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "BWD_DATA_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "BWD_DATA_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "BWD_DATA_WINOGRAD_NONFUSED";
    default:
      return "?";
  }
}

const char* algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "BWD_FILTER_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "BWD_FILTER_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "BWD_FILTER_FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "BWD_FILTER_ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "BWD_FILTER_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "BWD_FILTER_FFT_TILING";
    default:
      return "?";
  }
}

struct Descriptors {
  cudnnTensorDescriptor_t x{}, y{};
  cudnnFilterDescriptor_t w{};
  cudnnConvolutionDescriptor_t conv{};
  Descriptors(const Problem& p, Layout layout, DType dtype, MathMode math) {
    const cudnnDataType_t t = dtype == DType::Float16    ? CUDNN_DATA_HALF
                              : dtype == DType::BFloat16 ? CUDNN_DATA_BFLOAT16
                                                         : CUDNN_DATA_FLOAT;
    if (layout != Layout::NCHW && layout != Layout::NHWC)
      throw std::runtime_error("the cuDNN peer takes NCHW or NHWC, not " + std::string(layout_name(layout)));
    const cudnnTensorFormat_t fmt = layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    ok(cudnnCreateTensorDescriptor(&x), "x desc");
    ok(cudnnCreateTensorDescriptor(&y), "y desc");
    ok(cudnnCreateFilterDescriptor(&w), "w desc");
    ok(cudnnCreateConvolutionDescriptor(&conv), "conv desc");
    ok(cudnnSetTensor4dDescriptor(x, fmt, t, int(p.n), int(p.c), int(p.h), int(p.w)), "x desc");
    ok(cudnnSetFilter4dDescriptor(w, t, fmt, int(p.k), int(p.c / p.groups), int(p.r), int(p.s)), "w desc");
    ok(cudnnSetConvolution2dDescriptor(
           conv, int(p.pad_h), int(p.pad_w), int(p.stride_h), int(p.stride_w), int(p.dil_h), int(p.dil_w),
           p.mode == Mode::Convolution ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
       "conv desc");
    ok(cudnnSetConvolutionGroupCount(conv, int(p.groups)), "group count");
    const bool exact = dtype == DType::Float32 && math == MathMode::Exact;
    ok(cudnnSetConvolutionMathType(conv, exact ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH), "math type");
    ok(cudnnSetTensor4dDescriptor(y, fmt, t, int(p.n), int(p.k), int(p.p()), int(p.q())), "y desc");
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
};

cudnnHandle_t handle() {
  static cudnnHandle_t h = [] {
    cudnnHandle_t hh;
    ok(cudnnCreate(&hh), "cudnnCreate");
    return hh;
  }();
  return h;
}

// Find's candidates of one pass (`Perf`: cuDNN's perf struct of that pass), timed like mconv:
// `run(a, copy)` launches candidate a on rotating copy `copy`, into that copy's output; `out0` is
// the output of copy 0, checked by `error_of`.
template <class Perf>
void pick_peers(const Perf* perf, int returned, bool exact, const std::function<void(const Perf&, int)>& run,
                const float* out0, const LoopTiming& timing, const std::function<double(const float*)>& error_of,
                int candidates, double cap_factor, PeerTime& fastest, PeerTime& matched, std::string& note) {
  auto measure = [&](const Perf& a, const LoopTiming& loop) {
    PeerTime out;
    out.valid = true;
    out.algo = algo_name(a.algo);
    out.workspace = int64_t(a.memory);
    run(a, 0);
    cuda_ok(cudaStreamSynchronize(timing.stream), "cudnn run");
    out.rel_err = error_of(out0);
    out.ms = median_ms_per_launch([&](int i) { run(a, i); }, loop);
    return out;
  };
  // Find's candidates in its order (fastest first by its own timing), each timed at most once: the
  // first `candidates` of any workspace and the first `candidates` within 64 KiB. The fastest peer is
  // the fastest of all of them ("whatever its workspace": never slower than the memory-matched one),
  // the memory-matched peer the fastest within 64 KiB.
  auto usable = [&](const Perf& a) {
    // Exact fp32 takes no tensor-core algorithm; the other precisions take any (as mconv does).
    return a.status == CUDNN_STATUS_SUCCESS &&
           (!exact || (a.mathType != CUDNN_TENSOR_OP_MATH && a.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
  };
  // The cap of each class: cap_factor times its best Find time, at least 1 ms.
  float best_any = 1e30f, best_matched = 1e30f;
  for (int i = 0; i < returned; ++i) {
    if (!usable(perf[i])) continue;
    best_any = std::min(best_any, perf[i].time);
    if (perf[i].memory <= kMemoryMatchedWorkspace) best_matched = std::min(best_matched, perf[i].time);
  }
  int fastest_timed = 0, matched_timed = 0;
  auto keep = [](PeerTime& best, const PeerTime& t) {
    if (!best.valid || t.ms < best.ms) best = t;
  };
  auto add_note = [&](const std::string& s) { note += (note.empty() ? "cuDNN: " : "; ") + s; };
  for (int i = 0; i < returned; ++i) {
    if (!usable(perf[i])) continue;
    const bool for_fastest = fastest_timed < candidates;
    const bool for_matched = matched_timed < candidates && perf[i].memory <= kMemoryMatchedWorkspace;
    if (!for_fastest && !for_matched) continue;
    const double cap = std::max(1.0, cap_factor * (for_matched ? std::max(best_any, best_matched) : best_any));
    if (perf[i].time > cap) {
      add_note(std::string("skipped ") + algo_name(perf[i].algo) + " (Find " + std::to_string(perf[i].time) +
               " ms > cap " + std::to_string(cap) + " ms)");
      continue;
    }
    // Slow candidates (Find > 5 ms a launch) are timed over fewer launches.
    LoopTiming loop = timing;
    if (perf[i].time > 5.0f) loop.launches = std::min(loop.launches, 3);
    PeerTime t;
    try {
      t = measure(perf[i], loop);
    } catch (const std::exception& e) {
      add_note(std::string(algo_name(perf[i].algo)) + " failed: " + e.what());
      continue;
    }
    keep(fastest, t);
    fastest_timed += for_fastest;
    if (for_matched) keep(matched, t), ++matched_timed;
  }
}

// "A few GB of workspace to choose from" (docs/BENCHMARKING.md), bounded by what is free.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
  Workspace() {
    size_t free_b = 0, total_b = 0;
    cuda_ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    bytes = std::min<size_t>(size_t(4) << 30, free_b / 2);
    cuda_ok(cudaMalloc(&ptr, bytes), "cudaMalloc workspace");
  }
  ~Workspace() { cudaFree(ptr); }
};

}  // namespace

void time_cudnn_peers(Pass pass, const Problem& p, Layout layout, DType dtype, MathMode math,
                      const std::vector<float*>& as, const std::vector<float*>& bs, const std::vector<float*>& outs,
                      const LoopTiming& timing, const std::function<double(const float*)>& error_of, int candidates,
                      double cap_factor, PeerTime& fastest, PeerTime& matched, std::string& note) {
  Descriptors d(p, layout, dtype, math);
  const bool exact = dtype == DType::Float32 && math == MathMode::Exact;
  ok(cudnnSetStream(handle(), timing.stream), "cudnnSetStream");
  Workspace ws;
  const float one = 1.0f, zero = 0.0f;
  const auto n = as.size();
  int returned = 0;
  if (pass == Pass::Forward) {  // as = x, bs = w, outs = y
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    ok(cudnnFindConvolutionForwardAlgorithmEx(handle(), d.x, as[0], d.w, bs[0], d.conv, d.y, outs[0],
                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws.ptr, ws.bytes),
       "cudnnFindConvolutionForwardAlgorithmEx");
    pick_peers<cudnnConvolutionFwdAlgoPerf_t>(
        perf, returned, exact,
        [&](const cudnnConvolutionFwdAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionForward(handle(), &one, d.x, as[i % n], d.w, bs[i % n], d.conv, a.algo, ws.ptr, a.memory,
                                     &zero, d.y, outs[i % n]),
             "cudnnConvolutionForward");
        },
        outs[0], timing, error_of, candidates, cap_factor, fastest, matched, note);
  } else if (pass == Pass::BackwardData) {  // as = dy, bs = w, outs = dx
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    ok(cudnnFindConvolutionBackwardDataAlgorithmEx(handle(), d.w, bs[0], d.y, as[0], d.conv, d.x, outs[0],
                                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws.ptr,
                                                   ws.bytes),
       "cudnnFindConvolutionBackwardDataAlgorithmEx");
    pick_peers<cudnnConvolutionBwdDataAlgoPerf_t>(
        perf, returned, exact,
        [&](const cudnnConvolutionBwdDataAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionBackwardData(handle(), &one, d.w, bs[i % n], d.y, as[i % n], d.conv, a.algo, ws.ptr,
                                          a.memory, &zero, d.x, outs[i % n]),
             "cudnnConvolutionBackwardData");
        },
        outs[0], timing, error_of, candidates, cap_factor, fastest, matched, note);
  } else {  // as = x, bs = dy, outs = dw
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    ok(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle(), d.x, as[0], d.y, bs[0], d.conv, d.w, outs[0],
                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, ws.ptr,
                                                     ws.bytes),
       "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    pick_peers<cudnnConvolutionBwdFilterAlgoPerf_t>(
        perf, returned, exact,
        [&](const cudnnConvolutionBwdFilterAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionBackwardFilter(handle(), &one, d.x, as[i % n], d.y, bs[i % n], d.conv, a.algo, ws.ptr,
                                            a.memory, &zero, d.w, outs[i % n]),
             "cudnnConvolutionBackwardFilter");
        },
        outs[0], timing, error_of, candidates, cap_factor, fastest, matched, note);
  }
}

}  // namespace mconv::tools
