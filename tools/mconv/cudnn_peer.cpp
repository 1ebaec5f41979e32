#include "cudnn_peer.hpp"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// One algorithm a peer may run: its name, workspace, the time cuDNN's Find gave it (< 0: none, so never
// capped) and `run(copy)`, which launches it on rotating copy `copy`, into that copy's output.
struct Candidate {
  std::string name;
  int64_t memory = 0;
  float find_ms = -1.0f;
  std::function<void(int)> run;
};

// The candidates of one API (in its own order, best first), timed like mconv; `out0` is the output
// of copy 0, checked by `error_of`. `fastest` and `matched` keep the best so far, over every API.
void pick_peers(const std::vector<Candidate>& all, const float* out0, const LoopTiming& timing,
                const std::function<double(const float*)>& error_of, int candidates, double cap_factor,
                PeerTime& fastest, PeerTime& matched, std::string& note) {
  auto measure = [&](const Candidate& a, const LoopTiming& loop) {
    PeerTime out;
    out.valid = true;
    out.algo = a.name;
    out.workspace = a.memory;
    a.run(0);
    cuda_ok(cudaStreamSynchronize(timing.stream), "cudnn run");
    out.rel_err = error_of(out0);
    out.ms = median_ms_per_launch(a.run, loop);
    return out;
  };
  // Each candidate is timed at most once: the first `candidates` of any workspace and the first
  // `candidates` within 64 KiB. The fastest peer is the fastest of all of them ("whatever its
  // workspace": never slower than the memory-matched one), the memory-matched peer the fastest within
  // 64 KiB. The cap of each class: cap_factor times its best Find time, at least 1 ms.
  float best_any = 1e30f, best_matched = 1e30f;
  for (const Candidate& a : all) {
    if (a.find_ms < 0) continue;
    best_any = std::min(best_any, a.find_ms);
    if (a.memory <= int64_t(kMemoryMatchedWorkspace)) best_matched = std::min(best_matched, a.find_ms);
  }
  int fastest_timed = 0, matched_timed = 0;
  auto keep = [](PeerTime& best, const PeerTime& t) {
    if (!best.valid || t.ms < best.ms) best = t;
  };
  auto add_note = [&](const std::string& s) { note += (note.empty() ? "cuDNN: " : "; ") + s; };
  for (const Candidate& a : all) {
    const bool for_fastest = fastest_timed < candidates;
    const bool for_matched = matched_timed < candidates && a.memory <= int64_t(kMemoryMatchedWorkspace);
    if (!for_fastest && !for_matched) continue;
    const double cap = std::max(1.0, cap_factor * (for_matched ? std::max(best_any, best_matched) : best_any));
    if (a.find_ms > cap) {
      add_note("skipped " + a.name + " (Find " + std::to_string(a.find_ms) + " ms > cap " + std::to_string(cap) +
               " ms)");
      continue;
    }
    // Slow candidates (Find > 5 ms a launch) are timed over fewer launches.
    LoopTiming loop = timing;
    if (a.find_ms > 5.0f) loop.launches = std::min(loop.launches, 3);
    PeerTime t;
    try {
      t = measure(a, loop);
    } catch (const std::exception& e) {
      add_note(a.name + " failed: " + e.what());
      continue;
    }
    keep(fastest, t);
    fastest_timed += for_fastest;
    if (for_matched) keep(matched, t), ++matched_timed;
  }
}

// The legacy API's candidates: Find's results (`Perf`: its perf struct of the pass) that succeeded,
// exact fp32 taking no tensor-core algorithm (the other precisions take any, as mconv does).
template <class Perf>
std::vector<Candidate> legacy_candidates(const Perf* perf, int returned, bool exact,
                                         const std::function<void(const Perf&, int)>& run) {
  std::vector<Candidate> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& a = perf[i];
    if (a.status != CUDNN_STATUS_SUCCESS ||
        (exact && (a.mathType == CUDNN_TENSOR_OP_MATH || a.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)))
      continue;
    out.push_back({algo_name(a.algo), int64_t(a.memory), a.time, [run, a](int copy) { run(a, copy); }});
  }
  return out;
}

// Note [cuDNN graph peer]: cuDNN's graph (backend) API reaches engines the legacy API does not (on the
// H100 PyTorch's cuDNN path, which uses it, ran resnet50 in fp16 about 3x faster than the legacy
// API's Find did). For the tensor-core precisions the peer also takes the engine configs that
// heuristics mode A returns for the same operation graph (one convolution of the pass, the same
// tensors, fp32 compute), each finalized into an execution plan and timed like the legacy
// candidates; engines that reduce in reduced precision are left out, so the peer accumulates in fp32
// as mconv does.
class BackendDescriptor {
 public:
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type) {
    ok(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~BackendDescriptor() { cudnnBackendDestroyDescriptor(d_); }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const T* values) {
    ok(cudnnBackendSetAttribute(d_, name, type, count, values), "cudnnBackendSetAttribute");
  }
  void set(cudnnBackendAttributeName_t name, const BackendDescriptor& value) {
    const cudnnBackendDescriptor_t v = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  void finalize() { ok(cudnnBackendFinalize(d_), "cudnnBackendFinalize"); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using BackendPtr = std::unique_ptr<BackendDescriptor>;

// Unique ids of the three tensors in the graph and in every variant pack.
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

BackendPtr backend_tensor(int64_t uid, cudnnDataType_t type, const std::array<int64_t, 4>& dims, Layout layout) {
  // dims in (N, C, H, W) order; strides of NCHW or NHWC (channels fastest).
  std::array<int64_t, 4> strides;
  if (layout == Layout::NHWC)
    strides = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};
  else
    strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  auto t = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  t->finalize();
  return t;
}

// Owns every backend descriptor the graph candidates use, as long as they are timed.
struct GraphPeer {
  std::vector<BackendPtr> keep;
};

std::vector<Candidate> graph_candidates(Pass pass, const Problem& p, Layout layout, DType dtype, void* ws,
                                        size_t ws_bytes, const std::vector<float*>& as, const std::vector<float*>& bs,
                                        const std::vector<float*>& outs, GraphPeer& g) {
  const cudnnDataType_t type = dtype == DType::Float16    ? CUDNN_DATA_HALF
                               : dtype == DType::BFloat16 ? CUDNN_DATA_BFLOAT16
                                                          : CUDNN_DATA_FLOAT;
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  BackendPtr x = backend_tensor(kUidX, type, {p.n, p.c, p.h, p.w}, layout);
  BackendPtr w = backend_tensor(kUidW, type, {p.k, p.c / p.groups, p.r, p.s}, layout);
  BackendPtr y = backend_tensor(kUidY, type, {p.n, p.k, p.p(), p.q()}, layout);
  auto conv = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnConvolutionMode_t mode = p.mode == Mode::Convolution ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, dil[2] = {p.dil_h, p.dil_w}, stride[2] = {p.stride_h, p.stride_w},
                pad[2] = {p.pad_h, p.pad_w};
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv->finalize();
  const float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptorType_t op_type;
  struct Attrs {
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  } at{};
  if (pass == Pass::Forward) {
    op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    at = {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
  } else if (pass == Pass::BackwardData) {
    op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    at = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
  } else {
    op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
    at = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }
  auto op = std::make_unique<BackendDescriptor>(op_type);
  op->set(at.x, *x);
  op->set(at.w, *w);
  op->set(at.y, *y);
  op->set(at.conv, *conv);
  op->set(at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  op->set(at.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  op->finalize();
  cudnnHandle_t h = handle();
  auto graph = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  const cudnnBackendDescriptor_t ops = op->get();
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ops);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  graph->finalize();
  auto heur = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
  heur->set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph);
  heur->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
  heur->finalize();
  int64_t count = 0;
  ok(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                              nullptr),
     "engine config count");
  std::vector<BackendPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t returned = 0;
  ok(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                              &returned, raw.data()),
     "engine configs");
  // The tensors each copy binds: x, w, y of the forward pass; dx, w, dy of dgrad; x, dw, dy of wgrad.
  auto pointers = [&](int i) -> std::array<void*, 3> {
    const size_t c = size_t(i) % as.size();
    if (pass == Pass::Forward) return {as[c], bs[c], outs[c]};
    if (pass == Pass::BackwardData) return {outs[c], bs[c], as[c]};
    return {as[c], outs[c], bs[c]};
  };
  std::vector<Candidate> out;
  for (int64_t i = 0; i < returned; ++i) {
    try {
      BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      cudnnBackendDescriptor_t e = engine.get();
      int64_t n = 0;
      ok(cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
         "config engine");
      int64_t index = -1;
      ok(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index), "engine index");
      cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
      int64_t note_count = 0;
      ok(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                  CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &note_count, notes),
         "engine notes");
      if (std::find(notes, notes + note_count, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) != notes + note_count)
        continue;
      auto plan = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      plan->finalize();
      int64_t workspace = 0;
      ok(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                  &workspace),
         "plan workspace");
      if (workspace > int64_t(ws_bytes)) continue;
      std::vector<cudnnBackendDescriptor_t> packs;
      const int64_t uids[3] = {kUidX, kUidW, kUidY};
      for (size_t c = 0; c < as.size(); ++c) {
        auto pack = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
        std::array<void*, 3> ptrs = pointers(int(c));
        pack->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
        pack->set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs.data());
        pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        pack->finalize();
        packs.push_back(pack->get());
        g.keep.push_back(std::move(pack));
      }
      const cudnnBackendDescriptor_t pl = plan->get();
      g.keep.push_back(std::move(plan));
      out.push_back({"GRAPH_ENGINE_" + std::to_string(index), workspace, -1.0f, [h, pl, packs](int copy) {
                       ok(cudnnBackendExecute(h, pl, packs[size_t(copy) % packs.size()]), "cudnnBackendExecute");
                     }});
    } catch (const std::exception&) {
      continue;  // a config that does not finalize for this graph: not a candidate
    }
  }
  // Every descriptor the plans were built from stays alive with them.
  g.keep.push_back(std::move(conv));
  g.keep.push_back(std::move(op));
  g.keep.push_back(std::move(heur));
  g.keep.push_back(std::move(x));
  g.keep.push_back(std::move(w));
  g.keep.push_back(std::move(y));
  g.keep.push_back(std::move(graph));
  for (auto& c : configs) g.keep.push_back(std::move(c));
  return out;
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
  std::vector<Candidate> legacy;
  if (pass == Pass::Forward) {  // as = x, bs = w, outs = y
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    ok(cudnnFindConvolutionForwardAlgorithmEx(handle(), d.x, as[0], d.w, bs[0], d.conv, d.y, outs[0],
                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws.ptr, ws.bytes),
       "cudnnFindConvolutionForwardAlgorithmEx");
    legacy = legacy_candidates<cudnnConvolutionFwdAlgoPerf_t>(
        perf, returned, exact, [&, n](const cudnnConvolutionFwdAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionForward(handle(), &one, d.x, as[i % n], d.w, bs[i % n], d.conv, a.algo, ws.ptr, a.memory,
                                     &zero, d.y, outs[i % n]),
             "cudnnConvolutionForward");
        });
  } else if (pass == Pass::BackwardData) {  // as = dy, bs = w, outs = dx
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    ok(cudnnFindConvolutionBackwardDataAlgorithmEx(handle(), d.w, bs[0], d.y, as[0], d.conv, d.x, outs[0],
                                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws.ptr,
                                                   ws.bytes),
       "cudnnFindConvolutionBackwardDataAlgorithmEx");
    legacy = legacy_candidates<cudnnConvolutionBwdDataAlgoPerf_t>(
        perf, returned, exact, [&, n](const cudnnConvolutionBwdDataAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionBackwardData(handle(), &one, d.w, bs[i % n], d.y, as[i % n], d.conv, a.algo, ws.ptr,
                                          a.memory, &zero, d.x, outs[i % n]),
             "cudnnConvolutionBackwardData");
        });
  } else {  // as = x, bs = dy, outs = dw
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    ok(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle(), d.x, as[0], d.y, bs[0], d.conv, d.w, outs[0],
                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, ws.ptr,
                                                     ws.bytes),
       "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    legacy = legacy_candidates<cudnnConvolutionBwdFilterAlgoPerf_t>(
        perf, returned, exact, [&, n](const cudnnConvolutionBwdFilterAlgoPerf_t& a, int i) {
          ok(cudnnConvolutionBackwardFilter(handle(), &one, d.x, as[i % n], d.y, bs[i % n], d.conv, a.algo, ws.ptr,
                                            a.memory, &zero, d.w, outs[i % n]),
             "cudnnConvolutionBackwardFilter");
        });
  }
  pick_peers(legacy, outs[0], timing, error_of, candidates, cap_factor, fastest, matched, note);
  if (exact) return;  // Note [cuDNN graph peer]: the tensor-core precisions
  GraphPeer graph;
  std::vector<Candidate> engines;
  try {
    engines = graph_candidates(pass, p, layout, dtype, ws.ptr, ws.bytes, as, bs, outs, graph);
  } catch (const std::exception& e) {
    note += (note.empty() ? "cuDNN: " : "; ") + std::string("graph API: ") + e.what();
  }
  pick_peers(engines, outs[0], timing, error_of, candidates, cap_factor, fastest, matched, note);
}

}  // namespace mconv::tools
