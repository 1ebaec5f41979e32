// libFuzzer harness: the .npy reader on arbitrary bytes. It must return an array whose data matches its
// shape, or throw mconv::Error; anything else (a crash, another exception, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mconv/npy.hpp"
#include "mconv/types.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const mconv::npy::Array a = mconv::npy::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    size_t count = 1;
    for (int64_t d : a.shape) count *= static_cast<size_t>(d);
    if (count != a.data.size()) std::abort();
  } catch (const mconv::Error&) {
  }
  return 0;
}
