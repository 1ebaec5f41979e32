// libFuzzer harness: the benchmark suite reader on arbitrary text. It returns valid layers (every
// Problem validates) or throws mconv::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../tools/mconv/suite.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto layers = mconv::tools::parse_suite(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& l : layers) l.problem.validate();  // throws only if the reader let a bad layer through
  } catch (const mconv::Error&) {
  }
  return 0;
}
