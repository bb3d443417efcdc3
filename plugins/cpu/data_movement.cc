// Data-movement kernels of the CPU plugin: cat, index_select, gather,
// scatter_add and masked_fill (stack and embedding are host composites over
// cat and index_select). Each computes into the `out` the host has sized
// with the op's rule (Note [Meta kernels]); the range of index VALUES is
// checked here, where they can be read.
//
// Moving an element does not depend on what it means, so same-dtype copies
// move raw bytes of the element's size (one instantiation per size, not per
// dtype); only cat and masked_fill, whose `out` may have another dtype,
// convert.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Elements worth one thread: below this, starting threads costs more than
// it saves.
constexpr int64_t kGrain = 32768;
// Dimensions a layout may have (PyTorch's TensorIterator limit is 25).
constexpr int kMaxDims = 32;

// Calls f(begin, end) over [0, n), split across threads when the n items
// (each `cost` elements of work) are enough to share. f must not throw.
template <class F>
void parallelFor(int64_t n, int64_t cost, F&& f) {
  if (n <= 0) return;
  const int64_t work = n * std::max<int64_t>(cost, 1);
  if (work < 2 * kGrain || numThreads() == 1) {
    f(int64_t{0}, n);
    return;
  }
  ThreadScope threads;
  const int nt = static_cast<int>(std::min<int64_t>({omp_get_max_threads(), work / kGrain, n}));
#pragma omp parallel num_threads(nt)
  {
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (n + team - 1) / team;
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) f(begin, end);
  }
}

// K operands walked together over one shape, in row-major order. Strides
// are kept in bytes; dimensions of size 1 are dropped and neighbours merged
// where every operand is contiguous across them, so a contiguous copy is a
// single run however many dimensions it has.
template <int K>
class Loop {
 public:
  using Ptrs = std::array<char*, K>;
  using Steps = std::array<int64_t, K>;

  // strides[k]: operand k's element strides for each of sizes' dimensions.
  Loop(const char* op, bp::IntList sizes, const std::array<const int64_t*, K>& strides,
       const std::array<int64_t, K>& itemsize) {
    BP_PLUGIN_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims), op, ": tensors of ", sizes.size(),
                    " dimensions are not supported on cpu (at most ", kMaxDims, ")");
    for (size_t d = sizes.size(); d-- > 0;) {  // innermost first: index 0 is the innermost dimension
      numel_ *= sizes[d];
      if (sizes[d] == 1) continue;
      bool merge = ndim_ > 0;
      for (int k = 0; k < K && merge; ++k)
        merge = strides[k][d] * itemsize[k] == strides_[k][ndim_ - 1] * sizes_[ndim_ - 1];
      if (merge) {
        sizes_[ndim_ - 1] *= sizes[d];
        continue;
      }
      sizes_[ndim_] = sizes[d];
      for (int k = 0; k < K; ++k) strides_[k][ndim_] = strides[k][d] * itemsize[k];
      ++ndim_;
    }
  }

  int64_t numel() const { return numel_; }

  // Calls f(ptrs, n, steps) for runs of n elements along the innermost
  // dimension that together cover elements [begin, end) (row-major
  // positions); ptrs start at `base` plus the run's offsets.
  template <class F>
  void run(const Ptrs& base, int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    if (ndim_ == 0) {
      f(base, int64_t{1}, Steps{});
      return;
    }
    int64_t index[kMaxDims];
    Ptrs p = base;
    int64_t rem = begin;
    for (int i = 0; i < ndim_; ++i) {
      index[i] = rem % sizes_[i];
      rem /= sizes_[i];
      for (int k = 0; k < K; ++k) p[k] += index[i] * strides_[k][i];
    }
    Steps inner;
    for (int k = 0; k < K; ++k) inner[k] = strides_[k][0];
    for (int64_t pos = begin; pos < end;) {
      const int64_t n = std::min(sizes_[0] - index[0], end - pos);
      f(p, n, inner);
      pos += n;
      index[0] += n;
      for (int k = 0; k < K; ++k) p[k] += n * strides_[k][0];
      for (int i = 0; i + 1 < ndim_ && index[i] == sizes_[i]; ++i) {  // carry
        index[i] = 0;
        ++index[i + 1];
        for (int k = 0; k < K; ++k) p[k] += strides_[k][i + 1] - sizes_[i] * strides_[k][i];
      }
    }
  }

 private:
  int ndim_ = 0;
  int64_t numel_ = 1;
  int64_t sizes_[kMaxDims];
  int64_t strides_[K][kMaxDims];
};

template <class E>
inline E loadRaw(const char* p) {
  E v;
  std::memcpy(&v, p, sizeof(E));
  return v;
}
template <class E>
inline void storeRaw(char* p, E v) {
  std::memcpy(p, &v, sizeof(E));
}

// n elements of E from src (step ss bytes) to dst (step ds bytes).
template <class E>
inline void copyRun(char* dst, const char* src, int64_t n, int64_t ds, int64_t ss) {
  if (ds == static_cast<int64_t>(sizeof(E)) && ss == static_cast<int64_t>(sizeof(E))) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(E));
    return;
  }
  for (int64_t j = 0; j < n; ++j) storeRaw<E>(dst + j * ds, loadRaw<E>(src + j * ss));
}

// Copies the elements of shape `sizes` from src to dst (element strides of
// each), converting from src_type to dst_type.
void copyStrided(const char* op, char* dst, ScalarType dst_type, const int64_t* dst_strides, const char* src,
                 ScalarType src_type, const int64_t* src_strides, bp::IntList sizes) {
  const int64_t dst_item = static_cast<int64_t>(bp::elementSize(dst_type));
  const int64_t src_item = static_cast<int64_t>(bp::elementSize(src_type));
  Loop<2> loop(op, sizes, {dst_strides, src_strides}, {dst_item, src_item});
  const Loop<2>::Ptrs base{dst, const_cast<char*>(src)};
  if (dst_type == src_type) {
    visitItemSize(static_cast<size_t>(dst_item), [&](auto tag) {
      using E = decltype(tag);
      parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
        loop.run(base, b, e, [](const Loop<2>::Ptrs& p, int64_t n, const Loop<2>::Steps& st) {
          copyRun<E>(p[0], p[1], n, st[0], st[1]);
        });
      });
    });
    return;
  }
  visitAnyDtype(dst_type, [&](auto out_tag) {
    using O = decltype(out_tag);
    visitAnyDtype(src_type, [&](auto in_tag) {
      using I = decltype(in_tag);
      parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
        loop.run(base, b, e, [](const Loop<2>::Ptrs& p, int64_t n, const Loop<2>::Steps& st) {
          for (int64_t j = 0; j < n; ++j) storeRaw<O>(p[0] + j * st[0], convert<O>(loadRaw<I>(p[1] + j * st[1])));
        });
      });
    });
  });
}

bool sameLayout(const bp::Tensor& a, const bp::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

void checkSameDtype(const char* op, const bp::Tensor& out, const bp::Tensor& self) {
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": argument 'out' has dtype ", bp::name(out.dtype()),
                  " but 'self' has dtype ", bp::name(self.dtype()), "; pass an out of dtype ", bp::name(self.dtype()));
}

// Calls f(I{}) with the C++ type of an index tensor (int32 or int64).
template <class F>
decltype(auto) visitIndex(const char* op, const bp::Tensor& index, F&& f) {
  auto refuse = [&] { checkDtype(op, index, "index", {ScalarType::Int64, ScalarType::Int32}); };
  return bp_common::visitIndexDtype(index.dtype(), refuse, f);
}

// Throws unless every element of `index` (int32 or int64) is in [0, size),
// naming the first one that is not (in row-major order).
template <class I>
void checkIndexRange(const char* op, const bp::Tensor& index, int64_t size, int64_t dim, const char* of) {
  Loop<1> loop(op, index.sizes(), {index.strides().data()}, {static_cast<int64_t>(sizeof(I))});
  const Loop<1>::Ptrs base{static_cast<char*>(index.data_ptr())};
  std::atomic<bool> bad{false};
  parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
    bool local = false;
    loop.run(base, b, e, [&](const Loop<1>::Ptrs& p, int64_t n, const Loop<1>::Steps& st) {
      for (int64_t j = 0; j < n; ++j) {
        const I v = loadRaw<I>(p[0] + j * st[0]);
        local |= v < 0 || v >= size;
      }
    });
    if (local) bad.store(true, std::memory_order_relaxed);
  });
  if (!bad.load()) return;
  int64_t position = 0, first_bad = -1, value = 0;
  loop.run(base, 0, loop.numel(), [&](const Loop<1>::Ptrs& p, int64_t n, const Loop<1>::Steps& st) {
    for (int64_t j = 0; j < n && first_bad < 0; ++j) {
      const I v = loadRaw<I>(p[0] + j * st[0]);
      if (v < 0 || v >= size) first_bad = position + j, value = v;
    }
    position += n;
  });
  bp::fail(BP_OUT_OF_RANGE,
           bp::detail::concat(op, ": index ", value, " (element ", first_bad, " of 'index') is out of range for ",
                              "dimension ", dim, " of ", of, ", which has size ", size,
                              size > 0 ? bp::detail::concat("; valid indices are 0 to ", size - 1)
                                       : std::string("; it has no elements to index")));
}

using bp_common::wrapDim;

// --- cat

bp::Tensor cat_out(const std::vector<bp::Tensor>& tensors, int64_t dim, const bp::Tensor& out) {
  const char* op = "bp::cat.out";
  checkCpu(op, out, "out");
  for (const bp::Tensor& t : tensors) checkCpu(op, t, "tensors");
  if (out.numel() == 0) return out;
  // The host's rule has checked dim against the inputs' rank, which is out's.
  const int64_t d = wrapDim(dim, out.dim());
  char* base = static_cast<char*>(out.data_ptr());
  const int64_t step = out.stride(d) * static_cast<int64_t>(out.element_size());
  int64_t offset = 0;
  for (const bp::Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // skipped by cat's rule (legacy empty tensor)
    copyStrided(op, base + offset * step, out.dtype(), out.strides().data(), static_cast<const char*>(t.data_ptr()),
                t.dtype(), t.strides().data(), t.sizes());
    offset += t.size(d);
  }
  return out;
}

// --- index_select: out[..., i, ...] = self[..., index[i], ...] along dim.

bp::Tensor index_select_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& out) {
  const char* op = "bp::index_select.out";
  checkCpu(op, self, "self");
  checkCpu(op, index, "index");
  checkCpu(op, out, "out");
  checkSameDtype(op, out, self);
  const int64_t item = static_cast<int64_t>(self.element_size());
  return visitIndex(op, index, [&](auto index_tag) {
    using I = decltype(index_tag);
    const int64_t d = wrapDim(dim, self.dim());
    const int64_t size = self.dim() == 0 ? 1 : self.size(d);
    checkIndexRange<I>(op, index, size, d, "'self'");
    const char* idx = static_cast<const char*>(index.data_ptr());
    const int64_t idx_step = (index.dim() == 0 ? 0 : index.stride(0)) * static_cast<int64_t>(sizeof(I));
    const int64_t n_index = index.numel();
    // One slice per index: every dimension but d.
    int64_t slice_sizes[kMaxDims], out_strides[kMaxDims], self_strides[kMaxDims];
    BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(),
                    " dimensions are not supported on cpu (at most ", kMaxDims, ")");
    int64_t slice_dims = 0;
    for (int64_t k = 0; k < self.dim(); ++k) {
      if (k == d) continue;
      slice_sizes[slice_dims] = self.size(k);
      out_strides[slice_dims] = out.stride(k);
      self_strides[slice_dims] = self.stride(k);
      ++slice_dims;
    }
    Loop<2> slice(op, bp::IntList(slice_sizes, static_cast<size_t>(slice_dims)), {out_strides, self_strides},
                  {item, item});
    const int64_t slice_numel = slice.numel();
    const int64_t out_step = (self.dim() == 0 ? 0 : out.stride(d)) * item;
    const int64_t self_step = (self.dim() == 0 ? 0 : self.stride(d)) * item;
    char* out_base = static_cast<char*>(out.data_ptr());
    char* self_base = static_cast<char*>(self.data_ptr());
    visitItemSize(static_cast<size_t>(item), [&](auto tag) {
      using E = decltype(tag);
      // Positions [b, e) of the (index, slice element) space, so that a few
      // big slices and many small ones both split evenly across threads.
      parallelFor(n_index * slice_numel, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b / slice_numel; i * slice_numel < e; ++i) {
          const int64_t v = loadRaw<I>(idx + i * idx_step);
          const int64_t lo = std::max(b, i * slice_numel) - i * slice_numel;
          const int64_t hi = std::min(e, (i + 1) * slice_numel) - i * slice_numel;
          slice.run({out_base + i * out_step, self_base + v * self_step}, lo, hi,
                    [](const Loop<2>::Ptrs& p, int64_t n, const Loop<2>::Steps& st) {
                      copyRun<E>(p[0], p[1], n, st[0], st[1]);
                    });
        }
      });
    });
    return out;
  });
}

// --- gather: out[p] = self[p with p[dim] = index[p]].

bp::Tensor gather_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, bool, const bp::Tensor& out) {
  const char* op = "bp::gather.out";
  checkCpu(op, self, "self");
  checkCpu(op, index, "index");
  checkCpu(op, out, "out");
  checkSameDtype(op, out, self);
  checkDtype(op, index, "index", {ScalarType::Int64});
  if (index.numel() == 0) return out;
  const int64_t item = static_cast<int64_t>(self.element_size());
  const int64_t d = wrapDim(dim, self.dim());
  checkIndexRange<int64_t>(op, index, self.dim() == 0 ? 1 : self.size(d), d, "'self'");
  // Walk index's shape; self moves with it except along d, where the index
  // value picks the element. The host's rule made index's other sizes fit
  // self's, and the ranks equal (a 0-d tensor counting as 1-d).
  int64_t self_strides[kMaxDims];
  BP_PLUGIN_CHECK(index.dim() <= kMaxDims, op, ": tensors of ", index.dim(),
                  " dimensions are not supported on cpu (at most ", kMaxDims, ")");
  for (int64_t k = 0; k < index.dim(); ++k) self_strides[k] = k == d ? 0 : self.stride(k);
  Loop<3> loop(op, index.sizes(), {out.strides().data(), index.strides().data(), self_strides}, {item, 8, item});
  const int64_t self_step = (self.dim() == 0 ? 0 : self.stride(d)) * item;
  const Loop<3>::Ptrs base{static_cast<char*>(out.data_ptr()), static_cast<char*>(index.data_ptr()),
                           static_cast<char*>(self.data_ptr())};
  visitItemSize(static_cast<size_t>(item), [&](auto tag) {
    using E = decltype(tag);
    parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
      loop.run(base, b, e, [self_step](const Loop<3>::Ptrs& p, int64_t n, const Loop<3>::Steps& st) {
        for (int64_t j = 0; j < n; ++j) {
          const int64_t v = loadRaw<int64_t>(p[1] + j * st[1]);
          storeRaw<E>(p[0] + j * st[0], loadRaw<E>(p[2] + j * st[2] + v * self_step));
        }
      });
    });
  });
  return out;
}

// --- scatter_add: out = self; out[p with p[dim] = index[p]] += src[p].
// --- scatter: the same with = (the last element along dim wins).

template <bool Add>
bp::Tensor scatterInto(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& index,
                       const bp::Tensor& src, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, index, "index");
  checkCpu(op, src, "src");
  checkCpu(op, out, "out");
  checkSameDtype(op, out, self);
  checkSameDtype(op, src, self);
  checkDtype(op, index, "index", {ScalarType::Int64});
  const int64_t d = wrapDim(dim, self.dim());
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  if (index.numel() != 0) checkIndexRange<int64_t>(op, index, size, d, "'self'");  // before out changes
  if (!sameLayout(out, self)) {
    copyStrided(op, static_cast<char*>(out.data_ptr()), out.dtype(), out.strides().data(),
                static_cast<const char*>(self.data_ptr()), self.dtype(), self.strides().data(), self.sizes());
  }
  if (index.numel() == 0) return out;
  const int64_t item = static_cast<int64_t>(self.element_size());
  // Elements that differ only along d may add into the same place, so the
  // work splits into lines along d (every other dimension of index), each
  // accumulated in order by one thread: no races, and a deterministic sum.
  int64_t line_sizes[kMaxDims], index_strides[kMaxDims], src_strides[kMaxDims], out_strides[kMaxDims];
  BP_PLUGIN_CHECK(index.dim() <= kMaxDims, op, ": tensors of ", index.dim(),
                  " dimensions are not supported on cpu (at most ", kMaxDims, ")");
  int64_t line_dims = 0;
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (k == d) continue;
    line_sizes[line_dims] = index.size(k);
    index_strides[line_dims] = index.stride(k);
    src_strides[line_dims] = src.stride(k);
    out_strides[line_dims] = out.stride(k);
    ++line_dims;
  }
  Loop<3> lines(op, bp::IntList(line_sizes, static_cast<size_t>(line_dims)), {index_strides, src_strides, out_strides},
                {8, item, item});
  const int64_t length = index.dim() == 0 ? 1 : index.size(d);
  const int64_t index_step = (index.dim() == 0 ? 0 : index.stride(d)) * 8;
  const int64_t src_step = (src.dim() == 0 ? 0 : src.stride(d)) * item;
  const int64_t out_step = (out.dim() == 0 ? 0 : out.stride(d)) * item;
  const Loop<3>::Ptrs base{static_cast<char*>(index.data_ptr()), static_cast<char*>(src.data_ptr()),
                           static_cast<char*>(out.data_ptr())};
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallelFor(lines.numel(), length, [&](int64_t b, int64_t e) {
      lines.run(base, b, e, [&](const Loop<3>::Ptrs& p, int64_t n, const Loop<3>::Steps& st) {
        // Along d outside, across lines inside: the inner loop walks memory in order for dim 0.
        for (int64_t k = 0; k < length; ++k) {
          for (int64_t j = 0; j < n; ++j) {
            const int64_t v = loadRaw<int64_t>(p[0] + j * st[0] + k * index_step);
            char* o = p[2] + j * st[2] + v * out_step;
            const T value = loadRaw<T>(p[1] + j * st[1] + k * src_step);
            if constexpr (Add)
              storeRaw<T>(o, store<T>(load(loadRaw<T>(o)) + load(value)));
            else
              storeRaw<T>(o, value);
          }
        }
      });
    });
  });
  return out;
}

bp::Tensor scatter_add_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& src,
                           const bp::Tensor& out) {
  return scatterInto<true>("bp::scatter_add.out", self, dim, index, src, out);
}

bp::Tensor scatter_src_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& src,
                           const bp::Tensor& out) {
  return scatterInto<false>("bp::scatter.src_out", self, dim, index, src, out);
}

// --- masked_fill: out = mask ? value : self, self and mask broadcast to out.

// t's element strides for `ndim` dimensions it broadcasts to (right-aligned;
// 0 where t has size 1 or no dimension).
void broadcastStrides(const bp::Tensor& t, int64_t ndim, int64_t* strides) {
  const int64_t lead = ndim - t.dim();
  for (int64_t k = 0; k < ndim; ++k) strides[k] = k < lead || t.size(k - lead) == 1 ? 0 : t.stride(k - lead);
}

// The fill value's bytes in out's dtype: converted to self's dtype first (as
// PyTorch, which fills self's dtype and then writes out). The host has
// range-checked a Scalar value; masked_fill_tensor_out checks a 0-d value
// tensor's.
uint64_t fillBits(const bp::Scalar& value, ScalarType self_type, ScalarType out_type) {
  uint64_t bits = 0;
  visitAnyDtype(self_type, [&](auto self_tag) {
    using S = decltype(self_tag);
    const S s = scalarTo<S>(value);
    visitAnyDtype(out_type, [&](auto out_tag) {
      using O = decltype(out_tag);
      const O o = convert<O>(s);
      std::memcpy(&bits, &o, sizeof(O));
    });
  });
  return bits;
}

bp::Tensor maskedFill(const char* op, const bp::Tensor& self, const bp::Tensor& mask, const bp::Scalar& value,
                      const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, mask, "mask");
  checkCpu(op, out, "out");
  checkDtype(op, mask, "mask", {ScalarType::Bool});
  const uint64_t bits = fillBits(value, self.dtype(), out.dtype());
  if (out.numel() == 0) return out;
  const int64_t ndim = out.dim();
  BP_PLUGIN_CHECK(ndim <= kMaxDims, op, ": tensors of ", ndim, " dimensions are not supported on cpu (at most ",
                  kMaxDims, ")");
  int64_t self_strides[kMaxDims], mask_strides[kMaxDims];
  broadcastStrides(self, ndim, self_strides);
  broadcastStrides(mask, ndim, mask_strides);
  const int64_t item = static_cast<int64_t>(out.element_size());
  char* out_base = static_cast<char*>(out.data_ptr());
  char* mask_base = static_cast<char*>(mask.data_ptr());
  visitItemSize(static_cast<size_t>(item), [&](auto tag) {
    using E = decltype(tag);
    E fill;
    std::memcpy(&fill, &bits, sizeof(E));  // little-endian: the low bytes
    if (out.dtype() == self.dtype() && !sameLayout(out, self)) {
      // One pass: every element of out is written.
      Loop<3> loop(op, out.sizes(), {out.strides().data(), self_strides, mask_strides}, {item, item, 1});
      const Loop<3>::Ptrs base{out_base, static_cast<char*>(self.data_ptr()), mask_base};
      parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
        loop.run(base, b, e, [fill](const Loop<3>::Ptrs& p, int64_t n, const Loop<3>::Steps& st) {
          for (int64_t j = 0; j < n; ++j)
            storeRaw<E>(p[0] + j * st[0], p[2][j * st[2]] ? fill : loadRaw<E>(p[1] + j * st[1]));
        });
      });
      return;
    }
    // In place, or out of another dtype: out = self (converted), then fill.
    if (!sameLayout(out, self)) {
      copyStrided(op, out_base, out.dtype(), out.strides().data(), static_cast<const char*>(self.data_ptr()),
                  self.dtype(), self_strides, out.sizes());
    }
    Loop<2> loop(op, out.sizes(), {out.strides().data(), mask_strides}, {item, 1});
    parallelFor(loop.numel(), 1, [&](int64_t b, int64_t e) {
      loop.run({out_base, mask_base}, b, e, [fill](const Loop<2>::Ptrs& p, int64_t n, const Loop<2>::Steps& st) {
        for (int64_t j = 0; j < n; ++j)
          if (p[1][j * st[1]]) storeRaw<E>(p[0] + j * st[0], fill);
      });
    });
  });
  return out;
}

constexpr auto masked_fill_scalar_out = &bp_common::maskedFillScalarOut<&maskedFill>;

bp::Tensor masked_fill_tensor_out(const bp::Tensor& self, const bp::Tensor& mask, const bp::Tensor& value,
                                  const bp::Tensor& out) {
  const char* op = "bp::masked_fill.Tensor_out";
  checkCpu(op, value, "value");
  bp_common::checkZeroDim(op, value, "value");
  const bp::Scalar v = visitAnyDtype(value.dtype(), [&](auto tag) {
    using V = decltype(tag);
    return bp_common::scalarOfElement(loadRaw<V>(static_cast<const char*>(value.data_ptr())));
  });
  // The value is data the host has not read: its range is checked here.
  bp_common::checkScalarFits(op, v, self.dtype());
  return maskedFill(op, self, mask, v, out);
}

}  // namespace

namespace bp_cpu {

void registerDataMovementKernels(bp::Library& m) { BP_REGISTER_DATA_MOVEMENT_KERNELS(m, kCpu); }

}  // namespace bp_cpu
