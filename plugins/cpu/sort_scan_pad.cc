// CPU kernels of the ops that work along dims rather than element by
// element: cumsum, sort and topk (one line of the input along `dim` at a
// time) and flip and the pads (each output element reads one input element,
// or the padding value). The host has checked the arguments and sized the
// outputs with each op's rule (Note [Flip and pad] and Note [Products,
// logical reductions, scans and sorts] on the host).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "elementwise_loops.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

constexpr int kMaxDims = 32;
// Lines (or output rows) worth starting threads for.
constexpr int64_t kParallelWork = 32768;

using bp_common::DimMap;
using bp_common::mapCoordinate;
using bp_common::wrapDim;

// An element converted to storage type O as PyTorch's casts do; floating to
// integral goes through int64, and values outside int64 (and NaN) become 0
// rather than undefined behaviour.
template <class O, class I>
O convertElement(I v) {
  const auto x = load(v);
  using X = decltype(x);
  if constexpr (std::is_same_v<O, bool>) {
    return x != X(0);
  } else if constexpr (std::is_integral_v<O> && !std::is_integral_v<X>) {
    const double d = static_cast<double>(x);
    return static_cast<O>(d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? static_cast<int64_t>(d) : 0);
  } else {
    return store<O>(x);
  }
}

// Runs f(begin, end) over [0, n) items of `cost` elements each, in parallel
// when there is enough work. f must not throw.
template <class F>
void parallelRange(int64_t n, int64_t cost, F&& f) {
  if (n <= 0) return;
  if (n * std::max<int64_t>(cost, 1) < kParallelWork || numThreads() == 1 || n == 1) {
    f(int64_t{0}, n);
    return;
  }
  ThreadScope threads;
  const int64_t parts = std::min<int64_t>(n, omp_get_max_threads());
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < parts; ++p) f(n * p / parts, n * (p + 1) / parts);
}

// --- lines along one dim: cumsum, sort, topk

// The lines of `self` along dim `d` and, for each of up to two outputs of
// self's rank, where the same line starts in it. A 0-d tensor is one line
// of one element.
struct Lines {
  int64_t count = 1, len = 1;
  int64_t in_step = 0, out_step[2] = {0, 0};
  int nd = 0;  // other dims
  int64_t sizes[kMaxDims] = {}, in_strides[kMaxDims] = {}, out_strides[2][kMaxDims] = {};

  Lines(const char* op, const bp::Tensor& self, int64_t d, std::initializer_list<const bp::Tensor*> outs) {
    BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(),
                    " dimensions are not supported on cpu (at most ", kMaxDims, ")");
    for (int64_t k = 0; k < self.dim(); ++k) {
      size_t o = 0;
      if (k == d) {
        len = self.size(k);
        in_step = self.stride(k);
        for (const bp::Tensor* t : outs) out_step[o++] = t->stride(k);
        continue;
      }
      sizes[nd] = self.size(k);
      in_strides[nd] = self.stride(k);
      for (const bp::Tensor* t : outs) out_strides[o++][nd] = t->stride(k);
      count *= self.size(k);
      ++nd;
    }
  }

  // Offsets of line `i` in self and in the outputs.
  void offsets(int64_t i, int64_t& in, int64_t out[2]) const {
    in = 0;
    out[0] = out[1] = 0;
    for (int k = nd; k-- > 0;) {
      const int64_t c = i % sizes[k];
      i /= sizes[k];
      in += c * in_strides[k];
      out[0] += c * out_strides[0][k];
      out[1] += c * out_strides[1][k];
    }
  }
};

// cumsum, cumprod: each element converted to out's dtype O, summed
// (multiplied) in double for a floating O and in wrapping uint64 for an
// integral one (as PyTorch's int64 sums and products wrap). In place (out is
// self) each element is read before it is written.
template <bool Prod>
bp::Tensor scanInto(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", kAllDtypes);
  // The conversion is a copy first, so the loop is instantiated per out
  // dtype only (x is self in place).
  bp::Tensor holder;
  const bp::Tensor& x = elementwise::as(self, out.dtype(), holder);
  const Lines lines(op, x, wrapDim(dim, x.dim()), {&out});
  visitDtype(out.dtype(), [&](auto tag) {
    using O = decltype(tag);
    using Acc = std::conditional_t<kFloating<O>, double, uint64_t>;
    const O* in = x.data_ptr<const O>();
    O* o = out.data_ptr<O>();
    parallelRange(lines.count, lines.len, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t in_off, out_off[2];
        lines.offsets(i, in_off, out_off);
        Acc acc = Prod ? 1 : 0;
        for (int64_t j = 0; j < lines.len; ++j) {
          const Acc v = static_cast<Acc>(load(in[in_off + j * lines.in_step]));
          if constexpr (Prod)
            acc *= v;
          else
            acc += v;
          if constexpr (kFloating<O>)
            o[out_off[0] + j * lines.out_step[0]] = store<O>(acc);
          else
            o[out_off[0] + j * lines.out_step[0]] = store<O>(static_cast<int64_t>(acc));  // modulo 2^64
        }
      }
    });
  });
  return out;
}

bp::Tensor cumsum_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return scanInto<false>("bp::cumsum.out", self, dim, out);
}

bp::Tensor cumprod_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return scanInto<true>("bp::cumprod.out", self, dim, out);
}

// Whether a comes before b in an ascending (descending) sort with NaN the
// largest value; equal values keep their index order (the caller breaks ties).
template <class V>
bool before(V a, V b, bool descending) {
  if constexpr (std::is_floating_point_v<V>) {
    const bool an = std::isnan(a), bn = std::isnan(b);
    if (an || bn) return descending ? an && !bn : bn && !an;
  }
  return descending ? a > b : a < b;
}

// Sorts each line of self along `dim` and writes the first `k` entries:
// every one for sort, the k largest (descending) or smallest for topk.
// Ties keep index order, so the sort is stable. Each line is copied out
// first, so `values` may be `self` itself.
void sortLines(const char* op, const bp::Tensor& self, int64_t dim, bool descending, int64_t k,
               const bp::Tensor& values, const bp::Tensor& indices) {
  checkCpu(op, self, "self");
  checkCpu(op, values, "values");
  checkCpu(op, indices, "indices");
  checkDtype(op, self, "self", kAllDtypes);
  BP_PLUGIN_CHECK(values.dtype() == self.dtype() && indices.dtype() == ScalarType::Int64, op,
                  ": expected 'values' of dtype ", self.dtype(), " and 'indices' of dtype int64");
  const int64_t d = wrapDim(dim, self.dim());
  const Lines lines(op, self, d, {&values, &indices});
  if (k == 0 || lines.count == 0) return;
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using V = opmath_t<T>;
    const T* in = self.data_ptr<const T>();
    T* vo = values.data_ptr<T>();
    int64_t* io = indices.data_ptr<int64_t>();
    parallelRange(lines.count, lines.len * 8, [&](int64_t begin, int64_t end) {
      std::vector<V> line(static_cast<size_t>(lines.len));
      std::vector<int64_t> order(static_cast<size_t>(lines.len));
      for (int64_t i = begin; i < end; ++i) {
        int64_t in_off, out_off[2];
        lines.offsets(i, in_off, out_off);
        for (int64_t j = 0; j < lines.len; ++j) line[static_cast<size_t>(j)] = load(in[in_off + j * lines.in_step]);
        std::iota(order.begin(), order.end(), int64_t{0});
        auto cmp = [&](int64_t a, int64_t b) {
          const V x = line[static_cast<size_t>(a)], y = line[static_cast<size_t>(b)];
          if (before(x, y, descending)) return true;
          if (before(y, x, descending)) return false;
          return a < b;
        };
        if (k < lines.len)
          std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
        else
          std::sort(order.begin(), order.end(), cmp);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t src = order[static_cast<size_t>(j)];
          vo[out_off[0] + j * lines.out_step[0]] = store<T>(static_cast<V>(line[static_cast<size_t>(src)]));
          io[out_off[1] + j * lines.out_step[1]] = src;
        }
      }
    });
  });
}

constexpr auto sort_values_stable = &bp_common::sortValuesStable<&sortLines>;
constexpr auto topk_values = &bp_common::topkValues<&sortLines>;

// --- flip and pads: out[p] = self[map(p)], or the padding value

// Output dim d reads input coordinate map(c - before[d]); -1: the padding value.
struct Mapping {
  int nd = 0;
  DimMap map[kMaxDims];
  int64_t before[kMaxDims];
};

// Writes every element of `out` from `self` through `m`; `fill` holds the
// padding value's bytes in out's dtype (self's).
void gatherMapped(const char* op, const bp::Tensor& self, const bp::Tensor& out, const Mapping& m,
                  const uint64_t fill) {
  BP_PLUGIN_CHECK(out.dim() <= kMaxDims, op, ": tensors of ", out.dim(),
                  " dimensions are not supported on cpu (at most ", kMaxDims, ")");
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": expected 'out' of dtype ", self.dtype(), ", got ", out.dtype());
  const int64_t nd = out.dim();
  if (out.numel() == 0) return;
  const int64_t inner = nd == 0 ? 1 : out.size(nd - 1);
  const int64_t rows = out.numel() / inner;
  const size_t item = self.element_size();
  const char* in = static_cast<const char*>(self.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  parallelRange(rows, inner, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      // Offsets of the row's start in out and in self (the outer dims).
      int64_t rest = r, out_off = 0, in_off = 0;
      bool padding = false;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t c = rest % out.size(d);
        rest /= out.size(d);
        out_off += c * out.stride(d);
        const int64_t u = mapCoordinate(m.map[d], c, m.before[d], self.size(d));
        if (u < 0)
          padding = true;
        else
          in_off += u * self.stride(d);
      }
      for (int64_t j = 0; j < inner; ++j) {
        char* dst = o + (out_off + (nd == 0 ? 0 : j * out.stride(nd - 1))) * static_cast<int64_t>(item);
        const int64_t u = nd == 0 ? 0 : mapCoordinate(m.map[nd - 1], j, m.before[nd - 1], self.size(nd - 1));
        if (padding || u < 0) {
          std::memcpy(dst, &fill, item);
        } else {
          const int64_t src = in_off + (nd == 0 ? 0 : u * self.stride(nd - 1));
          std::memcpy(dst, in + src * static_cast<int64_t>(item), item);
        }
      }
    }
  });
}

bp::Tensor flip_out(const bp::Tensor& self, bp::IntList dims, const bp::Tensor& out) {
  const char* op = "bp::flip.out";
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(),
                  " dimensions are not supported on cpu (at most ", kMaxDims, ")");
  Mapping m;
  bp_common::flipMaps(self.dim(), dims, m.map, m.before);
  gatherMapped(op, self, out, m, 0);
  return out;
}

// `pad` pairs (before, after) for the last dims, the last dim first.
void padInto(const char* op, const bp::Tensor& self, bp::IntList pad, DimMap mode, uint64_t fill,
             const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(),
                  " dimensions are not supported on cpu (at most ", kMaxDims, ")");
  Mapping m;
  bp_common::padMaps(self.dim(), pad, mode, m.map, m.before);
  gatherMapped(op, self, out, m, fill);
}

// The pad kernels: plugins/common's, over padInto.
constexpr auto constant_pad_nd_out = &bp_common::constantPadOut<CpuStorage, &padInto>;
template <DimMap Mode>
constexpr auto edge_pad_out = &bp_common::edgePadOut<&padInto, Mode>;

}  // namespace

namespace bp_cpu {

void registerSortScanPadKernels(bp::Library& m) {
  BP_REGISTER_SCAN_PAD_KERNELS(m, kCpu);
  BP_REGISTER_SORT_KERNELS(m, kCpu);
}

}  // namespace bp_cpu
