#include "backplane/core/checked_math.h"

namespace backplane {

// Note [Empty shapes do not overflow]
// A shape with a size of 0 has no elements and spans no bytes, whatever its
// other sizes and strides: numel and the storage size are 0, never an
// overflow error, in every order of the dims ([0, 2^40, 2^40] and
// [2^40, 2^40, 0] alike; found by fuzz_dlpack_import, where the order
// decided whether an import failed).

int64_t checkedNumel(IntArrayRef sizes) {
  bool empty = false;
  for (int64_t s : sizes) {
    BP_CHECK(s >= 0, "negative size ", s, " in shape ", sizes, "; sizes must be >= 0");
    empty = empty || s == 0;
  }
  if (empty) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) n = checkedMul(n, s, "number of elements");
  return n;
}

int64_t checkedStorageBytes(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset, int64_t element_size) {
  BP_CHECK(sizes.size() == strides.size(), "shape ", sizes, " has ", sizes.size(), " dims but strides ", strides,
           " have ", strides.size());
  BP_CHECK(storage_offset >= 0, "negative storage offset ", storage_offset);
  int64_t last = 0;  // offset of the last element relative to the first
  for (size_t i = 0; i < sizes.size(); ++i) {
    BP_CHECK(sizes[i] >= 0, "negative size ", sizes[i], " in shape ", sizes);
    BP_CHECK(strides[i] >= 0, "negative stride ", strides[i], " in strides ", strides,
             "; Backplane tensors have non-negative strides");
    if (sizes[i] == 0) return 0;  // Note [Empty shapes do not overflow]
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    last = checkedAdd(last, checkedMul(sizes[i] - 1, strides[i], "tensor extent"), "tensor extent");
  int64_t elements = checkedAdd(checkedAdd(storage_offset, last, "tensor extent"), 1, "tensor extent");
  return checkedMul(elements, element_size, "tensor byte size");
}

}  // namespace backplane
