// spconv::get_indice_pairs on the CPU: checks the active sites, then builds
// the rulebook with an open-addressing hash table of linearised coordinates.
//
// Note [Rulebook]
// A sparse tensor is features [N, C] plus indices int32 [N, 4] = (batch, z,
// y, x) inside spatial_shape [D, H, W]. Kernel offset k = (kz * kH + ky) *
// kW + kx pairs input site i with output site o when, per dimension,
//   i = o * stride - padding + kk * dilation.
// Regular convolution: an output site is active iff some active input
// reaches it; the output spatial shape is (in + 2 * padding - dilation *
// (kernel - 1) - 1) / stride + 1 per dimension. Output rows are sorted by
// their linearised key ((b * D + z) * H + y) * W + x, so out_indices are the
// same whatever the input order or thread count.
// Submanifold convolution: the outputs are the inputs, in the same order;
// the kernel is centred on each site (padding is not used: the effective
// padding is dilation * (kernel - 1) / 2), so kernel sizes must be odd and
// stride 1. The centre offset pairs every site with itself.
// Inverse convolution uses the rulebook of the forward strided convolution
// with the roles of its rows swapped (indice_conv(..., inverse=True)).
//
// indice_pairs is int32 [K, 2, N]: row 0 the input row, row 1 the output
// row, the first indice_pair_num[k] entries used, the rest -1. Within an
// offset the pairs are in ascending order of the output row (Note [Rulebook
// order]), and no input or output row appears twice.
//
// Note [Coordinate keys]
// Keys are 32-bit while batch_size x volume < 2^31 (half the table memory,
// faster probing) and 64-bit beyond, where a 32-bit key would wrap and merge
// distinct sites. The hash table is open addressing with linear probing, at
// most half full, keyed by the linearised coordinate; the all-ones key marks
// an empty slot (it is never a valid key: every key is below 2^62).
//
// Note [Parallel rulebook building]
// Every stage runs on threadsFor(work) threads and gives the same bytes
// for any thread count (BACKPLANE_NUM_THREADS), errors included:
// - Checking the sites: each row's batch and coordinates are checked in
//   parallel, keeping the lowest failing row, and the valid rows' keys go
//   into the table of inputs concurrently (CoordinateTable::insertFirst: a
//   compare-and-swap claims an empty slot for a key, and the slot's row is
//   lowered to the smallest row inserted with that key), so whatever order
//   the threads run in, every key ends up with its first row, as a serial
//   walk would leave it. The claims are counted: one per valid row means no
//   duplicates; else a second pass finds the lowest row whose key's first
//   row is another one. The error reported is the one of the lowest row
//   that fails any check, with the text a serial walk gives (the duplicate
//   names the key's first row and the row that repeats it).
// - Output sites of a regular convolution: the threads insert the keys of
//   the output sites their input rows reach into one table, sized for the
//   number of (row, offset) candidates counted first, so it is at most
//   half full and never grows while threads insert. Each thread keeps the
//   keys it claimed; each thread sorts its own, the sorted lists are merged
//   and the rows numbered in key order. The table's slots depend on the
//   threads' timing; the set of keys in it, and so the numbering, do not.
// - Neighbours (one writer per entry, see below) and pairs (tasks of a
//   fixed number of rows, counted, then written at offsets from a prefix
//   sum) as before.
// The scratch (tables, the neighbour map) is taken as tensors, so it comes
// from the CPU allocator's cache of large blocks (Note [CPU caching
// allocator] in core/src/cpu_device.cc) instead of fresh pages each call.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <limits>
#include <optional>
#include <string>

#include "spconv.h"

namespace bp_spconv {

namespace {

constexpr const char* kOp = kGetIndicePairs;
// Rows handled as one unit of parallel work when filling pairs; fixed, so the
// result does not depend on the thread count.
constexpr int64_t kRowsPerTask = 2048;

// Storage of `n` elements of trivial type T taken from the CPU allocator as
// a tensor (so reused blocks come from its cache); not initialised.
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : holder_(bp::Tensor::empty({static_cast<int64_t>(sizeof(T)) * std::max<int64_t>(n, 1)}, bp::ScalarType::UInt8,
                                  kCpuDevice)),
        data_(static_cast<T*>(holder_.data_ptr())) {}
  T* data() const { return data_; }
  T& operator[](int64_t i) const { return data_[i]; }

 private:
  bp::Tensor holder_;
  T* data_;
};

// value[i] = v for i in [0, n), on `threads` threads.
template <class T>
void parallelFill(T* data, int64_t n, T v, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < threads; ++c) std::fill(data + n * c / threads, data + n * (c + 1) / threads, v);
}

// Open addressing with linear probing (Note [Coordinate keys]), sized once
// for at most `most` keys and never grown, so threads may insert
// concurrently (Note [Parallel rulebook building]); find() and assign()
// run after the inserting threads have joined.
template <class Key>
class CoordinateTable {
 public:
  static constexpr Key kEmpty = ~Key{0};

  CoordinateTable(int64_t most, int threads) : slots_(static_cast<int64_t>(capacityFor(most))) {
    const size_t cap = capacityFor(most);
    mask_ = cap - 1;
    shift_ = 64 - (__builtin_ctzll(cap) - kRunLog2);
    parallelFill(slots_.data(), static_cast<int64_t>(cap), Entry{kEmpty, INT32_MAX}, threads);
  }

  // The row stored under `key`, or -1.
  int32_t find(Key key) const {
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask_) {
      const Entry& e = slots_[static_cast<int64_t>(s)];
      if (e.key == key) return e.value;
      if (e.key == kEmpty) return -1;
    }
  }
  // Stores key -> row, keeping the smallest row inserted under the key;
  // true when this call claimed the key's slot (the key was absent). Safe
  // against concurrent insertFirst calls; the table must hold at most
  // `most` keys.
  bool insertFirst(Key key, int32_t row) {
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask_) {
      Entry& e = slots_[static_cast<int64_t>(s)];
      std::atomic_ref<Key> slot_key(e.key);
      Key seen = slot_key.load(std::memory_order_relaxed);
      bool claimed = false;
      if (seen == kEmpty) claimed = slot_key.compare_exchange_strong(seen, key, std::memory_order_relaxed);
      if (!claimed && seen != key) continue;  // another key holds the slot
      std::atomic_ref<int32_t> value(e.value);
      int32_t v = value.load(std::memory_order_relaxed);
      while (row < v && !value.compare_exchange_weak(v, row, std::memory_order_relaxed)) {
      }
      return claimed;
    }
  }
  // Replaces the value of a key that is present (distinct keys may be
  // assigned concurrently).
  void assign(Key key, int32_t value) {
    uint64_t s = slotOf(key);
    while (slots_[static_cast<int64_t>(s)].key != key) s = (s + 1) & mask_;
    slots_[static_cast<int64_t>(s)].value = value;
  }

 private:
  struct Entry {
    Key key;
    int32_t value;
  };
  static size_t capacityFor(int64_t n) {
    size_t cap = 16;
    while (cap < 2 * static_cast<size_t>(std::max<int64_t>(n, 1))) cap *= 2;
    return cap;
  }
  // Fibonacci hashing of key / 8: the top bits of (key / 8) * 2^64 / phi
  // spread runs of 8 consecutive keys over the table, and a run's keys take
  // the 8 slots of one 64-byte line (for 32-bit keys), so the lookups of a
  // site's x-neighbours mostly hit one cache line.
  uint64_t slotOf(Key key) const {
    const uint64_t k = static_cast<uint64_t>(key);
    return (((k >> kRunLog2) * 0x9E3779B97F4A7C15ull) >> shift_) << kRunLog2 | (k & ((1u << kRunLog2) - 1));
  }
  static constexpr int kRunLog2 = 3;

  Scratch<Entry> slots_;
  uint64_t mask_ = 0;
  int shift_ = 0;
};

// Where the input rows sit, read through the tensor's strides.
struct SiteReader {
  const int32_t* data;
  int64_t row_stride, col_stride;
  int32_t at(int64_t row, int col) const { return data[row * row_stride + col * col_stride]; }
};

template <class Key>
Key linearKey(int64_t b, int64_t z, int64_t y, int64_t x, const std::array<int64_t, 3>& shape) {
  return static_cast<Key>(((b * shape[0] + z) * shape[1] + y) * shape[2] + x);
}

// Note [Rulebook order]
// Within each offset, get_indice_pairs lists the pairs in ascending output
// row. The CPU forward relies on it to find a tile of output rows' pairs
// without sorting them (Note [Direct sparse convolution kernel]); a
// rulebook in another order is still correct, only slower.
//
// Fills indice_pairs and indice_pair_num from nbr[r * K + k], the input row
// that output row r takes at offset k, or -1: pair (nbr[r * K + k], r), in
// ascending r within an offset.
void fillPairs(const int32_t* nbr, int64_t rows, int64_t K, int32_t* pairs, int64_t capacity, int32_t* counts) {
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  // start[t * K + k]: where task t's pairs of offset k begin.
  std::vector<int64_t> start(static_cast<size_t>(tasks * K), 0);
  const int threads = threadsFor(rows * K);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t end = std::min(rows, (t + 1) * kRowsPerTask);
    for (int64_t r = t * kRowsPerTask; r < end; ++r)
      for (int64_t k = 0; k < K; ++k) start[t * K + k] += nbr[r * K + k] >= 0;
  }
  for (int64_t k = 0; k < K; ++k) {
    int64_t total = 0;
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n = start[t * K + k];
      start[t * K + k] = total;
      total += n;
    }
    counts[k] = static_cast<int32_t>(total);
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t end = std::min(rows, (t + 1) * kRowsPerTask);
    int64_t* pos = &start[t * K];
    for (int64_t r = t * kRowsPerTask; r < end; ++r) {
      for (int64_t k = 0; k < K; ++k) {
        const int32_t partner = nbr[r * K + k];
        if (partner < 0) continue;
        int32_t* kp = pairs + k * 2 * capacity;
        kp[pos[k]] = partner;
        kp[capacity + pos[k]] = static_cast<int32_t>(r);
        ++pos[k];
      }
    }
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < K; ++k) {
    int32_t* kp = pairs + k * 2 * capacity;
    std::fill(kp + counts[k], kp + capacity, -1);
    std::fill(kp + capacity + counts[k], kp + 2 * capacity, -1);
  }
}

// The kernel offsets as (kz, ky, kx), k = (kz * kH + ky) * kW + kx.
std::vector<std::array<int64_t, 3>> kernelOffsets(const ConvGeometry& g) {
  std::vector<std::array<int64_t, 3>> offs;
  offs.reserve(static_cast<size_t>(g.kernelVolume()));
  for (int64_t kz = 0; kz < g.kernel[0]; ++kz)
    for (int64_t ky = 0; ky < g.kernel[1]; ++ky)
      for (int64_t kx = 0; kx < g.kernel[2]; ++kx) offs.push_back({kz, ky, kx});
  return offs;
}

// Sorts `lists` (one per thread, each sorted in parallel) into one ascending list.
template <class Key>
std::vector<Key> mergeSorted(std::vector<std::vector<Key>>& lists, int threads) {
  const int64_t parts = static_cast<int64_t>(lists.size());
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t p = 0; p < parts; ++p) std::sort(lists[p].begin(), lists[p].end());
  std::vector<int64_t> begin(static_cast<size_t>(parts + 1), 0);
  for (int64_t p = 0; p < parts; ++p) begin[p + 1] = begin[p] + static_cast<int64_t>(lists[p].size());
  std::vector<Key> keys(static_cast<size_t>(begin[parts]));
  for (int64_t p = 0; p < parts; ++p) std::copy(lists[p].begin(), lists[p].end(), keys.begin() + begin[p]);
  // Pairwise merges of neighbouring runs, doubling the run count each round.
  for (int64_t width = 1; width < parts; width *= 2) {
    const int64_t merges = (parts + 2 * width - 1) / (2 * width);
    const int merge_threads = static_cast<int>(std::min<int64_t>(threads, merges));
#pragma omp parallel for num_threads(merge_threads) schedule(static, 1)
    for (int64_t m = 0; m < merges; ++m) {
      const int64_t a = m * 2 * width, b = std::min(parts, a + width), c = std::min(parts, a + 2 * width);
      std::inplace_merge(keys.begin() + begin[a], keys.begin() + begin[b], keys.begin() + begin[c]);
    }
  }
  return keys;
}

template <class Key>
class RulebookBuilder {
 public:
  RulebookBuilder(const ConvGeometry& g, const SiteReader& sites, int64_t n)
      : g_(g), sites_(sites), n_(n), K_(g.kernelVolume()), offsets_(kernelOffsets(g)), threads_(threadsFor(n * 16)) {}

  // Checks every row (range, batch, duplicates) and fills the table of
  // input sites; the error names the first offending row (Note [Parallel
  // rulebook building]).
  void checkSites() {
    if (sitesInKeyOrder()) return;  // Note [Sites in key order]
    inputs_.emplace(n_, threads_);
    int64_t first_bad = n_, valid = 0, claims = 0;
#pragma omp parallel for num_threads(threads_) schedule(static, kRowsPerTask) reduction(min : first_bad) \
    reduction(+ : valid, claims)
    for (int64_t i = 0; i < n_; ++i) {
      if (!inRange(i)) {
        first_bad = std::min(first_bad, i);
        continue;
      }
      ++valid;
      claims += inputs_->insertFirst(inKey(i), static_cast<int32_t>(i));
    }
    if (claims < valid) {
      // Every row below first_bad is valid, so in the table: a row whose key
      // has another first row repeats it.
      int64_t first_repeat = first_bad;
#pragma omp parallel for num_threads(threads_) schedule(static, kRowsPerTask) reduction(min : first_repeat)
      for (int64_t i = 0; i < first_bad; ++i)
        if (inputs_->find(inKey(i)) != i) first_repeat = std::min(first_repeat, i);
      if (first_repeat < first_bad) {
        const int64_t i = first_repeat;
        failDuplicateSite(inputs_->find(inKey(i)), i, siteAt(i));
      }
    }
    if (first_bad < n_) throwRangeError(first_bad);
  }

  std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> build() {
    std::optional<Scratch<int32_t>> nbr;  // Note [Rulebook order]
    bp::Tensor out_indices;
    if (g_.subm) {
      out_indices = copyOfIndices();
      nbr.emplace(n_ * K_);
      submanifoldNeighbours(nbr->data());
    } else {
      out_indices = regularNeighbours(nbr);
    }
    // No offset pairs an input with two outputs, so n_ pairs per offset hold them all.
    bp::Tensor pairs = bp::Tensor::empty({K_, 2, n_}, bp::ScalarType::Int32, kCpuDevice);
    bp::Tensor counts = bp::Tensor::empty({K_}, bp::ScalarType::Int32, kCpuDevice);
    fillPairs(nbr->data(), out_indices.size(0), K_, pairs.data_ptr<int32_t>(), n_, counts.data_ptr<int32_t>());
    return {std::move(out_indices), std::move(pairs), std::move(counts)};
  }

 private:
  Key inKey(int64_t i) const {
    return linearKey<Key>(sites_.at(i, 0), sites_.at(i, 1), sites_.at(i, 2), sites_.at(i, 3), g_.in_shape);
  }

  Site siteAt(int64_t i) const { return {sites_.at(i, 0), sites_.at(i, 1), sites_.at(i, 2), sites_.at(i, 3)}; }
  bool inRange(int64_t i) const { return siteInside(g_, siteAt(i)); }
  // Throws the error for row i, one that inRange() refuses.
  [[noreturn]] void throwRangeError(int64_t i) const { failSiteOutside(g_, i, siteAt(i)); }

  bp::Tensor copyOfIndices() const {
    bp::Tensor out = bp::Tensor::empty({n_, 4}, bp::ScalarType::Int32, kCpuDevice);
    int32_t* o = out.data_ptr<int32_t>();
#pragma omp parallel for num_threads(threads_) schedule(static, kRowsPerTask)
    for (int64_t i = 0; i < n_; ++i)
      for (int c = 0; c < 4; ++c) o[i * 4 + c] = sites_.at(i, c);
    return out;
  }

  // Note [Sites in key order]
  // Scans voxelised in (batch, z, y, x) order, and every regular
  // convolution's output sites, list their rows in ascending key. Such
  // rows need no table: no key can repeat, and a submanifold rulebook finds
  // each row's neighbour at offset k by walking one cursor per offset
  // through the sorted keys (the neighbour's key is the row's plus a fixed
  // delta, so the targets ascend with the row) instead of hashing each
  // (row, offset): sequential reads, no table to fill. True, with the keys
  // kept, when every row is in range and the keys strictly ascend; any
  // other input takes the table, whose checks give the errors.
  bool sitesInKeyOrder() {
    if (n_ == 0) return false;
    std::vector<Key> keys(static_cast<size_t>(n_));
    int64_t bad = 0;
#pragma omp parallel for num_threads(threads_) schedule(static, kRowsPerTask) reduction(+ : bad)
    for (int64_t i = 0; i < n_; ++i) {
      if (!inRange(i)) {
        ++bad;
        continue;
      }
      keys[static_cast<size_t>(i)] = inKey(i);
    }
    if (bad > 0) return false;
#pragma omp parallel for num_threads(threads_) schedule(static, kRowsPerTask) reduction(+ : bad)
    for (int64_t i = 1; i < n_; ++i) bad += !(keys[static_cast<size_t>(i - 1)] < keys[static_cast<size_t>(i)]);
    if (bad > 0) return false;
    sorted_keys_ = std::move(keys);
    return true;
  }

  // submanifoldNeighbours() for rows in key order (Note [Sites in key
  // order]): per task of rows and per offset of the first half, one cursor
  // that only moves forward.
  void sortedSubmanifoldNeighbours(int32_t* nbr, const std::array<int64_t, 3>& half, int threads) const {
    const Key* keys = sorted_keys_.data();
    const std::array<int64_t, 3>& shape = g_.in_shape;
    const int64_t tasks = (n_ + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o0 = t * kRowsPerTask, o1 = std::min(n_, o0 + kRowsPerTask);
      for (int64_t k = 0; k < K_ / 2; ++k) {
        std::array<int64_t, 3> step;
        for (int d = 0; d < 3; ++d) step[d] = (offsets_[k][d] - half[d]) * g_.dilation[d];
        const int64_t delta = (step[0] * shape[1] + step[1]) * shape[2] + step[2];
        const uint64_t first = static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(keys[o0]) + delta));
        int64_t cur = first > static_cast<uint64_t>(std::numeric_limits<Key>::max())
                          ? n_
                          : std::lower_bound(keys, keys + n_, static_cast<Key>(first)) - keys;
        for (int64_t o = o0; o < o1; ++o) {
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            const int64_t p = sites_.at(o, d + 1) + step[d];
            inside = inside && p >= 0 && p < shape[d];
          }
          if (!inside) continue;
          const Key target = static_cast<Key>(static_cast<int64_t>(keys[o]) + delta);
          while (cur < n_ && keys[cur] < target) ++cur;
          if (cur == n_) break;  // the targets only grow
          if (keys[cur] != target) continue;
          nbr[o * K_ + k] = static_cast<int32_t>(cur);
          nbr[cur * K_ + (K_ - 1 - k)] = static_cast<int32_t>(o);
        }
      }
      for (int64_t o = o0; o < o1; ++o) nbr[o * K_ + K_ / 2] = static_cast<int32_t>(o);
    }
  }

  // nbr[o * K + k] = the input row at offset k around site o, or -1. The
  // kernel is centred (odd sizes), so offsets k and K - 1 - k are opposite:
  // when site j is at offset k of site o, o is at offset K - 1 - k of j.
  // Each site looks up only the first half of the offsets and fills both
  // entries of what it finds, which halves the hash lookups; every entry
  // has exactly one writer, so the threads never write the same one. The
  // centre is the site itself.
  void submanifoldNeighbours(int32_t* nbr) const {
    std::array<int64_t, 3> half;
    for (int d = 0; d < 3; ++d) half[d] = (g_.kernel[d] - 1) / 2;
    const int threads = threadsFor(n_ * K_);
    parallelFill(nbr, n_ * K_, int32_t{-1}, threads);
    if (!sorted_keys_.empty()) return sortedSubmanifoldNeighbours(nbr, half, threads);
#pragma omp parallel for num_threads(threads) schedule(static, kRowsPerTask)
    for (int64_t o = 0; o < n_; ++o) {
      const int64_t b = sites_.at(o, 0);
      const std::array<int64_t, 3> c{sites_.at(o, 1), sites_.at(o, 2), sites_.at(o, 3)};
      for (int64_t k = 0; k < K_ / 2; ++k) {
        std::array<int64_t, 3> p;
        bool inside = true;
        for (int d = 0; d < 3; ++d) {
          p[d] = c[d] + (offsets_[k][d] - half[d]) * g_.dilation[d];
          inside = inside && p[d] >= 0 && p[d] < g_.in_shape[d];
        }
        if (!inside) continue;
        const int32_t j = inputs_->find(linearKey<Key>(b, p[0], p[1], p[2], g_.in_shape));
        if (j < 0) continue;
        nbr[o * K_ + k] = j;
        nbr[j * K_ + (K_ - 1 - k)] = static_cast<int32_t>(o);
      }
      nbr[o * K_ + K_ / 2] = static_cast<int32_t>(o);
    }
  }

  // The kernel positions along dimension d at which coordinate c reaches
  // an output site (c + padding - kk * dilation = o * stride, 0 <= o < out),
  // with those output coordinates.
  struct AxisReach {
    int count = 0;
    std::array<int32_t, 64> kk;  // kernel sizes are at most 64 (checkGeometry)
    std::array<int64_t, 64> out;
  };
  void reach(int d, int64_t c, AxisReach& r) const {
    r.count = 0;
    for (int64_t kk = 0; kk < g_.kernel[d]; ++kk) {
      const int64_t t = c + g_.padding[d] - kk * g_.dilation[d];
      if (t < 0) break;  // t falls as kk grows
      if (t % g_.stride[d] != 0) continue;
      const int64_t o = t / g_.stride[d];
      if (o >= g_.out_shape[d]) continue;
      r.kk[r.count] = static_cast<int32_t>(kk);
      r.out[r.count] = o;
      ++r.count;
    }
  }
  // The number of (offset, output site) pairs input row i takes part in.
  int64_t reachCount(int64_t i) const {
    AxisReach r;
    int64_t count = 1;
    for (int d = 0; d < 3; ++d) {
      reach(d, sites_.at(i, d + 1), r);
      count *= r.count;
    }
    return count;
  }
  // What forEachOutput does with each (offset, output key) of a row: named
  // functors holding pointers, passed by value. (With lambdas capturing by
  // reference instead, GCC 12 -O2 built code that read the table through a
  // wrong address inside the OpenMP loop; this form runs clean under
  // valgrind.)
  struct InsertOutput {  // claims the key, keeping it in this thread's list if new
    CoordinateTable<Key>* table;
    std::vector<Key>* claimed;
    void operator()(int64_t, Key key) const {
      if (table->insertFirst(key, 0)) claimed->push_back(key);
    }
  };
  struct RecordNeighbour {  // nbr[o * K + k] = row for the key's output row o
    const CoordinateTable<Key>* table;
    int32_t* nbr;
    int64_t K;
    int32_t row;
    void operator()(int64_t k, Key key) const { nbr[table->find(key) * K + k] = row; }
  };

  // Calls f(k, key) for every output site input row i reaches, at offset k.
  template <class F>
  void forEachOutput(int64_t i, F f) const {
    std::array<AxisReach, 3> r;
    for (int d = 0; d < 3; ++d) {
      reach(d, sites_.at(i, d + 1), r[d]);
      if (r[d].count == 0) return;
    }
    const int64_t b = sites_.at(i, 0);
    for (int a = 0; a < r[0].count; ++a)
      for (int e = 0; e < r[1].count; ++e)
        for (int x = 0; x < r[2].count; ++x) {
          const int64_t k = (r[0].kk[a] * g_.kernel[1] + r[1].kk[e]) * g_.kernel[2] + r[2].kk[x];
          f(k, linearKey<Key>(b, r[0].out[a], r[1].out[e], r[2].out[x], g_.out_shape));
        }
  }

  // Finds the active output sites, numbers them in key order, and fills
  // nbr[o * K + k] = the input row that output o takes at offset k, or -1
  // (Note [Parallel rulebook building]). Returns out_indices.
  bp::Tensor regularNeighbours(std::optional<Scratch<int32_t>>& nbr) const {
    const int threads = threadsFor(n_ * K_);
    int64_t candidates = 0;
#pragma omp parallel for num_threads(threads) schedule(static, kRowsPerTask) reduction(+ : candidates)
    for (int64_t i = 0; i < n_; ++i) candidates += reachCount(i);
    int64_t out_sites = g_.batch_size;  // fits: checked against 2^62 by the caller
    for (int d = 0; d < 3; ++d) out_sites *= g_.out_shape[d];
    CoordinateTable<Key> outputs(std::min(candidates, out_sites), threads);
    std::vector<std::vector<Key>> claimed(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
    {
      std::vector<Key>& mine = claimed[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static, kRowsPerTask)
      for (int64_t i = 0; i < n_; ++i) {
        forEachOutput(i, InsertOutput{&outputs, &mine});
      }
    }
    const std::vector<Key> keys = mergeSorted(claimed, threads);
    BP_PLUGIN_CHECK(keys.size() <= static_cast<size_t>(INT32_MAX), kOp, ": the convolution has ", keys.size(),
                    " active output sites, more than int32 rows can number");
    const int64_t m = static_cast<int64_t>(keys.size());
    bp::Tensor out = bp::Tensor::empty({m, 4}, bp::ScalarType::Int32, kCpuDevice);
    int32_t* o = m == 0 ? nullptr : out.data_ptr<int32_t>();
#pragma omp parallel for num_threads(threads) schedule(static, kRowsPerTask)
    for (int64_t r = 0; r < m; ++r) {
      outputs.assign(keys[r], static_cast<int32_t>(r));
      uint64_t rest = static_cast<uint64_t>(keys[r]);
      for (int c = 3; c >= 1; --c) {
        const uint64_t extent = static_cast<uint64_t>(g_.out_shape[c - 1]);
        o[r * 4 + c] = static_cast<int32_t>(rest % extent);
        rest /= extent;
      }
      o[r * 4] = static_cast<int32_t>(rest);
    }
    // Input i reaches at most one output per offset, so the writes never collide.
    nbr.emplace(m * K_);
    int32_t* map = nbr->data();
    parallelFill(map, m * K_, int32_t{-1}, threads);
#pragma omp parallel for num_threads(threads) schedule(static, kRowsPerTask)
    for (int64_t i = 0; i < n_; ++i) {
      forEachOutput(i, RecordNeighbour{&outputs, map, K_, static_cast<int32_t>(i)});
    }
    return out;
  }

  const ConvGeometry& g_;
  const SiteReader sites_;
  const int64_t n_, K_;
  const std::vector<std::array<int64_t, 3>> offsets_;
  const int threads_;  // for the per-row passes over the inputs
  // The rows' keys when they strictly ascend (Note [Sites in key order]),
  // else empty and the table of inputs is built.
  std::vector<Key> sorted_keys_;
  std::optional<CoordinateTable<Key>> inputs_;
};

template <class Key>
std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> buildRulebook(const ConvGeometry& g, const SiteReader& sites,
                                                             int64_t n) {
  RulebookBuilder<Key> builder(g, sites, n);
  builder.checkSites();
  return builder.build();
}

}  // namespace

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> getIndicePairsCpu(const bp::Tensor& indices, int64_t batch_size,
                                                                 bp::IntList spatial_shape, bp::IntList kernel_size,
                                                                 bp::IntList stride, bp::IntList padding,
                                                                 bp::IntList dilation, bool subm) {
  const ConvGeometry g = checkGeometry(batch_size, spatial_shape, kernel_size, stride, padding, dilation, subm);
  BP_PLUGIN_CHECK(indices.device().type == kCpu, kOp, ": this is the cpu kernel, but indices is on device type ",
                  indices.device().type);
  const bool wide_keys = checkIndices(indices, g);
  const int64_t n = indices.size(0);
  const SiteReader sites{n == 0 ? nullptr : indices.data_ptr<const int32_t>(), indices.stride(0), indices.stride(1)};
  // Note [Coordinate keys]
  return wide_keys ? buildRulebook<uint64_t>(g, sites, n) : buildRulebook<uint32_t>(g, sites, n);
}

}  // namespace bp_spconv
