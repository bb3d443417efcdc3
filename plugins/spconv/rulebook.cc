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
#include <omp.h>

#include <algorithm>
#include <climits>
#include <string>

#include "spconv.h"

namespace bp_spconv {

namespace {

constexpr const char* kOp = kGetIndicePairs;
// Rows handled as one unit of parallel work when filling pairs; fixed, so the
// result does not depend on the thread count.
constexpr int64_t kRowsPerTask = 2048;

template <class Key>
class CoordinateTable {
 public:
  static constexpr Key kEmpty = ~Key{0};

  explicit CoordinateTable(int64_t expected) { allocate(capacityFor(expected)); }

  // The value stored under `key`, or -1.
  int32_t find(Key key) const {
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask_) {
      const Entry& e = slots_[s];
      if (e.key == key) return e.value;
      if (e.key == kEmpty) return -1;
    }
  }
  // Stores key -> value unless the key is present; returns the value already
  // stored, or -1 if it inserted.
  int32_t insert(Key key, int32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask_) {
      Entry& e = slots_[s];
      if (e.key == key) return e.value;
      if (e.key == kEmpty) {
        e = Entry{key, value};
        ++size_;
        return -1;
      }
    }
  }
  // Replaces the value of a key that is present.
  void assign(Key key, int32_t value) {
    uint64_t s = slotOf(key);
    while (slots_[s].key != key) s = (s + 1) & mask_;
    slots_[s].value = value;
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
  void allocate(size_t cap) {
    slots_.assign(cap, Entry{kEmpty, -1});
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    size_ = 0;
  }
  // Fibonacci hashing: the top bits of key * 2^64 / phi spread neighbouring
  // coordinates (consecutive keys) over the whole table.
  uint64_t slotOf(Key key) const { return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_; }
  void grow() {
    std::vector<Entry> old = std::move(slots_);
    allocate(old.size() * 2);
    for (const Entry& e : old)
      if (e.key != kEmpty) insert(e.key, e.value);
  }

  std::vector<Entry> slots_;
  uint64_t mask_ = 0;
  int shift_ = 0;
  size_t size_ = 0;
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
void fillPairs(const std::vector<int32_t>& nbr, int64_t rows, int64_t K, int32_t* pairs, int64_t capacity,
               int32_t* counts) {
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

template <class Key>
class RulebookBuilder {
 public:
  RulebookBuilder(const ConvGeometry& g, const SiteReader& sites, int64_t n)
      : g_(g), sites_(sites), n_(n), K_(g.kernelVolume()), offsets_(kernelOffsets(g)), inputs_(n) {}

  // Checks every row (range, batch, duplicates) in order, so the error names
  // the first offending row, and fills the table of input sites.
  void checkSites() {
    for (int64_t i = 0; i < n_; ++i) {
      const Site s{sites_.at(i, 0), sites_.at(i, 1), sites_.at(i, 2), sites_.at(i, 3)};
      if (!siteInside(g_, s)) failSiteOutside(g_, i, s);
      const int32_t first = inputs_.insert(inKey(i), static_cast<int32_t>(i));
      if (first >= 0) failDuplicateSite(first, i, s);
    }
  }

  std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> build() {
    std::vector<int32_t> nbr;
    bp::Tensor out_indices;
    if (g_.subm) {
      out_indices = copyOfIndices();
      submanifoldNeighbours(nbr);
    } else {
      out_indices = regularNeighbours(nbr);
    }
    // No offset pairs an input with two outputs, so n_ pairs per offset hold them all.
    bp::Tensor pairs = bp::Tensor::empty({K_, 2, n_}, bp::ScalarType::Int32, kCpuDevice);
    bp::Tensor counts = bp::Tensor::empty({K_}, bp::ScalarType::Int32, kCpuDevice);
    fillPairs(nbr, out_indices.size(0), K_, pairs.data_ptr<int32_t>(), n_, counts.data_ptr<int32_t>());
    return {std::move(out_indices), std::move(pairs), std::move(counts)};
  }

 private:
  Key inKey(int64_t i) const {
    return linearKey<Key>(sites_.at(i, 0), sites_.at(i, 1), sites_.at(i, 2), sites_.at(i, 3), g_.in_shape);
  }

  bp::Tensor copyOfIndices() const {
    bp::Tensor out = bp::Tensor::empty({n_, 4}, bp::ScalarType::Int32, kCpuDevice);
    int32_t* o = out.data_ptr<int32_t>();
    for (int64_t i = 0; i < n_; ++i)
      for (int c = 0; c < 4; ++c) o[i * 4 + c] = sites_.at(i, c);
    return out;
  }

  // nbr[o * K + k] = the input row at offset k around site o, or -1. The
  // kernel is centred (odd sizes), so offsets k and K - 1 - k are opposite:
  // when site j is at offset k of site o, o is at offset K - 1 - k of j.
  // Each site looks up only the first half of the offsets and fills both
  // entries of what it finds, which halves the hash lookups; every entry
  // has exactly one writer, so the threads never write the same one. The
  // centre is the site itself.
  void submanifoldNeighbours(std::vector<int32_t>& nbr) const {
    std::array<int64_t, 3> half;
    for (int d = 0; d < 3; ++d) half[d] = (g_.kernel[d] - 1) / 2;
    nbr.assign(static_cast<size_t>(n_ * K_), -1);
#pragma omp parallel for num_threads(threadsFor(n_ * K_)) schedule(static, kRowsPerTask)
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
        const int32_t j = inputs_.find(linearKey<Key>(b, p[0], p[1], p[2], g_.in_shape));
        if (j < 0) continue;
        nbr[o * K_ + k] = j;
        nbr[j * K_ + (K_ - 1 - k)] = static_cast<int32_t>(o);
      }
      nbr[o * K_ + K_ / 2] = static_cast<int32_t>(o);
    }
  }

  // The output site that input row i reaches at offset k, as a key; false
  // when it falls between strides or outside the output.
  bool outputKey(int64_t i, int64_t k, Key& key) const {
    std::array<int64_t, 3> o;
    for (int d = 0; d < 3; ++d) {
      const int64_t t = sites_.at(i, d + 1) + g_.padding[d] - offsets_[k][d] * g_.dilation[d];
      if (t < 0 || t % g_.stride[d] != 0) return false;
      o[d] = t / g_.stride[d];
      if (o[d] >= g_.out_shape[d]) return false;
    }
    key = linearKey<Key>(sites_.at(i, 0), o[0], o[1], o[2], g_.out_shape);
    return true;
  }

  // Finds the active output sites, numbers them in key order, and sets
  // nbr[o * K + k] = the input row that output o takes at offset k, or -1.
  // Returns out_indices.
  bp::Tensor regularNeighbours(std::vector<int32_t>& nbr) const {
    CoordinateTable<Key> outputs(n_);
    std::vector<Key> keys;
    for (int64_t i = 0; i < n_; ++i) {
      for (int64_t k = 0; k < K_; ++k) {
        Key key;
        if (outputKey(i, k, key) && outputs.insert(key, 0) < 0) keys.push_back(key);
      }
    }
    BP_PLUGIN_CHECK(keys.size() <= static_cast<size_t>(INT32_MAX), kOp, ": the convolution has ", keys.size(),
                    " active output sites, more than int32 rows can number");
    std::sort(keys.begin(), keys.end());
    const int64_t m = static_cast<int64_t>(keys.size());
    bp::Tensor out = bp::Tensor::empty({m, 4}, bp::ScalarType::Int32, kCpuDevice);
    int32_t* o = m == 0 ? nullptr : out.data_ptr<int32_t>();
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
    nbr.assign(static_cast<size_t>(m * K_), -1);
#pragma omp parallel for num_threads(threadsFor(n_ * K_)) schedule(static, kRowsPerTask)
    for (int64_t i = 0; i < n_; ++i) {
      for (int64_t k = 0; k < K_; ++k) {
        Key key;
        if (outputKey(i, k, key)) nbr[outputs.find(key) * K_ + k] = static_cast<int32_t>(i);
      }
    }
    return out;
  }

  const ConvGeometry& g_;
  const SiteReader sites_;
  const int64_t n_, K_;
  const std::vector<std::array<int64_t, 3>> offsets_;
  CoordinateTable<Key> inputs_;
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
