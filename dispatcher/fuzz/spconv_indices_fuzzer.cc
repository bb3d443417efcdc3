// Fuzz target fuzz_spconv_indices: spconv::get_indice_pairs on the CPU (the
// sparse-convolution plugin of this build tree, called through the
// dispatcher as an application calls it) with fuzzed indices (rows of
// batch, z, y, x: out of range, negative, duplicates; int32 [N, 4] mostly,
// sometimes a transposed view, another dtype or shape) and fuzzed
// batch_size, spatial_shape, kernel_size, stride, padding, dilation and
// subm. Rows are capped so that N x the kernel volume stays small (each run
// is fast); the values are not. What it checks, against a model written
// here from Note [Rulebook]:
// - Arguments the model refuses throw backplane::Error naming the op;
//   arguments it accepts succeed.
// - A rulebook's every index is in range: out_indices rows lie in the batch
//   and the output grid, indice_pair_num[k] in [0, N], pairs name input rows
//   in [0, N) and output rows in [0, M), unused entries are -1.
// - Each pair is a real neighbour (the input site is the output site moved
//   by kernel offset k under stride, padding and dilation, in the same
//   batch), no offset pairs an input or an output twice, pairs are in
//   ascending output row (Note [Rulebook order]), output sites are distinct
//   and sorted, every pair the geometry allows is there, and a submanifold
//   rulebook keeps the input sites as its outputs.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "field_reader.h"

namespace {

using namespace backplane;
using fuzz::FieldReader;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_spconv_indices: %s\n", what.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, what) \
  do {                         \
    if (!(cond)) fail(what);   \
  } while (0)

using Triple = std::array<int64_t, 3>;
using Site = std::array<int64_t, 4>;
using Result = std::tuple<Tensor, Tensor, Tensor>;
using GetIndicePairs = Result(const Tensor&, int64_t, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef,
                              bool);

// Rows times kernel offsets at most, so that a run stays fast.
constexpr int64_t kMaxWork = int64_t{1} << 16;

const TypedOperatorHandle<GetIndicePairs>& getIndicePairs() {
  static const TypedOperatorHandle<GetIndicePairs> op = [] {
    // get_indice_pairs on the CPU needs no other plugin: its kernel reads
    // strided indices itself and allocates through the host.
    absl::StatusOr<PluginStatus> s = plugins().load(BACKPLANE_SPCONV_PLUGIN_PATH);
    FUZZ_CHECK(s.ok(), std::string("cannot load the spconv plugin: ") + std::string(s.status().message()));
    return Dispatcher::singleton().findOpOrThrow("spconv::get_indice_pairs").typed<GetIndicePairs>();
  }();
  return op;
}

int64_t small(FieldReader& in, int64_t lo, int64_t count) {
  const uint8_t m = in.take<uint8_t>();
  return m < 240 ? lo + m % count : in.take<int64_t>();
}

// A list argument: three values, sometimes two or four.
std::vector<int64_t> listField(FieldReader& in, int64_t lo, int64_t count) {
  const uint8_t n = in.take<uint8_t>();
  const size_t len = n < 248 ? 3 : n % 2 == 0 ? 2 : 4;
  std::vector<int64_t> v(len);
  for (int64_t& x : v) x = small(in, lo, count);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& op = getIndicePairs();
  FieldReader in(data, size);

  // ---------------------------------------------------------------- fields
  const int64_t batch = small(in, 0, 4);
  const std::vector<int64_t> spatial = listField(in, 1, 10), kernel = listField(in, 1, 4), stride = listField(in, 1, 3),
                             padding = listField(in, 0, 3), dilation = listField(in, 1, 3);
  const uint8_t mode = in.take<uint8_t>();
  const bool subm = mode & 1;
  const int layout = (mode >> 1) & 7;  // 0-4: int32 [N, 4]; 5: a transposed view; 6: int64; 7: [N, 3]
  int64_t rows = in.take<uint8_t>() % 65;
  std::vector<int32_t> flat;
  const int columns = layout == 7 ? 3 : 4;
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < columns; ++c) {
      const uint8_t m = in.take<uint8_t>();
      flat.push_back(m < 240 ? static_cast<int32_t>(m % 12) - 1 : in.take<int32_t>());
    }
  }

  // ------------------------------------------------------------- the model
  bool valid = batch >= 1 && layout <= 5;
  const bool triples =
      spatial.size() == 3 && kernel.size() == 3 && stride.size() == 3 && padding.size() == 3 && dilation.size() == 3;
  valid = valid && triples;
  Triple in_shape{}, out_shape{}, k{}, s{}, p{}, d{};
  int64_t K = 1;
  if (triples) {
    for (int i = 0; i < 3; ++i) {
      in_shape[i] = spatial[i], k[i] = kernel[i], s[i] = stride[i], p[i] = padding[i], d[i] = dilation[i];
      valid = valid && in_shape[i] >= 1 && in_shape[i] <= INT32_MAX && k[i] >= 1 && k[i] <= 64 && s[i] >= 1 &&
              p[i] >= 0 && p[i] <= INT32_MAX && d[i] >= 1 && d[i] <= INT32_MAX;
    }
  }
  if (valid) {
    for (int i = 0; i < 3; ++i) {
      K *= k[i];
      if (subm) {
        valid = valid && k[i] % 2 == 1 && s[i] == 1;
        out_shape[i] = in_shape[i];
      } else {
        const int64_t span = in_shape[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1;
        valid = valid && span >= 0;
        out_shape[i] = span >= 0 ? span / s[i] + 1 : 0;
      }
    }
  }
  // Cap the rows (the values stay as fuzzed).
  if (K > 0 && rows * K > kMaxWork) {
    rows = kMaxWork / K;
    flat.resize(static_cast<size_t>(rows * columns));
  }
  if (valid) {
    __int128 in_sites = batch, out_sites = batch;
    for (int i = 0; i < 3; ++i) in_sites *= in_shape[i], out_sites *= out_shape[i];
    valid = std::max(in_sites, out_sites) < (__int128{1} << 62);
  }
  std::vector<Site> sites(static_cast<size_t>(rows));
  std::map<Site, int64_t> row_of;
  for (int64_t r = 0; r < rows && layout != 7; ++r) {
    Site site{flat[r * 4], flat[r * 4 + 1], flat[r * 4 + 2], flat[r * 4 + 3]};
    sites[r] = site;
    if (!valid) continue;
    bool inside = site[0] >= 0 && site[0] < batch;
    for (int i = 0; i < 3; ++i) inside = inside && site[i + 1] >= 0 && site[i + 1] < in_shape[i];
    valid = inside && row_of.emplace(site, r).second;
  }

  // ------------------------------------------------------------- the call
  const Device cpu(DeviceType::CPU);
  Tensor indices;
  switch (layout) {
    case 5: {  // [N, 4] as the transpose of a [4, N] tensor
      std::vector<int32_t> transposed(flat.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int c = 0; c < 4; ++c) transposed[c * rows + r] = flat[r * 4 + c];
      indices = Tensor(tensorFromVector<int32_t>(transposed, {4, rows}, cpu)).t();
      break;
    }
    case 6: {
      std::vector<int64_t> wide(flat.begin(), flat.end());
      indices = tensorFromVector<int64_t>(wide, {rows, 4}, cpu);
      break;
    }
    case 7: indices = tensorFromVector<int32_t>(flat, {rows, 3}, cpu); break;
    default: indices = tensorFromVector<int32_t>(flat, {rows, 4}, cpu); break;
  }
  Result result;
  try {
    result = op.call(indices, batch, spatial, kernel, stride, padding, dilation, subm);
  } catch (const Error& e) {
    FUZZ_CHECK(e.message().find("spconv::get_indice_pairs") != std::string::npos,
               "an error does not name spconv::get_indice_pairs: " + e.message());
    FUZZ_CHECK(!valid, "valid arguments were refused: " + e.message());
    return 0;
  }
  FUZZ_CHECK(valid, "arguments the model refuses were accepted");

  // ----------------------------------------------------------- the rulebook
  const auto& [out_indices, pairs, counts] = result;
  FUZZ_CHECK(out_indices.dtype() == ScalarType::Int32 && pairs.dtype() == ScalarType::Int32 &&
                 counts.dtype() == ScalarType::Int32,
             "a result is not int32");
  FUZZ_CHECK(out_indices.dim() == 2 && out_indices.size(1) == 4, "out_indices is not [M, 4]");
  const int64_t M = out_indices.size(0);
  FUZZ_CHECK(pairs.dim() == 3 && pairs.size(0) == K && pairs.size(1) == 2 && pairs.size(2) == rows,
             "indice_pairs is not [K, 2, N]");
  FUZZ_CHECK(counts.dim() == 1 && counts.size(0) == K, "indice_pair_num is not [K]");
  const std::vector<int32_t> outs = out_indices.toVector<int32_t>(), pv = pairs.toVector<int32_t>(),
                             cv = counts.toVector<int32_t>();
  std::vector<Site> out_sites(static_cast<size_t>(M));
  for (int64_t o = 0; o < M; ++o) {
    Site site{outs[o * 4], outs[o * 4 + 1], outs[o * 4 + 2], outs[o * 4 + 3]};
    FUZZ_CHECK(site[0] >= 0 && site[0] < batch, "an output site is outside the batch");
    for (int i = 0; i < 3; ++i)
      FUZZ_CHECK(site[i + 1] >= 0 && site[i + 1] < out_shape[i], "an output site is outside the grid");
    out_sites[o] = site;
    if (subm) FUZZ_CHECK(site == sites[o], "a submanifold rulebook moved a site");
    if (!subm && o > 0) FUZZ_CHECK(out_sites[o - 1] < site, "output sites are not distinct and sorted");
  }
  if (subm) FUZZ_CHECK(M == rows, "a submanifold rulebook has another number of outputs");

  int64_t pairs_total = 0;
  for (int64_t kk = 0; kk < K; ++kk) {
    const int64_t n = cv[kk];
    FUZZ_CHECK(n >= 0 && n <= rows, "indice_pair_num is outside [0, N]");
    pairs_total += n;
    const Triple off{kk / (k[1] * k[2]), kk / k[2] % k[1], kk % k[2]};
    std::set<int64_t> seen_in;
    int64_t last_out = -1;
    for (int64_t j = 0; j < rows; ++j) {
      const int64_t i = pv[(kk * 2) * rows + j], o = pv[(kk * 2 + 1) * rows + j];
      if (j >= n) {
        FUZZ_CHECK(i == -1 && o == -1, "an unused pair entry is not -1");
        continue;
      }
      FUZZ_CHECK(i >= 0 && i < rows && o >= 0 && o < M, "a pair names a row out of range");
      FUZZ_CHECK(o > last_out, "an offset's pairs are not in ascending output row");
      last_out = o;
      FUZZ_CHECK(seen_in.insert(i).second, "an offset pairs one input twice");
      FUZZ_CHECK(sites[i][0] == out_sites[o][0], "a pair crosses batches");
      for (int a = 0; a < 3; ++a) {
        const int64_t want = subm ? out_sites[o][a + 1] + (off[a] - (k[a] - 1) / 2) * d[a]
                                  : out_sites[o][a + 1] * s[a] - p[a] + off[a] * d[a];
        FUZZ_CHECK(sites[i][a + 1] == want, "a pair's input is not at the kernel offset of its output");
      }
    }
  }
  // Every pair the geometry allows is there (each one found above is real
  // and distinct, so equal counts mean none is missing).
  int64_t expected = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t kk = 0; kk < K; ++kk) {
      const Triple off{kk / (k[1] * k[2]), kk / k[2] % k[1], kk % k[2]};
      bool hit = true;
      Site other{sites[r][0], 0, 0, 0};
      for (int a = 0; a < 3 && hit; ++a) {
        if (subm) {
          other[a + 1] = sites[r][a + 1] + (off[a] - (k[a] - 1) / 2) * d[a];
          hit = other[a + 1] >= 0 && other[a + 1] < in_shape[a];
        } else {
          const int64_t t = sites[r][a + 1] + p[a] - off[a] * d[a];
          hit = t >= 0 && t % s[a] == 0 && t / s[a] < out_shape[a];
        }
      }
      if (hit && subm) hit = row_of.count(other) != 0;
      expected += hit;
    }
  }
  FUZZ_CHECK(pairs_total == expected, "the rulebook has " + std::to_string(pairs_total) +
                                          " pairs; the geometry allows " + std::to_string(expected));
  return 0;
}
