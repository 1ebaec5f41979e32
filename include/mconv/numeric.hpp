// mconv: the storage formats of the half-precision dtypes on the host, so tools, tests and the CPU
// executor convert exactly as the GPU does (round to nearest, ties to even; NaN stays NaN).
#pragma once

#include <cstdint>

#include "mconv/types.hpp"

namespace mconv {

/// IEEE binary16 bits -> float (exact).
float half_bits_to_float(uint16_t bits);
/// float -> IEEE binary16 bits, round to nearest even (overflow to infinity, subnormals kept).
uint16_t float_to_half_bits(float v);
/// bfloat16 bits (the top half of a float) -> float (exact).
float bfloat16_bits_to_float(uint16_t bits);
/// float -> bfloat16 bits, round to nearest even.
uint16_t float_to_bfloat16_bits(float v);
/// The float nearest to v that the tensor cores' TF32 format holds (10 mantissa bits), ties away
/// from zero as cvt.rna.tf32.f32 rounds.
float round_to_tf32(float v);

/// Storage bits of v in a 16-bit dtype (Float16 or BFloat16).
uint16_t float_to_bits(float v, DType t);
/// The value of 16-bit storage bits of dtype t (Float16 or BFloat16).
float bits_to_float(uint16_t bits, DType t);
/// v rounded to what dtype t stores (identity for Float32).
float round_to_dtype(float v, DType t);

/// Elements of dtype t at `src` (count of them, at any alignment) -> floats; `dst` may not alias `src`.
void to_float(DType t, const void* src, float* dst, int64_t count);
/// Floats -> elements of dtype t at `dst` (any alignment), rounded to nearest even.
void from_float(DType t, const float* src, void* dst, int64_t count);

}  // namespace mconv
