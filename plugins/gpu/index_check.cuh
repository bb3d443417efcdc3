#pragma once
// An index tensor's values checked on the device against [0, size): the
// GPU plugins' indexing kernels (data_movement.cu) and embedding's backward
// (backward.cu).
//
// Note [Index checks on the device]
// The CPU plugin rejects an out-of-range index value before writing
// anything, with an error naming it. Index values live in device memory
// here, so a kernel counts the bad ones and the host reads the count back:
// one small kernel and a wait for the stream per indexing call. PyTorch's
// CUDA kernels assert on the device instead, which costs no wait but
// leaves the CUDA context unusable; Backplane keeps the CPU's contract (a
// bp::Error the caller can catch, out untouched) and pays the wait. Only
// when the count is non-zero is the index copied to the host, to name the
// first bad value exactly as the CPU plugin does.
#include <string>
#include <vector>

#include "kernel_args.h"
#include "loops.cuh"

namespace bp_gpu {

template <class I>
__global__ void countBadIndicesKernel(OffsetCalculator<1> walk, int64_t n, const I* index, int64_t size,
                                      unsigned long long* bad) {
  unsigned long long local = 0;
  gridStride(n, [&](int64_t i) {
    const I v = index[walk.get(i).v[0]];
    local += v < 0 || v >= size;
  });
  if (local != 0) atomicAdd(bad, local);
}

// Throws unless every element of `index` is in [0, size), naming the first
// one that is not (in row-major order).
template <class I>
void checkIndexRange(const char* op, const bp::Tensor& index, int64_t size, int64_t dim, const char* of) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const int device = index.device().index;
  bp::Tensor count = bp::Tensor::empty({1}, ScalarType::Int64, index.device());
  {
    DeviceGuard guard(device);
    check(gpuMemsetAsync(count.data_ptr(), 0, sizeof(unsigned long long), currentStream(device)), op);
  }
  launchElements(&countBadIndicesKernel<I>, n, 1, device,
                 makeOffsetCalculator<1>(op, index.sizes(), {index.strides().data()}), n,
                 static_cast<const I*>(index.data_ptr()), size, static_cast<unsigned long long*>(count.data_ptr()));
  unsigned long long bad = 0;
  readDevice(device, &bad, count.data_ptr(), sizeof bad, op);
  if (bad == 0) return;
  bp::Tensor flat = bp::Tensor::empty(index.sizes(), ScalarType::Int64, index.device());
  copyCast(op, flat, index);
  std::vector<int64_t> values(static_cast<size_t>(n));
  readDevice(device, values.data(), flat.data_ptr(), values.size() * sizeof(int64_t), op);
  size_t first = 0;
  while (values[first] >= 0 && values[first] < size) ++first;
  bp::fail(BP_OUT_OF_RANGE,
           bp::detail::concat(op, ": index ", values[first], " (element ", first, " of 'index') is out of range for ",
                              "dimension ", dim, " of ", of, ", which has size ", size,
                              size > 0 ? bp::detail::concat("; valid indices are 0 to ", size - 1)
                                       : std::string("; it has no elements to index")));
}

}  // namespace bp_gpu
