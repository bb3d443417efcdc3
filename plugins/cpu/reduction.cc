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
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bp_common/registration.h"
#include "cpu_common.h"
#include "elementwise_loops.h"
#include "kernels.h"
#include "softmax_rows.h"

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

// float64 rows: the passes of Note [Softmax kernels] in scalar double, on
// n elements at x[j * xs] into y[j * ys] (y may be x), log_softmax's sum
// split as there (the max's 1 apart, log1p of the rest).
void softmaxRowDouble(bool log, const double* x, int64_t xs, double* y, int64_t ys, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = x[j * xs] > mx ? x[j * xs] : mx;
  double sum = 0;
  if (log) {
    int64_t ones = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double e = std::exp(x[j * xs] - mx);
      if (e == 1.0)
        ++ones;
      else
        sum += e;
    }
    const double lse = ones == 1 ? std::log1p(sum) : std::log(static_cast<double>(ones) + sum);
    for (int64_t j = 0; j < n; ++j) y[j * ys] = (x[j * xs] - mx) - lse;
  } else {
    for (int64_t j = 0; j < n; ++j) {
      y[j * ys] = std::exp(x[j * xs] - mx);
      sum += y[j * ys];
    }
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j < n; ++j) y[j * ys] *= inv;
  }
}

// Along `dim`. Every position but `dim` is one row. float32 rows with unit
// stride in the input and out run the vectorised kernels in place
// (softmaxRow); so do blocks of kSoftmaxColumns neighbouring rows when
// `dim` is not the innermost dim but neighbouring rows are adjacent in
// memory (softmax over a middle or the first dim: softmaxColumns, each step
// along `dim` reading a run of 16 elements instead of one element per row).
// Any other layout or dtype is copied into a buffer in the out dtype's
// opmath (float for float32 and narrower, double for float64), converting
// the input to dtype= first as PyTorch does, computed there, and copied
// out.
template <bool Log>
bp::Tensor softmax_out(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& out) {
  checkCpu(op, self, "self");
  checkCpu(op, out, "out");
  checkDtype(op, self, "self", kAllDtypes);
  checkDtype(op, out, "out", kFloatDtypes);
  const int64_t nd = self.dim();
  if (self.numel() == 0) return out;
  const int64_t d = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
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
  const int64_t xs = n == 1 ? 1 : self.stride(d), ys = n == 1 ? 1 : out.stride(d);
  constexpr int64_t kBlock = kSoftmaxColumns;
  // Columns: the innermost row dim is unit-stride in the input (and, to
  // compute in place, in out).
  const bool columns = xs != 1 && !sizes.empty() && in_strides.back() == 1 && sizes.back() > 1;
  const bool in_place = self.dtype() == ScalarType::Float32 && out.dtype() == ScalarType::Float32 &&
                        (columns ? out_strides.back() == 1 : xs == 1 && ys == 1);
  const int64_t inner = columns ? sizes.back() : 1;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t tasks = columns ? rows / inner * blocks : rows;
  const int64_t ycs = columns ? out_strides.back() : 0;
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
  // Task t: one row, or with columns outer position t / blocks and rows
  // [c0, c0 + w) of the innermost row dim. Its first elements' offsets.
  auto place = [&](int64_t t, int64_t& xo, int64_t& yo, int64_t& w) {
    if (!columns) {
      offsets(t, sizes.size(), xo, yo);
      w = 1;
      return;
    }
    const int64_t c0 = (t % blocks) * kBlock;
    w = std::min(kBlock, inner - c0);
    offsets(t / blocks, sizes.size() - 1, xo, yo);
    xo += c0;
    yo += c0 * ycs;
  };
  // Runs every task, each thread with its own copy of `buffer`.
  auto parallel = [&](const auto& buffer, auto&& run) {
    if (self.numel() < kParallelNumel || tasks == 1) {
      auto buf = buffer;
      for (int64_t t = 0; t < tasks; ++t) run(t, buf.data());
    } else {
      ThreadScope threads;
#pragma omp parallel
      {
        auto buf = buffer;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) run(t, buf.data());
      }
    }
  };
  if (in_place) {
    const float* x = self.data_ptr<const float>();
    float* y = out.data_ptr<float>();
    parallel(std::vector<float>{}, [&](int64_t t, float*) {
      int64_t xo, yo, w;
      place(t, xo, yo, w);
      if (columns)
        softmaxColumns(Log, x + xo, xs, y + yo, ys, n, w);
      else
        softmaxRow(Log, x + xo, y + yo, n);
    });
    return out;
  }
  visitDtype(self.dtype(), [&](auto itag) {
    using I = decltype(itag);
    visitDtype(out.dtype(), [&](auto otag) {
      using O = decltype(otag);
      if constexpr (kFloating<O>) {
        using V = opmath_t<O>;
        const I* x = self.data_ptr<const I>();
        O* y = out.data_ptr<O>();
        // The task's rows in buf as [n][kBlock] (columns) or [n].
        const int64_t bs = columns ? kBlock : 1;
        parallel(std::vector<V>(static_cast<size_t>(n * bs)), [&](int64_t t, V* buf) {
          int64_t xo, yo, w;
          place(t, xo, yo, w);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < w; ++c) buf[j * bs + c] = static_cast<V>(load(store<O>(load(x[xo + j * xs + c]))));
          if constexpr (std::is_same_v<V, float>) {
            if (columns)
              softmaxColumns(Log, buf, bs, buf, bs, n, w);
            else
              softmaxRow(Log, buf, buf, n);
          } else {
            for (int64_t c = 0; c < w; ++c) softmaxRowDouble(Log, buf + c, bs, buf + c, bs, n);
          }
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < w; ++c) y[yo + j * ys + c * ycs] = store<O>(buf[j * bs + c]);
        });
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
