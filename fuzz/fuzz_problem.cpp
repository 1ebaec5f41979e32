// libFuzzer harness: Problem and descriptor validation through the C ABI. The input is read as the
// problem's fields, three descriptors and plan options (int64 values, extremes included); planning must
// succeed or return an error status with a message, never crash. Small valid layers are also run on
// the CPU, with y poisoned, and every output must then be finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mconv/mconv.h"
#include "mconv/numeric.hpp"

namespace {

struct Reader {
  const uint8_t* p;
  size_t n;
  int64_t next() {
    int64_t v = 0;
    const size_t k = n < 8 ? n : 8;
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    // Mostly small values (real layers), sometimes the raw 64-bit pattern (extremes).
    const uint64_t u = static_cast<uint64_t>(v);
    return (u & 0xF) == 0 ? v : static_cast<int64_t>((u >> 4) % 40) - 2;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mconv_engine_t engine = [] {
    mconv_engine_t e = nullptr;
    if (mconv_engine_create(MCONV_TARGET_CPU, 0, nullptr, &e) != MCONV_STATUS_SUCCESS) std::abort();
    return e;
  }();
  Reader r{data, size};
  mconv_problem_t p = mconv_problem_default();
  int64_t* fields[] = {&p.n,     &p.c,     &p.h,        &p.w,        &p.k,     &p.r,     &p.s,
                       &p.pad_h, &p.pad_w, &p.stride_h, &p.stride_w, &p.dil_h, &p.dil_w, &p.groups};
  for (int64_t* f : fields) *f = r.next();
  p.mode = static_cast<int>(r.next() & 3);
  // A valid layer of up to 2^24 reduction rows (Problem::validate's cap) plans an offset table of up
  // to 256 MB. Under AddressSanitizer the process does not give that memory back between inputs (a
  // smaller quarantine did not help, and LeakSanitizer finds no leak), so a minute of mutations
  // around one such layer took a run past its 2 GB limit. Layers of more than 2^20 rows (tables
  // above 16 MB) are skipped here; the cap's error path (more than 2^24 rows) allocates nothing and
  // is still fuzzed.
  int64_t rows = 0;
  if (p.groups > 0 && p.r > 0 && p.s > 0 && !__builtin_mul_overflow(p.c / p.groups, p.r, &rows) &&
      !__builtin_mul_overflow(rows, p.s, &rows) && rows > (int64_t(1) << 20) && rows <= (int64_t(1) << 24))
    return 0;
  mconv_tensor_desc_t d[3];
  const int64_t layout = r.next();
  const bool packed = (layout & 1) == 0;
  const int64_t cg = p.groups > 0 ? p.c / p.groups : 0;
  const int64_t dims[3][4] = {{p.n, p.c, p.h, p.w}, {p.k, cg, p.r, p.s}, {p.n, p.k, 0, 0}};
  for (int t = 0; t < 3; ++t) {
    if (packed) {
      // y's extent comes from the fuzzer too: valid only when it matches the problem.
      const int64_t* dd = dims[t];
      const int64_t h = t == 2 ? r.next() : dd[2], w = t == 2 ? r.next() : dd[3];
      if (mconv_tensor_desc_packed(static_cast<int>((layout >> 1) % 4), dd[0], dd[1], h, w, &d[t]) !=
          MCONV_STATUS_SUCCESS)
        return 0;
    } else {
      d[t].dtype = static_cast<int>(r.next() % 3);
      for (int i = 0; i < 4; ++i) d[t].dims[i] = r.next();
      for (int i = 0; i < 4; ++i) d[t].strides[i] = r.next();
    }
  }
  mconv_plan_t plan = nullptr;
  const int algo = static_cast<int>(r.next() % 8);
  const mconv_status_t s =
      mconv_plan_create(engine, &p, &d[0], &d[1], &d[2], algo, nullptr, static_cast<int>(r.next() & 1), &plan);
  if (s != MCONV_STATUS_SUCCESS) {
    if (plan != nullptr || mconv_last_error_message()[0] == '\0') std::abort();  // an error says why
    return 0;
  }
  int64_t needed = 0;
  if (mconv_plan_describe(plan, nullptr, 0, &needed) != MCONV_STATUS_SUCCESS || needed <= 0) std::abort();
  // Run small layers: the spans of the descriptors bound the buffers.
  int64_t span[3];
  bool small = true;
  for (int t = 0; t < 3; ++t) {
    span[t] = 1;
    for (int i = 0; i < 4; ++i) {
      int64_t term = 0;
      small = small && !__builtin_mul_overflow(d[t].dims[i] - 1, d[t].strides[i], &term) &&
              !__builtin_add_overflow(span[t], term, &span[t]);
    }
    small = small && span[t] <= (1 << 14);
  }
  if (small && double(p.n) * p.k * p.c * p.r * p.s <= double(1 << 16)) {
    // Buffers of the descriptors' dtype (one for all three once the plan exists); y poisoned with NaN.
    const auto t = static_cast<mconv::DType>(d[2].dtype);
    auto run = [&](auto zero) {
      using E = decltype(zero);
      auto value = [&](float v) {
        if constexpr (sizeof(E) == 4)
          return v;
        else
          return mconv::float_to_bits(v, t);
      };
      std::vector<E> x(span[0], value(0.5f)), w(span[1], value(-0.25f)), y(span[2], value(NAN));
      if (mconv_conv2d_forward(engine, plan, x.data(), w.data(), y.data(), 1.0f, 0.0f, nullptr, 0) !=
          MCONV_STATUS_SUCCESS)
        return;
      for (int64_t n = 0; n < d[2].dims[0]; ++n)
        for (int64_t k = 0; k < d[2].dims[1]; ++k)
          for (int64_t h = 0; h < d[2].dims[2]; ++h)
            for (int64_t q = 0; q < d[2].dims[3]; ++q) {
              const E v = y[n * d[2].strides[0] + k * d[2].strides[1] + h * d[2].strides[2] + q * d[2].strides[3]];
              float f;
              if constexpr (sizeof(E) == 4)
                f = v;
              else
                f = mconv::bits_to_float(v, t);
              if (!std::isfinite(f)) std::abort();  // an output left unwritten
            }
    };
    if (t == mconv::DType::Float32)
      run(0.0f);
    else
      run(uint16_t(0));
  }
  mconv_plan_destroy(plan);
  return 0;
}
