#pragma once
// Overflow-checked size arithmetic. Sizes computed from user input (shapes,
// strides, element sizes) go through these so that a huge shape raises a
// clear error instead of wrapping into a small allocation.

#include <cstdint>

#include "backplane/core/array_ref.h"
#include "backplane/core/error.h"

namespace backplane {

inline int64_t checkedMul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) BP_THROW(kOutOfRange, what, " overflows int64: ", a, " * ", b);
  return r;
}
inline int64_t checkedAdd(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) BP_THROW(kOutOfRange, what, " overflows int64: ", a, " + ", b);
  return r;
}

// Product of `sizes`; each must be >= 0. Throws on a negative size or overflow.
int64_t checkedNumel(IntArrayRef sizes);

// Bytes a strided tensor spans from element 0 of its storage offset:
// (storage_offset + 1 + sum((size_i - 1) * stride_i)) * element_size, or 0
// when any size is 0. Strides must be >= 0.
int64_t checkedStorageBytes(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset, int64_t element_size);

}  // namespace backplane
