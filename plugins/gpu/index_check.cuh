#pragma once
// Index values checked on the device as kernels read them: the GPU
// plugins' indexing kernels (data_movement.cu) and embedding's backward
// (backward.cu).
//
// Note [Index checks on the device]
// The CPU plugin rejects an out-of-range index value before writing
// anything, with an error naming it. Here index values live in device
// memory, so each kernel checks the value it reads (indexInRange): a value
// outside [0, size) is recorded in the device's error slot and raised at
// the next synchronization, naming the op, the value and its element (Note
// [Deferred device errors] in device_errors.h), and the kernel reads zero
// for it (gathers) or skips it (scatters, embedding's backward). No call
// waits for the device, and no bad index is ever dereferenced. Where
// several elements are bad, the one named is the first a thread recorded,
// not necessarily the first in row-major order (the CPU names that one).
#include <string>

#include "bp_common/dtypes.h"
#include "device_errors.h"
#include "runtime.h"

namespace bp_gpu {

// "<op>: index 9 (element 1 of 'index') is out of range for dimension 0 of
// 'self', which has size 4; valid indices are 0 to 3", from the values
// {index, element, size, dim} a kernel recorded.
inline std::string describeIndexOutOfRange(const ErrorSite& site, const int64_t (&v)[4]) {
  return bp::detail::concat(site.op, ": index ", v[0], " (element ", v[1], " of 'index') is out of range for ",
                            "dimension ", v[3], " of ", site.subject, ", which has size ", v[2],
                            v[2] > 0 ? bp::detail::concat("; valid indices are 0 to ", v[2] - 1)
                                     : std::string("; it has no elements to index"));
}

// What an indexing kernel checks its index values against.
struct IndexCheck {
  DeviceErrorSlot* slot;
  const ErrorSite* site;
  int64_t size;  // valid values: [0, size)
  int64_t dim;   // of the indexed tensor, for the message
};

// The check of an index into a dimension of `size` (dimension `dim`) for a
// kernel on `device`; `site` names the op (a static ErrorSite).
inline IndexCheck indexCheck(int device, const ErrorSite& site, int64_t size, int64_t dim) {
  return IndexCheck{deviceErrorSlot(device), &site, size, dim};
}

// Whether index value v (element `element` of the index tensor, row-major)
// is in range; if not, records it.
template <class I>
__device__ inline bool indexInRange(const IndexCheck& c, I v, int64_t element) {
  if (v >= 0 && static_cast<int64_t>(v) < c.size) return true;
  raiseDeviceError(c.slot, c.site, static_cast<int64_t>(v), element, c.size, c.dim);
  return false;
}

// An ErrorSite for out-of-range indices of op `op` into `subject`.
#define BP_GPU_INDEX_SITE(NAME, OP, SUBJECT) \
  inline constexpr ErrorSite NAME { OP, BP_OUT_OF_RANGE, &describeIndexOutOfRange, SUBJECT }

}  // namespace bp_gpu
