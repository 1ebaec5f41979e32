// Host conversions of numeric.hpp. Bit-level, so they match the GPU's cvt.rn instructions exactly.
#include "mconv/numeric.hpp"

#include <cstring>

namespace mconv {
namespace {

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

}  // namespace

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in float.
  const float v = float(man) * (1.0f / 16777216.0f);
  return sign ? -v : v;
}

uint16_t float_to_half_bits(float v) {
  const uint32_t u = bits_of(v);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((abs >> 13) & 0x3ff));  // NaN stays NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);                         // rounds past 65504: infinity
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal multiple of 2^-24, round to nearest even.
    if (abs < 0x33000000u) return sign;  // below half of 2^-24 (the tie at exactly 2^-25 rounds to 0, even)
    const uint32_t e = abs >> 23, m = (abs & 0x7fffff) | 0x800000;
    const int shift = int(126 - e);  // value = m * 2^(e-150); in units of 2^-24: m >> (126 - e)
    uint32_t q = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (q & 1))) ++q;
    return uint16_t(sign | q);
  }
  // Normal: rebias the exponent, keep 10 mantissa bits, round to nearest even (a carry may bump the
  // exponent, which is the right result).
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float bfloat16_bits_to_float(uint16_t bits) {
  return float_of(uint32_t(bits) << 16);
}

uint16_t float_to_bfloat16_bits(float v) {
  const uint32_t u = bits_of(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN (quiet)
  const uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return uint16_t((u + rounding) >> 16);
}

float round_to_tf32(float v) {
  const uint32_t u = bits_of(v);
  if ((u & 0x7f800000u) == 0x7f800000u) return v;  // inf, NaN
  return float_of((u + 0x1000u) & 0xffffe000u);    // 13 low bits dropped, ties away from zero
}

uint16_t float_to_bits(float v, DType t) {
  return t == DType::BFloat16 ? float_to_bfloat16_bits(v) : float_to_half_bits(v);
}

float bits_to_float(uint16_t bits, DType t) {
  return t == DType::BFloat16 ? bfloat16_bits_to_float(bits) : half_bits_to_float(bits);
}

float round_to_dtype(float v, DType t) {
  return t == DType::Float32 || t == DType::Float64 ? v : bits_to_float(float_to_bits(v, t), t);
}

void to_float(DType t, const void* src, float* dst, int64_t count) {
  if (t == DType::Float32) {
    std::memcpy(dst, src, size_t(count) * 4);
    return;
  }
  if (t == DType::Float64) {
    for (int64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, static_cast<const char*>(src) + i * 8, 8);
      dst[i] = static_cast<float>(v);
    }
    return;
  }
  // Byte copies: `src` may sit at any address (the data of a .npy file follows a header of any length).
  const auto* s = static_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, s + 2 * i, 2);
    dst[i] = bits_to_float(bits, t);
  }
}

void from_float(DType t, const float* src, void* dst, int64_t count) {
  if (t == DType::Float32) {
    std::memcpy(dst, src, size_t(count) * 4);
    return;
  }
  if (t == DType::Float64) {
    for (int64_t i = 0; i < count; ++i) {
      const double v = src[i];
      std::memcpy(static_cast<char*>(dst) + i * 8, &v, 8);
    }
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t bits = float_to_bits(src[i], t);
    std::memcpy(d + 2 * i, &bits, 2);
  }
}

}  // namespace mconv
