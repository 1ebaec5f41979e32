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
#include "mconv/numeric.hpp"
#ifdef MCONV_HAVE_CUDNN
#include "cudnn_peer.hpp"
#endif

namespace mconv::tools {
namespace {

// " sk<n>" where the plan splits its reduction and its division's name does not already say how
// (implicit_mma's names carry _cs<n> and _as<n>).
std::string split_suffix(const Plan& plan) {
  if (plan.split_k() <= 1 || plan.algorithm() == Algorithm::ImplicitMma) return "";
  return " sk" + std::to_string(plan.split_k());
}

// Copy bandwidth (bytes read + written) and a large cuBLAS GEMM in the suite's precision: SGEMM on
// the FFMA units for exact fp32, else the tensor cores in fp16, bf16 or TF32 with fp32 accumulation.
void measure_peaks(Peaks& peaks, DType dtype, MathMode math) {
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
    const float one = 1.0f, zero = 0.0f;
    const bool exact = dtype == DType::Float32 && math == MathMode::Exact;
    const cudaDataType_t t = dtype == DType::Float16 ? CUDA_R_16F : dtype == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = exact                     ? CUBLAS_COMPUTE_32F_PEDANTIC
                                        : dtype == DType::Float32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                  : CUBLAS_COMPUTE_32F;
    peaks.gemm_name = exact
                          ? "SGEMM (FFMA)"
                          : std::string(dtype == DType::Float32 ? "tf32" : dtype_name(dtype)) + " GEMM (tensor cores)";
    const double ms = median_ms_per_launch(
        [&](int) {
          cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.ptr, t, m, b.ptr, t, m, &zero, c.ptr, t, m,
                       compute, CUBLAS_GEMM_DEFAULT);
        },
        {5, 3});
    peaks.gemm_flops = 2.0 * m * m * double(m) / (ms * 1e-3);
    cublasDestroy(h);
  }
}

// One layer of `mconv bench --pass dgrad|wgrad`: the backward plan, its output (poisoned first)
// checked on sampled elements against the double sums of its definition, timed like the forward
// over rotating copies, beside cuDNN's Find of the same pass.
LayerResult bench_backward_layer(Engine& engine, const Layer& layer, const Problem& p, const BenchOptions& opt,
                                 const LoopTiming& timing, int l2, uint64_t seed) {
  LayerResult r;
  r.name = layer.name;
  r.problem = p;
  r.target = "cuda";
  const bool dgrad = opt.pass == Pass::BackwardData;
  std::shared_ptr<const BackwardPlan> plan;
  TensorDesc ad, bd, od;
  try {
    p.validate();
    const TensorDesc xd = p.x_desc(opt.layout, opt.dtype), wd = p.w_desc(opt.layout, opt.dtype),
                     yd = p.y_desc(opt.layout, opt.dtype);
    ad = dgrad ? yd : xd;
    bd = dgrad ? wd : yd;
    od = dgrad ? xd : wd;
    PlanOptions po = opt.plan;
    po.target = Target::Cuda;
    plan = dgrad ? engine.plan_backward_data(p, ad, bd, od, po) : engine.plan_backward_filter(p, ad, bd, od, po);
  } catch (const Error& e) {
    r.ran = false;
    r.note = std::string("mconv: ") + e.what();
    std::cerr << "  not run: " << e.what() << "\n";
    return r;
  }
  const int esz = dtype_size(opt.dtype);
  std::vector<float> ha = host_tensor("a", ad.span_elements()), hb = host_tensor("b", bd.span_elements());
  fill_uniform(ha, seed);
  fill_uniform(hb, seed + 1);
  round_to_storage(ha, opt.dtype);
  round_to_storage(hb, opt.dtype);
  const auto sa = to_storage(ha, opt.dtype), sb = to_storage(hb, opt.dtype);
  const size_t out_bytes = size_t(od.span_elements()) * esz;
  const double set_bytes = double(sa.size() + sb.size() + out_bytes);
  const int copies = int(std::min(16.0, std::max(1.0, std::ceil(3.0 * l2 / set_bytes))));
  std::vector<DeviceArray> ba, bb, bo;
  std::vector<float*> as, bs, outs;
  for (int c = 0; c < copies; ++c) {
    ba.emplace_back((sa.size() + 3) / 4);
    bb.emplace_back((sb.size() + 3) / 4);
    bo.emplace_back((out_bytes + 3) / 4);
    cuda_ok(cudaMemcpy(ba.back().ptr, sa.data(), sa.size(), cudaMemcpyHostToDevice), "copy a");
    cuda_ok(cudaMemcpy(bb.back().ptr, sb.data(), sb.size(), cudaMemcpyHostToDevice), "copy b");
    as.push_back(ba.back().ptr);
    bs.push_back(bb.back().ptr);
    outs.push_back(bo.back().ptr);
  }
  std::vector<unsigned char> hout(out_bytes);
  // wgrad's samples each sum N*P*Q products: fewer of them.
  const int64_t samples = dgrad ? opt.check_samples : std::min<int64_t>(opt.check_samples, 512);
  auto error_of = [&](const float* dev) {
    cuda_ok(cudaMemcpy(hout.data(), dev, hout.size(), cudaMemcpyDeviceToHost), "copy out");
    const std::vector<float> out = from_storage(hout, opt.dtype);
    return sampled_backward_error(opt.pass, p, widened(ad), ha.data(), widened(bd), hb.data(), widened(od), out.data(),
                                  samples, seed + 7);
  };
  auto run = [&](int i) {
    const int c = i % copies;
    if (dgrad)
      engine.conv2d_backward_data(*plan, as[c], bs[c], outs[c]);
    else
      engine.conv2d_backward_filter(*plan, as[c], bs[c], outs[c]);
  };
  r.algorithm = std::string(pass_name(opt.pass)) + ":" +
                (plan->plans.empty() ? std::string("fill") : algorithm_name(plan->plans.front()->algorithm()));
  r.tile =
      std::to_string(plan->decomposition.steps.size()) + " step(s)" +
      (plan->plans.empty() ? std::string()
                           : " " + division_name(plan->plans.front()->division()) + split_suffix(*plan->plans.front()));
  cuda_ok(cudaMemset(outs[0], 0xff, out_bytes), "poison out");  // NaN in every dtype
  run(0);
  engine.synchronize();
  r.rel_err = error_of(outs[0]);
  // The backward passes are held to their precision's tolerance (tf32 wgrad runs exact FFMA).
  const MathMode math = plan->plans.empty() ? MathMode::Exact : plan->plans.front()->math();
  r.correct = r.rel_err < sampled_tolerance(opt.dtype, math);
  r.ms = median_ms_per_launch(run, timing);
  r.extra_bytes = plan->table_bytes();
#ifdef MCONV_HAVE_CUDNN
  if (opt.vs_cudnn) {
    try {
      time_cudnn_peers(opt.pass, p, opt.layout, opt.dtype, opt.plan.math, as, bs, outs, timing, error_of,
                       opt.peer_candidates, opt.peer_cap_factor, r.fastest, r.matched, r.note);
    } catch (const std::exception& e) {
      r.note += (r.note.empty() ? "" : "; ") + std::string("cuDNN: ") + e.what();
    }
  }
#else
  if (opt.vs_cudnn) throw Error(Status::Unsupported, "--vs cudnn: this build did not find cuDNN");
#endif
  return r;
}

}  // namespace

std::vector<LayerResult> bench_cuda(const std::vector<Layer>& layers, const BenchOptions& opt, Peaks& peaks) {
  // A stream of our own, since a CUDA graph cannot be captured on the legacy default stream. It is a
  // blocking stream: the poisoning memsets and the checks' copies on the default stream order with it.
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> stream_owner(stream, cudaStreamDestroy);
  EngineOptions engine_options;
  engine_options.dependent_launch = opt.dependent_launch;
  Engine engine(Target::Cuda, 0, stream, engine_options);
  const LoopTiming timing{opt.launches, opt.repeats, opt.graph, stream};
  peaks.timing = (opt.pass == Pass::Forward ? std::string() : std::string(pass_name(opt.pass)) + " pass; ") +
                 "median of " + std::to_string(opt.repeats) + " loops of " + std::to_string(opt.launches) +
                 (opt.graph ? " launches replayed as one CUDA graph" : " launches enqueued from the host") +
                 (opt.dependent_launch ? "" : ", no dependent launches") +
                 (opt.activation == Activation::Identity
                      ? ""
                      : std::string("; mconv fuses ") + activation_name(opt.activation) +
                            (opt.vs_cudnn ? " (the cuDNN peers time the convolution alone)" : ""));
  if (opt.vs_cudnn) {
    const bool graph = !(opt.dtype == DType::Float32 && opt.plan.math == MathMode::Exact);
    const std::string apis = graph ? "Find's and the graph API heuristics' " : "Find's ";
    peaks.timing += opt.peer_candidates == 1 ? "; cuDNN peers: " + apis + "picks"
                                             : "; cuDNN peers: the fastest of " + apis + "first " +
                                                   std::to_string(opt.peer_candidates) + " candidates, each timed so";
  }
  std::cerr << "measuring peaks (copy bandwidth, GEMM)...\n";
  measure_peaks(peaks, opt.dtype, opt.plan.math);
  std::cerr << peaks.device << ": copy " << peaks.bytes_per_s / 1e9 << " GB/s, " << peaks.gemm_name << " "
            << peaks.gemm_flops / 1e12 << " TFLOP/s\n";
  const int esz = dtype_size(opt.dtype);
  int l2 = 0;
  cuda_ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  std::vector<LayerResult> out;
  for (size_t li = 0; li < layers.size(); ++li) {
    Problem p = layers[li].problem;
    if (opt.batch > 0) p.n = opt.batch;
    std::cerr << "[" << li + 1 << "/" << layers.size() << "] " << layers[li].name << " (" << p.to_string() << ")"
              << std::flush;
    if (opt.pass != Pass::Forward) {
      LayerResult r = bench_backward_layer(engine, layers[li], p, opt, timing, l2, opt.seed + 2 * li);
      if (peaks.gemm_flops > 0 && r.ran)
        r.floor_ms = 1e3 * std::max(p.flops() / peaks.gemm_flops, min_bytes(p, esz) / peaks.bytes_per_s);
      std::cerr << "  " << r.ms << " ms"
                << (r.fastest.valid
                        ? ", cuDNN " + std::to_string(r.fastest.ms) + " / " + std::to_string(r.matched.ms) + " ms"
                        : "")
                << (r.correct || !r.ran ? "" : "  WRONG") << (r.note.empty() ? "" : "  (" + r.note + ")") << "\n";
      if (opt.on_row) opt.on_row(r);
      out.push_back(r);
      continue;
    }
    LayerResult r;
    const auto plan = plan_layer(engine, layers[li], p, opt.plan, opt, r, out);
    if (!plan) continue;
    const TensorDesc xd = plan->x_desc(), wd = plan->w_desc(), yd = plan->y_desc();

    std::vector<float> hx = host_tensor("x", xd.span_elements()), hw = host_tensor("w", wd.span_elements());
    fill_uniform(hx, opt.seed + 2 * li);
    fill_uniform(hw, opt.seed + 2 * li + 1);
    round_to_storage(hx, opt.dtype);
    round_to_storage(hw, opt.dtype);
    const auto sx = to_storage(hx, opt.dtype), sw = to_storage(hw, opt.dtype);
    // Rotate through enough copies that the timed loop does not run from L2 (docs/BENCHMARKING.md).
    const double set_bytes = double(esz) * (hx.size() + hw.size() + yd.span_elements());
    const int copies = int(std::min(16.0, std::max(1.0, std::ceil(3.0 * l2 / set_bytes))));
    const size_t y_bytes = size_t(yd.span_elements()) * esz;
    std::vector<DeviceArray> bx, bw, by;
    std::vector<float*> xs, ws, ys;  // device buffers of the suite's dtype
    for (int c = 0; c < copies; ++c) {
      bx.emplace_back((sx.size() + 3) / 4);
      bw.emplace_back((sw.size() + 3) / 4);
      by.emplace_back((y_bytes + 3) / 4);
      cuda_ok(cudaMemcpy(bx.back().ptr, sx.data(), sx.size(), cudaMemcpyHostToDevice), "copy x");
      cuda_ok(cudaMemcpy(bw.back().ptr, sw.data(), sw.size(), cudaMemcpyHostToDevice), "copy w");
      xs.push_back(bx.back().ptr);
      ws.push_back(bw.back().ptr);
      ys.push_back(by.back().ptr);
    }
    std::vector<unsigned char> hy(y_bytes);
    auto error_of = [&](const float* dy, Activation act) {
      cuda_ok(cudaMemcpy(hy.data(), dy, hy.size(), cudaMemcpyDeviceToHost), "copy y");
      const std::vector<float> y = from_storage(hy, opt.dtype);
      return sampled_error(p, widened(xd), hx.data(), widened(wd), hw.data(), widened(yd), y.data(), opt.check_samples,
                           opt.seed + li, act);
    };
    const Epilogue fused{1.0f, 0.0f, nullptr, opt.activation};
    const double tolerance = sampled_tolerance(opt.dtype, opt.plan.math);

    r.algorithm = algorithm_name(plan->algorithm());
    r.tile = division_name(plan->division()) + split_suffix(*plan);
    // The checked result: y poisoned with NaN first, so an unwritten element fails.
    cuda_ok(cudaMemset(ys[0], 0xff, hy.size()), "poison y");  // NaN in every dtype
    engine.conv2d_forward(*plan, xs[0], ws[0], ys[0], fused);
    engine.synchronize();
    r.rel_err = error_of(ys[0], opt.activation);
    r.correct = r.rel_err < tolerance;
    r.ms = median_ms_per_launch(
        [&](int i) { engine.conv2d_forward(*plan, xs[i % copies], ws[i % copies], ys[i % copies], fused); }, timing);
    r.extra_bytes = engine.plan_device_bytes(*plan);
    if (opt.all_algorithms) {
      for (Algorithm a : {Algorithm::ImplicitPrecomp, Algorithm::DirectBlock, Algorithm::SingleChannel,
                          Algorithm::StrideFixed, Algorithm::ImplicitMma}) {
        PlanOptions ao = opt.plan;
        ao.target = Target::Cuda;
        ao.algorithm = a;
        std::shared_ptr<const Plan> alt;
        try {
          alt = engine.plan(p, xd, wd, yd, ao);
        } catch (const Error&) {
          continue;  // the algorithm does not support this layer
        }
        cuda_ok(cudaMemset(ys[0], 0xff, hy.size()), "poison y");
        engine.conv2d_forward(*alt, xs[0], ws[0], ys[0], fused);
        engine.synchronize();
        const bool ok = error_of(ys[0], opt.activation) < tolerance;
        const double ms = median_ms_per_launch(
            [&](int i) { engine.conv2d_forward(*alt, xs[i % copies], ws[i % copies], ys[i % copies], fused); }, timing);
        r.alternatives.emplace_back(algorithm_name(a), ok ? ms : -1.0);
      }
    }
    if (peaks.gemm_flops > 0)
      r.floor_ms = 1e3 * std::max(p.flops() / peaks.gemm_flops, min_bytes(p, esz) / peaks.bytes_per_s);
#ifdef MCONV_HAVE_CUDNN
    if (opt.vs_cudnn) {
      try {
        time_cudnn_peers(
            Pass::Forward, p, opt.layout, opt.dtype, opt.plan.math, xs, ws, ys, timing,
            [&](const float* dy) { return error_of(dy, Activation::Identity); }, opt.peer_candidates,
            opt.peer_cap_factor, r.fastest, r.matched, r.note);
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

void run_on_cuda(Engine& engine, const Plan& plan, const std::vector<unsigned char>& x,
                 const std::vector<unsigned char>& w, std::vector<unsigned char>& y, const Epilogue& e) {
  auto floats = [](size_t bytes) { return (bytes + 3) / 4; };
  DeviceArray dx(floats(x.size())), dw(floats(w.size())), dy(floats(y.size()));
  cuda_ok(cudaMemcpy(dx.ptr, x.data(), x.size(), cudaMemcpyHostToDevice), "cudaMemcpy x");
  cuda_ok(cudaMemcpy(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice), "cudaMemcpy w");
  cuda_ok(cudaMemcpy(dy.ptr, y.data(), y.size(), cudaMemcpyHostToDevice), "cudaMemcpy y");  // beta reads it
  engine.conv2d_forward(plan, dx.ptr, dw.ptr, dy.ptr, e);
  engine.synchronize();
  cuda_ok(cudaMemcpy(y.data(), dy.ptr, y.size(), cudaMemcpyDeviceToHost), "cudaMemcpy y back");
}

void run_backward_on_cuda(Engine& engine, const BackwardPlan& plan, const std::vector<unsigned char>& a,
                          const std::vector<unsigned char>& b, std::vector<unsigned char>& out, float alpha,
                          float beta) {
  auto floats = [](size_t bytes) { return (bytes + 3) / 4; };
  DeviceArray da(floats(a.size())), db(floats(b.size())), dout(floats(out.size()));
  cuda_ok(cudaMemcpy(da.ptr, a.data(), a.size(), cudaMemcpyHostToDevice), "cudaMemcpy a");
  cuda_ok(cudaMemcpy(db.ptr, b.data(), b.size(), cudaMemcpyHostToDevice), "cudaMemcpy b");
  cuda_ok(cudaMemcpy(dout.ptr, out.data(), out.size(), cudaMemcpyHostToDevice), "cudaMemcpy out");  // beta reads it
  if (plan.pass == Pass::BackwardData)
    engine.conv2d_backward_data(plan, da.ptr, db.ptr, dout.ptr, alpha, beta);
  else
    engine.conv2d_backward_filter(plan, da.ptr, db.ptr, dout.ptr, alpha, beta);
  engine.synchronize();
  cuda_ok(cudaMemcpy(out.data(), dout.ptr, out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy out back");
}

}  // namespace mconv::tools
