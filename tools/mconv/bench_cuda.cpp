// The GPU side of `mconv bench`: peaks measured in the same run, each layer checked against the
// double reference (sampled outputs) and timed with events over rotating input copies, beside cuDNN.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "bench.hpp"
#include "gpu_timing.hpp"
#include "layer_args.hpp"
#include "mconv/engine.hpp"
#ifdef MCONV_HAVE_CUDNN
#include "cudnn_peer.hpp"
#endif

namespace mconv::tools {
namespace {

// Copy bandwidth (bytes read + written) and cuBLAS SGEMM rate without tensor cores.
void measure_peaks(Peaks& peaks) {
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  peaks.device = prop.name;
  const size_t n = size_t(256) << 20;  // 1 GiB of floats each side
  {
    DeviceArray a(n), b(n);
    cuda_ok(cudaMemset(a.ptr, 1, n * 4), "memset");
    const double ms = median_ms_per_launch(
        [&](int) { cuda_ok(cudaMemcpyAsync(b.ptr, a.ptr, n * 4, cudaMemcpyDeviceToDevice), "copy"); }, {10, 3});
    peaks.bytes_per_s = 2.0 * n * 4 / (ms * 1e-3);
  }
  {
    const int m = 8192;
    DeviceArray a(size_t(m) * m), b(size_t(m) * m), c(size_t(m) * m);
    cudaMemset(a.ptr, 0, size_t(m) * m * 4);
    cudaMemset(b.ptr, 0, size_t(m) * m * 4);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);  // FFMA only: no TF32
    const float one = 1.0f, zero = 0.0f;
    const double ms = median_ms_per_launch(
        [&](int) { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.ptr, m, b.ptr, m, &zero, c.ptr, m); },
        {5, 3});
    peaks.fp32_flops = 2.0 * m * m * double(m) / (ms * 1e-3);
    cublasDestroy(h);
  }
}

}  // namespace

std::vector<LayerResult> bench_cuda(const std::vector<Layer>& layers, const BenchOptions& opt, Peaks& peaks) {
  // A stream of our own, since a CUDA graph cannot be captured on the legacy default stream. It is a
  // blocking stream: the poisoning memsets and the checks' copies on the default stream order with it.
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> stream_owner(stream, cudaStreamDestroy);
  Engine engine(Target::Cuda, 0, stream);
  const LoopTiming timing{opt.launches, opt.repeats, opt.graph, stream};
  peaks.timing = "median of " + std::to_string(opt.repeats) + " loops of " + std::to_string(opt.launches) +
                 (opt.graph ? " launches replayed as one CUDA graph" : " launches enqueued from the host");
  if (opt.vs_cudnn)
    peaks.timing += opt.peer_candidates == 1 ? "; cuDNN peers: Find's picks"
                                             : "; cuDNN peers: the fastest of Find's first " +
                                                   std::to_string(opt.peer_candidates) + " candidates, each timed so";
  std::cerr << "measuring peaks (copy bandwidth, SGEMM)...\n";
  measure_peaks(peaks);
  std::cerr << peaks.device << ": copy " << peaks.bytes_per_s / 1e9 << " GB/s, SGEMM " << peaks.fp32_flops / 1e12
            << " TFLOP/s\n";
  int l2 = 0;
  cuda_ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  std::vector<LayerResult> out;
  for (size_t li = 0; li < layers.size(); ++li) {
    Problem p = layers[li].problem;
    if (opt.batch > 0) p.n = opt.batch;
    std::cerr << "[" << li + 1 << "/" << layers.size() << "] " << layers[li].name << " (" << p.to_string() << ")"
              << std::flush;
    LayerResult r;
    const auto plan = plan_layer(engine, layers[li], p, opt.plan, opt, r, out);
    if (!plan) continue;
    const TensorDesc xd = plan->x_desc(), wd = plan->w_desc(), yd = plan->y_desc();

    std::vector<float> hx = host_tensor("x", xd.span_elements()), hw = host_tensor("w", wd.span_elements());
    fill_uniform(hx, opt.seed + 2 * li);
    fill_uniform(hw, opt.seed + 2 * li + 1);
    // Rotate through enough copies that the timed loop does not run from L2 (docs/BENCHMARKING.md).
    const double set_bytes = 4.0 * (hx.size() + hw.size() + yd.span_elements());
    const int copies = int(std::min(16.0, std::max(1.0, std::ceil(3.0 * l2 / set_bytes))));
    std::vector<DeviceArray> bx, bw, by;
    std::vector<float*> xs, ws, ys;
    for (int c = 0; c < copies; ++c) {
      bx.emplace_back(hx.size());
      bw.emplace_back(hw.size());
      by.emplace_back(yd.span_elements());
      cuda_ok(cudaMemcpy(bx.back().ptr, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice), "copy x");
      cuda_ok(cudaMemcpy(bw.back().ptr, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice), "copy w");
      xs.push_back(bx.back().ptr);
      ws.push_back(bw.back().ptr);
      ys.push_back(by.back().ptr);
    }
    std::vector<float> hy = host_tensor("y", yd.span_elements());
    auto error_of = [&](const float* dy) {
      cuda_ok(cudaMemcpy(hy.data(), dy, hy.size() * 4, cudaMemcpyDeviceToHost), "copy y");
      return sampled_error(p, xd, hx.data(), wd, hw.data(), yd, hy.data(), opt.check_samples, opt.seed + li);
    };

    r.algorithm = algorithm_name(plan->algorithm());
    r.tile = division_name(plan->division()) + (plan->split_k() > 1 ? " sk" + std::to_string(plan->split_k()) : "");
    // The checked result: y poisoned with NaN first, so an unwritten element fails.
    cuda_ok(cudaMemset(ys[0], 0xff, hy.size() * 4), "poison y");
    engine.conv2d_forward(*plan, xs[0], ws[0], ys[0]);
    engine.synchronize();
    r.rel_err = error_of(ys[0]);
    r.correct = r.rel_err < 2e-5;
    r.ms = median_ms_per_launch(
        [&](int i) { engine.conv2d_forward(*plan, xs[i % copies], ws[i % copies], ys[i % copies]); }, timing);
    r.extra_bytes = engine.plan_device_bytes(*plan);
    if (opt.all_algorithms) {
      for (Algorithm a :
           {Algorithm::ImplicitPrecomp, Algorithm::DirectBlock, Algorithm::SingleChannel, Algorithm::StrideFixed}) {
        PlanOptions ao = opt.plan;
        ao.target = Target::Cuda;
        ao.algorithm = a;
        std::shared_ptr<const Plan> alt;
        try {
          alt = engine.plan(p, xd, wd, yd, ao);
        } catch (const Error&) {
          continue;  // the algorithm does not support this layer
        }
        cuda_ok(cudaMemset(ys[0], 0xff, hy.size() * 4), "poison y");
        engine.conv2d_forward(*alt, xs[0], ws[0], ys[0]);
        engine.synchronize();
        const bool ok = error_of(ys[0]) < 2e-5;
        const double ms = median_ms_per_launch(
            [&](int i) { engine.conv2d_forward(*alt, xs[i % copies], ws[i % copies], ys[i % copies]); }, timing);
        r.alternatives.emplace_back(algorithm_name(a), ok ? ms : -1.0);
      }
    }
    if (peaks.fp32_flops > 0)
      r.floor_ms = 1e3 * std::max(p.flops() / peaks.fp32_flops, min_bytes(p) / peaks.bytes_per_s);
#ifdef MCONV_HAVE_CUDNN
    if (opt.vs_cudnn) {
      try {
        time_cudnn_peers(p, opt.layout, xs, ws, ys, timing, error_of, opt.peer_candidates, opt.peer_cap_factor,
                         r.fastest, r.matched, r.note);
      } catch (const std::exception& e) {
        r.note += (r.note.empty() ? "" : "; ") + std::string("cuDNN: ") + e.what();
        std::cerr << "  cuDNN: " << e.what();
      }
    }
#else
    if (opt.vs_cudnn) throw Error(Status::Unsupported, "--vs cudnn: this build did not find cuDNN");
#endif
    std::cerr << "  " << r.ms << " ms, " << p.flops() / (r.ms * 1e-3) / 1e12 << " TFLOP/s"
              << (r.fastest.valid
                      ? ", cuDNN " + std::to_string(r.fastest.ms) + " / " + std::to_string(r.matched.ms) + " ms"
                      : "")
              << (r.correct ? "" : "  WRONG") << (r.note.empty() ? "" : "  (" + r.note + ")") << "\n";
    if (opt.on_row) opt.on_row(r);
    out.push_back(r);
  }
  return out;
}

void run_on_cuda(Engine& engine, const Plan& plan, const std::vector<float>& x, const std::vector<float>& w,
                 std::vector<float>& y, const Epilogue& e) {
  DeviceArray dx(x.size()), dw(w.size()), dy(y.size());
  cuda_ok(cudaMemcpy(dx.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy x");
  cuda_ok(cudaMemcpy(dw.ptr, w.data(), w.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy w");
  cuda_ok(cudaMemcpy(dy.ptr, y.data(), y.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy y");  // beta reads it
  engine.conv2d_forward(plan, dx.ptr, dw.ptr, dy.ptr, e);
  engine.synchronize();
  cuda_ok(cudaMemcpy(y.data(), dy.ptr, y.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy y back");
}

}  // namespace mconv::tools
