// Elementwise loops: bp::forEach (the body of an elementwise `.out`
// kernel), forEachElement, and the StridedSpan views they run over (Note
// [Strided loops]). Part of <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_ELEMENTWISE_HPP_
#define BACKPLANE_PLUGIN_ELEMENTWISE_HPP_

#include <array>
#include <cstddef>
#include <utility>

#include "backplane/plugin/detail/strided_loop.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/value_types.hpp"

namespace bp {

// Note [Strided loops]
// Most kernels of a device whose memory the kernel can address directly
// (host memory, or device memory the plugin translates) are one function
// applied to every element. bp::forEach runs it over any layout the host
// hands a kernel: strided and transposed views, storage offsets (the data
// pointer is the first element), expanded inputs (stride 0), 0-d tensors
// (one element) and empty ones (no call, no memory touched), with inputs
// broadcast to the output's shape as PyTorch broadcasts (sizes aligned at
// the end; a size-1 or missing dimension repeats). An `.out` kernel's
// output may itself be strided, and in place it is exactly an input (same
// address, sizes and strides): every element is read before it is written,
// at the same step, so that is fine; the host refuses partial overlaps and
// expanded outputs before a kernel runs. Dimensions that are contiguous
// for every operand are merged first, so a contiguous call is one flat
// loop. No heap allocation up to 12 dimensions.

// Elements a loop reads or writes: the first element's address in memory
// the kernel can dereference, and the sizes and strides (in elements) of
// the view. Borrowed: sizes and strides must outlive the loop (a Tensor's
// own lists live as long as the Tensor).
template <class T>
struct StridedSpan {
  T* data = nullptr;
  IntList sizes;
  IntList strides;
};

// A tensor's elements for the host to read and write: its data_ptr<T>()
// (which checks the dtype and that the memory is host memory, Note [Host
// and device addresses]), sizes and strides.
template <class T>
StridedSpan<T> hostSpan(const Tensor& t) {
  return StridedSpan<T>{t.numel() == 0 ? nullptr : t.data_ptr<T>(), t.sizes(), t.strides()};
}
// A tensor's elements at `data`, the kernel's own pointer to its first
// element (e.g. device memory the plugin translated from
// t.device_ptr<T>()); checks that T is the tensor's dtype.
template <class T>
StridedSpan<T> spanAt(const Tensor& t, T* data) {
  (void)t.device_ptr<T>();  // the dtype check
  return StridedSpan<T>{data, t.sizes(), t.strides()};
}

// Calls fn(e0, e1, ...) with references to the elements of each span at
// every index of `shape`, in row-major order, each span broadcast to
// `shape` (Note [Strided loops]). Throws bp::Error(BP_INVALID_ARGUMENT)
// when a span's sizes do not broadcast to `shape`. A span broadcast along
// a dimension is visited once per index of it, so a reduction can sum
// into one: forEachElement(self.sizes(), [](double& acc, const float& x) {
// acc += x; }, accSpan, selfSpan) with accSpan's reduced strides 0.
template <class Fn, class... T>
void forEachElement(IntList shape, Fn&& fn, const StridedSpan<T>&... spans) {
  constexpr size_t K = sizeof...(T);
  static_assert(K > 0, "bp::forEachElement: pass at least one span");
  detail::stridedLoop<K>(
      shape, {detail::bytePointer(spans.data)...}, {sizeof(T)...}, {spans.sizes...}, {spans.strides...},
      [&](const std::array<char*, K>& p) { detail::invokeOnElements<T...>(fn, p, std::index_sequence_for<T...>()); });
}

// out[i] = fn(a[i], ...) for every element of `out`, the inputs broadcast to
// out's shape: the whole body of an elementwise `.out` kernel. T is the
// element type of every tensor (checked); fn takes the inputs' elements by
// value and returns the output element. The tensors' memory must be host
// memory (data_ptr<T>(), Note [Host and device addresses]); for memory the
// plugin translates, pass StridedSpans (spanAt) instead.
//   bp::forEach<float>(out, self, [](float x) { return x < 0 ? 0.0f : x; });
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), fn);
}
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, const Tensor& b, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), hostSpan<const T>(b), fn);
}
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), hostSpan<const T>(b), hostSpan<const T>(c), fn);
}
// The same over spans, which may have different element types.
template <class O, class A, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x) { o = fn(x); }, out, a);
}
template <class O, class A, class B, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, const StridedSpan<B>& b, Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x, B& y) { o = fn(x, y); }, out, a, b);
}
template <class O, class A, class B, class C, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, const StridedSpan<B>& b, const StridedSpan<C>& c,
             Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x, B& y, C& z) { o = fn(x, y, z); }, out, a, b, c);
}

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_ELEMENTWISE_HPP_
