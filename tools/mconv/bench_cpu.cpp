// The CPU side of `mconv bench`: wall-clock median of repeated calls of the CPU executor.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "bench.hpp"
#include "layer_args.hpp"
#include "mconv/cpu.hpp"
#include "mconv/engine.hpp"
#include "mconv/numeric.hpp"

namespace mconv::tools {

std::vector<LayerResult> bench_cpu(const std::vector<Layer>& layers, const BenchOptions& opt) {
  Engine engine(Target::Cpu);
  std::vector<LayerResult> out;
  for (size_t i = 0; i < layers.size(); ++i) {
    Problem p = layers[i].problem;
    if (opt.batch > 0) p.n = opt.batch;
    std::cerr << "[" << i + 1 << "/" << layers.size() << "] " << layers[i].name << " (" << p.to_string() << ")"
              << std::flush;
    LayerResult r;
    const auto plan = plan_layer(engine, layers[i], p, opt.plan, opt, r, out);
    if (!plan) continue;
    const TensorDesc xd = plan->x_desc(), wd = plan->w_desc(), yd = plan->y_desc();
    std::vector<float> x = host_tensor("x", xd.span_elements()), w = host_tensor("w", wd.span_elements()),
                       y = host_tensor("y", yd.span_elements());
    fill_uniform(x, opt.seed + 2 * i);
    fill_uniform(w, opt.seed + 2 * i + 1);
    round_to_storage(x, opt.dtype);
    round_to_storage(w, opt.dtype);
    const auto sx = to_storage(x, opt.dtype), sw = to_storage(w, opt.dtype);
    auto sy = to_storage(y, opt.dtype);
    const Epilogue fused{1.0f, 0.0f, nullptr, opt.activation};
    engine.conv2d_forward(*plan, sx.data(), sw.data(), sy.data(), fused);  // warm-up, and the checked result
    r.algorithm = algorithm_name(plan->algorithm());
    y = from_storage(sy, opt.dtype);
    r.rel_err = sampled_error(p, widened(xd), x.data(), widened(wd), w.data(), widened(yd), y.data(), opt.check_samples,
                              opt.seed, opt.activation);
    r.correct = r.rel_err < sampled_tolerance(opt.dtype, MathMode::Exact);  // the CPU computes exactly
    // One call per timed repeat on the CPU: layers take milliseconds, far above timer resolution.
    std::vector<double> times;
    const int reps = std::max(3, opt.repeats);
    for (int rep = 0; rep < reps; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      engine.conv2d_forward(*plan, sx.data(), sw.data(), sy.data(), fused);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    r.ms = times[times.size() / 2];
    r.extra_bytes =
        plan->table_bytes() + int64_t(omp_get_max_threads()) * cpu::implicit_precomp_scratch_bytes_per_thread();
    std::cerr << "  " << r.ms << " ms, " << p.flops() / (r.ms * 1e-3) / 1e12 << " TFLOP/s"
              << (r.correct ? "" : "  WRONG") << "\n";
    if (opt.on_row) opt.on_row(r);
    out.push_back(r);
  }
  return out;
}

}  // namespace mconv::tools
