// Reduction kernels of the GPU plugins (structured: each computes into the
// `out` the host has sized and typed with the op's rule): sum, mean, amax,
// amin, argmax, argmin, var, std over dims, and softmax / log_softmax along
// one dim. They mirror plugins/cpu/reduction.cc value for value where the
// arithmetic allows (see Note [GPU reduction arithmetic]).
//
// Note [GPU reduction arithmetic]
// One kernel per storage type serves every reduction over dims; the op is a
// runtime enum switched on uniformly (compile time grows with dtypes, not
// ops x dtypes). The input is split into kept dims (one output each) and
// reduced dims, each walked through an OffsetCalculator (loops.cuh), and
// rows are reduced as Note [GPU row reductions] says.
//   * Accumulators: float for float16/bfloat16/float32, double for float64
//     (the CPU sums floats in double; a tree of float partial sums stays
//     well within the sums' tolerance), int64 for integers and bool
//     (wrapping, as PyTorch's).
//   * dtype= (and an int sum's int64 result): PyTorch converts the input
//     first, and so do we (one conversion kernel, kernel_args.h's as());
//     the reduction then runs in the result's dtype.
//   * Few long rows are split across blocks and their partials merged by a
//     second kernel with the same rules (Note [Split reductions] in
//     block_reduce.cuh): each part's partial is the first extremum of its
//     range of indices and the merge prefers the lower index, so ties
//     resolve to the first index across parts as across lanes.
//   * amax/amin propagate NaN; argmax/argmin return the first extremum in
//     row-major order of the reduced dims, a NaN counting as the extremum:
//     each lane keeps its first best, and the tree prefers the lower index
//     on ties, so the result does not depend on how lanes split the row.
//   * var/std: Welford per lane over x less the output's first element,
//     merged with Chan et al.'s formula (stable for a large mean), divisor
//     max(0, N - correction) as PyTorch.
//   * softmax: max, then the sum of exp(x - max), then the outputs; a row
//     holding NaN or +inf, or only -inf, comes out NaN by that arithmetic.
//     Rows that fit in shared memory are read from global memory once
//     (Note [One-pass rows] in block_reduce.cuh), with the same arithmetic.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "block_reduce.cuh"
#include "bp_common/registration.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

enum class ReduceOp : int32_t { kSum, kMean, kMax, kMin, kArgMax, kArgMin, kVar, kStd, kProd, kAll, kAny };

// The accumulator value type of storage type T (Note [GPU reduction arithmetic]).
template <class T>
using reduce_acc_t = std::conditional_t<kIsFloating<T>, opmath_t<T>, int64_t>;

// One lane's (or a merged group's) partial result. No constructors: it
// lives in __shared__ memory.
template <class V>
struct Partial {
  V a;        // sum; the extreme value; Welford's mean
  V m2;       // Welford's sum of squared deviations
  int64_t n;  // extrema: the index of `a` (-1: nothing yet); Welford: the count
};

// The reduction's parameters, passed to the kernel by value.
struct ReduceArgs {
  ReduceOp op;
  OffsetCalculator<2> outputs;  // kept dims: {input offset, output offset} of output o
  OffsetCalculator<1> reduced;  // reduced dims: input offset of reduced element r
  int64_t num_out, num_red;
  double correction;  // var/std
  bool slots_fastest;
  // Note [Split reductions]: block (x, y) reduces reduced indices
  // [y * chunk, (y + 1) * chunk) of its rows; with partials non-null it
  // writes its Partial to partials[o * gridDim.y + y] instead of out.
  int64_t chunk;
  void* partials;
};

BP_GPU_HD inline bool isMaxOp(ReduceOp op) { return op == ReduceOp::kMax || op == ReduceOp::kArgMax; }
BP_GPU_HD inline bool isExtremumOp(ReduceOp op) {
  return op == ReduceOp::kMax || op == ReduceOp::kMin || op == ReduceOp::kArgMax || op == ReduceOp::kArgMin;
}

// Whether x beats y for a max (min); a NaN beats every number.
template <class V>
BP_GPU_HD inline bool better(bool max, V x, V y) {
  if constexpr (std::is_floating_point_v<V>) {
    if (x != x) return y == y;
  }
  return max ? x > y : x < y;
}

// Integer sums wrap, as PyTorch's: in unsigned arithmetic, where wrapping is defined.
template <class V>
BP_GPU_HD inline V addWrapping(V a, V b) {
  if constexpr (std::is_integral_v<V>)
    return static_cast<V>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

// Integer products wrap too (prod), in unsigned arithmetic.
template <class V>
BP_GPU_HD inline V mulWrapping(V a, V b) {
  if constexpr (std::is_integral_v<V>)
    return static_cast<V>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

// all/any: a partial's `a` is 1 (true) or 0.
BP_GPU_HD inline bool isLogicalOp(ReduceOp op) { return op == ReduceOp::kAll || op == ReduceOp::kAny; }
template <class V>
BP_GPU_HD inline V mergeLogical(ReduceOp op, V a, V b) {
  const bool x = a != V(0), y = b != V(0);
  return (op == ReduceOp::kAll ? x && y : x || y) ? V(1) : V(0);
}

template <class V>
struct MergePartials {
  ReduceOp op;
  BP_GPU_HD Partial<V> operator()(Partial<V> a, const Partial<V>& b) const {
    if (isExtremumOp(op)) {
      const bool max = isMaxOp(op);
      const bool take = b.n >= 0 && (a.n < 0 || better(max, b.a, a.a) || (!better(max, a.a, b.a) && b.n < a.n));
      return take ? b : a;
    }
    if (op == ReduceOp::kVar || op == ReduceOp::kStd) {
      if (b.n == 0) return a;
      if (a.n == 0) return b;
      const V na = static_cast<V>(a.n), nb = static_cast<V>(b.n), n = na + nb;
      const V delta = b.a - a.a;
      a.a += delta * nb / n;
      a.m2 += b.m2 + delta * delta * na * nb / n;
      a.n += b.n;
      return a;
    }
    if (op == ReduceOp::kProd)
      a.a = mulWrapping(a.a, b.a);
    else if (isLogicalOp(op))
      a.a = mergeLogical(op, a.a, b.a);
    else
      a.a = addWrapping(a.a, b.a);
    return a;
  }
};

// The result of output o from its row's Partial p, stored at out's `offset`.
template <class T, class V>
__device__ inline void finishReduction(const ReduceArgs& args, const Partial<V>& p, void* out, int64_t offset) {
  const ReduceOp op = args.op;
  if (op == ReduceOp::kArgMax || op == ReduceOp::kArgMin) {
    static_cast<int64_t*>(out)[offset] = p.n;
    return;
  }
  if (isLogicalOp(op)) {  // out is bool or uint8: 0/1 in one byte either way
    static_cast<uint8_t*>(out)[offset] = p.a != V(0) ? 1 : 0;
    return;
  }
  V v = p.a;
  if constexpr (kIsFloating<T>) {
    const V count = static_cast<V>(args.num_red);
    if (op == ReduceOp::kMean) v = p.a / count;  // 0 / 0 = NaN for an empty reduction
    if (op == ReduceOp::kVar || op == ReduceOp::kStd) {
      const V divisor = count - static_cast<V>(args.correction);
      v = p.m2 / (divisor > V(0) ? divisor : V(0));
      if (op == ReduceOp::kStd) v = math::sqrt(v);
    }
  }
  static_cast<T*>(out)[offset] = store<T>(v);
}

template <class V>
BP_GPU_HD inline Partial<V> emptyPartial(ReduceOp op) {
  const V identity = op == ReduceOp::kProd || op == ReduceOp::kAll ? V(1) : V(0);
  return Partial<V>{identity, V(0), isExtremumOp(op) ? int64_t{-1} : int64_t{0}};
}

template <class T>
__global__ void reduceKernel(ReduceArgs args, const T* in, void* out) {
  using V = reduce_acc_t<T>;
  __shared__ Partial<V> shared[kReduceThreads];
  const RowLane t = rowLane(args.slots_fastest);
  const ReduceOp op = args.op;
  const MergePartials<V> merge{op};
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * args.chunk;
  const int64_t end = args.num_red - begin < args.chunk ? args.num_red : begin + args.chunk;
  for (int64_t first = firstRow(t); first < args.num_out; first += rowStep(t)) {
    const int64_t o = first + t.slot;
    Partial<V> p = emptyPartial<V>(op);
    Offsets<2> at{};
    if (o < args.num_out) {
      at = args.outputs.get(o);
      // var/std: Welford over x less the output's first element, the same
      // shift in every lane and part (the merge is unchanged by it), so a
      // large common offset (1000 + 0.01 * u) does not round the running
      // mean and the deviations in float.
      V shift = V(0);
      if ((op == ReduceOp::kVar || op == ReduceOp::kStd) && args.num_red > 0)
        shift = static_cast<V>(load(in[at.v[0] + args.reduced.get(0).v[0]]));
      for (int64_t r = begin + t.lane; r < end; r += t.lanes) {
        const V x = static_cast<V>(load(in[at.v[0] + args.reduced.get(r).v[0]]));
        if (isExtremumOp(op)) {
          if (p.n < 0 || better(isMaxOp(op), x, p.a)) p = Partial<V>{x, V(0), r};
        } else if (op == ReduceOp::kVar || op == ReduceOp::kStd) {
          ++p.n;
          const V xs = x - shift;
          const V delta = xs - p.a;
          p.a += delta / static_cast<V>(p.n);
          p.m2 += delta * (xs - p.a);
        } else if (op == ReduceOp::kProd) {
          p.a = mulWrapping(p.a, x);
        } else if (isLogicalOp(op)) {
          p.a = mergeLogical(op, p.a, x);
        } else {
          p.a = addWrapping(p.a, x);
        }
      }
    }
    p = blockCombine(p, shared, t, merge);
    if (t.lane != 0 || o >= args.num_out) continue;
    if (args.partials != nullptr) {
      static_cast<Partial<V>*>(args.partials)[o * gridDim.y + blockIdx.y] = p;
    } else {
      finishReduction<T>(args, p, out, at.v[1]);
    }
  }
}

// The second kernel of a split reduction (Note [Split reductions]): output
// o's `splits` partials, merged in part order by lanes of one row each.
template <class T>
__global__ void combinePartialsKernel(ReduceArgs args, int64_t splits, void* out) {
  using V = reduce_acc_t<T>;
  __shared__ Partial<V> shared[kReduceThreads];
  const RowLane t = rowLane(false);
  const MergePartials<V> merge{args.op};
  const Partial<V>* partials = static_cast<const Partial<V>*>(args.partials);
  for (int64_t first = firstRow(t); first < args.num_out; first += rowStep(t)) {
    const int64_t o = first + t.slot;
    Partial<V> p = emptyPartial<V>(args.op);
    if (o < args.num_out)
      for (int64_t s = t.lane; s < splits; s += t.lanes) p = merge(p, partials[o * splits + s]);
    p = blockCombine(p, shared, t, merge);
    if (t.lane == 0 && o < args.num_out) finishReduction<T>(args, p, out, args.outputs.get(o).v[1]);
  }
}

const std::initializer_list<ScalarType> kAllDtypes = {
    ScalarType::Bool,  ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};

// Runs `op` over the dims of `self` that `reduced` marks (indexed by dim;
// `self` already in the dtype the kernel reads) into `out`. `keepdim`: out
// keeps the reduced dims with size 1. `keep_order`: the reduced dims are
// walked in row-major order (argmax's index), else reordered so that the
// smallest stride is innermost (reads coalesce).
void runReduction(const char* name, ReduceOp op, const bp::Tensor& self, const bool* reduced, bool keepdim,
                  bool keep_order, double correction, const bp::Tensor& out) {
  const int64_t nd = self.dim();
  int64_t kept_sizes[kMaxDims], kept_in[kMaxDims], kept_out[kMaxDims];
  int64_t red_sizes[kMaxDims], red_strides[kMaxDims];
  size_t nk = 0, nr = 0;
  int64_t out_dim = 0, num_out = 1, num_red = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      red_sizes[nr] = self.size(d);
      red_strides[nr++] = self.stride(d);
      num_red *= self.size(d);
      if (keepdim) ++out_dim;
    } else {
      kept_sizes[nk] = self.size(d);
      kept_in[nk] = self.stride(d);
      kept_out[nk++] = out.dim() == 0 ? 0 : out.stride(out_dim++);
      num_out *= self.size(d);
    }
  }
  if (num_out == 0) return;
  if (!keep_order) {  // stable insertion sort by decreasing |stride| (few dims)
    for (size_t i = 1; i < nr; ++i) {
      for (size_t j = i; j > 0 && std::abs(red_strides[j - 1]) < std::abs(red_strides[j]); --j) {
        std::swap(red_sizes[j - 1], red_sizes[j]);
        std::swap(red_strides[j - 1], red_strides[j]);
      }
    }
  }
  ReduceArgs args{};
  args.op = op;
  args.outputs = makeOffsetCalculator<2>(name, bp::IntList(kept_sizes, nk), {kept_in, kept_out});
  args.reduced = makeOffsetCalculator<1>(name, bp::IntList(red_sizes, nr), {red_strides});
  args.num_out = num_out;
  args.num_red = num_red;
  args.correction = correction;
  // Columns (Note [GPU row reductions]): neighbouring outputs are adjacent
  // in the input while the reduced elements are not.
  const bool reduced_contiguous = args.reduced.sizes[0] == 1 || args.reduced.strides[0][0] == 1;
  const RowLayout layout = rowLayoutFor(num_red, reduced_contiguous, args.outputs.strides[0][0], args.outputs.sizes[0]);
  args.slots_fastest = layout.slots_fastest;
  const int lanes = layout.lanes;
  const int device = out.device().index;
  const int64_t splits = splitsFor(rowBlocks(num_out, lanes, device), num_red, lanes, limits(device).sm_count);
  args.chunk = (num_red + splits - 1) / splits;
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(self.data_ptr());
    if (splits == 1) {
      launchRows(&reduceKernel<T>, num_out, lanes, args.slots_fastest, 0, device, args, in, out.data_ptr());
      return;
    }
    // Note [Split reductions]: partials in a scratch tensor on the device.
    using V = reduce_acc_t<T>;
    const bp::Tensor scratch = bp::Tensor::empty({num_out * splits * static_cast<int64_t>(sizeof(Partial<V>))},
                                                 ScalarType::UInt8, out.device());
    args.partials = scratch.data_ptr();
    launchRowsSplit(&reduceKernel<T>, num_out, lanes, args.slots_fastest, 0, splits, device, args, in, nullptr);
    launchRows(&combinePartialsKernel<T>, num_out, lanesFor(splits), false, 0, device, args, splits, out.data_ptr());
  });
}

// The dims a dim list reduces, by index (none or empty: all), wrapping
// negative dims; the host's rule has rejected bad or repeated ones.
void reducedMask(const bp::Tensor& self, std::optional<bp::IntList> dims, bool* mask) {
  const int64_t nd = self.dim();
  for (int64_t d = 0; d < nd; ++d) mask[d] = !dims || dims->empty();
  if (dims && nd > 0)
    for (int64_t d : *dims) mask[d < 0 ? d + nd : d] = true;
}

// Also bounds the rank: the kernels' geometry and the dim masks hold kMaxDims dims.
void checkArgs(const char* op, const bp::Tensor& self, const bp::Tensor& out,
               std::initializer_list<ScalarType> self_dtypes) {
  checkOnDevice(op, self, "self", out.device());
  checkDtype(op, self, "self", self_dtypes);
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(), " dimensions are not supported on ",
                  BP_GPU_NAME, " (at most ", kMaxDims, ")");
}

void checkSameDtype(const char* op, const bp::Tensor& self, const bp::Tensor& out) {
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": expected 'out' of dtype ", self.dtype(), ", got ", out.dtype());
}

bp::Tensor sumOrMean(const char* op, ReduceOp kind, const bp::Tensor& self, std::optional<bp::IntList> dim,
                     bool keepdim, const bp::Tensor& out) {
  checkArgs(op, self, out, kAllDtypes);
  checkDtype(op, out, "out", kind == ReduceOp::kMean ? kFloatDtypes : kAllDtypes);
  bool mask[kMaxDims];
  reducedMask(self, dim, mask);
  bp::Tensor converted;
  runReduction(op, kind, as(op, self, out.dtype(), converted), mask, keepdim, false, 0, out);
  return out;
}

bp::Tensor sum_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim, std::optional<ScalarType>,
                   const bp::Tensor& out) {
  return sumOrMean("bp::sum.IntList_out", ReduceOp::kSum, self, dim, keepdim, out);
}
bp::Tensor mean_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim, std::optional<ScalarType>,
                    const bp::Tensor& out) {
  return sumOrMean("bp::mean.out", ReduceOp::kMean, self, dim, keepdim, out);
}

bp::Tensor extremum_out(const char* op, ReduceOp kind, const bp::Tensor& self, bp::IntList dim, bool keepdim,
                        const bp::Tensor& out) {
  checkArgs(op, self, out, kAllDtypes);
  checkSameDtype(op, self, out);
  bool mask[kMaxDims];
  reducedMask(self, dim, mask);
  runReduction(op, kind, self, mask, keepdim, false, 0, out);
  return out;
}

bp::Tensor amax_out(const bp::Tensor& self, bp::IntList dim, bool keepdim, const bp::Tensor& out) {
  return extremum_out("bp::amax.out", ReduceOp::kMax, self, dim, keepdim, out);
}
bp::Tensor amin_out(const bp::Tensor& self, bp::IntList dim, bool keepdim, const bp::Tensor& out) {
  return extremum_out("bp::amin.out", ReduceOp::kMin, self, dim, keepdim, out);
}

// Without dim the index is into the flattened tensor: every dim is reduced
// in row-major order and out has one element.
bp::Tensor arg_extremum_out(const char* op, ReduceOp kind, const bp::Tensor& self, std::optional<int64_t> dim,
                            bool keepdim, const bp::Tensor& out) {
  checkArgs(op, self, out, kAllDtypes);
  checkDtype(op, out, "out", {ScalarType::Int64});
  bool mask[kMaxDims];
  for (int64_t d = 0; d < self.dim(); ++d) mask[d] = !dim.has_value();
  if (dim && self.dim() > 0) mask[*dim < 0 ? *dim + self.dim() : *dim] = true;
  runReduction(op, kind, self, mask, keepdim && dim.has_value(), true, 0, out);
  return out;
}

bp::Tensor argmax_out(const bp::Tensor& self, std::optional<int64_t> dim, bool keepdim, const bp::Tensor& out) {
  return arg_extremum_out("bp::argmax.out", ReduceOp::kArgMax, self, dim, keepdim, out);
}
bp::Tensor argmin_out(const bp::Tensor& self, std::optional<int64_t> dim, bool keepdim, const bp::Tensor& out) {
  return arg_extremum_out("bp::argmin.out", ReduceOp::kArgMin, self, dim, keepdim, out);
}

bp::Tensor var_out(const char* op, ReduceOp kind, const bp::Tensor& self, std::optional<bp::IntList> dim,
                   const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  checkArgs(op, self, out, kFloatDtypes);
  checkSameDtype(op, self, out);
  bool mask[kMaxDims];
  const double corr = correction ? correction->toDouble() : 1.0;
  reducedMask(self, dim, mask);
  runReduction(op, kind, self, mask, keepdim, false, corr, out);
  return out;
}

bp::Tensor var_correction_out(const bp::Tensor& self, std::optional<bp::IntList> dim,
                              const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  return var_out("bp::var.correction_out", ReduceOp::kVar, self, dim, correction, keepdim, out);
}
bp::Tensor std_correction_out(const bp::Tensor& self, std::optional<bp::IntList> dim,
                              const std::optional<bp::Scalar>& correction, bool keepdim, const bp::Tensor& out) {
  return var_out("bp::std.correction_out", ReduceOp::kStd, self, dim, correction, keepdim, out);
}

// --- softmax, log_softmax

struct SoftmaxArgs {
  OffsetCalculator<2> rows;  // {input offset, output offset} of row r's first element
  int64_t num_rows, n;       // rows, and elements per row
  int64_t in_stride, out_stride;
  bool log, slots_fastest;
};

// In T's opmath type (float for float32 and narrower, double for float64),
// as the CPU's loops. kCached: the rows a block serves at once are cached in
// dynamic shared memory and read from global memory once (Note [One-pass
// rows] in block_reduce.cuh); else each pass reads them again.
template <class T, bool kCached>
__global__ void softmaxKernel(SoftmaxArgs args, const T* in, T* out) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(args.slots_fastest);
  V* cache = kCached ? dynamicShared<V>() : nullptr;
  // Element j of this slot's cached row.
  auto cached = [&](int64_t j) -> V& {
    return cache[args.slots_fastest ? j * t.slots + t.slot : static_cast<int64_t>(t.slot) * args.n + j];
  };
  for (int64_t first = firstRow(t); first < args.num_rows; first += rowStep(t)) {
    const int64_t r = first + t.slot;
    const bool valid = r < args.num_rows;
    const Offsets<2> at = valid ? args.rows.get(r) : Offsets<2>{};
    const T* x = in + at.v[0];
    V mx = -static_cast<V>(INFINITY);
    if (valid) {
      for (int64_t j = t.lane; j < args.n; j += t.lanes) {
        const V v = load(x[j * args.in_stride]);
        if constexpr (kCached) cached(j) = v;
        mx = MaxOf<V>{}(mx, v);
      }
    }
    mx = blockCombine(mx, shared, t, MaxOf<V>{});
    V sum = 0;
    if (valid) {
      for (int64_t j = t.lane; j < args.n; j += t.lanes) {
        if constexpr (kCached) {
          const V e = math::exp(cached(j) - mx);
          if (!args.log) cached(j) = e;  // the output pass scales it
          sum += e;
        } else {
          sum += math::exp(load(x[j * args.in_stride]) - mx);
        }
      }
    }
    sum = blockCombine(sum, shared, t, SumOf<V>{});
    if (!valid) continue;
    T* y = out + at.v[1];
    if (args.log) {
      // (x - max) - lse, not x - (max + lse): the latter rounds at the magnitude of max.
      const V lse = math::log(sum);
      for (int64_t j = t.lane; j < args.n; j += t.lanes) {
        const V v = kCached ? cached(j) : load(x[j * args.in_stride]);
        y[j * args.out_stride] = store<T>((v - mx) - lse);
      }
    } else {
      const V inv = V(1) / sum;
      for (int64_t j = t.lane; j < args.n; j += t.lanes) {
        const V e = kCached ? cached(j) : math::exp(load(x[j * args.in_stride]) - mx);
        y[j * args.out_stride] = store<T>(e * inv);
      }
    }
  }
}

bp::Tensor softmax_out(const char* op, bool log, const bp::Tensor& self, int64_t dim, const bp::Tensor& out) {
  checkArgs(op, self, out, kAllDtypes);
  checkDtype(op, out, "out", kFloatDtypes);
  const int64_t nd = self.dim();
  if (self.numel() == 0) return out;
  // PyTorch converts the input to dtype= (out's dtype) first.
  bp::Tensor converted;
  const bp::Tensor& x = as(op, self, out.dtype(), converted);
  const int64_t d = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
  // Every position but `dim` is one independent row.
  const LinesAlong l = linesAlong(op, x, out, d);
  SoftmaxArgs args{};
  args.rows = l.lines;
  args.n = l.len;
  args.num_rows = l.count;
  args.in_stride = l.in_step;
  args.out_stride = l.out_step;
  args.log = log;
  const RowLayout layout = rowLayoutFor(args.n, args.in_stride == 1, args.rows.strides[0][0], args.rows.sizes[0]);
  args.slots_fastest = layout.slots_fastest;
  const int lanes = layout.lanes;
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloating<T>) {
      const int device = out.device().index;
      const size_t cache = rowCacheBytes(args.n, lanes, sizeof(opmath_t<T>), limits(device).shared_mem_per_block);
      launchRows(cache > 0 ? &softmaxKernel<T, true> : &softmaxKernel<T, false>, args.num_rows, lanes,
                 args.slots_fastest, cache, device, args, static_cast<const T*>(x.data_ptr()),
                 static_cast<T*>(out.data_ptr()));
    }
  });
  return out;
}

bp::Tensor softmax_int_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return softmax_out("bp::softmax.int_out", false, self, dim, out);
}
bp::Tensor log_softmax_int_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return softmax_out("bp::log_softmax.int_out", true, self, dim, out);
}

// --- prod, all, any (as the CPU plugin's, plugins/cpu/reduction.cc): prod
// multiplies the input converted to out's dtype; all/any test each element
// against 0 (NaN counts as true) and write 0/1 into a bool or uint8 out.

bp::Tensor prodInto(const char* op, const bp::Tensor& self, const bool* mask, bool keepdim, const bp::Tensor& out) {
  checkArgs(op, self, out, kAllDtypes);
  checkDtype(op, out, "out", kAllDtypes);
  bp::Tensor converted;
  runReduction(op, ReduceOp::kProd, as(op, self, out.dtype(), converted), mask, keepdim, false, 0, out);
  return out;
}

bp::Tensor prod_int_out(const bp::Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType>,
                        const bp::Tensor& out) {
  bool mask[kMaxDims];
  reducedMask(self, bp::IntList(&dim, 1), mask);
  return prodInto("bp::prod.int_out", self, mask, keepdim, out);
}

bp::Tensor prod_out(const bp::Tensor& self, std::optional<ScalarType>, const bp::Tensor& out) {
  bool mask[kMaxDims];
  reducedMask(self, std::nullopt, mask);
  return prodInto("bp::prod.out", self, mask, false, out);
}

template <bool All>
bp::Tensor logical_dims_out(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim,
                            const bp::Tensor& out) {
  const char* op = All ? "bp::all.dims_out" : "bp::any.dims_out";
  checkArgs(op, self, out, kAllDtypes);
  checkDtype(op, out, "out", {ScalarType::Bool, ScalarType::UInt8});
  bool mask[kMaxDims];
  reducedMask(self, dim, mask);
  if (dim && dim->empty())  // dim=[] reduces nothing here (PyTorch's all/any), unlike sum's
    for (int64_t d = 0; d < self.dim(); ++d) mask[d] = false;
  runReduction(op, All ? ReduceOp::kAll : ReduceOp::kAny, self, mask, keepdim, false, 0, out);
  return out;
}

}  // namespace

void registerReductionKernels(bp::Library& m, int32_t type) { BP_REGISTER_REDUCTION_KERNELS(m, type); }

}  // namespace bp_gpu
