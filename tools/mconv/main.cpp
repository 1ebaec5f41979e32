// The `mconv` command: run one layer, print its plan, benchmark a suite, describe the device.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

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

// The flags of `group` that the user gave and that disagree with `file`'s shape: an error naming them.
void require_flags_agree(const CLI::App& cmd, const std::string& file,
                         std::initializer_list<std::tuple<const char*, int64_t, int64_t>> flags) {
  for (const auto& [flag, given, from_file] : flags)
    if (cmd.count(flag) > 0 && given != from_file)
      throw Error(mconv::Status::BadParam, std::string(flag) + " " + std::to_string(given) + " disagrees with " + file +
                                               " (" + std::to_string(from_file) + "); the file sets it: drop the flag");
}

/// An output that cannot be written is an error before any work: a directory, or a folder that does
/// not exist or is not writable.
void require_writable(const std::string& output, const char* flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(output, ec))
    throw Error(mconv::Status::IoError, std::string(flag) + ": " + output + " is a directory");
  const fs::path parent = fs::absolute(output, ec).parent_path();
  if (!fs::is_directory(parent, ec))
    throw Error(mconv::Status::IoError,
                std::string(flag) + ": " + output + ": folder " + parent.string() + " does not exist");
  if (!fs::exists(output, ec) && ::access(parent.c_str(), W_OK) != 0)
    throw Error(mconv::Status::IoError,
                std::string(flag) + ": " + output + ": folder " + parent.string() + " is not writable");
}

void refuse_overwriting(const std::string& output, std::initializer_list<std::pair<const char*, std::string>> inputs) {
  for (const auto& [what, path] : inputs)
    if (!path.empty() && mconv::file::same_file(output, path))
      throw Error(mconv::Status::BadParam,
                  "output: " + output + " is the " + what + " file (" + path + "); refusing to overwrite it");
}

int cmd_run(mt::LayerArgs& args, const CLI::App& cmd, const std::string& input, const std::string& filter,
            const std::string& output, const std::string& save_inputs, bool check, mconv::Activation activation,
            uint64_t seed) {
  using namespace mconv;
  if (!output.empty()) {
    refuse_overwriting(output, {{"--input", input}, {"--filter", filter}});
    require_writable(output, "--output");
  }
  if (!save_inputs.empty()) require_writable(save_inputs + "_x.npy", "--save-inputs");
  for (const char* suffix : {"_x.npy", "_w.npy"})
    if (!save_inputs.empty() && !output.empty() && file::same_file(save_inputs + suffix, output))
      throw Error(Status::BadParam, "--save-inputs: " + save_inputs + suffix + " is also the --output file");
  Problem p = args.resolved_problem();
  npy::Array xa, wa;
  // A given .npy input fixes n, c, h, w; a given filter fixes k, r, s (in the chosen layouts' order).
  if (!input.empty()) {
    xa = npy::load(input);
    const auto d = logical_dims(xa, parse_layout(args.x_layout.empty() ? args.layout : args.x_layout), input);
    require_flags_agree(cmd, input, {{"--n", p.n, d[0]}, {"--c", p.c, d[1]}, {"--h", p.h, d[2]}, {"--w", p.w, d[3]}});
    p.n = d[0];
    p.c = d[1];
    p.h = d[2];
    p.w = d[3];
  }
  if (!filter.empty()) {
    wa = npy::load(filter);
    const auto d = logical_dims(wa, parse_layout(args.w_layout.empty() ? args.layout : args.w_layout), filter);
    require_flags_agree(cmd, filter, {{"--k", p.k, d[0]}, {"--r", p.r, d[2]}, {"--s", p.s, d[3]}});
    p.k = d[0];
    p.r = d[2];
    p.s = d[3];
  }
  p.validate();  // before any size is computed from the fields
  args.problem = p;
  args.problem.mode = Mode::CrossCorrelation;  // resolved again from args.mode
  const TensorDesc xd = args.x_desc(), wd = args.w_desc(), yd = args.y_desc();
  p.validate(xd, wd, yd);
  std::vector<float> x = mt::host_tensor("x", xd.span_elements()), w = mt::host_tensor("w", wd.span_elements()),
                     y = mt::host_tensor("y", yd.span_elements());
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
  // Values as the dtype stores them (a bf16 layer rounds a float32 file on load): the reference then
  // sees exactly the inputs the executor multiplies.
  const DType dtype = xd.dtype;
  for (auto* v : {&x, &w, &y}) mt::round_to_storage(*v, dtype);
  if (!save_inputs.empty()) {
    npy::save(save_inputs + "_x.npy", storage_shape(xd), x.data(), dtype);
    npy::save(save_inputs + "_w.npy", storage_shape(wd), w.data(), dtype);
    std::cout << "wrote " << save_inputs << "_x.npy and " << save_inputs << "_w.npy\n";
  }
  std::vector<float> y0 = check ? y : std::vector<float>();

  Engine engine(parse_target(args.target));
  auto plan = engine.plan(p, xd, wd, yd, args.plan_options());
  Epilogue e;
  e.activation = activation;
  e.alpha = args.alpha;
  e.beta = args.beta;
  std::cerr << "mconv run: " << p.to_string() << " on " << target_name(engine.target()) << ", "
            << algorithm_name(plan->algorithm()) << " " << division_name(plan->division()) << "\n";
  {
    const auto xs = mt::to_storage(x, dtype), ws = mt::to_storage(w, dtype);
    auto ys = mt::to_storage(y, dtype);
    if (engine.target() == Target::Cpu) {
      engine.conv2d_forward(*plan, xs.data(), ws.data(), ys.data(), e);
    } else {
#ifdef MCONV_HAVE_CUDA
      mt::run_on_cuda(engine, *plan, xs, ws, ys, e);
#else
      throw Error(Status::NoDevice, "target: this mconv was built without CUDA");
#endif
    }
    y = mt::from_storage(ys, dtype);
  }
  if (check) {
    std::vector<float> ref = y0;
    cpu::reference_forward(p, mt::widened(xd), x.data(), mt::widened(wd), w.data(), mt::widened(yd), ref.data(), e);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      e2 += double(y[i] - ref[i]) * (y[i] - ref[i]);
      r2 += double(ref[i]) * ref[i];
    }
    const double rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
    const double tolerance = mt::precision_tolerance(dtype, plan->math());
    const bool ok = rel < tolerance && std::isfinite(rel);
    std::cout << "check: relative error " << rel << " against the double reference (" << args.dtype << " tolerance "
              << tolerance << "): " << (ok ? "PASS" : "FAIL") << "\n";
    if (!ok) return 1;
  }
  if (!output.empty()) {
    npy::save(output, storage_shape(yd), y.data(), dtype);  // whole or not at all
    std::cout << "wrote " << output << "\n";
  }
  return 0;
}

// `mconv run --pass dgrad|wgrad`: random dy and w (dgrad) or x and dy (wgrad), the pass on the chosen
// target, and with --check its error against the double reference of the pass.
int cmd_run_backward(mt::LayerArgs& args, mconv::Pass pass, bool check, uint64_t seed) {
  using namespace mconv;
  Problem p = args.resolved_problem();
  p.validate();
  const TensorDesc xd = args.x_desc(), wd = args.w_desc(), yd = args.y_desc();
  p.validate(xd, wd, yd);
  const bool dgrad = pass == Pass::BackwardData;
  const TensorDesc ad = dgrad ? yd : xd, bd = dgrad ? wd : yd, od = dgrad ? xd : wd;
  std::vector<float> a = mt::host_tensor(dgrad ? "dy" : "x", ad.span_elements()),
                     b = mt::host_tensor(dgrad ? "w" : "dy", bd.span_elements()),
                     out = mt::host_tensor(dgrad ? "dx" : "dw", od.span_elements());
  mt::fill_uniform(a, seed);
  mt::fill_uniform(b, seed + 1);
  if (args.beta != 0.0f) mt::fill_uniform(out, seed + 2);
  const DType dtype = xd.dtype;
  for (auto* v : {&a, &b, &out}) mt::round_to_storage(*v, dtype);
  const std::vector<float> out0 = out;
  Engine engine(parse_target(args.target));
  auto plan = dgrad ? engine.plan_backward_data(p, ad, bd, od, args.plan_options())
                    : engine.plan_backward_filter(p, ad, bd, od, args.plan_options());
  std::cerr << "mconv run: " << pass_name(pass) << " of " << p.to_string() << " on " << target_name(engine.target())
            << ", " << plan->decomposition.steps.size() << " forward step(s), " << plan->decomposition.fills.size()
            << " fill(s)\n";
  {
    const auto as = mt::to_storage(a, dtype), bs = mt::to_storage(b, dtype);
    auto os = mt::to_storage(out, dtype);
    if (engine.target() == Target::Cpu) {
      if (dgrad)
        engine.conv2d_backward_data(*plan, as.data(), bs.data(), os.data(), args.alpha, args.beta);
      else
        engine.conv2d_backward_filter(*plan, as.data(), bs.data(), os.data(), args.alpha, args.beta);
    } else {
#ifdef MCONV_HAVE_CUDA
      mt::run_backward_on_cuda(engine, *plan, as, bs, os, args.alpha, args.beta);
#else
      throw Error(Status::NoDevice, "target: this mconv was built without CUDA");
#endif
    }
    out = mt::from_storage(os, dtype);
  }
  if (!check) return 0;
  std::vector<float> ref = out0;
  if (dgrad)
    cpu::reference_backward_data(p, mt::widened(ad), a.data(), mt::widened(bd), b.data(), mt::widened(od), ref.data(),
                                 args.alpha, args.beta);
  else
    cpu::reference_backward_filter(p, mt::widened(ad), a.data(), mt::widened(bd), b.data(), mt::widened(od), ref.data(),
                                   args.alpha, args.beta);
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e2 += double(out[i] - ref[i]) * (out[i] - ref[i]);
    r2 += double(ref[i]) * ref[i];
  }
  const double rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
  const MathMode math = plan->plans.empty() ? MathMode::Exact : plan->plans.front()->math();
  const double tolerance = mt::precision_tolerance(dtype, math);
  const bool ok = rel < tolerance && std::isfinite(rel);
  std::cout << "check: " << pass_name(pass) << " relative error " << rel << " against the double reference ("
            << args.dtype << " tolerance " << tolerance << "): " << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}

// Exit codes (documented in --help): 0 success; 1 a result failed its check; 2 bad input (a flag,
// field or file content); 3 not enough memory; 4 a file could not be read or written; 5 no usable
// device; 6 a CUDA error; 7 an internal error.
int exit_code(mconv::Status s) {
  switch (s) {
    case mconv::Status::Success:
      return 0;
    case mconv::Status::BadParam:
    case mconv::Status::Unsupported:
    case mconv::Status::Overflow:
    case mconv::Status::NullPointer:
    case mconv::Status::Misaligned:
      return 2;
    case mconv::Status::OutOfMemory:
      return 3;
    case mconv::Status::IoError:
      return 4;
    case mconv::Status::NoDevice:
      return 5;
    case mconv::Status::CudaError:
      return 6;
    case mconv::Status::Internal:
      return 7;
  }
  return 7;
}

constexpr const char* kFooter = R"(Examples:
  mconv plan --n 1 --c 3 --h 3 --w 3 --k 2 --r 2 --s 2          the offset table of a small layer
  mconv run --c 64 --h 56 --w 56 --k 64 --r 3 --s 3 --pad-h 1 --pad-w 1 --check
  mconv run --c 8 --h 9 --w 9 --k 4 --r 3 --s 3 --save-inputs in --output y.npy
  mconv run --input in_x.npy --filter in_w.npy --output y.npy --check
  mconv bench --suite bench/suites/resnet50.csv --vs cudnn --out /tmp/resnet50
  mconv device                                                   the hardware model of GPU 0
Exit codes: 0 success, 1 a result failed its check, 2 bad input, 3 not enough memory,
4 a file could not be read or written, 5 no usable device, 6 CUDA error, 7 internal error.)";

int run_main(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const Error& e) {
    std::cerr << "mconv: error (" << mconv::status_name(e.status()) << "): " << e.what() << "\n";
    return exit_code(e.status());
  } catch (const std::bad_alloc&) {
    std::cerr << "mconv: error (out of memory): a host allocation failed\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "mconv: error (internal error): " << e.what() << "\n";
    return 7;
  }
}

namespace {

int run_main(int argc, char** argv) {
  CLI::App app{"mconv: zero-workspace convolution on the GPU (and the CPU)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mconv ") + MCONV_VERSION_STRING);
  app.footer(kFooter);

  mt::LayerArgs run_args;
  std::string input, filter, output;
  bool check = false, relu = false;
  uint64_t seed = 1;
  auto* run = app.add_subcommand("run", "run one layer given by flags (or .npy files)");
  run_args.add_to(*run);
  run->add_option("--input", input,
                  "x as a float32 or float16 .npy, in the x layout's order (rounded to --dtype on load)");
  run->add_option("--filter", filter, "w as a float32 or float16 .npy, in the w layout's order");
  run->add_option("--output", output,
                  "write y as a .npy, whole or not at all (float16 for --dtype fp16, else float32)");
  std::string save_inputs;
  run->add_option("--save-inputs", save_inputs, "write the x and w used as PREFIX_x.npy and PREFIX_w.npy");
  run->add_flag("--check", check, "compare with the double-accumulating reference");
  run->add_flag("--relu", relu, "fused ReLU (--activation relu)");
  std::string activation = "identity";
  run->add_option("--activation", activation, "fused activation: identity, relu or silu")
      ->check(CLI::IsMember({"identity", "relu", "silu"}))
      ->capture_default_str();
  run->add_option("--seed", seed, "seed of the random inputs")->capture_default_str();
  std::string run_pass = "fwd";
  run->add_option("--pass", run_pass, "fwd, dgrad (dx from dy, w) or wgrad (dw from x, dy); random inputs")
      ->check(CLI::IsMember({"fwd", "dgrad", "wgrad"}))
      ->capture_default_str();

  mt::LayerArgs plan_args;
  std::string plan_format = "text";
  int64_t max_rows = 64;
  auto* plan = app.add_subcommand("plan", "print the Plan of a layer: offset table, start-address rule, decisions");
  plan_args.add_to(*plan);
  plan->add_option("--format", plan_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  std::string plan_pass = "fwd";
  plan->add_option("--pass", plan_pass, "fwd, dgrad or wgrad: a backward pass prints its forward steps' plans")
      ->check(CLI::IsMember({"fwd", "dgrad", "wgrad"}))
      ->capture_default_str();
  plan->add_option("--max-rows", max_rows, "offset-table rows to print (-1: all)")
      ->check(CLI::Range(int64_t(-1), int64_t(1) << 40))
      ->capture_default_str();

  std::string suite_path, format = "table", out_prefix, target = "auto", algo = "auto", tile;
  mt::BenchOptions bopt;
  std::string vs;
  auto* bench = app.add_subcommand("bench", "benchmark every layer of a suite (default: built-in resnet50)");
  bench->add_option("--suite", suite_path,
                    "suite CSV (name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups)");
  bench->add_option("--batch", bopt.batch, "override n of every layer (0: keep the suite's)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 31));
  std::string bench_layout = "NCHW";
  bench->add_option("--layout", bench_layout, "layout of x, w and y: NCHW, NHWC or CNHW (cuDNN peer: NCHW, NHWC)")
      ->capture_default_str();
  bench->add_option("--format", format, "table, csv or json on stdout")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  bench->add_option("--out", out_prefix,
                    "also write PREFIX.csv and PREFIX.json (whole or not at all) and PREFIX.rows.csv (row by row)");
  bench->add_option("--target", target, "auto (the GPU if one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  bench
      ->add_option("--algo", algo,
                   "auto, reference, implicit_precomp, direct_block, single_channel, stride_fixed, implicit_mma, "
                   "depthwise_wgrad (wgrad of C/G = 1 layers), few_channel_wgrad (wgrad of C <= 4 layers, fp16/bf16), "
                   "few_channel (forward of C <= 4 layers, fp16/bf16/TF32), few_filter (layers of K <= 8, fp16/bf16), "
                   "window_mma (TF32 with x in plane order)")
      ->capture_default_str();
  bench->add_option("--tile", tile, "force a CUDA tile, shape or variant (see `mconv plan`)");
  bench->add_option("--split-k", bopt.plan.split_k, "CUDA row slices: 0 = planner, 1 = off, n = force")
      ->check(CLI::Range(0, 1 << 20));
  bench->add_option("--vs", vs, "peer to time beside mconv: cudnn")->check(CLI::IsMember({"cudnn"}));
  bench->add_flag("--deterministic", bopt.plan.deterministic,
                  "plans without atomics (splits only within a cluster, in rank order)");
  std::string bench_dtype = "fp32", bench_pass = "fwd";
  bench
      ->add_option("--pass", bench_pass,
                   "fwd, dgrad or wgrad (the backward passes: cuda target; peer: cuDNN's Find "
                   "of the same pass)")
      ->check(CLI::IsMember({"fwd", "dgrad", "wgrad"}))
      ->capture_default_str();
  bench
      ->add_option("--dtype", bench_dtype,
                   "fp32 (exact), tf32 (fp32 tensors on tensor cores), fp16 or bf16; cuDNN runs the same precision")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))
      ->capture_default_str();
  std::string bench_activation = "identity";
  bench
      ->add_option("--activation", bench_activation,
                   "fused into mconv's calls and checked: identity, relu or silu (cuDNN peers: the convolution alone)")
      ->check(CLI::IsMember({"identity", "relu", "silu"}))
      ->capture_default_str();
  bench->add_flag("--no-dependent-launch{false}", bopt.dependent_launch,
                  "launch every kernel only once the previous one has ended (EngineOptions::dependent_launch)");
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
  bench->add_option("--launches", bopt.launches, "launches per timed loop (GPU)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bench->add_option("--repeats", bopt.repeats, "timed loops, median reported")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
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
  device->add_option("--index", device_index, "CUDA device")->check(CLI::Range(0, 1 << 16))->capture_default_str();

  // An unknown subcommand is named as such (CLI11 alone would say that one is required).
  const auto known = app.get_subcommands([](const CLI::App*) { return true; });
  const bool is_subcommand =
      argc > 1 && std::any_of(known.begin(), known.end(), [&](const CLI::App* c) { return c->get_name() == argv[1]; });
  if (argc > 1 && argv[1][0] != '-' && !is_subcommand)
    throw Error(mconv::Status::BadParam,
                std::string("unknown subcommand '") + argv[1] + "' (expected run, plan, bench or device; see --help)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, the version, or the error
    return rc == 0 ? 0 : 2;
  }
  {
    if (*run) {
      if (relu && activation != "identity" && activation != "relu")
        throw Error(mconv::Status::BadParam, "--relu: conflicts with --activation " + activation);
      const mconv::Activation act = relu ? mconv::Activation::ReLU : mconv::parse_activation(activation);
      if (run_pass != "fwd") {
        for (const auto* flag : {"--input", "--filter", "--output", "--save-inputs"})
          if (run->count(flag) > 0)
            throw Error(mconv::Status::Unsupported, std::string(flag) +
                                                        ": the .npy options run the forward pass; --pass " + run_pass +
                                                        " runs on random inputs");
        if (act != mconv::Activation::Identity)
          throw Error(mconv::Status::BadParam, "--activation: a backward pass has no activation");
        return cmd_run_backward(run_args, mconv::parse_pass(run_pass), check, seed);
      }
      return cmd_run(run_args, *run, input, filter, output, save_inputs, check, act, seed);
    }
    if (*plan) {
      plan_args.resolved_problem().validate();  // before any size is computed from the fields
      mconv::PlanOptions o = plan_args.plan_options();
      if (plan_pass != "fwd") {
        if (plan_format == "json")
          throw Error(mconv::Status::Unsupported, "--format json: a backward pass prints as text (its steps' plans)");
        mconv::Engine engine(o.target);  // a backward plan's steps are made by an engine: a GPU for cuda
        const auto& pr = plan_args.resolved_problem();
        const auto bp =
            plan_pass == "dgrad"
                ? engine.plan_backward_data(pr, plan_args.y_desc(), plan_args.w_desc(), plan_args.x_desc(), o)
                : engine.plan_backward_filter(pr, plan_args.x_desc(), plan_args.y_desc(), plan_args.w_desc(), o);
        std::cout << bp->to_text(max_rows);
        return 0;
      }
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
      if (!mconv::built_with_cuda()) throw Error(mconv::Status::NoDevice, "device: this mconv was built without CUDA");
      if (!mconv::cuda_available()) throw Error(mconv::Status::NoDevice, "device: no CUDA device is visible");
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
      if (!out_prefix.empty())
        for (const char* ext : {".csv", ".json", ".rows.csv"})
          refuse_overwriting(out_prefix + ext, {{"suite", suite_path}});
      mconv::Target t = mconv::parse_target(target);
      if (t == mconv::Target::Cuda && !mconv::cuda_available())
        throw Error(mconv::Status::NoDevice, mconv::built_with_cuda() ? "--target cuda: no CUDA device is visible"
                                                                      : "--target cuda: mconv was built without CUDA");
      if (t == mconv::Target::Auto) t = mconv::cuda_available() ? mconv::Target::Cuda : mconv::Target::Cpu;
      bopt.plan.algorithm = mconv::parse_algorithm(algo);
      bopt.layout = mconv::parse_layout(bench_layout);
      if (bopt.layout != mconv::Layout::NCHW) suite_name += std::string("_") + mconv::layout_name(bopt.layout);
      std::tie(bopt.dtype, bopt.plan.math) = mt::parse_precision(bench_dtype);
      bopt.pass = mconv::parse_pass(bench_pass);
      bopt.activation = mconv::parse_activation(bench_activation);
      if (bopt.pass != mconv::Pass::Forward && bopt.activation != mconv::Activation::Identity)
        throw Error(mconv::Status::BadParam, "--activation: a backward pass has no activation");
      if (bench_dtype != "fp32") suite_name += "_" + bench_dtype;
      if (bopt.activation != mconv::Activation::Identity) suite_name += std::string("_") + bench_activation;
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
          if (!rows_csv.flush()) throw Error(mconv::Status::IoError, out_prefix + ".rows.csv: write failed");
        };
      }
      if (t == mconv::Target::Cpu) {
        if (bopt.vs_cudnn) throw Error(mconv::Status::Unsupported, "--vs cudnn: needs the cuda target");
        if (bopt.pass != mconv::Pass::Forward)
          throw Error(mconv::Status::Unsupported,
                      "--pass " + bench_pass +
                          ": the backward benchmark runs on the cuda target (mconv run --pass "
                          "checks a backward pass on the CPU)");
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
        std::ostringstream csv, json;
        mt::print_report(csv, "csv", suite_name, rows, peaks);
        mt::print_report(json, "json", suite_name, rows, peaks);
        mconv::file::write_atomically(out_prefix + ".csv", csv.str());
        mconv::file::write_atomically(out_prefix + ".json", json.str());
        rows_csv.close();
        if (!rows_csv) throw Error(mconv::Status::IoError, out_prefix + ".rows.csv: write failed");
        std::cerr << "wrote " << out_prefix << ".csv, " << out_prefix << ".json and " << out_prefix << ".rows.csv\n";
      }
      // 1: a layer gave a wrong result; 2: a layer could not be run (its row says why).
      for (const auto& r : rows)
        if (r.ran && !r.correct) return 1;
      for (const auto& r : rows)
        if (!r.ran) return 2;
      return 0;
    }
  }
  return 0;
}

}  // namespace
