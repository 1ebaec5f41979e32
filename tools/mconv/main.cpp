// The `mconv` command: run one layer, print its plan, benchmark a suite, describe the device.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "bench.hpp"
#include "default_suite.hpp"
#include "layer_args.hpp"
#include "mconv/mconv.hpp"

namespace mt = mconv::tools;
using mconv::Error;

namespace {

// Dims of a tensor in the order its layout stores them (what a .npy file of it holds).
std::vector<int64_t> storage_shape(const mconv::TensorDesc& d) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int a, int b) { return d.strides[a] > d.strides[b]; });
  std::vector<int64_t> s;
  for (int i : order) s.push_back(d.dims[i]);
  return s;
}

// The logical dims (n, c, h, w) -- (k, c, r, s) for a filter -- of a 4-d array stored in `layout`:
// the inverse of storage_shape().
std::array<int64_t, 4> logical_dims(const mconv::npy::Array& a, mconv::Layout layout, const std::string& what) {
  if (a.shape.size() != 4) throw Error(mconv::Status::BadParam, what + ": the array must be 4-d");
  static constexpr int kStorageIndex[3][4] = {{0, 1, 2, 3}, {0, 3, 1, 2}, {1, 0, 2, 3}};  // NCHW, NHWC, CNHW
  const auto& idx = kStorageIndex[static_cast<int>(layout)];
  return {a.shape[idx[0]], a.shape[idx[1]], a.shape[idx[2]], a.shape[idx[3]]};
}

void require_shape(const mconv::npy::Array& a, const mconv::TensorDesc& d, const std::string& what) {
  if (a.shape != storage_shape(d)) {
    std::string got, want;
    for (auto v : a.shape) got += std::to_string(v) + " ";
    for (auto v : storage_shape(d)) want += std::to_string(v) + " ";
    throw Error(mconv::Status::BadParam, what + ": .npy shape (" + got + ") does not match the layer (" + want + "in " +
                                             mconv::layout_name(d.layout()) + " order)");
  }
}

int cmd_run(mt::LayerArgs& args, const std::string& input, const std::string& filter, const std::string& output,
            bool check, bool relu, uint64_t seed) {
  using namespace mconv;
  Problem p = args.resolved_problem();
  npy::Array xa, wa;
  // A given .npy input fixes n, c, h, w; a given filter fixes k, r, s (in the chosen layouts' order).
  if (!input.empty()) {
    xa = npy::load(input);
    const auto d = logical_dims(xa, parse_layout(args.x_layout.empty() ? args.layout : args.x_layout), input);
    p.n = d[0];
    p.c = d[1];
    p.h = d[2];
    p.w = d[3];
  }
  if (!filter.empty()) {
    wa = npy::load(filter);
    const auto d = logical_dims(wa, parse_layout(args.w_layout.empty() ? args.layout : args.w_layout), filter);
    p.k = d[0];
    p.r = d[2];
    p.s = d[3];
  }
  args.problem = p;
  args.problem.mode = Mode::CrossCorrelation;  // resolved again from args.mode
  const TensorDesc xd = args.x_desc(), wd = args.w_desc(), yd = args.y_desc();
  p.validate(xd, wd, yd);
  std::vector<float> x(xd.span_elements()), w(wd.span_elements()), y(yd.span_elements(), 0.0f);
  if (!input.empty()) {
    require_shape(xa, xd, input);
    x = xa.data;
  } else
    mt::fill_uniform(x, seed);
  if (!filter.empty()) {
    require_shape(wa, wd, filter);
    w = wa.data;
  } else
    mt::fill_uniform(w, seed + 1);
  if (args.beta != 0.0f) mt::fill_uniform(y, seed + 2);
  std::vector<float> y0 = y;

  Engine engine(parse_target(args.target));
  auto plan = engine.plan(p, xd, wd, yd, args.plan_options());
  Epilogue e;
  e.relu = relu;
  e.alpha = args.alpha;
  e.beta = args.beta;
  std::cerr << "mconv run: " << p.to_string() << " on " << target_name(engine.target()) << ", "
            << algorithm_name(plan->algorithm()) << " " << division_name(plan->division()) << "\n";
  if (engine.target() == Target::Cpu) {
    engine.conv2d_forward(*plan, x.data(), w.data(), y.data(), e);
  } else {
#ifdef MCONV_HAVE_CUDA
    mt::run_on_cuda(engine, *plan, x, w, y, e);
#else
    throw Error(Status::NoDevice, "target: this mconv was built without CUDA");
#endif
  }
  if (check) {
    std::vector<float> ref = y0;
    cpu::reference_forward(p, xd, x.data(), wd, w.data(), yd, ref.data(), e);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      e2 += double(y[i] - ref[i]) * (y[i] - ref[i]);
      r2 += double(ref[i]) * ref[i];
    }
    const double rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
    const bool ok = rel < 1e-5 && std::isfinite(rel);
    std::cout << "check: relative error " << rel << " against the double reference: " << (ok ? "PASS" : "FAIL") << "\n";
    if (!ok) return 1;
  }
  if (!output.empty()) {
    npy::save(output, storage_shape(yd), y.data());
    std::cout << "wrote " << output << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mconv: zero-workspace convolution (implicit GEMM through a precomputed offset table)"};
  app.require_subcommand(1);

  mt::LayerArgs run_args;
  std::string input, filter, output;
  bool check = false, relu = false;
  uint64_t seed = 1;
  auto* run = app.add_subcommand("run", "run one layer given by flags (or .npy files)");
  run_args.add_to(*run);
  run->add_option("--input", input, "x as a float32 .npy, in the x layout's order");
  run->add_option("--filter", filter, "w as a float32 .npy, in the w layout's order");
  run->add_option("--output", output, "write y as a float32 .npy");
  run->add_flag("--check", check, "compare with the double-accumulating reference");
  run->add_flag("--relu", relu, "fused ReLU");
  run->add_option("--seed", seed, "seed of the random inputs")->capture_default_str();

  mt::LayerArgs plan_args;
  std::string plan_format = "text";
  int64_t max_rows = 64;
  auto* plan = app.add_subcommand("plan", "print the Plan of a layer: offset table, start-address rule, decisions");
  plan_args.add_to(*plan);
  plan->add_option("--format", plan_format)->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  plan->add_option("--max-rows", max_rows, "offset-table rows to print (-1: all)")->capture_default_str();

  std::string suite_path, format = "table", out_prefix, target = "auto", algo = "auto", tile;
  mt::BenchOptions bopt;
  std::string vs;
  auto* bench = app.add_subcommand("bench", "benchmark every layer of a suite (default: built-in resnet50)");
  bench->add_option("--suite", suite_path,
                    "suite CSV (name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups)");
  bench->add_option("--batch", bopt.batch, "override n of every layer");
  std::string bench_layout = "NCHW";
  bench->add_option("--layout", bench_layout, "layout of x, w and y: NCHW, NHWC or CNHW (cuDNN peer: NCHW, NHWC)")
      ->capture_default_str();
  bench->add_option("--format", format)->check(CLI::IsMember({"table", "csv", "json"}))->capture_default_str();
  bench->add_option("--out", out_prefix, "also write PREFIX.csv and PREFIX.json");
  bench->add_option("--target", target)->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  bench->add_option("--algo", algo)->capture_default_str();
  bench->add_option("--tile", tile, "force a CUDA tile");
  bench->add_option("--split-k", bopt.plan.split_k, "CUDA row slices: 0 = planner, 1 = off, n = force");
  bench->add_option("--vs", vs, "peer to time beside mconv: cudnn")->check(CLI::IsMember({"cudnn"}));
  bench->add_flag("--all-algos", bopt.all_algorithms, "also time every mconv algorithm that supports each layer");
  bench
      ->add_option("--peer-candidates", bopt.peer_candidates,
                   "cuDNN peers: time this many of Find's candidates per peer and keep the fastest (8: all of "
                   "them; 1: Find's own pick)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  bench
      ->add_option("--peer-cap", bopt.peer_cap_factor,
                   "cuDNN peers: skip candidates Find timed slower than this many times the best of their class "
                   "(and 1 ms); they are named in the row's note")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench->add_option("--launches", bopt.launches, "launches per timed loop (GPU)")->capture_default_str();
  bench->add_option("--repeats", bopt.repeats, "timed loops, median reported")->capture_default_str();
  std::string timing = "graph";
  bench
      ->add_option("--timing", timing,
                   "graph: each loop's launches replayed as one CUDA graph (no per-call host overhead, for "
                   "mconv and cuDNN alike); loop: enqueued from the host")
      ->check(CLI::IsMember({"graph", "loop"}))
      ->capture_default_str();

  bool refresh = false, device_json = false;
  int device_index = 0;
  auto* device =
      app.add_subcommand("device", "the hardware model: device properties, measured latency and bandwidth, N_FMA, V_s");
  device->add_flag("--refresh", refresh, "measure again instead of reading the cache");
  device->add_flag("--json", device_json, "print JSON");
  device->add_option("--index", device_index, "CUDA device")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (*run) return cmd_run(run_args, input, filter, output, check, relu, seed);
    if (*plan) {
      mconv::PlanOptions o = plan_args.plan_options();
      std::shared_ptr<const mconv::Plan> pl;
      if (o.target == mconv::Target::Cuda && !mconv::cuda_available()) {
        // Planning is pure: a CUDA plan can be inspected without a GPU, for the reference H100.
        std::cerr << "mconv plan: no GPU visible; planning for the reference H100 model\n";
        pl = std::make_shared<const mconv::Plan>(mconv::Plan::build(plan_args.resolved_problem(), plan_args.x_desc(),
                                                                    plan_args.w_desc(), plan_args.y_desc(),
                                                                    mconv::HardwareModel::reference_h100(), o));
      } else {
        mconv::Engine engine(o.target);
        o.target = engine.target();
        pl = engine.plan(plan_args.resolved_problem(), plan_args.x_desc(), plan_args.w_desc(), plan_args.y_desc(), o);
      }
      std::cout << (plan_format == "json" ? pl->to_json(max_rows) : pl->to_text(max_rows));
      return 0;
    }
    if (*device) {
      std::string note;
      const mconv::HardwareModel m = mconv::hardware_model(device_index, refresh, &note);
      std::cout << (device_json ? m.to_json() + "\n" : m.to_text());
      std::cerr << "hardware model: " << note << "\n";
      return 0;
    }
    if (*bench) {
      std::vector<mt::Layer> layers;
      std::string suite_name;
      if (suite_path.empty()) {
        layers = mt::parse_suite(mt::kDefaultSuiteCsv, "built-in resnet50");
        suite_name = mt::kDefaultSuiteName;
      } else {
        layers = mt::load_suite(suite_path);
        suite_name = suite_path.substr(suite_path.find_last_of('/') + 1);
        if (suite_name.size() > 4 && suite_name.substr(suite_name.size() - 4) == ".csv")
          suite_name.resize(suite_name.size() - 4);
      }
      mconv::Target t = mconv::parse_target(target);
      if (t == mconv::Target::Auto) t = mconv::cuda_available() ? mconv::Target::Cuda : mconv::Target::Cpu;
      bopt.plan.algorithm = mconv::parse_algorithm(algo);
      bopt.layout = mconv::parse_layout(bench_layout);
      if (bopt.layout != mconv::Layout::NCHW) suite_name += std::string("_") + mconv::layout_name(bopt.layout);
      bopt.plan.tile = tile;
      bopt.vs_cudnn = vs == "cudnn";
      bopt.graph = timing == "graph";
      mt::Peaks peaks;
      std::vector<mt::LayerResult> rows;
      // Rows are written to PREFIX.rows.csv as they finish, so an interrupted run keeps them.
      std::ofstream rows_csv;
      if (!out_prefix.empty()) {
        rows_csv.open(out_prefix + ".rows.csv");
        if (!rows_csv) throw Error(mconv::Status::IoError, "--out: cannot write " + out_prefix + ".rows.csv");
        mt::print_csv_header(rows_csv);
        rows_csv.flush();
        bopt.on_row = [&](const mt::LayerResult& r) {
          mt::print_csv_row(rows_csv, suite_name, r);
          rows_csv.flush();
        };
      }
      if (t == mconv::Target::Cpu) {
        if (bopt.vs_cudnn) throw Error(mconv::Status::Unsupported, "--vs cudnn: needs the cuda target");
        // The CPU default runs the suite at batch 1: batch 32 would take minutes on a laptop.
        if (suite_path.empty() && bopt.batch == 0) bopt.batch = 1;
        peaks.device = "CPU";
        rows = mt::bench_cpu(layers, bopt);
      } else {
#ifdef MCONV_HAVE_CUDA
        rows = mt::bench_cuda(layers, bopt, peaks);
#else
        throw Error(mconv::Status::NoDevice, "--target cuda: mconv was built without CUDA");
#endif
      }
      mt::print_report(std::cout, format, suite_name, rows, peaks);
      if (!out_prefix.empty()) {
        std::ofstream csv(out_prefix + ".csv"), json(out_prefix + ".json");
        mt::print_report(csv, "csv", suite_name, rows, peaks);
        mt::print_report(json, "json", suite_name, rows, peaks);
        std::cerr << "wrote " << out_prefix << ".csv and " << out_prefix << ".json\n";
      }
      for (const auto& r : rows)
        if (!r.correct) return 1;
      return 0;
    }
  } catch (const Error& e) {
    std::cerr << "mconv: error (" << mconv::status_name(e.status()) << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}
