// The CPU kernels of the sparse-convolution ops: gather-GEMM-scatter for
// indice_conv and its backward, and the max pooling pair.
//
// Note [CPU gather-GEMM-scatter]
// The forward is output stationary: the rulebook is first turned around
// into source[o][k] (the input row output o takes at offset k), then each
// task owns a tile of R consecutive output rows (R fixed by the channel
// counts, so results do not depend on the thread count) and, offset by
// offset, gathers the input rows its outputs take into a per-thread buffer,
// multiplies it by W[k] with oneDNN's sgemm (single-threaded inside the
// parallel region) and adds the product rows into its own output rows. The
// buffers stay in cache, tasks never share an output row, and there is no
// barrier between offsets: no atomics, no locks, and every output row sums
// its offsets in offset order, deterministically. With subm=True the centre
// offset is the identity and runs first, straight from the features into
// the tile (no gather, no zero fill).
// For the channel counts where a product per offset and tile is too small
// for sgemm, float32 runs a direct kernel instead (Note [Direct sparse
// convolution kernel]); the scratch of either stays with its thread across
// calls (threadScratch).
// The backward runs offset by offset (a barrier between offsets): each task
// takes R pairs of the offset, gathers features and out_grad rows, and adds
// out_grad @ W[k]^T into input_grad (no input row repeats within an offset,
// so tasks of one offset never share a row); filters_grad[k] = the sum of
// the tasks' A^T G partial products, added in task order.
// The rulebook is checked before any of this (ranges, counts, and that no
// row repeats within an offset), in one parallel pass over the pairs.
// float64 uses a plain loop instead of oneDNN (which has no dgemm).
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "spconv.h"

namespace bp_spconv {

namespace {

// Rows of one task: the gather and product buffers of a task (R x (Cin +
// Cout) values) stay within about 128 KiB of float32, a typical L2 share.
int64_t taskRows(int64_t cin, int64_t cout) { return std::clamp<int64_t>(32768 / (cin + cout), 32, 2048); }

// C[m, n] = op(A) @ op(B) + beta * C, row-major; op transposes when asked.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc, std::atomic<int>& status) {
  const dnnl_status_t s =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (s != dnnl_success) status.store(static_cast<int>(s), std::memory_order_relaxed);
}
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc, std::atomic<int>&) {
  for (int64_t i = 0; i < m; ++i) {
    double* c = C + i * ldc;
    for (int64_t j = 0; j < n; ++j) c[j] = beta == 0 ? 0.0 : beta * c[j];
    for (int64_t p = 0; p < k; ++p) {
      const double a = trans_a ? A[p * lda + i] : A[i * lda + p];
      for (int64_t j = 0; j < n; ++j) c[j] += a * (trans_b ? B[j * ldb + p] : B[p * ldb + j]);
    }
  }
}

// Called first in each parallel region that runs gemm(): oneDNN's sgemm
// starts its own team unless it sees an enclosing active region, and a
// region of one thread is not active; a team per small product would cost
// more than the product. The setting is this implicit task's, so it ends
// with the region.
void singleThreadedGemm() { omp_set_num_threads(1); }

void throwIfGemmFailed(const char* op, const std::atomic<int>& status) {
  BP_PLUGIN_CHECK_CODE(status.load() == 0, BP_INTERNAL, op, ": oneDNN sgemm failed with status ", status.load());
}

// A buffer of at least `n` elements owned by the calling thread, that only
// grows (one per Slot). The forward's tables and tiles have the same sizes
// call after call; fresh allocations of that size come from glibc as new
// mmap'd pages, so every call would pay a page fault and a kernel clear per
// 4 KiB. OpenMP keeps its worker threads, so their buffers live on too.
template <class T, int Slot>
T* threadScratch(size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) {
    buffer.clear();
    buffer.resize(n);
  }
  return buffer.data();
}

// A checked rulebook on the host, oriented for one call: in(k)[j] and
// out(k)[j] are the rows of pair j at offset k as this call uses them
// (swapped for inverse=True).
class Rulebook {
 public:
  Rulebook(const char* op, const bp::Tensor& pairs, const bp::Tensor& pair_num, int64_t capacity, bool inverse)
      : pairs_(contiguous(pairs)),
        counts_(pairCounts(op, pair_num, capacity)),
        capacity_(capacity),
        in_row_(inverse ? 1 : 0) {
    BP_PLUGIN_CHECK(pairs_.device().type == kCpu, op, ": this is the cpu kernel, but indice_pairs is on device type ",
                    pairs_.device().type);
    base_ = capacity == 0 ? nullptr : pairs_.data_ptr<const int32_t>();
  }

  int64_t kernelVolume() const { return static_cast<int64_t>(counts_.size()); }
  int64_t count(int64_t k) const { return counts_[k]; }
  const int32_t* in(int64_t k) const { return base_ + (2 * k + in_row_) * capacity_; }
  const int32_t* out(int64_t k) const { return base_ + (2 * k + 1 - in_row_) * capacity_; }
  int64_t totalCount() const {
    int64_t total = 0;
    for (int64_t n : counts_) total += n;
    return total;
  }
  int64_t maxCount() const { return counts_.empty() ? 0 : *std::max_element(counts_.begin(), counts_.end()); }

  // Checks that every used pair has in rows in [0, num_in) and out rows in
  // [0, num_out), no row twice within an offset, and (for subm) that the
  // centre offset is the identity over all num_in rows; notes whether every
  // offset lists its output rows in ascending order (outputsAscending()).
  // Offsets are checked in parallel, each in two branch-free passes: ranges
  // and order (vectorised), then repeats, marking rows in a per-thread byte
  // map that is all zero between offsets (output rows need none while they
  // ascend). Only an offset that fails is walked pair by pair, to name its
  // first bad pair; the error reported is the one of the lowest offset.
  void check(const char* op, int64_t num_in, int64_t num_out, bool subm) {
    const int64_t K = kernelVolume();
    if (subm) {
      const int64_t c = K / 2;
      bool identity = counts_[c] == num_in;
      for (int64_t j = 0; identity && j < counts_[c]; ++j) identity = in(c)[j] == j && out(c)[j] == j;
      BP_PLUGIN_CHECK(identity, op, ": subm=True, but the centre offset ", c,
                      " of the rulebook does not pair every site with itself in order; build the rulebook with "
                      "get_indice_pairs(..., subm=True) or pass subm=False");
    }
    std::vector<std::string> errors(static_cast<size_t>(K));
    std::vector<uint8_t> ascending(static_cast<size_t>(K), 1);
    const int threads = static_cast<int>(std::min<int64_t>(threadsFor(totalCount()), K));
    // Rows are int32: a negative one is >= 2^31 as uint32, so one compare checks both ends.
    const uint32_t in_limit = static_cast<uint32_t>(std::min<int64_t>(num_in, INT32_MAX));
    const uint32_t out_limit = static_cast<uint32_t>(std::min<int64_t>(num_out, INT32_MAX));
#pragma omp parallel num_threads(threads)
    {
      uint8_t* seen_in = threadScratch<uint8_t, 5>(static_cast<size_t>(num_in + num_out));
      uint8_t* seen_out = seen_in + num_in;
#pragma omp for schedule(dynamic, 1)
      for (int64_t k = 0; k < K; ++k) {
        const int32_t *ri = in(k), *ro = out(k);
        const int64_t n = counts_[k];
        bool in_range = true, rising = true;
        for (int64_t j = 0; j < n; ++j)
          in_range &= (static_cast<uint32_t>(ri[j]) < in_limit) & (static_cast<uint32_t>(ro[j]) < out_limit);
        for (int64_t j = 1; j < n; ++j) rising &= ro[j] > ro[j - 1];
        uint8_t repeated = 0;
        if (in_range) {
          for (int64_t j = 0; j < n; ++j) {
            repeated |= seen_in[ri[j]];
            seen_in[ri[j]] = 1;
          }
          for (int64_t j = 0; j < n; ++j) seen_in[ri[j]] = 0;
          if (!rising) {
            for (int64_t j = 0; j < n; ++j) {
              repeated |= seen_out[ro[j]];
              seen_out[ro[j]] = 1;
            }
            for (int64_t j = 0; j < n; ++j) seen_out[ro[j]] = 0;
          }
        }
        if (!in_range || repeated) errors[k] = firstBadPair(k, num_in, num_out);
        ascending[k] = rising;
      }
    }
    for (const std::string& e : errors) BP_PLUGIN_CHECK(e.empty(), op, ": ", e);
    outputs_ascending_ = std::all_of(ascending.begin(), ascending.end(), [](uint8_t a) { return a != 0; });
  }

  // After check(): whether every offset lists its pairs in strictly
  // ascending output row, as get_indice_pairs builds them.
  bool outputsAscending() const { return outputs_ascending_; }

 private:
  // What is wrong with offset k, which check() found bad: its first pair
  // outside the tensors or repeating a row.
  std::string firstBadPair(int64_t k, int64_t num_in, int64_t num_out) const {
    std::vector<uint8_t> seen_in(static_cast<size_t>(num_in)), seen_out(static_cast<size_t>(num_out));
    for (int64_t j = 0; j < counts_[k]; ++j) {
      const int32_t i = in(k)[j], o = out(k)[j];
      if (i < 0 || i >= num_in || o < 0 || o >= num_out)
        return bp::detail::concat("pair ", j, " of kernel offset ", k, " joins input row ", i, " and output row ", o,
                                  ", outside the ", num_in, " input and ", num_out,
                                  " output rows; was the rulebook built for these tensors?");
      const bool repeated_in = seen_in[i] != 0, repeated_out = seen_out[o] != 0;
      if (repeated_in || repeated_out)
        return bp::detail::concat("kernel offset ", k, " uses ", repeated_in ? "input" : "output", " row ",
                                  repeated_in ? i : o,
                                  " twice; a rulebook pairs each row with at most one partner "
                                  "per offset, as get_indice_pairs builds it");
      seen_in[i] = seen_out[o] = 1;
    }
    return {};
  }

  bp::Tensor pairs_;
  std::vector<int64_t> counts_;
  int64_t capacity_;
  int in_row_;
  const int32_t* base_;
  bool outputs_ascending_ = false;
};

void checkCpuFloat(const char* op, const bp::Tensor& t, const char* name) {
  BP_PLUGIN_CHECK(t.device().type == kCpu, op, ": this is the cpu kernel, but ", name, " is on device type ",
                  t.device().type);
  BP_PLUGIN_CHECK(t.dtype() == bp::ScalarType::Float32 || t.dtype() == bp::ScalarType::Float64, op, ": ", name,
                  " must be float32 or float64 on cpu, got ", t.dtype(), "; convert with .to(float32)");
}

template <class F>
decltype(auto) visitFloat(bp::ScalarType t, F&& f) {
  if (t == bp::ScalarType::Float64) return f(double{});
  return f(float{});
}

// The offsets in the order a call runs them: for subm the centre first (it
// initialises the output), then the others in order.
std::vector<int64_t> offsetOrder(int64_t K, bool subm) {
  std::vector<int64_t> order;
  if (subm) order.push_back(K / 2);
  for (int64_t k = 0; k < K; ++k)
    if (!subm || k != K / 2) order.push_back(k);
  return order;
}

void copyRows(const int32_t* rows, int64_t n, const void* src, int64_t row_bytes, void* dst) {
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(static_cast<char*>(dst) + r * row_bytes, static_cast<const char*>(src) + rows[r] * row_bytes,
                static_cast<size_t>(row_bytes));
}

template <class T>
void addRows(const T* src, int64_t n, int64_t width, const int32_t* rows, T* dst) {
  for (int64_t r = 0; r < n; ++r) {
    T* d = dst + static_cast<int64_t>(rows[r]) * width;
    const T* s = src + r * width;
    for (int64_t c = 0; c < width; ++c) d[c] += s[c];
  }
}

// Note [Direct sparse convolution kernel]
// For small channel counts the products of one offset and tile are too
// small for sgemm (a few rows of 16 x 16: the call, gather and scatter cost
// more than the FMAs), so the float32 forward computes them directly, with
// no gather buffer and no scatter. Each task owns a tile of R output rows
// and runs the offsets in the call's order; for each, it takes the pairs
// whose output row is in the tile and adds features[in] @ W[k] into
// out[out], P pairs at a time: the P pairs share every load of a row of
// W[k] (which stays in L1 for the whole offset), the input features enter
// the FMAs as broadcast operands, and P x Cout / 16 accumulators (8 vectors
// of 16 floats) are as many independent FMA chains as the FMA units take.
// Finding a tile's pairs costs nothing when every offset lists its pairs in
// ascending output row, as get_indice_pairs builds them (Note [Rulebook
// order]): they are one range per offset, found by binary search. Any
// other rulebook (an inverse convolution's, or one built elsewhere) is
// first counting-sorted into (tile, offset) buckets (sortPairs).
// Each output row sums its offsets in offset order and each product over ci
// in order, whatever thread computes it, so results do not depend on the
// thread count. The build has no -march flags, so the kernels are compiled
// per instruction set (target_clones) and picked at load.
// Where the features and outputs outgrow the last-level cache (a batch of
// four scans: 16 MB of features and 15 MB of outputs at 32 channels), the
// rows arrive from memory at random: for Cout 32 and 64 each group of pairs
// first requests the rows of the group four ahead (prefetchRows): a group
// takes about as long as one row's trip from memory. Cout 16 does not: its
// groups are too short to pay for the requests, and its data fits the cache.
using Float16 = float __attribute__((vector_size(64)));

// The pairs of one (tile, offset): in[j] and out[j] for j < n.
struct PairRange {
  const int32_t* in;
  const int32_t* out;
  int64_t n;
};

// Adds features[in[p]] @ wk into out rows rows[p] for p < Pairs, or with
// Store stores it there (for a first offset that reaches every row).
template <int Pairs, int Blocks, bool Store>
[[gnu::always_inline]] inline void addProducts(const int32_t* in, const int32_t* rows, const float* feat, int64_t cin,
                                               const float* wk, float* out) {
  constexpr int64_t cout = 16 * Blocks;
  const float* x[Pairs];
#pragma GCC unroll 8
  for (int p = 0; p < Pairs; ++p) x[p] = feat + static_cast<int64_t>(in[p]) * cin;
  Float16 acc[Pairs][Blocks] = {};
  for (int64_t ci = 0; ci < cin; ++ci)
#pragma GCC unroll 4
    for (int b = 0; b < Blocks; ++b) {
      Float16 wv;
      std::memcpy(&wv, wk + ci * cout + 16 * b, sizeof wv);
#pragma GCC unroll 8
      for (int p = 0; p < Pairs; ++p) acc[p][b] += x[p][ci] * wv;
    }
#pragma GCC unroll 8
  for (int p = 0; p < Pairs; ++p) {
    float* y = out + static_cast<int64_t>(rows[p]) * cout;
#pragma GCC unroll 4
    for (int b = 0; b < Blocks; ++b) {
      Float16 yv = acc[p][b];
      if constexpr (!Store) {
        Float16 old;
        std::memcpy(&old, y + 16 * b, sizeof old);
        yv += old;
      }
      std::memcpy(y + 16 * b, &yv, sizeof yv);
    }
  }
}

// Asks for the input rows in[p] and output rows rows[p] (p < Pairs), every
// cache line of them, ahead of their use.
template <int Pairs, int Blocks>
[[gnu::always_inline]] inline void prefetchRows(const int32_t* in, const int32_t* rows, const float* feat, int64_t cin,
                                                float* out) {
  constexpr int64_t cout = 16 * Blocks;
#pragma GCC unroll 8
  for (int p = 0; p < Pairs; ++p) {
    const char* x = reinterpret_cast<const char*>(feat + static_cast<int64_t>(in[p]) * cin);
    for (int64_t b = 0; b < cin * static_cast<int64_t>(sizeof(float)); b += 64) __builtin_prefetch(x + b, 0, 3);
    const char* y = reinterpret_cast<const char*>(out + static_cast<int64_t>(rows[p]) * cout);
#pragma GCC unroll 4
    for (int b = 0; b < Blocks; ++b) __builtin_prefetch(y + 64 * b, 1, 3);
  }
}

// All pairs of `r`, Pairs at a time, the rest in halving groups.
template <int Pairs, int Blocks, bool Store>
[[gnu::always_inline]] inline void addRange(PairRange r, const float* feat, int64_t cin, const float* wk, float* out) {
  int64_t j = 0;
  for (; j + Pairs <= r.n; j += Pairs) {
    // The rows of the group four ahead, requested now (Note [Direct sparse
    // convolution kernel]). Not for Cout 16, whose groups are too short to
    // pay for the requests.
    if constexpr (Blocks >= 2) {
      if (j + 5 * Pairs <= r.n)
        prefetchRows<Pairs, Blocks>(r.in + j + 4 * Pairs, r.out + j + 4 * Pairs, feat, cin, out);
    }
    addProducts<Pairs, Blocks, Store>(r.in + j, r.out + j, feat, cin, wk, out);
  }
  if constexpr (Pairs > 1) {
    if (j < r.n) addRange<Pairs / 2, Blocks, Store>({r.in + j, r.out + j, r.n - j}, feat, cin, wk, out);
  }
}

// Pairs per group: 8 accumulator vectors in all.
#define BP_SPCONV_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
BP_SPCONV_MULTIVERSION void addRange16(PairRange r, const float* feat, int64_t cin, const float* wk, float* out,
                                       bool store) {
  store ? addRange<8, 1, true>(r, feat, cin, wk, out) : addRange<8, 1, false>(r, feat, cin, wk, out);
}
BP_SPCONV_MULTIVERSION void addRange32(PairRange r, const float* feat, int64_t cin, const float* wk, float* out,
                                       bool store) {
  store ? addRange<4, 2, true>(r, feat, cin, wk, out) : addRange<4, 2, false>(r, feat, cin, wk, out);
}
BP_SPCONV_MULTIVERSION void addRange64(PairRange r, const float* feat, int64_t cin, const float* wk, float* out,
                                       bool store) {
  store ? addRange<2, 4, true>(r, feat, cin, wk, out) : addRange<2, 4, false>(r, feat, cin, wk, out);
}
#undef BP_SPCONV_MULTIVERSION

// Whether the forward runs the direct kernel (Note [Direct sparse
// convolution kernel]): float32 with Cout 16, 32 or 64 and W[k] within 16
// KiB, so that it stays in L1 while its pairs stream through.
template <class T>
bool directKernel(int64_t cin, int64_t cout) {
  return std::is_same_v<T, float> && (cout == 16 || cout == 32 || cout == 64) && cin * cout <= 64 * 64;
}

// The rulebook's pairs counting-sorted into buckets (tile t, step s) =
// t * K + s for the offsets in `order`: bucket b is in[first[b] ..
// first[b + 1]) and out[...], pairs in rulebook order within a bucket. It
// runs on one thread: it is memory bound, and only rulebooks not in output
// order need it.
struct TileBuckets {
  const int64_t* first;
  const int32_t* in;
  const int32_t* out;
};
TileBuckets sortPairs(const Rulebook& rb, const std::vector<int64_t>& order, int64_t R, int64_t tiles) {
  const int64_t K = static_cast<int64_t>(order.size()), buckets = tiles * K;
  int64_t* first = threadScratch<int64_t, 0>(static_cast<size_t>(buckets + 1));
  int32_t* in = threadScratch<int32_t, 1>(static_cast<size_t>(2 * rb.totalCount()));
  int32_t* out = in + rb.totalCount();
  std::fill(first, first + buckets + 1, int64_t{0});
  for (int64_t step = 0; step < K; ++step) {
    const int32_t* o = rb.out(order[step]);
    for (int64_t j = 0, n = rb.count(order[step]); j < n; ++j) ++first[o[j] / R * K + step + 1];
  }
  for (int64_t b = 0; b < buckets; ++b) first[b + 1] += first[b];
  // Fill with first[b] as the cursor of bucket b, then shift it back.
  for (int64_t step = 0; step < K; ++step) {
    const int32_t *i = rb.in(order[step]), *o = rb.out(order[step]);
    for (int64_t j = 0, n = rb.count(order[step]); j < n; ++j) {
      const int64_t at = first[o[j] / R * K + step]++;
      in[at] = i[j];
      out[at] = o[j];
    }
  }
  for (int64_t b = buckets; b > 0; --b) first[b] = first[b - 1];
  first[0] = 0;
  return {first, in, out};
}

// The direct float32 forward (Note [Direct sparse convolution kernel]).
// With subm the first offset is the centre, which check() found to be the
// identity: it stores every row of the tile instead of adding to zeros.
void directForward(const Rulebook& rb, const ConvShape& s, const std::vector<int64_t>& order, bool subm, int64_t R,
                   int threads, const float* feat, const float* w, float* out) {
  const int64_t cin = s.cin, cout = s.cout, K = static_cast<int64_t>(order.size());
  const int64_t tiles = (s.num_out + R - 1) / R;
  const auto add = cout == 16 ? addRange16 : cout == 32 ? addRange32 : addRange64;
  const bool ranges = rb.outputsAscending();
  const TileBuckets sorted = ranges ? TileBuckets{} : sortPairs(rb, order, R, tiles);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t o0 = t * R, o1 = std::min(o0 + R, s.num_out);
    if (!subm) std::fill(out + o0 * cout, out + o1 * cout, 0.0f);
    for (int64_t step = 0; step < K; ++step) {
      const int64_t k = order[step];
      PairRange r;
      if (ranges) {
        const int32_t *begin = rb.out(k), *end = begin + rb.count(k);
        const int32_t* lo = std::lower_bound(begin, end, o0);
        const int64_t j = lo - begin;
        r = {rb.in(k) + j, lo, std::lower_bound(lo, end, o1) - lo};
      } else {
        const int64_t b = t * K + step;
        r = {sorted.in + sorted.first[b], sorted.out + sorted.first[b], sorted.first[b + 1] - sorted.first[b]};
      }
      if (r.n > 0) add(r, feat, cin, w + k * cin * cout, out, subm && step == 0);
    }
  }
}

// out[num_out, Cout] = sum over pairs of features[in] @ W[k], output
// stationary (Note [CPU gather-GEMM-scatter]).
template <class T>
void convForward(const Rulebook& rb, const ConvShape& s, const T* feat, const T* w, bool subm, T* out,
                 std::atomic<int>& status) {
  const int64_t cin = s.cin, cout = s.cout, R = taskRows(cin, cout), K = rb.kernelVolume();
  const int threads = threadsFor(rb.totalCount() * cin * cout);
  const std::vector<int64_t> order = offsetOrder(K, subm);
  if constexpr (std::is_same_v<T, float>) {
    if (directKernel<T>(cin, cout)) return directForward(rb, s, order, subm, R, threads, feat, w, out);
  }
  // source[o * K + k]: the input row output o takes at offset k, or -1.
  int32_t* source = threadScratch<int32_t, 2>(static_cast<size_t>(s.num_out * K));
#pragma omp parallel num_threads(threads)
  {
    singleThreadedGemm();
    T* a = threadScratch<T, 3>(static_cast<size_t>(R * (cin + cout)));
    T* c = a + R * cin;
    int32_t* in_rows = threadScratch<int32_t, 4>(static_cast<size_t>(2 * R));
    int32_t* out_rows = in_rows + R;
#pragma omp for schedule(static)
    for (int64_t o = 0; o < s.num_out; ++o) std::fill(&source[o * K], &source[o * K] + K, -1);
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < rb.count(k); ++j) source[rb.out(k)[j] * K + k] = rb.in(k)[j];
#pragma omp for schedule(dynamic, 1)
    for (int64_t o0 = 0; o0 < s.num_out; o0 += R) {
      const int64_t tile = std::min(R, s.num_out - o0);
      T* y = out + o0 * cout;
      if (!subm) std::fill(y, y + tile * cout, T(0));
      for (size_t step = 0; step < order.size(); ++step) {
        const int64_t k = order[step];
        const T* wk = w + k * cin * cout;
        if (subm && step == 0) {  // the identity: straight from the features, initialising the tile
          gemm(false, false, tile, cout, cin, feat + o0 * cin, cin, wk, cout, T(0), y, cout, status);
          continue;
        }
        int64_t m = 0;
        for (int64_t r = 0; r < tile; ++r) {
          const int32_t i = source[(o0 + r) * K + k];
          if (i < 0) continue;
          in_rows[m] = i;
          out_rows[m++] = static_cast<int32_t>(r);
        }
        if (m == 0) continue;
        copyRows(in_rows, m, feat, cin * static_cast<int64_t>(sizeof(T)), a);
        gemm(false, false, m, cout, cin, a, cin, wk, cout, T(0), c, cout, status);
        addRows(c, m, cout, out_rows, y);
      }
    }
  }
}

// input_grad[N, Cin] = sum over pairs of out_grad[out] @ W[k]^T, and
// filters_grad[k] = sum over pairs of features[in]^T out_grad[out].
template <class T>
void convBackward(const Rulebook& rb, const ConvShape& s, const T* feat, const T* w, const T* grad, bool subm,
                  T* input_grad, T* filters_grad, std::atomic<int>& status) {
  const int64_t cin = s.cin, cout = s.cout, R = taskRows(cin, cout), wsize = cin * cout;
  const int threads = threadsFor(rb.totalCount() * wsize);
  const int64_t per_thread = R * (2 * cin + cout);
  std::vector<T> workspace(static_cast<size_t>(threads * per_thread));
  const int64_t max_tasks = (rb.maxCount() + R - 1) / R;
  std::vector<T> partials(static_cast<size_t>(max_tasks * wsize));
  const std::vector<int64_t> order = offsetOrder(rb.kernelVolume(), subm);
#pragma omp parallel num_threads(threads)
  {
    singleThreadedGemm();
    T* a = workspace.data() + omp_get_thread_num() * per_thread;  // gathered features [R, Cin]
    T* g = a + R * cin;                                           // gathered out_grad [R, Cout]
    T* d = g + R * cout;                                          // their input gradient [R, Cin]
    if (!subm) {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < s.num_in; ++r) std::fill(input_grad + r * cin, input_grad + (r + 1) * cin, T(0));
    }
    for (size_t step = 0; step < order.size(); ++step) {
      const int64_t k = order[step], n = rb.count(k);
      const T* wk = w + k * wsize;
      T* fk = filters_grad + k * wsize;
      if (n == 0) {
#pragma omp single
        std::fill(fk, fk + wsize, T(0));
        continue;
      }
      const bool identity = subm && step == 0;
#pragma omp for schedule(static)
      for (int64_t t0 = 0; t0 < n; t0 += R) {
        const int64_t m = std::min(R, n - t0);
        T* partial = partials.data() + (t0 / R) * wsize;
        if (identity) {
          gemm(false, true, m, cin, cout, grad + t0 * cout, cout, wk, cout, T(0), input_grad + t0 * cin, cin, status);
          gemm(true, false, cin, cout, m, feat + t0 * cin, cin, grad + t0 * cout, cout, T(0), partial, cout, status);
          continue;
        }
        copyRows(rb.in(k) + t0, m, feat, cin * static_cast<int64_t>(sizeof(T)), a);
        copyRows(rb.out(k) + t0, m, grad, cout * static_cast<int64_t>(sizeof(T)), g);
        gemm(false, true, m, cin, cout, g, cout, wk, cout, T(0), d, cin, status);
        addRows(d, m, cin, rb.in(k) + t0, input_grad);
        gemm(true, false, cin, cout, m, a, cin, g, cout, T(0), partial, cout, status);
      }
      const int64_t tasks = (n + R - 1) / R;
#pragma omp for schedule(static)
      for (int64_t e = 0; e < wsize; ++e) {
        T sum = 0;
        for (int64_t t = 0; t < tasks; ++t) sum += partials[t * wsize + e];
        fk[e] = sum;
      }
    }
  }
}

bp::Tensor indice_conv(const bp::Tensor& features, const bp::Tensor& filters, const bp::Tensor& indice_pairs,
                       const bp::Tensor& indice_pair_num, int64_t num_out, bool inverse, bool subm) {
  constexpr const char* op = "spconv::indice_conv";
  const ConvShape s = checkConv(op, features, filters, indice_pairs, indice_pair_num, num_out, subm);
  checkCpuFloat(op, features, "features");
  Rulebook rb(op, indice_pairs, indice_pair_num, s.rulebook.capacity, inverse);
  rb.check(op, s.num_in, s.num_out, subm);
  bp::Tensor out = bp::Tensor::empty({s.num_out, s.cout}, features.dtype(), kCpuDevice);
  if (out.numel() == 0) return out;
  const bp::Tensor feat = contiguous(features), w = contiguous(filters);
  std::atomic<int> status{0};
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    convForward<T>(rb, s, feat.data_ptr<const T>(), w.data_ptr<const T>(), subm, out.data_ptr<T>(), status);
  });
  throwIfGemmFailed(op, status);
  return out;
}

std::tuple<bp::Tensor, bp::Tensor> indice_conv_backward(const bp::Tensor& features, const bp::Tensor& filters,
                                                        const bp::Tensor& out_grad, const bp::Tensor& indice_pairs,
                                                        const bp::Tensor& indice_pair_num, bool inverse, bool subm) {
  constexpr const char* op = "spconv::indice_conv_backward";
  BP_PLUGIN_CHECK(out_grad.defined() && out_grad.dim() == 2, op, ": out_grad must have shape [num_out, Cout]");
  const ConvShape s = checkConv(op, features, filters, indice_pairs, indice_pair_num, out_grad.size(0), subm);
  checkCpuFloat(op, features, "features");
  BP_PLUGIN_CHECK(out_grad.size(1) == s.cout && out_grad.dtype() == features.dtype(), op, ": out_grad must be ",
                  features.dtype(), " [num_out, ", s.cout, "] (Cout of the filters), got ", out_grad.dtype(), " ",
                  out_grad.sizes());
  checkCpuFloat(op, out_grad, "out_grad");
  Rulebook rb(op, indice_pairs, indice_pair_num, s.rulebook.capacity, inverse);
  rb.check(op, s.num_in, s.num_out, subm);
  bp::Tensor input_grad = bp::Tensor::empty({s.num_in, s.cin}, features.dtype(), kCpuDevice);
  bp::Tensor filters_grad = bp::Tensor::empty(filters.sizes(), filters.dtype(), kCpuDevice);
  const bp::Tensor feat = contiguous(features), w = contiguous(filters), grad = contiguous(out_grad);
  std::atomic<int> status{0};
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* ig = s.num_in * s.cin == 0 ? nullptr : input_grad.data_ptr<T>();
    T* fg = filters_grad.numel() == 0 ? nullptr : filters_grad.data_ptr<T>();
    if (fg == nullptr) {  // Cin or Cout is 0: no products; input_grad is all zero
      std::fill(ig, ig + s.num_in * s.cin, T(0));
      return;
    }
    convBackward<T>(rb, s, feat.data_ptr<const T>(), w.data_ptr<const T>(), grad.data_ptr<const T>(), subm, ig, fg,
                    status);
  });
  throwIfGemmFailed(op, status);
  return {std::move(input_grad), std::move(filters_grad)};
}

// Note [Sparse max pooling]
// out[o, c] = the maximum of features[i, c] over the pairs (i, o); a row no
// pair reaches is 0. (spconv 1.x starts from 0 and so clamps negative
// maxima to 0; this is the true maximum.) NaN propagates. The backward
// routes out_grad[o, c] to ONE input per (o, c): the first pair, in offset
// order, whose value equals the maximum, as a dense max pool routes it to
// one argmax; ties (e.g. zeros after a ReLU) do not multiply the gradient.
template <class T>
bool takesOver(T candidate, T current) {
  return candidate > current || (std::isnan(candidate) && !std::isnan(current));
}
template <class T>
bool isMax(T value, T max) {
  return value == max || (std::isnan(value) && std::isnan(max));
}

void checkPoolFeatures(const char* op, const bp::Tensor& t, const char* name, int64_t channels) {
  BP_PLUGIN_CHECK(t.defined() && t.dim() == 2, op, ": ", name, " must have shape [rows, C]");
  checkCpuFloat(op, t, name);
  BP_PLUGIN_CHECK(channels < 0 || t.size(1) == channels, op, ": ", name, " has ", t.size(1), " channels, expected ",
                  channels);
}

bp::Tensor indice_maxpool(const bp::Tensor& features, const bp::Tensor& indice_pairs, const bp::Tensor& indice_pair_num,
                          int64_t num_out) {
  constexpr const char* op = "spconv::indice_maxpool";
  checkPoolFeatures(op, features, "features", -1);
  BP_PLUGIN_CHECK(num_out >= 0, op, ": num_out must be >= 0, got ", num_out);
  const RulebookShape shape = checkRulebook(op, indice_pairs, indice_pair_num, -1);
  Rulebook rb(op, indice_pairs, indice_pair_num, shape.capacity, false);
  const int64_t C = features.size(1), n_in = features.size(0);
  rb.check(op, n_in, num_out, false);
  bp::Tensor out = bp::Tensor::empty({num_out, C}, features.dtype(), kCpuDevice);
  if (out.numel() == 0) return out;
  const bp::Tensor feat = contiguous(features);
  std::vector<uint8_t> reached(static_cast<size_t>(num_out), 0);
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = feat.data_ptr<const T>();
    T* y = out.data_ptr<T>();
#pragma omp parallel num_threads(threadsFor(rb.totalCount() * C))
    for (int64_t k = 0; k < rb.kernelVolume(); ++k) {
      const int32_t *ri = rb.in(k), *ro = rb.out(k);
#pragma omp for schedule(static)
      for (int64_t j = 0; j < rb.count(k); ++j) {
        const T* src = x + static_cast<int64_t>(ri[j]) * C;
        T* dst = y + static_cast<int64_t>(ro[j]) * C;
        if (!reached[ro[j]]) {
          std::memcpy(dst, src, static_cast<size_t>(C) * sizeof(T));
          reached[ro[j]] = 1;
          continue;
        }
        for (int64_t c = 0; c < C; ++c)
          if (takesOver(src[c], dst[c])) dst[c] = src[c];
      }
    }
    for (int64_t o = 0; o < num_out; ++o)
      if (!reached[o]) std::fill(y + o * C, y + (o + 1) * C, T(0));
  });
  return out;
}

bp::Tensor indice_maxpool_backward(const bp::Tensor& features, const bp::Tensor& out_features,
                                   const bp::Tensor& out_grad, const bp::Tensor& indice_pairs,
                                   const bp::Tensor& indice_pair_num) {
  constexpr const char* op = "spconv::indice_maxpool_backward";
  checkPoolFeatures(op, features, "features", -1);
  const int64_t C = features.size(1), n_in = features.size(0);
  checkPoolFeatures(op, out_features, "out_features", C);
  checkPoolFeatures(op, out_grad, "out_grad", C);
  BP_PLUGIN_CHECK(out_grad.size(0) == out_features.size(0) && out_grad.dtype() == features.dtype() &&
                      out_features.dtype() == features.dtype(),
                  op, ": out_grad ", out_grad.dtype(), " ", out_grad.sizes(), " must match out_features ",
                  out_features.dtype(), " ", out_features.sizes(), " and features' dtype ", features.dtype());
  const int64_t num_out = out_features.size(0);
  const RulebookShape shape = checkRulebook(op, indice_pairs, indice_pair_num, -1);
  Rulebook rb(op, indice_pairs, indice_pair_num, shape.capacity, false);
  rb.check(op, n_in, num_out, false);
  bp::Tensor input_grad = bp::Tensor::empty({n_in, C}, features.dtype(), kCpuDevice);
  if (input_grad.numel() == 0) return input_grad;
  const bp::Tensor x_t = contiguous(features), y_t = contiguous(out_features), g_t = contiguous(out_grad);
  // routed[o * C + c]: out_grad[o, c] has gone to its input (Note [Sparse max pooling]).
  std::vector<uint8_t> routed(static_cast<size_t>(num_out * C), 0);
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *x = x_t.data_ptr<const T>(), *y = y_t.data_ptr<const T>(), *g = g_t.data_ptr<const T>();
    T* dx = input_grad.data_ptr<T>();
#pragma omp parallel num_threads(threadsFor(rb.totalCount() * C))
    {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n_in; ++i) std::fill(dx + i * C, dx + (i + 1) * C, T(0));
      for (int64_t k = 0; k < rb.kernelVolume(); ++k) {
        const int32_t *ri = rb.in(k), *ro = rb.out(k);
#pragma omp for schedule(static)
        for (int64_t j = 0; j < rb.count(k); ++j) {
          const int64_t i = ri[j], o = ro[j];
          for (int64_t c = 0; c < C; ++c) {
            uint8_t& done = routed[o * C + c];
            if (!done && isMax(x[i * C + c], y[o * C + c])) {
              dx[i * C + c] += g[o * C + c];
              done = 1;
            }
          }
        }
      }
    }
  });
  return input_grad;
}

}  // namespace

void registerCpuKernels(bp::Library& m) {
  m.impl("spconv::get_indice_pairs", kCpu, bp::kernel<&getIndicePairsCpu>());
  m.impl("spconv::indice_conv", kCpu, bp::kernel<&indice_conv>());
  m.impl("spconv::indice_conv_backward", kCpu, bp::kernel<&indice_conv_backward>());
  m.impl("spconv::indice_maxpool", kCpu, bp::kernel<&indice_maxpool>());
  m.impl("spconv::indice_maxpool_backward", kCpu, bp::kernel<&indice_maxpool_backward>());
}

}  // namespace bp_spconv
