#pragma once
// ArrayRef<T>: a non-owning view of contiguous elements, constructible from a
// braced list, a vector, an inlined vector or a single element. Like
// std::span<const T>, but usable with braced lists in C++20 call sites
// (`t.view({2, 3})`). The referenced storage must outlive the ArrayRef.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace backplane {

template <typename T>
class ArrayRef {
 public:
  using value_type = T;
  using const_iterator = const T*;

  constexpr ArrayRef() = default;
  constexpr ArrayRef(const T& one) : data_(&one), size_(1) {}  // NOLINT: implicit by design
  constexpr ArrayRef(const T* data, size_t size) : data_(data), size_(size) {}
  // The list's array lives until the end of the full expression: fine for
  // arguments (`t.view({2, 3})`), dangling if stored.
  // (GCC's -Winit-list-lifetime says so of every such constructor; clang has no such warning.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr ArrayRef(std::initializer_list<T> list)  // NOLINT
      : data_(list.begin() == list.end() ? nullptr : list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <typename A>
  ArrayRef(const std::vector<T, A>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  template <size_t N, typename A>
  ArrayRef(const absl::InlinedVector<T, N, A>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  constexpr ArrayRef(std::span<const T> s) : data_(s.data()), size_(s.size()) {}         // NOLINT

  constexpr const T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const T* begin() const { return data_; }
  constexpr const T* end() const { return data_ + size_; }
  constexpr const T& operator[](size_t i) const { return data_[i]; }
  constexpr const T& front() const { return data_[0]; }
  constexpr const T& back() const { return data_[size_ - 1]; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(ArrayRef a, ArrayRef b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

using IntArrayRef = ArrayRef<int64_t>;

// Note [Long lists in messages]
// Error messages print the lists a caller passed (sizes, strides, perm,
// dims) through operator<< below, and a list's length is the caller's: a
// 1M-entry perm once made a 7.9 MB message. A list of up to
// kListPrintedWhole entries prints whole, so every shape a tensor can have
// does (Note [Rank limit]); a longer one prints its first and last
// kListPrintedEdge entries around "...", then its length:
//   [0, 1, 2, 3, 4, 5, 6, 7, ..., 999992, ..., 999999] (1000000 entries)
// ops::shapeString prints through it too, so every message agrees.
inline constexpr size_t kListPrintedWhole = 64;
inline constexpr size_t kListPrintedEdge = 8;

// Prints "[2, 3]" (a long list elided: Note [Long lists in messages]).
template <typename T>
std::ostream& operator<<(std::ostream& os, ArrayRef<T> a) {
  const size_t n = a.size();
  const bool elide = n > kListPrintedWhole;
  os << '[';
  for (size_t i = 0; i < n; ++i) {
    if (elide && i == kListPrintedEdge) {
      os << ", ...";
      i = n - kListPrintedEdge;
    }
    os << (i ? ", " : "") << a[i];
  }
  os << ']';
  if (elide) os << " (" << n << " entries)";
  return os;
}

}  // namespace backplane
