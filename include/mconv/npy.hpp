// mconv: NumPy .npy files (format versions 1-3), float32 little-endian, C order, so layers from real
// models can be run and inspected. Malformed files raise Error(IoError) saying what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mconv::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Array load(const std::string& path);
/// Parses an in-memory .npy image (what load() reads from a file).
Array parse(const std::string& bytes, const std::string& name = "<memory>");
void save(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace mconv::npy
