// Command-line description of one layer and its layouts, shared by `mconv run` and `mconv plan`,
// plus the random inputs and sampled reference check the commands and benchmarks use.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mconv/backward.hpp"
#include "mconv/engine.hpp"
#include "mconv/plan.hpp"

namespace mconv::tools {

struct LayerArgs {
  Problem problem;
  float alpha = 1.0f, beta = 0.0f;  // the call's Epilogue
  std::string layout = "NCHW";      // default for x, w, y
  std::string x_layout, w_layout, y_layout;
  std::string mode = "cross";
  std::string target = "auto", algorithm = "auto", tile;
  std::string dtype = "fp32";  // fp32, tf32 (fp32 tensors, TF32 math), fp16 or bf16
  int split_k = 0;
  bool deterministic = false;

  void add_to(CLI::App& app);
  /// Resolves the mode string into problem.mode; throws Error on a bad name.
  Problem resolved_problem() const;
  TensorDesc x_desc() const;
  TensorDesc w_desc() const;
  TensorDesc y_desc() const;
  PlanOptions plan_options() const;
  /// The tensors' storage type (tf32 stores fp32).
  DType storage_dtype() const;
};

/// "fp32", "tf32", "fp16", "bf16" -> storage dtype and math mode; Error(BadParam) otherwise.
std::pair<DType, MathMode> parse_precision(const std::string& s);
/// The norm-relative error a result of this precision is held to against the double reference:
/// fp32 1e-5, tf32 1e-3, fp16/bf16 1e-2.
double precision_tolerance(DType t, MathMode m);

/// The tolerance of a check on sampled outputs: 2e-5 for exact fp32, else precision_tolerance.
double sampled_tolerance(DType t, MathMode m);

/// Rounds every value to what dtype `t` stores, so the reference multiplies exactly what is stored.
void round_to_storage(std::vector<float>& v, DType t);
/// The descriptor of a tensor's widened host copy: the same dims and strides, dtype fp32.
TensorDesc widened(TensorDesc d);

/// Values in the storage bytes of dtype `t` (rounded to nearest even), and back.
std::vector<unsigned char> to_storage(const std::vector<float>& v, DType t);
std::vector<float> from_storage(const std::vector<unsigned char>& b, DType t);

/// A host buffer of `count` floats for tensor `what`, or Error(OutOfMemory) naming it and its size.
std::vector<float> host_tensor(const char* what, int64_t count, float value = 0.0f);

/// Uniform values in [-1, 1) from a seeded generator (never zeros).
void fill_uniform(std::vector<float>& v, uint64_t seed);

/// Norm-relative error ||y - ref|| / ||ref|| over `samples` output elements drawn at random
/// (all of them when the output is smaller), against the double reference (alpha 1, beta 0, no bias)
/// followed by `act`.
double sampled_error(const Problem& p, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                     const TensorDesc& yd, const float* y, int64_t samples, uint64_t seed,
                     Activation act = Activation::Identity);

/// The same for a backward pass: sampled elements of its output (dx or dw) against the double sums
/// of their definitions; a and b are the pass's inputs (dgrad: dy, w; wgrad: x, dy).
double sampled_backward_error(Pass pass, const Problem& p, const TensorDesc& ad, const float* a, const TensorDesc& bd,
                              const float* b, const TensorDesc& od, const float* out, int64_t samples, uint64_t seed);

}  // namespace mconv::tools
