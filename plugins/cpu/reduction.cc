// Reduction kernels of the CPU plugin (structured: each computes into the
// `out` the host has sized and typed with the op's rule, Note [Meta
// kernels]).
//
// One driver serves every reduction over dims: the input is split into the
// kept dims (one output element each) and the reduced dims, which are
// walked as rows (the innermost reduced dim, length n, stride s). An op
// folds rows into an accumulator and merges accumulators in index order;
// big reductions run in parallel either over output elements or, when there
// are few outputs, over chunks of the reduced index range whose partial
// accumulators are merged in order (so argmax keeps the first occurrence).
// When the reduced elements are far apart but neighbouring outputs are
// adjacent in memory (a mean over the batch dim), blocks of outputs are
// reduced together instead ("columns"), so that memory is read in runs.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "bp_common/registration.h"
#include "cpu_common.h"
#include "dnnl_util.h"
#include "elementwise_loops.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Below this many input elements a reduction runs on the calling thread.
constexpr int64_t kParallelNumel = 32768;

// --- geometry

// Per-dim values with inline room for the usual ranks, so that reductions
// of small tensors do not allocate.
class DimVec {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t back() const { return data()[n_ - 1]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  void push_back(int64_t v) {
    if (n_ == kInline && heap_.empty()) heap_.assign(inline_, inline_ + kInline);
    if (!heap_.empty())
      heap_.push_back(v);
    else
      inline_[n_] = v;
    ++n_;
  }
  void shrink(size_t n) {
    n_ = n;
    if (!heap_.empty()) heap_.resize(n);
  }

 private:
  static constexpr size_t kInline = 12;
  int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const int64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;
  size_t n_ = 0;
};

struct ReduceGeom {
  // Kept dims, outermost first: sizes, input strides, output strides.
  DimVec out_sizes, out_in_strides, out_out_strides;
  // Reduced dims, outermost first; the last one is walked as a row.
  DimVec red_sizes, red_strides;
  int64_t num_out = 1, num_red = 1;
};

// Which dims of `self` a dim list reduces (none or empty: all), wrapping
// negative dims; the host's rule has rejected bad or repeated ones.
DimVec reducedMask(const bp::Tensor& self, std::optional<bp::IntList> dims) {
  const int64_t nd = self.dim();
  DimVec mask;
  for (int64_t d = 0; d < nd; ++d) mask.push_back(!dims || dims->empty());
  if (dims && nd > 0)
    for (int64_t d : *dims) mask[static_cast<size_t>(d < 0 ? d + nd : d)] = 1;
  return mask;
}

// Merges adjacent dims that walk memory as one (stride[i] == size[i+1] *
// stride[i+1] in every stride list) and drops dims of size 1.
void coalesce(DimVec& sizes, std::initializer_list<DimVec*> strides) {
  size_t w = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    bool merge = w > 0;
    for (auto* s : strides) merge = merge && (*s)[w - 1] == sizes[i] * (*s)[i];
    if (merge) {
      sizes[w - 1] *= sizes[i];
      for (auto* s : strides) (*s)[w - 1] = (*s)[i];
    } else {
      sizes[w] = sizes[i];
      for (auto* s : strides) (*s)[w] = (*s)[i];
      ++w;
    }
  }
  sizes.shrink(w);
  for (auto* s : strides) s->shrink(w);
}

// `keep_order`: the reduced dims are walked in row-major order (argmax
// reports the first occurrence in that order); otherwise they are reordered
// so that the row is the dim with the smallest stride.
ReduceGeom makeGeom(const bp::Tensor& self, const DimVec& mask, const bp::Tensor& out, bool keepdim, bool keep_order) {
  ReduceGeom g;
  int64_t out_dim = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[static_cast<size_t>(d)]) {
      g.red_sizes.push_back(self.size(d));
      g.red_strides.push_back(self.stride(d));
      if (keepdim) ++out_dim;
    } else {
      g.out_sizes.push_back(self.size(d));
      g.out_in_strides.push_back(self.stride(d));
      g.out_out_strides.push_back(out.dim() == 0 ? 0 : out.stride(out_dim++));
    }
  }
  for (int64_t s : g.red_sizes) g.num_red *= s;
  for (int64_t s : g.out_sizes) g.num_out *= s;
  if (!keep_order) {  // stable insertion sort by decreasing |stride| (few dims)
    for (size_t i = 1; i < g.red_sizes.size(); ++i) {
      for (size_t j = i; j > 0 && std::abs(g.red_strides[j - 1]) < std::abs(g.red_strides[j]); --j) {
        std::swap(g.red_sizes[j - 1], g.red_sizes[j]);
        std::swap(g.red_strides[j - 1], g.red_strides[j]);
      }
    }
  }
  coalesce(g.red_sizes, {&g.red_strides});
  coalesce(g.out_sizes, {&g.out_in_strides, &g.out_out_strides});
  if (g.red_sizes.empty()) {  // nothing (or only size-1 dims) to reduce: one row of one element
    g.red_sizes.push_back(g.num_red);
    g.red_strides.push_back(0);
  }
  return g;
}

// Input and output offsets of output element `o`.
inline void outOffsets(const ReduceGeom& g, int64_t o, int64_t& in_off, int64_t& out_off) {
  in_off = 0;
  out_off = 0;
  for (size_t d = g.out_sizes.size(); d-- > 0;) {
    const int64_t i = o % g.out_sizes[d];
    o /= g.out_sizes[d];
    in_off += i * g.out_in_strides[d];
    out_off += i * g.out_out_strides[d];
  }
}

// Calls row(offset, n, stride, index) for the reduced elements [begin, end)
// (row-major index over the reduced dims) starting at input offset `base`.
template <class Row>
void forRows(const ReduceGeom& g, int64_t base, int64_t begin, int64_t end, Row&& row) {
  if (begin >= end) return;  // also keeps a dim of size 0 out of the divisions below
  const size_t nd = g.red_sizes.size();
  const int64_t row_len = g.red_sizes[nd - 1], row_stride = g.red_strides[nd - 1];
  // Multi-index of `begin`; on the stack unless the tensor has very many
  // dims (this runs once per output element).
  constexpr size_t kInline = 16;
  int64_t inline_idx[kInline];
  std::vector<int64_t> heap_idx(nd > kInline ? nd : 0);
  int64_t* idx = nd > kInline ? heap_idx.data() : inline_idx;
  int64_t rest = begin;
  for (size_t d = nd; d-- > 0;) {
    idx[d] = rest % g.red_sizes[d];
    rest /= g.red_sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t off = base;
    for (size_t d = 0; d < nd; ++d) off += idx[d] * g.red_strides[d];
    const int64_t n = std::min(row_len - idx[nd - 1], end - pos);
    row(off, n, row_stride, pos);
    pos += n;
    idx[nd - 1] = 0;
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < g.red_sizes[d]) break;
      idx[d] = 0;
    }
  }
}

// Whether to reduce "columns": the innermost kept dim is contiguous in the
// input while the reduced elements are far apart (mean over a batch dim).
// Walking each output's reduction separately would then touch a cache line
// per element; instead a block of neighbouring outputs is accumulated
// together, reading contiguous runs.
bool columnwise(const ReduceGeom& g) {
  return !g.out_sizes.empty() && g.out_in_strides.back() == 1 && g.out_sizes.back() >= 8 && g.red_strides.back() != 1 &&
         g.num_red > 1;
}

constexpr int64_t kCols = 32;  // outputs per column block

// Calls block(first_output, count) for blocks of up to kCols neighbouring
// outputs along the innermost kept dim, in parallel when big.
template <class Block>
void forColumnBlocks(const ReduceGeom& g, Block&& block) {
  const int64_t width = g.out_sizes.back();
  const int64_t per_line = (width + kCols - 1) / kCols;
  const int64_t nblocks = g.num_out / width * per_line;
  auto one = [&](int64_t b) {
    const int64_t c0 = (b % per_line) * kCols;
    block((b / per_line) * width + c0, std::min(kCols, width - c0));
  };
  if (g.num_out * g.num_red < kParallelNumel || numThreads() == 1 || nblocks == 1) {
    for (int64_t b = 0; b < nblocks; ++b) one(b);
    return;
  }
  ThreadScope threads;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) one(b);
}

// The column-block form of reduce(): each reduced element of a block's
// outputs is folded in as a row of one.
template <class T, class Op, class Write>
void reduceColumns(const ReduceGeom& g, const T* in, const Op& op, Write&& write) {
  using Acc = decltype(op.init());
  const int64_t out_stride = g.out_out_strides.back();
  forColumnBlocks(g, [&](int64_t first, int64_t cols) {
    int64_t in_off, out_off;
    outOffsets(g, first, in_off, out_off);
    Acc acc[kCols];
    for (int64_t c = 0; c < cols; ++c) acc[c] = op.init();
    forRows(g, in_off, 0, g.num_red, [&](int64_t off, int64_t n, int64_t s, int64_t idx) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < cols; ++c) op.row(acc[c], in + off + j * s + c, 1, 1, idx + j);
    });
    for (int64_t c = 0; c < cols; ++c) write(out_off + c * out_stride, acc[c]);
  });
}

// Runs `op` over every output element; write(out_offset, acc) stores each
// result. Op provides: Acc init() const; void row(Acc&, const T* p, n,
// stride, index) const; void merge(Acc& a, const Acc& later) const.
template <class T, class Op, class Write>
void reduce(const ReduceGeom& g, const T* in, const Op& op, Write&& write) {
  using Acc = decltype(op.init());
  if (g.num_out == 0) return;
  if (columnwise(g)) {
    reduceColumns(g, in, op, write);
    return;
  }
  const int64_t work = g.num_out * std::max<int64_t>(g.num_red, 1);
  auto one = [&](int64_t o) {
    int64_t in_off, out_off;
    outOffsets(g, o, in_off, out_off);
    Acc acc = op.init();
    forRows(g, in_off, 0, g.num_red,
            [&](int64_t off, int64_t n, int64_t s, int64_t idx) { op.row(acc, in + off, n, s, idx); });
    write(out_off, acc);
  };
  if (work < kParallelNumel || numThreads() == 1) {
    for (int64_t o = 0; o < g.num_out; ++o) one(o);
    return;
  }
  ThreadScope threads;
  const int64_t nthreads = numThreads();
  if (g.num_out >= nthreads) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < g.num_out; ++o) one(o);
    return;
  }
  // Few outputs, long reductions: split each reduction into chunks.
  const int64_t chunks = nthreads * 4;
  const int64_t chunk_len = (g.num_red + chunks - 1) / chunks;
  std::vector<Acc> partial(static_cast<size_t>(chunks));
  for (int64_t o = 0; o < g.num_out; ++o) {
    int64_t in_off, out_off;
    outOffsets(g, o, in_off, out_off);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      Acc acc = op.init();
      const int64_t b = c * chunk_len, e = std::min(g.num_red, b + chunk_len);
      if (b < e)
        forRows(g, in_off, b, e,
                [&](int64_t off, int64_t n, int64_t s, int64_t idx) { op.row(acc, in + off, n, s, idx); });
      partial[static_cast<size_t>(c)] = acc;
    }
    Acc acc = partial[0];
    for (int64_t c = 1; c < chunks; ++c) op.merge(acc, partial[static_cast<size_t>(c)]);
    write(out_off, acc);
  }
}

// --- sum, mean

// Floating sums accumulate in double; integral (and bool) sums in uint64,
// so that they wrap around like PyTorch's int64 sums without signed
// overflow; sumValue() reads one back as the int64 it stands for.
template <class T>
using sum_acc_t = std::conditional_t<kFloating<T>, double, uint64_t>;
double sumValue(double acc) { return acc; }
int64_t sumValue(uint64_t acc) { return static_cast<int64_t>(acc); }  // modulo 2^64 (C++20)

// Sum of one row. Contiguous rows are summed in blocks with `omp simd`
// (which may reorder the adds: vector lanes are independent partial sums,
// pairwise-like rounding), and the block sums added to the total.
template <class T>
sum_acc_t<T> rowSum(const T* p, int64_t n, int64_t s) {
  using A = sum_acc_t<T>;
  if (s != 1) {
    A acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += static_cast<A>(load(p[j * s]));
    return acc;
  }
  constexpr int64_t kBlock = 4096;
  A total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    A acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = b; j < e; ++j) acc += static_cast<A>(load(p[j]));
    total += acc;
  }
  return total;
}

template <class T>
struct SumOp {
  sum_acc_t<T> init() const { return 0; }
  void row(sum_acc_t<T>& acc, const T* p, int64_t n, int64_t s, int64_t) const { acc += rowSum(p, n, s); }
  void merge(sum_acc_t<T>& a, sum_acc_t<T> b) const { a += b; }
};

// reduceColumns() for sums: the block's accumulators are one vector.
template <class T, class Write>
void sumColumns(const ReduceGeom& g, const T* in, Write&& write) {
  using A = sum_acc_t<T>;
  const int64_t out_stride = g.out_out_strides.back();
  forColumnBlocks(g, [&](int64_t first, int64_t cols) {
    int64_t in_off, out_off;
    outOffsets(g, first, in_off, out_off);
    A acc[kCols] = {};
    forRows(g, in_off, 0, g.num_red, [&](int64_t off, int64_t n, int64_t s, int64_t) {
      for (int64_t j = 0; j < n; ++j) {
        const T* p = in + off + j * s;
        if (cols == kCols) {
#pragma omp simd
          for (int64_t c = 0; c < kCols; ++c) acc[c] += static_cast<A>(load(p[c]));
        } else {
          for (int64_t c = 0; c < cols; ++c) acc[c] += static_cast<A>(load(p[c]));
        }
      }
    });
    for (int64_t c = 0; c < cols; ++c) write(out_off + c * out_stride, acc[c]);
  });
}

// Note [Reductions into another dtype]
// sum/mean/prod into out (whose dtype the host chose: dtype=, or out's own).
// Where the input's and out's kinds differ (a floating input into an
// integral out, anything non-bool into bool, an integral input into a
// floating out), PyTorch converts the input first, and so does this: a
// converted copy, then the reduction in out's dtype. An integral dtype so
// truncates floating inputs (and bool makes each element 0 or 1), and a
// floating dtype makes an integral sum a floating one, which does not wrap.
// The kernels are instantiated per input dtype only: the accumulator
// (double, or wrapping uint64) depends on the input, and one small store
// per out dtype writes it, called through a pointer once per output element.
// (Instantiating every (input, out) pair, 100 of them, cost minutes of
// compile time per build for conversions that rarely run.)

// The tensor to reduce for `out`: self, or self converted to out's dtype.
const bp::Tensor& reductionInput(const bp::Tensor& self, const bp::Tensor& out, bp::Tensor& holder) {
  const bool floating_in = bp_common::isFloating(self.dtype()), floating_out = bp_common::isFloating(out.dtype());
  const bool convert =
      floating_in != floating_out || (out.dtype() == ScalarType::Bool && self.dtype() != ScalarType::Bool);
  return convert ? elementwise::as(self, out.dtype(), holder) : self;
}

// Stores a sum (or mean, or product) accumulator into element `off` of an
// out of dtype O.
template <class A>
using AccStore = void (*)(void* out, int64_t off, A acc, double count);

template <class A, class O, bool Mean>
void storeAcc(void* out, int64_t off, A acc, double count) {
  if constexpr (Mean)
    static_cast<O*>(out)[off] = store<O>(static_cast<double>(sumValue(acc)) / count);
  else
    static_cast<O*>(out)[off] = store<O>(sumValue(acc));
}

template <class A>
AccStore<A> accStore(ScalarType out, bool mean) {
  return visitDtype(out, [&](auto tag) -> AccStore<A> {
    using O = decltype(tag);
    return mean ? &storeAcc<A, O, true> : &storeAcc<A, O, false>;
  });
}

bp::Tensor sumOrMean(const char* op, bool mean, const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim,
                     const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", mean ? kFloatDtypes : kAllDtypes);
  const DimVec mask = reducedMask(self, dim);
  bp::Tensor holder;
  const bp::Tensor& in = reductionInput(self, out, holder);
  const ReduceGeom g = makeGeom(in, mask, out, keepdim, false);
  visitDtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = sum_acc_t<T>;
    const AccStore<A> put = accStore<A>(out.dtype(), mean);
    void* o = out.data_ptr();
    const double count = static_cast<double>(g.num_red);
    auto write = [&](int64_t off, A acc) { put(o, off, acc, count); };
    if (columnwise(g))
      sumColumns(g, in.data_ptr<const T>(), write);
    else
      reduce(g, in.data_ptr<const T>(), SumOp<T>{}, write);
  });
  return out;
}

bp::Tensor sum_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim, std::optional<ScalarType>,
                   const bp::Tensor& out) {
  return sumOrMean("bp::sum.IntList_out", false, self, dim, keepdim, out);
}

bp::Tensor mean_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim, std::optional<ScalarType>,
                    const bp::Tensor& out) {
  return sumOrMean("bp::mean.out", true, self, dim, keepdim, out);
}

// --- amax, amin

template <class T>
bool isNan(T v) {
  if constexpr (kFloating<T>)
    return std::isnan(static_cast<double>(load(v)));
  else
    return false;
}

// Max (or min) so far; NaN wins and stays (as PyTorch: amax propagates NaN).
template <class T, bool Max>
struct ExtremumOp {
  using V = opmath_t<T>;
  struct Acc {
    V value;
    bool set;
  };
  static bool better(V a, V b) {
    if constexpr (kFloating<T>)
      if (std::isnan(static_cast<double>(a))) return !std::isnan(static_cast<double>(b));
    return Max ? a > b : a < b;
  }
  Acc init() const { return Acc{V{}, false}; }
  void row(Acc& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    if (n == 0) return;
    if (!acc.set) acc = Acc{load(p[0]), true};
    V best = acc.value;
    for (int64_t j = 0; j < n; ++j) {
      const V v = load(p[j * s]);
      if (better(v, best)) best = v;
    }
    acc.value = best;
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.set && (!a.set || better(b.value, a.value))) a = b;
  }
};

template <bool Max>
bp::Tensor extremum_out(const char* op, const bp::Tensor& self, bp::IntList dim, bool keepdim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": expected 'out' of dtype ", self.dtype(), ", got ", out.dtype());
  const ReduceGeom g = makeGeom(self, reducedMask(self, dim), out, keepdim, false);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Op = ExtremumOp<T, Max>;
    T* o = out.data_ptr<T>();
    reduce(g, self.data_ptr<const T>(), Op{},
           [&](int64_t off, const typename Op::Acc& acc) { o[off] = store<T>(acc.value); });
  });
  return out;
}

bp::Tensor amax_out(const bp::Tensor& self, bp::IntList dim, bool keepdim, const bp::Tensor& out) {
  return extremum_out<true>("bp::amax.out", self, dim, keepdim, out);
}
bp::Tensor amin_out(const bp::Tensor& self, bp::IntList dim, bool keepdim, const bp::Tensor& out) {
  return extremum_out<false>("bp::amin.out", self, dim, keepdim, out);
}

// --- argmax, argmin

// The index of the first maximum (minimum); a NaN counts as the maximum
// (and the minimum), so the first NaN wins, as in PyTorch.
template <class T, bool Max>
struct ArgExtremumOp {
  using V = opmath_t<T>;
  struct Acc {
    V value;
    int64_t index;  // -1: nothing seen yet
  };
  Acc init() const { return Acc{V{}, -1}; }
  void row(Acc& acc, const T* p, int64_t n, int64_t s, int64_t first) const {
    for (int64_t j = 0; j < n; ++j) {
      const V v = load(p[j * s]);
      if (acc.index < 0 || ExtremumOp<T, Max>::better(v, acc.value)) acc = Acc{v, first + j};
    }
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.index >= 0 && (a.index < 0 || ExtremumOp<T, Max>::better(b.value, a.value))) a = b;
  }
};

template <bool Max>
bp::Tensor arg_extremum_out(const char* op, const bp::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                            const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", {ScalarType::Int64});
  // Without dim the index is into the flattened tensor: every dim is
  // reduced, in row-major order, and out (0-d, or all ones with keepdim)
  // has one element.
  DimVec mask;
  for (int64_t d = 0; d < self.dim(); ++d) mask.push_back(!dim.has_value());
  if (dim && self.dim() > 0) mask[static_cast<size_t>(*dim < 0 ? *dim + self.dim() : *dim)] = 1;
  const ReduceGeom g = makeGeom(self, mask, out, keepdim && dim.has_value(), true);
  int64_t* o = out.data_ptr<int64_t>();
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Op = ArgExtremumOp<T, Max>;
    reduce(g, self.data_ptr<const T>(), Op{}, [&](int64_t off, const typename Op::Acc& acc) { o[off] = acc.index; });
  });
  return out;
}

bp::Tensor argmax_out(const bp::Tensor& self, std::optional<int64_t> dim, bool keepdim, const bp::Tensor& out) {
  return arg_extremum_out<true>("bp::argmax.out", self, dim, keepdim, out);
}
bp::Tensor argmin_out(const bp::Tensor& self, std::optional<int64_t> dim, bool keepdim, const bp::Tensor& out) {
  return arg_extremum_out<false>("bp::argmin.out", self, dim, keepdim, out);
}

// --- var, std

// Count, mean and sum of squared deviations (M2); each row is done in two
// passes (its mean, then deviations from it) and merged with Chan et al.'s
// formula, which stays accurate when the mean is large.
struct Moments {
  double n, mean, m2;
};

template <class T>
struct MomentsOp {
  Moments init() const { return Moments{0, 0, 0}; }
  void row(Moments& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    if (n == 1) {  // Welford's update; the column-block path adds one element at a time
      const double x = static_cast<double>(load(*p));
      acc.n += 1;
      const double delta = x - acc.mean;
      acc.mean += delta / acc.n;
      acc.m2 += delta * (x - acc.mean);
      return;
    }
    if (n == 0) return;
    const double row_mean = static_cast<double>(sumValue(rowSum(p, n, s))) / static_cast<double>(n);
    double m2 = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(load(p[j * s])) - row_mean;
      m2 += d * d;
    }
    merge(acc, Moments{static_cast<double>(n), row_mean, m2});
  }
  void merge(Moments& a, const Moments& b) const {
    if (b.n == 0) return;
    if (a.n == 0) {
      a = b;
      return;
    }
    const double n = a.n + b.n, delta = b.mean - a.mean;
    a.mean += delta * b.n / n;
    a.m2 += b.m2 + delta * delta * a.n * b.n / n;
    a.n = n;
  }
};

template <bool Std>
bp::Tensor var_out(const char* op, const bp::Tensor& self, std::optional<bp::IntList> dim,
                   const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kFloatDtypes);
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": expected 'out' of dtype ", self.dtype(), ", got ", out.dtype());
  const double corr = correction ? correction->toDouble() : 1.0;
  const ReduceGeom g = makeGeom(self, reducedMask(self, dim), out, keepdim, false);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloating<T>) {
      T* o = out.data_ptr<T>();
      const double count = static_cast<double>(g.num_red);
      reduce(g, self.data_ptr<const T>(), MomentsOp<T>{}, [&](int64_t off, const Moments& m) {
        // PyTorch's divisor: max(0, N - correction); 0 gives inf or nan.
        const double v = m.m2 / std::max(0.0, count - corr);
        o[off] = store<T>(Std ? std::sqrt(v) : v);
      });
    }
  });
  return out;
}

bp::Tensor var_correction_out(const bp::Tensor& self, std::optional<bp::IntList> dim,
                              const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  return var_out<false>("bp::var.correction_out", self, dim, correction, keepdim, out);
}
bp::Tensor std_correction_out(const bp::Tensor& self, std::optional<bp::IntList> dim,
                              const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  return var_out<true>("bp::std.correction_out", self, dim, correction, keepdim, out);
}

// --- softmax, log_softmax

// oneDNN's softmax (softmax_v2: softmax_accurate / softmax_log, forward
// inference) where it has a vectorised kernel. oneDNN 2.6 has one only when
// the axis is the innermost dim of a dense row-major layout (a middle axis,
// a transposed or gapped layout gets its slow "ref" kernel), so it is used
// for [rows, n] with unit element stride and row stride n, in float32 or
// bfloat16, input and out of one dtype; everything else takes the loops.
//
// Non-finite inputs: PyTorch gives NaN for the whole row when the row holds
// a NaN or +inf or only -inf. oneDNN gives NaN for an all -inf row but only
// at the NaN / +inf element otherwise (its other elements get 0, or -inf for
// log_softmax). In both cases the row it writes has a NaN, and a row of
// finite max never does, so rows with a NaN are set to NaN afterwards.
//
// Its exp() is an approximation (about 1.4e-6 relative: exp(0) comes out
// as 0.9999986), so where one element dominates a row, the row's sum is
// just under 1 and softmax_log gives that element log-probability
// -log(sum) = +1.4e-6 instead of 0 ([[30, 0]]: PyTorch gives 0). A
// log-probability is never positive, so the same pass clamps log_softmax's
// rows to <= 0: the error stays within float32's tolerance, and the sign,
// which a user reads as a probability above 1, is right.
struct DnnlSoftmax {
  dnnl::softmax_v2_forward prim;
  dnnl::memory::desc md;
  bool usable = false;  // false: oneDNN would run its reference kernel
};

const DnnlSoftmax& dnnlSoftmax(dnnl::memory::data_type type, bool log, int64_t rows, int64_t n) {
  return dnnl_util::cachedPerThread(std::array<int64_t, 4>{static_cast<int64_t>(type), log, rows, n}, 64, [&] {
    DnnlSoftmax entry;
    entry.md = dnnl::memory::desc({rows, n}, type, dnnl::memory::dims{n, 1});
    try {
      const dnnl::softmax_v2_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate,
           entry.md, entry.md, 1},
          dnnl_util::engine());
      if (!dnnl_util::isReference(pd)) {
        entry.prim = dnnl::softmax_v2_forward(pd);
        entry.usable = true;
      }
    } catch (const dnnl::error&) {
      // This oneDNN build has no such softmax (e.g. bf16 on an old CPU).
    }
    return entry;
  });
}

// Sets every row of y ([rows, n], contiguous) that holds a NaN to NaN, and
// with `non_positive` (log_softmax) every positive element of the others
// to 0. Bits: the unsigned integer of T's size (float32 or bfloat16). A
// NaN's magnitude bits exceed infinity's; their max over a row vectorises
// (a NaN test per element does not), so the check costs little next to
// exp(). A positive element is one whose sign bit is clear and whose bits
// are not all zero.
template <typename T, typename Bits>
void fixRows(T* y, int64_t rows, int64_t n, bool non_positive) {
  static_assert(sizeof(T) == sizeof(Bits));
  constexpr Bits kMagnitude = static_cast<Bits>(std::numeric_limits<Bits>::max() >> 1);
  const Bits inf_bits = std::bit_cast<Bits>(store<T>(std::numeric_limits<float>::infinity()));
  auto fix = [&](int64_t r) {
    T* yr = y + r * n;
    Bits most = 0;
    for (int64_t j = 0; j < n; ++j) most = std::max<Bits>(most, std::bit_cast<Bits>(yr[j]) & kMagnitude);
    if (most > inf_bits) {
      std::fill(yr, yr + n, store<T>(std::numeric_limits<float>::quiet_NaN()));
    } else if (non_positive) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const Bits b = std::bit_cast<Bits>(yr[j]);
        yr[j] = std::bit_cast<T>(b <= kMagnitude ? Bits{0} : b);
      }
    }
  };
  if (rows * n < kParallelNumel) {
    for (int64_t r = 0; r < rows; ++r) fix(r);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) fix(r);
  }
}

// Runs oneDNN's softmax when it applies (see DnnlSoftmax); false: it does
// not, nothing was written.
bool softmaxDnnl(bool log, const bp::Tensor& self, const bp::Tensor& out, int64_t rows, int64_t n) {
  const dnnl::memory::data_type type = dnnl_util::dataType(self.dtype());
  if (self.dtype() != out.dtype() || (self.dtype() != ScalarType::Float32 && self.dtype() != ScalarType::BFloat16))
    return false;
  const DnnlSoftmax& p = dnnlSoftmax(type, log, rows, n);
  if (!p.usable) return false;
  const dnnl::engine& eng = dnnl_util::engine();
  dnnl::memory src(p.md, eng, self.data_ptr()), dst(p.md, eng, out.data_ptr());
  ThreadScope threads;
  dnnl::stream& s = dnnl_util::stream();
  p.prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  s.wait();
  if (self.dtype() == ScalarType::Float32)
    fixRows<float, uint32_t>(out.data_ptr<float>(), rows, n, log);
  else
    fixRows<bp::BFloat16, uint16_t>(out.data_ptr<bp::BFloat16>(), rows, n, log);
  return true;
}

// Along `dim`, stably: x - max, then exp and its sum. Computed in the
// output dtype's opmath (float for float32 and narrower, double for
// float64), the sum in double; the input is converted element by element
// (PyTorch converts it to dtype= first).
//
// Rows are walked one at a time when `dim` is the innermost dim; otherwise,
// when neighbouring rows are adjacent in memory (softmax over a middle or
// the first dim of a contiguous tensor), blocks of kBlock rows are computed
// together so that each step along `dim` reads a run of kBlock elements
// instead of one element per row ("columns", as the reductions do).
template <bool Log>
bp::Tensor softmax_out(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", kFloatDtypes);
  const int64_t nd = self.dim();
  if (self.numel() == 0) return out;
  const int64_t d = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
  // Every position but `dim` is one independent row.
  DimVec sizes, in_strides, out_strides;
  for (int64_t i = 0; i < nd; ++i) {
    if (i == d) continue;
    sizes.push_back(self.size(i));
    in_strides.push_back(self.stride(i));
    out_strides.push_back(out.stride(i));
  }
  coalesce(sizes, {&in_strides, &out_strides});
  int64_t rows = 1;
  for (int64_t s : sizes) rows *= s;
  const int64_t n = nd == 0 ? 1 : self.size(d);
  const int64_t xs = nd == 0 ? 0 : self.stride(d), ys = nd == 0 ? 0 : out.stride(d);
  const bool dense_rows = n > 1 && xs == 1 && ys == 1 &&
                          (sizes.empty() || (sizes.size() == 1 && in_strides[0] == n && out_strides[0] == n));
  if (dense_rows && softmaxDnnl(Log, self, out, rows, n)) return out;
  // Columns: the innermost row dim is unit-stride in the input.
  constexpr int64_t kBlock = 16;
  const bool columns = n > 1 && xs != 1 && !sizes.empty() && in_strides.back() == 1 && sizes.back() > 1;
  visitDtype(self.dtype(), [&](auto itag) {
    using I = decltype(itag);
    visitDtype(out.dtype(), [&](auto otag) {
      using O = decltype(otag);
      if constexpr (kFloating<O>) {
        using V = opmath_t<O>;
        const I* x = self.data_ptr<const I>();
        O* y = out.data_ptr<O>();
        // Offsets of row position `r` (over the first `k_end` row dims).
        auto offsets = [&](int64_t r, size_t k_end, int64_t& xo, int64_t& yo) {
          xo = yo = 0;
          for (size_t k = k_end; k-- > 0;) {
            const int64_t i = r % sizes[k];
            r /= sizes[k];
            xo += i * in_strides[k];
            yo += i * out_strides[k];
          }
        };
        // `buf` holds the row in opmath, contiguous: strided rows are read
        // once, and exp() is computed once per element.
        auto one = [&](int64_t r, V* buf) {
          int64_t xo, yo;
          offsets(r, sizes.size(), xo, yo);
          const I* xr = x + xo;
          O* yr = y + yo;
          V mx = -std::numeric_limits<V>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            buf[j] = static_cast<V>(load(store<O>(load(xr[j * xs]))));
            mx = std::max(mx, buf[j]);
          }
          // A row of -inf (or with +inf / NaN) gives NaN, as PyTorch; a
          // finite max keeps exp() in range.
          double sum = 0;
          if constexpr (Log) {
            for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(std::exp(buf[j] - mx));
            // (x - max) - lse, not x - (max + lse): the latter rounds at the
            // magnitude of max.
            const V lse = static_cast<V>(std::log(sum));
            for (int64_t j = 0; j < n; ++j) yr[j * ys] = store<O>((buf[j] - mx) - lse);
          } else {
            for (int64_t j = 0; j < n; ++j) {
              buf[j] = std::exp(buf[j] - mx);
              sum += static_cast<double>(buf[j]);
            }
            const V inv = static_cast<V>(1.0 / sum);
            for (int64_t j = 0; j < n; ++j) yr[j * ys] = store<O>(buf[j] * inv);
          }
        };
        // Task t: outer position t / blocks, rows [c0, c0 + w) of the
        // innermost row dim; buf is [n][kBlock], the same steps as one().
        const int64_t inner = columns ? sizes.back() : 1;
        const int64_t blocks = (inner + kBlock - 1) / kBlock;
        const int64_t ycs = columns ? out_strides.back() : 0;
        auto block = [&](int64_t t, V* buf) {
          const int64_t c0 = (t % blocks) * kBlock, w = std::min(kBlock, inner - c0);
          int64_t xo, yo;
          offsets(t / blocks, sizes.size() - 1, xo, yo);
          const I* xb = x + xo + c0;
          O* yb = y + yo + c0 * ycs;
          V mx[kBlock];
          double sum[kBlock];
          std::fill(mx, mx + kBlock, -std::numeric_limits<V>::infinity());
          std::fill(sum, sum + kBlock, 0.0);
          for (int64_t j = 0; j < n; ++j) {
            const I* xr = xb + j * xs;
            V* b = buf + j * kBlock;
            for (int64_t c = 0; c < w; ++c) {
              b[c] = static_cast<V>(load(store<O>(load(xr[c]))));
              mx[c] = std::max(mx[c], b[c]);
            }
          }
          if constexpr (Log) {
            for (int64_t j = 0; j < n; ++j)
              for (int64_t c = 0; c < w; ++c) sum[c] += static_cast<double>(std::exp(buf[j * kBlock + c] - mx[c]));
            V lse[kBlock];
            for (int64_t c = 0; c < w; ++c) lse[c] = static_cast<V>(std::log(sum[c]));
            for (int64_t j = 0; j < n; ++j)
              for (int64_t c = 0; c < w; ++c) yb[j * ys + c * ycs] = store<O>((buf[j * kBlock + c] - mx[c]) - lse[c]);
          } else {
            for (int64_t j = 0; j < n; ++j)
              for (int64_t c = 0; c < w; ++c) {
                V& b = buf[j * kBlock + c];
                b = std::exp(b - mx[c]);
                sum[c] += static_cast<double>(b);
              }
            V inv[kBlock];
            for (int64_t c = 0; c < w; ++c) inv[c] = static_cast<V>(1.0 / sum[c]);
            for (int64_t j = 0; j < n; ++j)
              for (int64_t c = 0; c < w; ++c) yb[j * ys + c * ycs] = store<O>(buf[j * kBlock + c] * inv[c]);
          }
        };
        const int64_t tasks = columns ? rows / inner * blocks : rows;
        const size_t buf_len = static_cast<size_t>(columns ? n * kBlock : n);
        auto run = [&](int64_t t, V* buf) {
          if (columns)
            block(t, buf);
          else
            one(t, buf);
        };
        if (self.numel() < kParallelNumel || tasks == 1) {
          std::vector<V> buf(buf_len);
          for (int64_t t = 0; t < tasks; ++t) run(t, buf.data());
        } else {
          ThreadScope threads;
#pragma omp parallel
          {
            std::vector<V> buf(buf_len);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tasks; ++t) run(t, buf.data());
          }
        }
      }
    });
  });
  return out;
}

bp::Tensor softmax_int_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return softmax_out<false>("bp::softmax.int_out", self, dim, out);
}
bp::Tensor log_softmax_int_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return softmax_out<true>("bp::log_softmax.int_out", self, dim, out);
}

// --- prod, all, any (the host's Note [Products, logical reductions, scans
// and sorts]). prod multiplies the elements converted to out's dtype (which
// the host chose: dtype=, int64 for integral inputs, or out's own), in
// double for a floating result and in wrapping uint64 arithmetic for an
// integral one. all/any write 0/1 into a bool or uint8 out; a NaN counts as
// true, as any nonzero value.

bp::Tensor prodInto(const char* op, const bp::Tensor& self, const DimVec& mask, bool keepdim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", kAllDtypes);
  // Each element in out's dtype first (Note [Reductions into another dtype]):
  // an int8 product into int64 multiplies int64s, as PyTorch's.
  bp::Tensor holder;
  const bp::Tensor& in = elementwise::as(self, out.dtype(), holder);
  const ReduceGeom g = makeGeom(in, mask, out, keepdim, false);
  visitDtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<kFloating<T>, double, uint64_t>;
    struct ProdOp {
      Acc init() const { return 1; }
      void row(Acc& acc, const T* p, int64_t n, int64_t s, int64_t) const {
        for (int64_t j = 0; j < n; ++j) acc *= static_cast<Acc>(load(p[j * s]));
      }
      void merge(Acc& a, Acc b) const { a *= b; }
    };
    T* o = out.data_ptr<T>();
    reduce(g, in.data_ptr<const T>(), ProdOp{}, [&](int64_t off, Acc acc) {
      if constexpr (kFloating<T>)
        o[off] = store<T>(acc);
      else
        o[off] = store<T>(static_cast<int64_t>(acc));  // modulo 2^64 (C++20)
    });
  });
  return out;
}

bp::Tensor prod_int_out(const bp::Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType>,
                        const bp::Tensor& out) {
  return prodInto("bp::prod.int_out", self, reducedMask(self, bp::IntList(&dim, 1)), keepdim, out);
}

bp::Tensor prod_out(const bp::Tensor& self, std::optional<ScalarType>, const bp::Tensor& out) {
  return prodInto("bp::prod.out", self, reducedMask(self, std::nullopt), false, out);
}

template <bool All>
bp::Tensor logical_dims_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim,
                            const bp::Tensor& out) {
  const char* op = All ? "bp::all.dims_out" : "bp::any.dims_out";
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", {ScalarType::Bool, ScalarType::UInt8});
  // dim=[] reduces nothing here (PyTorch's all/any), unlike sum's.
  DimVec mask = reducedMask(self, dim);
  if (dim && dim->empty())
    for (size_t d = 0; d < mask.size(); ++d) mask[d] = 0;
  const ReduceGeom g = makeGeom(self, mask, out, keepdim, false);
  uint8_t* o = static_cast<uint8_t*>(out.data_ptr());  // bool and uint8 both hold 0/1 in one byte
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    struct LogicalOp {
      bool init() const { return All; }
      void row(bool& acc, const T* p, int64_t n, int64_t s, int64_t) const {
        for (int64_t j = 0; j < n && acc == All; ++j) acc = load(p[j * s]) != 0;
      }
      void merge(bool& a, bool b) const { a = All ? (a && b) : (a || b); }
    };
    reduce(g, self.data_ptr<const T>(), LogicalOp{}, [&](int64_t off, bool acc) { o[off] = acc ? 1 : 0; });
  });
  return out;
}

}  // namespace

namespace bp_cpu {

void registerReductionKernels(bp::Library& m) { BP_REGISTER_REDUCTION_KERNELS(m, kCpu); }

}  // namespace bp_cpu
