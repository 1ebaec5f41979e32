// The C ABI: translates handles and structs, and exceptions into status codes.
#include <cstring>
#include <memory>
#include <string>

#include "mconv/engine.hpp"
#include "mconv/mconv.h"

struct mconv_engine_s {
  std::unique_ptr<mconv::Engine> engine;
};
struct mconv_plan_s {
  std::shared_ptr<const mconv::Plan> plan;
};
struct mconv_backward_plan_s {
  std::shared_ptr<const mconv::BackwardPlan> plan;
};

namespace {

thread_local std::string g_last_error;

template <class F>
mconv_status_t guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return MCONV_STATUS_SUCCESS;
  } catch (const mconv::Error& e) {
    g_last_error = e.what();
    return static_cast<mconv_status_t>(e.status());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return MCONV_STATUS_INTERNAL;
  }
}

void require(const void* p, const char* what) {
  if (!p) throw mconv::Error(mconv::Status::NullPointer, std::string(what) + ": null pointer");
}

mconv::TensorDesc to_cpp(const mconv_tensor_desc_t& d) {
  if (d.dtype < MCONV_DTYPE_FLOAT32 || d.dtype > MCONV_DTYPE_FLOAT64)
    throw mconv::Error(mconv::Status::BadParam, "dtype: unknown value " + std::to_string(d.dtype));
  mconv::TensorDesc t;
  t.dtype = static_cast<mconv::DType>(d.dtype);
  for (int i = 0; i < 4; ++i) {
    t.dims[i] = d.dims[i];
    t.strides[i] = d.strides[i];
  }
  return t;
}

mconv::Problem to_cpp(const mconv_problem_t& p) {
  if (p.mode != MCONV_MODE_CROSS_CORRELATION && p.mode != MCONV_MODE_CONVOLUTION)
    throw mconv::Error(mconv::Status::BadParam, "mode: must be MCONV_MODE_CROSS_CORRELATION or MCONV_MODE_CONVOLUTION");
  mconv::Problem q;
  q.n = p.n;
  q.c = p.c;
  q.h = p.h;
  q.w = p.w;
  q.k = p.k;
  q.r = p.r;
  q.s = p.s;
  q.pad_h = p.pad_h;
  q.pad_w = p.pad_w;
  q.stride_h = p.stride_h;
  q.stride_w = p.stride_w;
  q.dil_h = p.dil_h;
  q.dil_w = p.dil_w;
  q.groups = p.groups;
  q.mode = static_cast<mconv::Mode>(p.mode);
  return q;
}

}  // namespace

extern "C" {

const char* mconv_status_string(mconv_status_t status) {
  return mconv::status_name(static_cast<mconv::Status>(status));
}

const char* mconv_last_error_message(void) {
  return g_last_error.c_str();
}

const char* mconv_version(void) {
  return MCONV_VERSION_STRING;
}

int mconv_cuda_available(void) {
  try {
    return mconv::cuda_available() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

mconv_problem_t mconv_problem_default(void) {
  mconv_problem_t p{};
  p.n = p.c = p.h = p.w = p.k = p.r = p.s = 1;
  p.stride_h = p.stride_w = p.dil_h = p.dil_w = p.groups = 1;
  return p;
}

mconv_status_t mconv_tensor_desc_packed(int layout, int64_t n, int64_t c, int64_t h, int64_t w,
                                        mconv_tensor_desc_t* out) {
  return guarded([&] {
    require(out, "out");
    if (layout < MCONV_LAYOUT_NCHW || layout > MCONV_LAYOUT_CNHW)
      throw mconv::Error(mconv::Status::BadParam, "layout: unknown value " + std::to_string(layout));
    auto d = mconv::TensorDesc::packed(static_cast<mconv::Layout>(layout), n, c, h, w);
    out->dtype = MCONV_DTYPE_FLOAT32;
    for (int i = 0; i < 4; ++i) {
      out->dims[i] = d.dims[i];
      out->strides[i] = d.strides[i];
    }
  });
}

mconv_status_t mconv_engine_create(int target, int device, void* stream, mconv_engine_t* out) {
  return guarded([&] {
    require(out, "out");
    if (target < MCONV_TARGET_AUTO || target > MCONV_TARGET_CUDA)
      throw mconv::Error(mconv::Status::BadParam, "target: unknown value " + std::to_string(target));
    auto e = std::make_unique<mconv_engine_s>();
    e->engine = std::make_unique<mconv::Engine>(static_cast<mconv::Target>(target), device, stream);
    *out = e.release();
  });
}

mconv_status_t mconv_engine_destroy(mconv_engine_t engine) {
  return guarded([&] { delete engine; });
}

mconv_status_t mconv_engine_synchronize(mconv_engine_t engine) {
  return guarded([&] {
    require(engine, "engine");
    engine->engine->synchronize();
  });
}

mconv_status_t mconv_plan_create(mconv_engine_t engine, const mconv_problem_t* problem, const mconv_tensor_desc_t* x,
                                 const mconv_tensor_desc_t* w, const mconv_tensor_desc_t* y, int algorithm,
                                 const char* tile, int math, mconv_plan_t* out) {
  return guarded([&] {
    require(engine, "engine");
    require(problem, "problem");
    require(x, "x");
    require(w, "w");
    require(y, "y");
    require(out, "out");
    if (algorithm < MCONV_ALGO_AUTO || algorithm > MCONV_ALGO_WINDOW_MMA)
      throw mconv::Error(mconv::Status::BadParam, "algorithm: unknown value " + std::to_string(algorithm));
    if (math != MCONV_MATH_EXACT && math != MCONV_MATH_TF32)
      throw mconv::Error(mconv::Status::BadParam, "math: unknown value " + std::to_string(math));
    mconv::PlanOptions opt;
    opt.math = static_cast<mconv::MathMode>(math);
    opt.algorithm = static_cast<mconv::Algorithm>(algorithm);
    if (tile) opt.tile = tile;
    auto p = std::make_unique<mconv_plan_s>();
    p->plan = engine->engine->plan(to_cpp(*problem), to_cpp(*x), to_cpp(*w), to_cpp(*y), opt);
    *out = p.release();
  });
}

mconv_status_t mconv_plan_destroy(mconv_plan_t plan) {
  return guarded([&] { delete plan; });
}

mconv_status_t mconv_plan_table_bytes(mconv_plan_t plan, int64_t* bytes) {
  return guarded([&] {
    require(plan, "plan");
    require(bytes, "bytes");
    *bytes = plan->plan->table_bytes();
  });
}

mconv_status_t mconv_plan_describe(mconv_plan_t plan, char* buf, int64_t size, int64_t* needed) {
  return guarded([&] {
    require(plan, "plan");
    const std::string text = plan->plan->to_text();
    if (needed) *needed = static_cast<int64_t>(text.size()) + 1;
    if (buf && size > 0) {
      const size_t n = std::min<size_t>(text.size(), static_cast<size_t>(size - 1));
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
  });
}

mconv_status_t mconv_conv2d_forward(mconv_engine_t engine, mconv_plan_t plan, const void* x, const void* w, void* y,
                                    float alpha, float beta, const float* bias, int activation) {
  return guarded([&] {
    require(engine, "engine");
    require(plan, "plan");
    mconv::Epilogue e;
    e.bias = bias;
    if (activation < MCONV_ACTIVATION_IDENTITY || activation > MCONV_ACTIVATION_SILU)
      throw mconv::Error(mconv::Status::BadParam, "activation: unknown value " + std::to_string(activation));
    e.activation = static_cast<mconv::Activation>(activation);
    e.alpha = alpha;
    e.beta = beta;
    engine->engine->conv2d_forward(*plan->plan, x, w, y, e);
  });
}

mconv_status_t mconv_backward_plan_create(mconv_engine_t engine, int pass, const mconv_problem_t* problem,
                                          const mconv_tensor_desc_t* a, const mconv_tensor_desc_t* b,
                                          const mconv_tensor_desc_t* out, int math, int deterministic,
                                          mconv_backward_plan_t* plan) {
  return guarded([&] {
    require(engine, "engine");
    require(problem, "problem");
    require(a, "a");
    require(b, "b");
    require(out, "out");
    require(plan, "plan");
    if (pass != MCONV_PASS_DGRAD && pass != MCONV_PASS_WGRAD)
      throw mconv::Error(mconv::Status::BadParam, "pass: unknown value " + std::to_string(pass));
    if (math != MCONV_MATH_EXACT && math != MCONV_MATH_TF32)
      throw mconv::Error(mconv::Status::BadParam, "math: unknown value " + std::to_string(math));
    mconv::PlanOptions opt;
    opt.math = static_cast<mconv::MathMode>(math);
    opt.deterministic = deterministic != 0;
    auto p = std::make_unique<mconv_backward_plan_s>();
    const mconv::Problem pr = to_cpp(*problem);
    p->plan = pass == MCONV_PASS_DGRAD
                  ? engine->engine->plan_backward_data(pr, to_cpp(*a), to_cpp(*b), to_cpp(*out), opt)
                  : engine->engine->plan_backward_filter(pr, to_cpp(*a), to_cpp(*b), to_cpp(*out), opt);
    *plan = p.release();
  });
}

mconv_status_t mconv_backward_plan_destroy(mconv_backward_plan_t plan) {
  return guarded([&] { delete plan; });
}

mconv_status_t mconv_conv2d_backward_data(mconv_engine_t engine, mconv_backward_plan_t plan, const void* dy,
                                          const void* w, void* dx, float alpha, float beta) {
  return guarded([&] {
    require(engine, "engine");
    require(plan, "plan");
    engine->engine->conv2d_backward_data(*plan->plan, dy, w, dx, alpha, beta);
  });
}

mconv_status_t mconv_conv2d_backward_filter(mconv_engine_t engine, mconv_backward_plan_t plan, const void* x,
                                            const void* dy, void* dw, float alpha, float beta) {
  return guarded([&] {
    require(engine, "engine");
    require(plan, "plan");
    engine->engine->conv2d_backward_filter(*plan->plan, x, dy, dw, alpha, beta);
  });
}

}  // extern "C"
