// Size arithmetic that cannot overflow silently: every product of sizes is formed through these.
#pragma once

#include <cstdint>
#include <string>

#include "mconv/types.hpp"

namespace mconv::detail {

/// a*b, or Error(Overflow) naming `what` if it leaves int64.
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error(Status::Overflow, what + ": element count overflows 64 bits");
  return r;
}

/// a+b, or Error(Overflow) naming `what`.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw Error(Status::Overflow, what + ": overflows 64 bits");
  return r;
}

}  // namespace mconv::detail
