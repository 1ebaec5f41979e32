// mconv: NumPy .npy files (format versions 1-3), float32 ('<f4') or float16 ('<f2') little-endian, C
// order, so layers from real models can be run and inspected. NumPy has no bfloat16: bf16 tensors
// travel as float32 files (rounded to bf16 when loaded for a bf16 layer). Malformed files raise
// Error(IoError) saying what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mconv/types.hpp"

namespace mconv::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;       ///< the values, widened to float (exact for float16 files)
  DType dtype = DType::Float32;  ///< what the file stored: Float32 or Float16
};

Array load(const std::string& path);
/// Parses an in-memory .npy image (what load() reads from a file).
Array parse(const std::string& bytes, const std::string& name = "<memory>");
/// Writes `data` as float32, or as float16 ('<f2', rounded to nearest even) when `dtype` is Float16.
/// BFloat16 writes float32 (NumPy has no bfloat16; the values are exact in it).
void save(const std::string& path, const std::vector<int64_t>& shape, const float* data, DType dtype = DType::Float32);

}  // namespace mconv::npy
