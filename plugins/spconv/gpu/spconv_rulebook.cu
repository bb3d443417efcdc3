// The sparse-convolution rulebook on the GPU: spconv::get_indice_pairs for
// the plugin's device, with the CPU kernel's results bit for bit.
//
// Note [Rulebook on the GPU]
// The CPU kernel's output is the contract (Note [Rulebook], Note [Rulebook
// order], Note [Coordinate keys]): out_indices in the same order, each
// offset's pairs in ascending output row, -1 after them, the same errors
// naming the same first offending row. The design, in launches:
//
//   A  insert: one thread per input row checks the row's range and inserts
//      its key into a device hash table (open addressing, linear probing, at
//      most half full, atomicCAS on the key; 32-bit keys when they fit, 64-bit
//      otherwise, the CPU's Fibonacci hash) whose value is the smallest row
//      holding the key (atomicMin). A row outside the batch or grid posts
//      itself to the error word (below). subm: also copies the row to
//      out_indices (the outputs are the inputs, in input order).
//   B  (regular only) outputs: one thread per (input, offset) computes the
//      output site the input reaches (the CPU's rule), inserts its key into
//      an output table (keys only) and, when the insert was the first,
//      appends the key to a list at an atomicAdd position. Offset-0 threads
//      also find duplicates: row i is one when the input table's smallest
//      row for its key is not i. Then one synchronising read of 16 bytes:
//      the error word and the number M of distinct outputs, which sizes
//      out_indices (the only host round trip when the call succeeds).
//      The list is then sorted by an LSD radix sort written in the dialect
//      (8-bit digits, only as many passes as the largest key has bits; per
//      pass a per-tile digit count, one scan, a stable scatter that ranks a
//      tile's elements by counting equal digits before them in shared
//      memory), so output row r holds the r-th smallest key, as the CPU's
//      std::sort gives. The keys are distinct, so the result does not depend
//      on the order the atomics appended them in.
//   G  gather: one block per (offset k, tile of 1024 output rows). Each output
//      row pulls its input: site = out * stride - padding + k * dilation
//      (subm: stride 1, padding dilation * (kernel - 1) / 2, the centred
//      kernel), inside the grid, looked up in the input table; the input row
//      or -1 goes to nbr[k][r], and the block's count of hits to its tile
//      slot. The regular path decodes each row's coordinates from its sorted
//      key (offset-0 blocks write out_indices); subm reads them from
//      out_indices, and at the centre offset finds the duplicates.
//   S  one block scans the tile counts (exclusive, 32-bit, wrapping: only
//      differences within one offset are used, and those are below 2^31).
//   C  compact: one block per tile again, a block scan of its rows' hits
//      gives each hit its place, so pair j of offset k is its j-th hit in
//      ascending output row: exactly fillPairs's order. indice_pairs was
//      set to -1 (one memset) beforehand; counts come from the scan.
//
// subm: 4 launches and one 8-byte read (the error word) at the end;
// regular: 5 + 3 x passes launches (passes = ceil(key bits / 8), 4 for a
// 32-bit grid) and one 16-byte read. Memsets are not launches: the tables
// and the error word share one buffer set to all-ones in one memset (the
// empty key, the largest row, no error).
//
// The error word is one 64-bit atomicMin of (row << 32 | what): what is
// 0xFFFFFFFF for a row outside the batch or grid, else the earliest row
// holding the same site. The smallest word names the first offending row,
// the row the CPU kernel's in-order checks stop at (rows before it are in
// range and distinct, so its first holder is the CPU table's). Only then
// is that one row read back (16 bytes), to write the CPU's message on the
// host (checks.cc). No part of `indices` is copied to the host otherwise.
//
// Scratch lives in tensors of this device (the caching allocator makes
// them cheap): tables of 2x their keys rounded to a power of two (inputs:
// N; outputs: min(N x K, batch x output volume) candidates), nbr of K x R
// int32, and the sort's second buffer. The results are deterministic: the
// order atomics ran in changes only the scratch (table slots, the list's
// order), never a value returned.
//
// Where to look first if it is slow: the scans run in one block (fine for
// the tile counts, K x N / 1024 of them, and the sort's 256 counts per 1024
// keys up to some 10^5 outputs; beyond, a multi-block scan), and the sort
// ranks a key by reading the digits before it in its tile (up to 1024
// shared-memory reads per thread).
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "gpu/kernel_args.h"
#include "gpu/loops.cuh"
#include "spconv/spconv.h"
#include "spconv_device.cuh"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {
namespace {

using bp_gpu::check;
using bp_gpu::currentStream;
using bp_gpu::DeviceGuard;
using bp_gpu::gridStride;
using bp_gpu::launch;
using bp_gpu::launchElements;
using bp_gpu::readDevice;
using bp_spconv::ConvGeometry;
using bp_spconv::Site;

constexpr const char* kOp = bp_spconv::kGetIndicePairs;

constexpr int kThreads = 256;                          // threads of a tile kernel's block
constexpr int kItems = 4;                              // elements per thread
constexpr int64_t kTile = int64_t{kThreads} * kItems;  // rows (or keys) per tile
constexpr int kScanThreads = 1024;                     // the one block of the scan
constexpr int kRadixBits = 8;
constexpr int kRadixBins = 1 << kRadixBits;
static_assert(kRadixBins == kThreads, "the digit count gives one bin to each thread");

constexpr unsigned kNoRow = 0xFFFFFFFFu;  // an empty table slot's row; the error word's "outside" mark
constexpr unsigned long long kNoError = ~0ull;

// The geometry as kernels see it. subm is folded in: stride 1 and padding
// dilation * (kernel - 1) / 2 give the centred kernel (Note [Rulebook]).
struct DeviceGeometry {
  int64_t batch;
  int64_t in_shape[3], out_shape[3], kernel[3], stride[3], padding[3], dilation[3];
  int64_t K;

  BP_GPU_HD bool inside(const int64_t s[4]) const {
    bool in = s[0] >= 0 && s[0] < batch;
    for (int d = 0; d < 3; ++d) in = in && s[d + 1] >= 0 && s[d + 1] < in_shape[d];
    return in;
  }
};

DeviceGeometry deviceGeometry(const ConvGeometry& g) {
  DeviceGeometry dg{};
  dg.batch = g.batch_size;
  for (int d = 0; d < 3; ++d) {
    dg.in_shape[d] = g.in_shape[d];
    dg.out_shape[d] = g.out_shape[d];
    dg.kernel[d] = g.kernel[d];
    dg.stride[d] = g.subm ? 1 : g.stride[d];
    dg.padding[d] = g.subm ? g.dilation[d] * (g.kernel[d] - 1) / 2 : g.padding[d];
    dg.dilation[d] = g.dilation[d];
  }
  dg.K = g.kernelVolume();
  return dg;
}

// ((b * D + z) * H + y) * W + x (Note [Coordinate keys]).
template <class Key>
BP_GPU_HD Key linearKey(int64_t b, const int64_t c[3], const int64_t shape[3]) {
  return static_cast<Key>(((static_cast<uint64_t>(b) * shape[0] + c[0]) * shape[1] + c[1]) * shape[2] + c[2]);
}

// The rows of `indices` as kernels read them (any strides).
struct SiteRows {
  const int32_t* data;
  int64_t row_stride, col_stride;
  BP_GPU_HD void load(int64_t i, int64_t s[4]) const {
    for (int c = 0; c < 4; ++c) s[c] = data[i * row_stride + c * col_stride];
  }
};

// A table of keys (unsigned or unsigned long long: what atomicCAS takes) ->
// the smallest row (rows == nullptr: keys only). Capacity a power of two.
template <class Key>
struct Table {
  static constexpr Key kEmpty = ~Key{0};
  Key* keys;
  unsigned* rows;
  uint64_t mask;
  int shift;

  BP_GPU_HD uint64_t slotOf(Key key) const { return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift; }
  // Inserts `key` unless present; its slot goes to `slot`. True if this call inserted it.
  __device__ bool insert(Key key, uint64_t& slot) const {
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask) {
      const Key prev = atomicCAS(&keys[s], kEmpty, key);
      if (prev == kEmpty || prev == key) {
        slot = s;
        return prev == kEmpty;
      }
    }
  }
  // The row stored under `key` (after the inserting launch), or kNoRow.
  __device__ unsigned find(Key key) const {
    for (uint64_t s = slotOf(key);; s = (s + 1) & mask) {
      const Key k = keys[s];
      if (k == key) return rows[s];
      if (k == kEmpty) return kNoRow;
    }
  }
};

// The error word: (row << 32 | what), the smallest one wins (see the Note).
__device__ inline void postError(unsigned long long* error, int64_t row, unsigned what) {
  atomicMin(error, (static_cast<unsigned long long>(row) << 32) | what);
}

// The exclusive prefix sum of `value` over the block's threads (in thread
// order), and the block's total. `shared` holds blockDim.x values; every
// thread must call it.
__device__ inline unsigned blockExclusiveScan(unsigned value, unsigned* shared, unsigned& total) {
  const unsigned t = threadIdx.x, n = blockDim.x;
  shared[t] = value;
  __syncthreads();
  for (unsigned offset = 1; offset < n; offset *= 2) {
    const unsigned add = t >= offset ? shared[t - offset] : 0u;
    __syncthreads();
    shared[t] += add;
    __syncthreads();
  }
  total = shared[n - 1];
  const unsigned exclusive = shared[t] - value;
  __syncthreads();  // shared may be reused at once
  return exclusive;
}

// --- A: check and insert the input sites

// status[0]: the error word; status[1]: the count of distinct outputs (B).
template <class Key>
__global__ void insertSitesKernel(SiteRows sites, int64_t n, DeviceGeometry g, Table<Key> table,
                                  unsigned long long* status, int32_t* copy) {
  if (blockIdx.x == 0 && threadIdx.x == 0) status[1] = 0;
  gridStride(n, [&](int64_t i) {
    int64_t s[4];
    sites.load(i, s);
    if (copy != nullptr) {
      for (int c = 0; c < 4; ++c) copy[i * 4 + c] = static_cast<int32_t>(s[c]);
    }
    if (!g.inside(s)) {
      postError(&status[0], i, kNoRow);
      return;
    }
    uint64_t slot;
    table.insert(linearKey<Key>(s[0], s + 1, g.in_shape), slot);
    atomicMin(&table.rows[slot], static_cast<unsigned>(i));
  });
}

// --- B: the distinct output sites of a regular convolution

template <class Key>
__global__ void findOutputsKernel(SiteRows sites, int64_t n, DeviceGeometry g, Table<Key> inputs, Table<Key> outputs,
                                  Key* distinct, unsigned long long* status) {
  gridStride(n * g.K, [&](int64_t idx) {
    const int64_t i = idx / g.K, k = idx - i * g.K;
    int64_t s[4];
    sites.load(i, s);
    if (!g.inside(s)) return;  // posted by A
    if (k == 0) {
      const unsigned first = inputs.find(linearKey<Key>(s[0], s + 1, g.in_shape));
      if (first != static_cast<unsigned>(i)) postError(&status[0], i, first);
    }
    const int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]), (k / g.kernel[2]) % g.kernel[1], k % g.kernel[2]};
    int64_t o[3];
    for (int d = 0; d < 3; ++d) {
      const int64_t t = s[d + 1] + g.padding[d] - kk[d] * g.dilation[d];
      if (t < 0 || t % g.stride[d] != 0) return;
      o[d] = t / g.stride[d];
      if (o[d] >= g.out_shape[d]) return;
    }
    const Key key = linearKey<Key>(s[0], o, g.out_shape);
    uint64_t slot;
    if (outputs.insert(key, slot)) distinct[atomicAdd(&status[1], 1ull)] = key;
  });
}

// --- the radix sort of the distinct output keys

template <class Key>
__global__ void digitCountKernel(const Key* keys, int64_t m, int shift, unsigned* counts, int64_t tiles) {
  __shared__ unsigned bins[kRadixBins];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  bins[threadIdx.x] = 0;
  __syncthreads();
  for (int j = 0; j < kItems; ++j) {
    const int64_t p = base + j * kThreads + threadIdx.x;
    if (p < m) atomicAdd(&bins[(keys[p] >> shift) & (kRadixBins - 1)], 1u);
  }
  __syncthreads();
  counts[threadIdx.x * tiles + blockIdx.x] = bins[threadIdx.x];
}

// Moves each key of the tile to starts[digit][tile] + the number of keys
// with its digit before it in the tile: a stable pass.
template <class Key>
__global__ void digitScatterKernel(const Key* in, Key* out, int64_t m, int shift, const unsigned* starts,
                                   int64_t tiles) {
  __shared__ unsigned char digits[kTile];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t size = m - base < kTile ? m - base : kTile;
  for (int j = 0; j < kItems; ++j) {
    const int64_t p = j * kThreads + threadIdx.x;
    digits[p] = p < size ? static_cast<unsigned char>((in[base + p] >> shift) & (kRadixBins - 1)) : 0;
  }
  __syncthreads();
  const int64_t first = static_cast<int64_t>(threadIdx.x) * kItems;
  unsigned mine[kItems], rank[kItems];
  for (int j = 0; j < kItems; ++j) {
    mine[j] = digits[first + j];
    rank[j] = 0;
  }
  for (int64_t q = 0; q < first; ++q) {
    const unsigned d = digits[q];
    for (int j = 0; j < kItems; ++j) rank[j] += d == mine[j];
  }
  for (int j = 0; j < kItems; ++j) {
    for (int i = 0; i < j; ++i) rank[j] += mine[i] == mine[j];
    if (first + j < size) out[starts[mine[j] * tiles + blockIdx.x] + rank[j]] = in[base + first + j];
  }
}

// --- S: the exclusive scan of `n` counts in place, the total at [n]; one block.

__global__ void exclusiveScanKernel(unsigned* values, int64_t n) {
  __shared__ unsigned partial[kScanThreads];
  unsigned carry = 0;
  for (int64_t base = 0; base < n; base += int64_t{kScanThreads} * kItems) {
    const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kItems;
    unsigned v[kItems], sum = 0;
    for (int j = 0; j < kItems; ++j) {
      v[j] = first + j < n ? values[first + j] : 0u;
      sum += v[j];
    }
    unsigned total;
    unsigned running = carry + blockExclusiveScan(sum, partial, total);
    for (int j = 0; j < kItems; ++j) {
      if (first + j < n) values[first + j] = running;
      running += v[j];
    }
    carry += total;
  }
  if (threadIdx.x == 0) values[n] = carry;
}

// --- G: each output row's input at each offset

// Block (k, c) serves rows [c * kTile, (c + 1) * kTile) at offset k. The
// rows' coordinates come from `row_keys` (the sorted output keys: regular;
// offset-0 blocks write them to out_indices) or from out_indices (subm).
template <class Key>
__global__ void gatherNeighboursKernel(DeviceGeometry g, Table<Key> inputs, int64_t rows, int64_t tiles_per_offset,
                                       const Key* row_keys, int32_t* out_indices, int32_t* nbr, unsigned* tile_counts,
                                       unsigned long long* status) {
  __shared__ unsigned partial[kThreads];
  const int64_t tile = blockIdx.x;
  const int64_t k = tile / tiles_per_offset, c = tile - k * tiles_per_offset;
  const int64_t kk[3] = {k / (g.kernel[1] * g.kernel[2]), (k / g.kernel[2]) % g.kernel[1], k % g.kernel[2]};
  const bool centre = row_keys == nullptr && k == g.K / 2;
  unsigned hits = 0;
  for (int j = 0; j < kItems; ++j) {
    const int64_t r = c * kTile + j * kThreads + threadIdx.x;
    if (r >= rows) continue;
    int64_t s[4];
    if (row_keys != nullptr) {
      uint64_t rest = static_cast<uint64_t>(row_keys[r]);
      for (int d = 2; d >= 0; --d) {
        const uint64_t extent = static_cast<uint64_t>(g.out_shape[d]);
        s[d + 1] = static_cast<int64_t>(rest % extent);
        rest /= extent;
      }
      s[0] = static_cast<int64_t>(rest);
      if (k == 0) {
        for (int e = 0; e < 4; ++e) out_indices[r * 4 + e] = static_cast<int32_t>(s[e]);
      }
    } else {
      for (int e = 0; e < 4; ++e) s[e] = out_indices[r * 4 + e];
      if (!g.inside(s)) {  // posted by A
        nbr[k * rows + r] = -1;
        continue;
      }
    }
    int64_t p[3];
    bool inside = true;
    for (int d = 0; d < 3; ++d) {
      p[d] = s[d + 1] * g.stride[d] - g.padding[d] + kk[d] * g.dilation[d];
      inside = inside && p[d] >= 0 && p[d] < g.in_shape[d];
    }
    const unsigned found = inside ? inputs.find(linearKey<Key>(s[0], p, g.in_shape)) : kNoRow;
    if (centre && found != static_cast<unsigned>(r)) postError(&status[0], r, found);
    nbr[k * rows + r] = found == kNoRow ? -1 : static_cast<int32_t>(found);
    hits += found != kNoRow;
  }
  unsigned total;
  blockExclusiveScan(hits, partial, total);
  if (threadIdx.x == 0) tile_counts[tile] = total;
}

// --- C: the pairs of each offset in ascending output row

__global__ void compactPairsKernel(const int32_t* nbr, int64_t rows, int64_t tiles_per_offset,
                                   const unsigned* tile_starts, int32_t* pairs, int64_t capacity, int32_t* counts) {
  __shared__ unsigned partial[kThreads];
  const int64_t tile = blockIdx.x;
  const int64_t k = tile / tiles_per_offset, c = tile - k * tiles_per_offset;
  const int64_t first = c * kTile + static_cast<int64_t>(threadIdx.x) * kItems;
  int32_t partner[kItems];
  unsigned hits = 0;
  for (int j = 0; j < kItems; ++j) {
    partner[j] = first + j < rows ? nbr[k * rows + first + j] : -1;
    hits += partner[j] >= 0;
  }
  unsigned total;
  const unsigned offset_start = tile_starts[k * tiles_per_offset];
  int64_t place = (tile_starts[tile] - offset_start) + blockExclusiveScan(hits, partial, total);
  int32_t* in_rows = pairs + k * 2 * capacity;
  for (int j = 0; j < kItems; ++j) {
    if (partner[j] < 0) continue;
    in_rows[place] = partner[j];
    in_rows[capacity + place] = static_cast<int32_t>(first + j);
    ++place;
  }
  if (c == 0 && threadIdx.x == 0) {
    counts[k] = static_cast<int32_t>(tile_starts[(k + 1) * tiles_per_offset] - offset_start);
  }
}

// --- the host side

uint64_t tableCapacity(int64_t keys) {
  uint64_t cap = 16;
  while (cap < 2 * static_cast<uint64_t>(keys)) cap *= 2;
  return cap;
}

int64_t roundUp(int64_t bytes) { return (bytes + 15) / 16 * 16; }

template <class T>
int64_t bytesOf(uint64_t count) {
  return static_cast<int64_t>(count * sizeof(T));
}

bp::Tensor deviceBytes(int64_t bytes, bp::Device device) {
  return bp::Tensor::empty({std::max<int64_t>(bytes, 1)}, bp::ScalarType::UInt8, device);
}

void fillBytes(void* ptr, int value, int64_t bytes, int device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  check(gpuMemsetAsync(ptr, value, static_cast<size_t>(bytes), currentStream(device)), kOp);
}

// Launches `blocks` blocks of `threads` threads, refusing a grid the
// runtimes cannot take with an error that says so.
template <class... P, class... A>
void launchBlocks(int device, void (*kernel)(P...), int64_t blocks, int threads, A&&... args) {
  const unsigned grid = bp_spconv_gpu::gridX(kOp, blocks, threads);
  if (grid == 0) return;
  DeviceGuard guard(device);
  launch(kernel, dim3(grid), dim3(threads), 0, currentStream(device), std::forward<A>(args)...);
}

// Throws the CPU kernel's error for the row the error word names, reading
// only that row.
[[noreturn]] void failRow(const ConvGeometry& g, const bp::Tensor& indices, unsigned long long error) {
  const int64_t row = static_cast<int64_t>(error >> 32);
  const unsigned what = static_cast<unsigned>(error & 0xFFFFFFFFu);
  const int device = indices.device().index;
  const int32_t* at = indices.device_ptr<const int32_t>() + row * indices.stride(0);
  Site s;
  if (indices.stride(1) == 1) {
    readDevice(device, s.data(), at, sizeof s, kOp);
  } else {
    for (int c = 0; c < 4; ++c) readDevice(device, &s[c], at + c * indices.stride(1), sizeof s[c], kOp);
  }
  if (what == kNoRow) bp_spconv::failSiteOutside(g, row, s);
  bp_spconv::failDuplicateSite(what, row, s);
}

template <class Key>
class DeviceRulebookBuilder {
 public:
  DeviceRulebookBuilder(const ConvGeometry& g, const bp::Tensor& indices)
      : g_(g),
        dg_(deviceGeometry(g)),
        indices_(indices),
        device_(indices.device()),
        index_(indices.device().index),
        n_(indices.size(0)),
        K_(g.kernelVolume()),
        sites_{indices.device_ptr<const int32_t>(), indices.stride(0), indices.stride(1)} {}

  std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> build() {
    // The tables and the status words, all-ones in one memset (see the Note).
    const uint64_t in_cap = tableCapacity(n_);
    const int64_t candidates = g_.subm ? 0 : std::min(n_ * K_, outputSites());
    const uint64_t out_cap = g_.subm ? 0 : tableCapacity(candidates);
    const int64_t status_bytes = 2 * sizeof(unsigned long long);
    const int64_t in_keys_at = status_bytes, in_rows_at = in_keys_at + roundUp(bytesOf<Key>(in_cap));
    const int64_t out_keys_at = in_rows_at + roundUp(bytesOf<unsigned>(in_cap));
    const int64_t distinct_at = out_keys_at + roundUp(bytesOf<Key>(out_cap));
    bp::Tensor scratch = deviceBytes(distinct_at + bytesOf<Key>(candidates), device_);
    uint8_t* base = scratch.device_ptr<uint8_t>();
    fillBytes(base, 0xFF, distinct_at, index_);
    status_ = reinterpret_cast<unsigned long long*>(base);
    inputs_ = table(base + in_keys_at, base + in_rows_at, in_cap);

    bp::Tensor out_indices;
    const Key* row_keys = nullptr;
    bp::Tensor sorted_holder;
    if (g_.subm) {
      out_indices = bp::Tensor::empty({n_, 4}, bp::ScalarType::Int32, device_);
      launchElements(&insertSitesKernel<Key>, n_, 1, index_, sites_, n_, dg_, inputs_, status_,
                     out_indices.device_ptr<int32_t>());
    } else {
      launchElements(&insertSitesKernel<Key>, n_, 1, index_, sites_, n_, dg_, inputs_, status_,
                     static_cast<int32_t*>(nullptr));
      const Table<Key> outputs = table(base + out_keys_at, nullptr, out_cap);
      Key* distinct = reinterpret_cast<Key*>(base + distinct_at);
      launchElements(&findOutputsKernel<Key>, n_ * K_, 1, index_, sites_, n_, dg_, inputs_, outputs, distinct, status_);
      unsigned long long status[2];
      readDevice(index_, status, status_, sizeof status, kOp);
      if (status[0] != kNoError) failRow(g_, indices_, status[0]);
      BP_PLUGIN_CHECK(status[1] <= static_cast<unsigned long long>(INT32_MAX), kOp, ": the convolution has ", status[1],
                      " active output sites, more than int32 rows can number");
      const int64_t m = static_cast<int64_t>(status[1]);
      row_keys = sortKeys(distinct, m, sorted_holder);
      out_indices = bp::Tensor::empty({m, 4}, bp::ScalarType::Int32, device_);
    }
    const int64_t rows = out_indices.size(0);
    // No offset pairs an input with two outputs, so n_ pairs per offset hold them all.
    bp::Tensor pairs = bp::Tensor::empty({K_, 2, n_}, bp::ScalarType::Int32, device_);
    bp::Tensor counts = bp::Tensor::empty({K_}, bp::ScalarType::Int32, device_);
    fillBytes(pairs.data_ptr(), 0xFF, pairs.numel() * 4, index_);
    if (rows == 0) {
      fillBytes(counts.data_ptr(), 0, K_ * 4, index_);
    } else {
      pairRows(rows, row_keys, out_indices.device_ptr<int32_t>(), pairs.device_ptr<int32_t>(),
               counts.device_ptr<int32_t>());
    }
    if (g_.subm) {
      unsigned long long error;
      readDevice(index_, &error, status_, sizeof error, kOp);
      if (error != kNoError) failRow(g_, indices_, error);
    }
    return {std::move(out_indices), std::move(pairs), std::move(counts)};
  }

 private:
  int64_t outputSites() const { return g_.batch_size * g_.out_shape[0] * g_.out_shape[1] * g_.out_shape[2]; }

  static Table<Key> table(uint8_t* keys, uint8_t* rows, uint64_t cap) {
    return Table<Key>{reinterpret_cast<Key*>(keys), reinterpret_cast<unsigned*>(rows), cap - 1,
                      64 - __builtin_ctzll(cap)};
  }

  // Sorts keys[0, m) (distinct) ascending; returns where the result is
  // (keys itself or a buffer kept in `holder`).
  const Key* sortKeys(Key* keys, int64_t m, bp::Tensor& holder) const {
    const uint64_t largest = static_cast<uint64_t>(outputSites() - 1);
    const int bits = largest == 0 ? 0 : 64 - __builtin_clzll(largest);
    const int passes = (bits + kRadixBits - 1) / kRadixBits;
    if (m <= 1 || passes == 0) return keys;
    const int64_t tiles = (m + kTile - 1) / kTile;
    const int64_t count_entries = kRadixBins * tiles;
    holder = deviceBytes(roundUp(bytesOf<Key>(m)) + (count_entries + 1) * 4, device_);
    Key* other = reinterpret_cast<Key*>(holder.device_ptr<uint8_t>());
    unsigned* digit_counts = reinterpret_cast<unsigned*>(holder.device_ptr<uint8_t>() + roundUp(bytesOf<Key>(m)));
    Key* from = keys;
    Key* to = other;
    for (int pass = 0; pass < passes; ++pass) {
      const int shift = pass * kRadixBits;
      launchBlocks(index_, &digitCountKernel<Key>, tiles, kThreads, from, m, shift, digit_counts, tiles);
      launchBlocks(index_, &exclusiveScanKernel, 1, kScanThreads, digit_counts, count_entries);
      launchBlocks(index_, &digitScatterKernel<Key>, tiles, kThreads, from, to, m, shift, digit_counts, tiles);
      std::swap(from, to);
    }
    return from;
  }

  // Fills nbr, then the pairs and counts of `rows` output rows.
  void pairRows(int64_t rows, const Key* row_keys, int32_t* out_indices, int32_t* pairs, int32_t* counts) const {
    const int64_t tiles_per_offset = (rows + kTile - 1) / kTile;
    const int64_t tiles = K_ * tiles_per_offset;
    bp::Tensor scratch = deviceBytes(roundUp(K_ * rows * 4) + (tiles + 1) * 4, device_);
    int32_t* nbr = reinterpret_cast<int32_t*>(scratch.device_ptr<uint8_t>());
    unsigned* tile_counts = reinterpret_cast<unsigned*>(scratch.device_ptr<uint8_t>() + roundUp(K_ * rows * 4));
    launchBlocks(index_, &gatherNeighboursKernel<Key>, tiles, kThreads, dg_, inputs_, rows, tiles_per_offset, row_keys,
                 out_indices, nbr, tile_counts, status_);
    launchBlocks(index_, &exclusiveScanKernel, 1, kScanThreads, tile_counts, tiles);
    launchBlocks(index_, &compactPairsKernel, tiles, kThreads, static_cast<const int32_t*>(nbr), rows, tiles_per_offset,
                 static_cast<const unsigned*>(tile_counts), pairs, n_, counts);
  }

  const ConvGeometry& g_;
  const DeviceGeometry dg_;
  const bp::Tensor& indices_;
  const bp::Device device_;
  const int index_;
  const int64_t n_, K_;
  const SiteRows sites_;
  unsigned long long* status_ = nullptr;
  Table<Key> inputs_{};
};

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> getIndicePairs(const bp::Tensor& indices, int64_t batch_size,
                                                              bp::IntList spatial_shape, bp::IntList kernel_size,
                                                              bp::IntList stride, bp::IntList padding,
                                                              bp::IntList dilation, bool subm) {
  const ConvGeometry g =
      bp_spconv::checkGeometry(batch_size, spatial_shape, kernel_size, stride, padding, dilation, subm);
  bp_gpu::callDevice(kOp, indices, "indices");
  const bool wide_keys = bp_spconv::checkIndices(indices, g);
  const int64_t n = indices.size(0);
  const int64_t K = g.kernelVolume();
  if (n == 0) {
    bp::Tensor out_indices = bp::Tensor::empty({0, 4}, bp::ScalarType::Int32, indices.device());
    bp::Tensor pairs = bp::Tensor::empty({K, 2, 0}, bp::ScalarType::Int32, indices.device());
    bp::Tensor counts = bp::Tensor::empty({K}, bp::ScalarType::Int32, indices.device());
    fillBytes(counts.data_ptr(), 0, K * 4, indices.device().index);
    return {std::move(out_indices), std::move(pairs), std::move(counts)};
  }
  // Note [Coordinate keys]
  if (wide_keys) return DeviceRulebookBuilder<unsigned long long>(g, indices).build();
  return DeviceRulebookBuilder<unsigned>(g, indices).build();
}

}  // namespace

void registerRulebookKernels(bp::Library& m, int32_t type) {
  registerKernel(m, kOp, type, bp::kernel<&getIndicePairs>());
}

}  // namespace bp_spconv_gpu
