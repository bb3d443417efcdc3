#pragma once
// Note [Elementwise loops]
// A small TensorIterator: the CPU plugin's elementwise kernels describe
// their operands (operand 0 is `out`, sized by the host's shape rule) and a
// per-element function; these loops walk them.
//
//   * Geometry: input strides aligned to out's shape (0 where broadcast),
//     size-1 dimensions dropped and adjacent dimensions merged when every
//     operand steps through them as one, so a contiguous or simply
//     broadcast problem becomes one long row. Up to kInlineDims dimensions
//     live on the stack: small tensors allocate nothing here.
//   * Rows: the innermost dimension is run by a typed loop. Unit-stride
//     rows (and rows where an input is a broadcast single value) get loops
//     with no index arithmetic that the compiler vectorises; the element
//     function is a lambda inlined into the loop, never a pointer call, and
//     the dtype switch happens once per kernel call, not per element.
//     The unit-stride rows are marked `omp simd` (BP_ELEMENTWISE_SIMD):
//     at -O2 GCC vectorises almost nothing by itself (its cheap cost model
//     refuses loops that need an alias check), and a select such as relu's
//     `x < 0 ? 0 : x` then compiles to a branch that random signs mispredict
//     half the time (relu.out was 4x slower than add.out). The pragma is
//     sound because the host refuses an `out` that overlaps an input other
//     than element for element (checkNoPartialOverlap), so no row carries a
//     dependence from one element to the next; each lane computes what the
//     scalar loop does (no reassociation, and without -ffast-math libm has
//     no vector variants), so results are the same bit for bit.
//   * Threads: above kParallelGrain elements the flat index range is split
//     into one contiguous chunk per thread under bp_cpu::ThreadScope, so
//     BACKPLANE_NUM_THREADS bounds the parallelism.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "cpu_common.h"

// The unit-stride rows' loops are vectorised (Note [Elementwise loops]).
#define BP_ELEMENTWISE_SIMD _Pragma("omp simd")

namespace bp_cpu::elementwise {

inline constexpr size_t kInlineDims = 8;
// Below this many elements a parallel region costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// int64_t[n], on the stack up to kInlineDims.
class DimVec {
 public:
  DimVec() = default;
  DimVec(const DimVec&) = delete;
  DimVec& operator=(const DimVec&) = delete;
  void resize(size_t n) {
    size_ = n;
    if (n > kInlineDims) {
      heap_.assign(n, 0);
      data_ = heap_.data();
    }
  }
  void shrink(size_t n) { size_ = n; }
  int64_t& operator[](size_t i) { return data_[i]; }
  int64_t operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

 private:
  std::array<int64_t, kInlineDims> inline_{};
  std::vector<int64_t> heap_;
  int64_t* data_ = inline_.data();
  size_t size_ = 0;
};

// N operands (0 is out) over out's shape, coalesced; strides in elements.
template <size_t N>
struct Geometry {
  DimVec sizes;  // innermost last; at least one dimension
  std::array<DimVec, N> strides;
  std::array<char*, N> base{};
  std::array<size_t, N> itemsize{};
  int64_t numel = 1;

  explicit Geometry(const std::array<const bp::Tensor*, N>& operands) {
    const bp::Tensor& out = *operands[0];
    const bp::IntList shape = out.sizes();
    const size_t nd = shape.size();
    sizes.resize(std::max<size_t>(nd, 1));
    for (auto& s : strides) s.resize(std::max<size_t>(nd, 1));
    size_t r = 0;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t size = shape[d];
      numel *= size;
      if (size == 1) continue;
      std::array<int64_t, N> st{};
      for (size_t k = 0; k < N; ++k) {
        const bp::Tensor& t = *operands[k];
        const size_t offset = nd - static_cast<size_t>(t.dim());  // inputs broadcast from the right
        if (d >= offset && t.sizes()[d - offset] != 1) st[k] = t.strides()[d - offset];
      }
      bool merge = r > 0;
      for (size_t k = 0; k < N && merge; ++k) merge = strides[k][r - 1] == st[k] * size;
      if (merge) {
        sizes[r - 1] *= size;
        for (size_t k = 0; k < N; ++k) strides[k][r - 1] = st[k];
        continue;
      }
      sizes[r] = size;
      for (size_t k = 0; k < N; ++k) strides[k][r] = st[k];
      ++r;
    }
    if (r == 0) {  // 0-d, or every dimension of size 1: one element
      sizes[0] = 1;
      for (auto& s : strides) s[0] = 0;
      r = 1;
    }
    sizes.shrink(r);
    for (auto& s : strides) s.shrink(r);
    for (size_t k = 0; k < N; ++k) {
      base[k] = static_cast<char*>(operands[k]->data_ptr());
      itemsize[k] = bp::elementSize(operands[k]->dtype());
    }
  }

  // Calls row(ptrs, n, inner_strides) for flat elements [begin, end).
  template <class Row>
  void runRange(int64_t begin, int64_t end, Row& row) const {
    const size_t nd = sizes.size();
    const size_t in = nd - 1;
    DimVec idx;
    idx.resize(nd);
    int64_t rem = begin;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    std::array<char*, N> p;
    std::array<int64_t, N> inner;
    for (size_t k = 0; k < N; ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < nd; ++d) off += idx[d] * strides[k][d];
      p[k] = base[k] + off * static_cast<int64_t>(itemsize[k]);
      inner[k] = strides[k][in];
    }
    for (int64_t pos = begin; pos < end;) {
      const int64_t n = std::min(sizes[in] - idx[in], end - pos);
      row(p, n, inner);
      pos += n;
      idx[in] += n;
      for (size_t k = 0; k < N; ++k) p[k] += n * inner[k] * static_cast<int64_t>(itemsize[k]);
      for (size_t d = in; d > 0 && idx[d] == sizes[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (size_t k = 0; k < N; ++k)
          p[k] += (strides[k][d - 1] - sizes[d] * strides[k][d]) * static_cast<int64_t>(itemsize[k]);
      }
    }
  }

  // Runs row over every element, in parallel above kParallelGrain.
  template <class Row>
  void run(Row&& row) const {
    if (numel == 0) return;
    const int threads = numThreads();
    if (numel < kParallelGrain || threads == 1) {
      runRange(0, numel, row);
      return;
    }
    ThreadScope scope;
    const int64_t chunks = std::min<int64_t>(threads, (numel + kParallelGrain - 1) / kParallelGrain);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) runRange(numel * c / chunks, numel * (c + 1) / chunks, row);
  }
};

// Runs row(ptrs, n, inner_strides) over the operands (out first): in one
// flat contiguous row when every operand is contiguous with out's element
// count (no broadcasting then, so elements correspond one to one) and the
// work is below the parallel grain, the common small case, which skips the
// Geometry set-up; through Geometry otherwise.
template <size_t N, class Row>
void runElementwise(const std::array<const bp::Tensor*, N>& operands, Row&& row) {
  const int64_t n = operands[0]->numel();
  if (n > 0 && n < kParallelGrain) {
    bool flat = true;
    for (size_t k = 0; k < N && flat; ++k) flat = operands[k]->is_contiguous() && operands[k]->numel() == n;
    if (flat) {
      std::array<char*, N> p;
      std::array<int64_t, N> ones;
      for (size_t k = 0; k < N; ++k) {
        p[k] = static_cast<char*>(operands[k]->data_ptr());
        ones[k] = 1;
      }
      row(p, n, ones);
      return;
    }
  }
  Geometry<N> g(operands);
  g.run(row);
}

// out[i] = store<O>(f(load(a[i]))).
template <class O, class A, class F>
void unaryLoop(const bp::Tensor& out, const bp::Tensor& a, F f) {
  runElementwise<2>({&out, &a}, [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    O* o = reinterpret_cast<O*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    if (s[0] == 1 && s[1] == 1) {
      BP_ELEMENTWISE_SIMD
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(x[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = store<O>(f(load(x[i * s[1]])));
    }
  });
}

// out[i] = store<O>(f(load(a[i]), load(b[i]))), with fast rows for a
// broadcast single value on either side.
template <class O, class A, class B, class F>
void binaryLoop(const bp::Tensor& out, const bp::Tensor& a, const bp::Tensor& b, F f) {
  runElementwise<3>({&out, &a, &b}, [&](const std::array<char*, 3>& p, int64_t n, const std::array<int64_t, 3>& s) {
    O* o = reinterpret_cast<O*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const B* y = reinterpret_cast<const B*>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      BP_ELEMENTWISE_SIMD
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(x[i]), load(y[i])));
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
      const auto yv = load(y[0]);
      BP_ELEMENTWISE_SIMD
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(load(x[i]), yv));
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
      const auto xv = load(x[0]);
      BP_ELEMENTWISE_SIMD
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(xv, load(y[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = store<O>(f(load(x[i * s[1]]), load(y[i * s[2]])));
    }
  });
}

// out[i] = store<O>(f(c[i], load(a[i]), load(b[i]))) with c bool.
template <class O, class F>
void ternaryLoop(const bp::Tensor& out, const bp::Tensor& c, const bp::Tensor& a, const bp::Tensor& b, F f) {
  runElementwise<4>({&out, &c, &a, &b}, [&](const std::array<char*, 4>& p, int64_t n, const std::array<int64_t, 4>& s) {
    O* o = reinterpret_cast<O*>(p[0]);
    const bool* cond = reinterpret_cast<const bool*>(p[1]);
    const O* x = reinterpret_cast<const O*>(p[2]);
    const O* y = reinterpret_cast<const O*>(p[3]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {
      BP_ELEMENTWISE_SIMD
      for (int64_t i = 0; i < n; ++i) o[i] = store<O>(f(cond[i], load(x[i]), load(y[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = store<O>(f(cond[i * s[1]], load(x[i * s[2]]), load(y[i * s[3]])));
    }
  });
}

// --- what the elementwise kernels share (elementwise.cc, elementwise_more.cc)

// dst = src converted elementwise (same shape; any strides): a loop for
// every pair of dtypes, compiled once (elementwise.cc).
void copyCast(const bp::Tensor& src, const bp::Tensor& dst);

// t as `dtype`: t itself when it already has it, else a converted copy kept
// in `holder` (only mixed-dtype calls pay for it; the common case copies no
// handle, which would cost a retain, a release and a new info query).
const bp::Tensor& as(const bp::Tensor& t, ScalarType dtype, bp::Tensor& holder);

// Each argument is a CPU tensor (checkCpu).
void checkArgs(const char* op, std::initializer_list<std::pair<const bp::Tensor*, const char*>> args);

// Runs fill(bool_out) into out, through a bool temporary when out is not bool.
template <class Fill>
bp::Tensor intoBoolOut(const bp::Tensor& out, Fill fill) {
  if (out.dtype() == ScalarType::Bool) {
    fill(out);
  } else {
    bp::Tensor tmp = bp::Tensor::empty(out.sizes(), ScalarType::Bool, kCpuDevice);
    fill(tmp);
    copyCast(tmp, out);
  }
  return out;
}

// A unary kernel: out = body(T{}, self as out's dtype T), after the checks.
template <class Body>
bp::Tensor unary(const char* op, const bp::Tensor& self, const bp::Tensor& out,
                 std::initializer_list<ScalarType> supported, Body body) {
  checkArgs(op, {{&self, "self"}, {&out, "out"}});
  checkDtype(op, out, "out", supported);
  bp::Tensor a_holder;
  const bp::Tensor& a = as(self, out.dtype(), a_holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    body(T{}, a);
  });
  return out;
}

}  // namespace bp_cpu::elementwise
