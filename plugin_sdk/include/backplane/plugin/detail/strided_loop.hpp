// bp::detail::stridedLoop, the loop behind bp::forEach and forEachElement
// (Note [Strided loops] in elementwise.hpp).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_STRIDED_LOOP_HPP_
#define BACKPLANE_PLUGIN_DETAIL_STRIDED_LOOP_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/value_types.hpp"

namespace bp {
namespace detail {

constexpr size_t kInlineLoopDims = 12;

[[noreturn, gnu::cold, gnu::noinline]] inline void loopShapeMismatch(size_t operand, IntList sizes, IntList shape) {
  fail(BP_INVALID_ARGUMENT, concat("bp::forEach: operand ", operand, " of shape ", sizes,
                                   " cannot be broadcast to the loop's shape ", shape));
}

// Calls body(ptrs) for every index of `shape` in row-major order, ptrs[k]
// being operand k's element there. `base` are the operands' first
// elements, `elem` their element sizes; each operand's sizes/strides are
// broadcast to `shape`.
template <size_t K, class Body>
void stridedLoop(IntList shape, const std::array<char*, K>& base, const std::array<size_t, K>& elem,
                 const std::array<IntList, K>& sizes, const std::array<IntList, K>& strides, Body&& body) {
  const size_t nd = shape.size();
  for (size_t k = 0; k < K; ++k) {
    const size_t od = sizes[k].size();
    if (od > nd || strides[k].size() != od) loopShapeMismatch(k, sizes[k], shape);
    for (size_t d = 0; d < od; ++d) {
      const int64_t os = sizes[k][d];
      if (os != shape[nd - od + d] && os != 1) loopShapeMismatch(k, sizes[k], shape);
    }
  }
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] == 0) return;  // no elements: no call, no address formed
  }
  // Kept dimensions, innermost first: their sizes, an odometer, and each
  // operand's step in bytes (0 where it is broadcast).
  int64_t inline_buf[kInlineLoopDims * (K + 2)];
  std::vector<int64_t> heap;
  int64_t* buf = inline_buf;
  if (nd > kInlineLoopDims) {
    heap.resize(nd * (K + 2));
    buf = heap.data();
  }
  int64_t* dims = buf;           // [nd]
  int64_t* counter = buf + nd;   // [nd]
  int64_t* step = buf + 2 * nd;  // [nd][K]
  size_t n = 0;
  for (size_t r = nd; r-- > 0;) {  // from the last (innermost) dimension
    const int64_t size = shape[r];
    if (size == 1) continue;
    int64_t s[K];
    for (size_t k = 0; k < K; ++k) {
      const size_t lead = nd - sizes[k].size();
      s[k] = r < lead || sizes[k][r - lead] == 1 ? 0 : strides[k][r - lead] * static_cast<int64_t>(elem[k]);
    }
    // Merge into the kept inner dimension when every operand continues it
    // (inner step * inner size == this step).
    bool merge = n > 0;
    for (size_t k = 0; k < K && merge; ++k) merge = step[(n - 1) * K + k] * dims[n - 1] == s[k];
    if (merge) {
      dims[n - 1] *= size;
      continue;
    }
    dims[n] = size;
    counter[n] = 0;
    for (size_t k = 0; k < K; ++k) step[n * K + k] = s[k];
    ++n;
  }
  std::array<char*, K> p = base;
  if (n == 0) {  // one element
    body(p);
    return;
  }
  const int64_t inner = dims[0];
  for (;;) {
    std::array<char*, K> q = p;
    for (int64_t i = 0; i < inner; ++i) {
      body(q);
      for (size_t k = 0; k < K; ++k) q[k] += step[k];
    }
    // Step the outer dimensions like an odometer.
    size_t d = 1;
    for (; d < n; ++d) {
      for (size_t k = 0; k < K; ++k) p[k] += step[d * K + k];
      if (++counter[d] < dims[d]) break;
      for (size_t k = 0; k < K; ++k) p[k] -= step[d * K + k] * dims[d];
      counter[d] = 0;
    }
    if (d == n) return;
  }
}

template <class T>
char* bytePointer(T* p) noexcept {
  return const_cast<char*>(reinterpret_cast<const char*>(p));
}

template <class... T, class Fn, size_t... I>
void invokeOnElements(Fn& fn, const std::array<char*, sizeof...(T)>& p, std::index_sequence<I...>) {
  fn(*reinterpret_cast<T*>(p[I])...);
}

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_STRIDED_LOOP_HPP_
