// The spconv ops through the dispatcher, as an application calls them,
// checked against a plain dense reference on small random grids: densify,
// run the dense 3-D convolution (or its transpose, or max pooling) with
// loops, sample at the output sites. Every test runs on "cpu" (the CPU
// kernels) and on "spgen:0", a test device with no kernels that
// BACKPLANE_SPCONV_GENERIC_DEVICES names: there the device-generic path runs
// and every standard op it calls goes through the CPU fallback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/errors.h"
#include "spconv_ops.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;
using namespace spconv_test;  // Triple, Site, the ops

std::string g_load_log;  // what the plugins printed while loading

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    testing::TestDevice::install("spgen", 1);
    // Read by the spconv plugin when it loads: spgen gets the generic path,
    // the unknown name a warning.
    setenv("BACKPLANE_SPCONV_GENERIC_DEVICES", "spgen,nosuchdevice", 1);
    ASSERT_TRUE(plugins().load(BACKPLANE_CPU_PLUGIN_PATH).ok());
    // What the spconv plugin prints while loading is checked below, so it
    // loads here rather than through testing::PluginEnvironment.
    ::testing::internal::CaptureStderr();
    const bool loaded = plugins().load(BACKPLANE_SPCONV_PLUGIN_PATH).ok();
    g_load_log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(loaded) << g_load_log;
    Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Environment);

// --- calling the ops

// --- the dense reference

struct Geometry {
  Triple kernel{3, 3, 3}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  int64_t volume() const { return kernel[0] * kernel[1] * kernel[2]; }
};

Triple outShape(const Triple& in, const Geometry& g) {
  Triple o;
  for (int d = 0; d < 3; ++d)
    o[d] = (in[d] + 2 * g.padding[d] - g.dilation[d] * (g.kernel[d] - 1) - 1) / g.stride[d] + 1;
  return o;
}

// A dense grid of C-vectors with an activity mask.
struct Dense {
  int64_t batch;
  Triple shape;
  int64_t C;
  std::vector<double> values;
  std::vector<char> active;
  Dense(int64_t b, Triple s, int64_t c)
      : batch(b), shape(s), C(c), values(b * s[0] * s[1] * s[2] * c, 0.0), active(b * s[0] * s[1] * s[2], 0) {}
  int64_t cell(int64_t b, int64_t z, int64_t y, int64_t x) const {
    return ((b * shape[0] + z) * shape[1] + y) * shape[2] + x;
  }
  bool inside(int64_t z, int64_t y, int64_t x) const {
    return z >= 0 && y >= 0 && x >= 0 && z < shape[0] && y < shape[1] && x < shape[2];
  }
  double* at(int64_t cell_index) { return &values[cell_index * C]; }
};

Dense densify(int64_t batch, Triple shape, const std::vector<Site>& sites, const std::vector<double>& f, int64_t C) {
  Dense d(batch, shape, C);
  for (size_t i = 0; i < sites.size(); ++i) {
    const int64_t cell = d.cell(sites[i][0], sites[i][1], sites[i][2], sites[i][3]);
    d.active[cell] = 1;
    std::copy(f.begin() + i * C, f.begin() + (i + 1) * C, d.at(cell));
  }
  return d;
}

// Calls visit(out_cell, in_cell, k) for every (output position, kernel
// offset) of the dense output grid whose input position is active: the
// convolution's connectivity, enumerated on the dense grids.
template <class F>
void forEachConnection(const Dense& in, const Triple& out_shape, const Geometry& g, F&& visit) {
  for (int64_t b = 0; b < in.batch; ++b)
    for (int64_t oz = 0; oz < out_shape[0]; ++oz)
      for (int64_t oy = 0; oy < out_shape[1]; ++oy)
        for (int64_t ox = 0; ox < out_shape[2]; ++ox)
          for (int64_t kz = 0, k = 0; kz < g.kernel[0]; ++kz)
            for (int64_t ky = 0; ky < g.kernel[1]; ++ky)
              for (int64_t kx = 0; kx < g.kernel[2]; ++kx, ++k) {
                const int64_t z = oz * g.stride[0] - g.padding[0] + kz * g.dilation[0];
                const int64_t y = oy * g.stride[1] - g.padding[1] + ky * g.dilation[1];
                const int64_t x = ox * g.stride[2] - g.padding[2] + kx * g.dilation[2];
                if (!in.inside(z, y, x) || !in.active[in.cell(b, z, y, x)]) continue;
                const int64_t out_cell = ((b * out_shape[0] + oz) * out_shape[1] + oy) * out_shape[2] + ox;
                visit(out_cell, in.cell(b, z, y, x), k);
              }
}

// out[o] += in[i] @ W[k] with W [K, Cin, Cout].
void accumulate(const double* x, const std::vector<float>& w, int64_t k, int64_t cin, int64_t cout, double* y) {
  for (int64_t a = 0; a < cin; ++a)
    for (int64_t c = 0; c < cout; ++c) y[c] += x[a] * w[(k * cin + a) * cout + c];
}

struct Case {
  int64_t batch;
  Triple shape;
  std::vector<Site> sites;
  std::vector<float> features;
  int64_t cin;
};

// Random distinct sites (about `density` of the grid) in shuffled order.
Case randomCase(uint32_t seed, int64_t batch, Triple shape, int64_t cin, double density = 0.3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_real_distribution<float> value(-1, 1);
  Case c{batch, shape, {}, {}, cin};
  for (int32_t b = 0; b < batch; ++b)
    for (int32_t z = 0; z < shape[0]; ++z)
      for (int32_t y = 0; y < shape[1]; ++y)
        for (int32_t x = 0; x < shape[2]; ++x)
          if (coin(rng) < density) c.sites.push_back({b, z, y, x});
  std::shuffle(c.sites.begin(), c.sites.end(), rng);
  c.features.resize(c.sites.size() * cin);
  for (float& f : c.features) f = value(rng);
  return c;
}

std::vector<float> randomValues(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

std::vector<double> toDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

Site siteOfCell(int64_t cell, const Triple& shape) {
  Site s;
  s[3] = static_cast<int32_t>(cell % shape[2]);
  cell /= shape[2];
  s[2] = static_cast<int32_t>(cell % shape[1]);
  cell /= shape[1];
  s[1] = static_cast<int32_t>(cell % shape[0]);
  s[0] = static_cast<int32_t>(cell / shape[0]);
  return s;
}

std::vector<Site> sitesOf(const Tensor& indices) {
  std::vector<int32_t> v = indices.toVector<int32_t>();
  std::vector<Site> s(v.size() / 4);
  for (size_t i = 0; i < s.size(); ++i) s[i] = {v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]};
  return s;
}

void expectNear(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << what << " at element " << i;
}

// --- the fixture: every test on cpu and on the generic path

class Spconv : public ::testing::TestWithParam<std::string> {
 protected:
  Device dev() const { return Device::fromString(GetParam()); }
  Tensor indicesOf(const std::vector<Site>& sites) const {
    std::vector<int32_t> flat;
    for (const Site& s : sites) flat.insert(flat.end(), s.begin(), s.end());
    return tensorFromVector<int32_t>(flat, {static_cast<int64_t>(sites.size()), 4}, dev());
  }
  Tensor floats(const std::vector<float>& v, std::vector<int64_t> sizes) const {
    return tensorFromVector<float>(v, sizes, dev());
  }
  Tensor filters(const std::vector<float>& w, const Geometry& g, int64_t cin, int64_t cout) const {
    return floats(w, {g.kernel[0], g.kernel[1], g.kernel[2], cin, cout});
  }
  PairsResult pairs(const Case& c, const Geometry& g, bool subm) const {
    return getIndicePairs(indicesOf(c.sites), c.batch, c.shape, g.kernel, g.stride, g.padding, g.dilation, subm);
  }
};

std::string describe(const Geometry& g) {
  std::string s = "kernel ";
  for (int64_t v : g.kernel) s += std::to_string(v) + " ";
  s += "stride ";
  for (int64_t v : g.stride) s += std::to_string(v) + " ";
  s += "padding ";
  for (int64_t v : g.padding) s += std::to_string(v) + " ";
  s += "dilation ";
  for (int64_t v : g.dilation) s += std::to_string(v) + " ";
  return s;
}

// (Cin, Cout) pairs that take each CPU forward path: the sgemm tiles, and
// the direct kernel with one, two and four vectors of 16 outputs.
const std::vector<std::pair<int64_t, int64_t>> kChannels = {{3, 4}, {5, 16}, {8, 32}, {2, 64}};

// The documented rulebook order (plugins/spconv/README.md): within each
// offset, pairs in strictly ascending output row.
void expectOutputRowsAscend(const Tensor& pairs, const Tensor& num) {
  const std::vector<int32_t> p = pairs.toVector<int32_t>(), counts = num.toVector<int32_t>();
  const int64_t capacity = pairs.size(2);
  for (size_t k = 0; k < counts.size(); ++k) {
    const int32_t* out = p.data() + (2 * k + 1) * capacity;
    for (int32_t j = 1; j < counts[k]; ++j)
      ASSERT_LT(out[j - 1], out[j]) << "kernel offset " << k << ", pairs " << j - 1 << " and " << j;
  }
}

const std::vector<Geometry> kRegularGeometries = {
    {{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}},
    {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}},
    {{3, 3, 3}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}}, {{5, 5, 5}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}},
    {{3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2}}, {{5, 5, 5}, {2, 2, 2}, {1, 1, 1}, {2, 2, 2}},
    {{3, 1, 2}, {2, 1, 3}, {1, 0, 1}, {1, 2, 1}},
};

TEST_P(Spconv, RegularConvMatchesTheDenseReference) {
  uint32_t seed = 1;
  for (const auto& [cin, cout] : kChannels) {
    for (const Geometry& g : kRegularGeometries) {
      SCOPED_TRACE(describe(g) + " Cin " + std::to_string(cin) + " Cout " + std::to_string(cout));
      const Case c = randomCase(seed++, 2, {7, 8, 9}, cin);
      const std::vector<float> w = randomValues(seed++, g.volume() * cin * cout);
      auto [out_indices, pairs_t, num] = pairs(c, g, false);

      const Dense in = densify(c.batch, c.shape, c.sites, toDouble(c.features), cin);
      const Triple os = outShape(c.shape, g);
      Dense out(c.batch, os, cout);
      int64_t connections = 0;
      forEachConnection(in, os, g, [&](int64_t o, int64_t i, int64_t k) {
        out.active[o] = 1;
        accumulate(&in.values[i * cin], w, k, cin, cout, out.at(o));
        ++connections;
      });
      std::vector<Site> want_sites;
      std::vector<double> want;
      for (int64_t cell = 0; cell < static_cast<int64_t>(out.active.size()); ++cell) {
        if (!out.active[cell]) continue;
        want_sites.push_back(siteOfCell(cell, os));
        want.insert(want.end(), out.at(cell), out.at(cell) + cout);
      }
      // Outputs are exactly the reachable sites, sorted by (batch, z, y, x).
      ASSERT_EQ(sitesOf(out_indices), want_sites);
      expectOutputRowsAscend(pairs_t, num);
      const std::vector<int32_t> counts = num.toVector<int32_t>();
      EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), connections);
      const int64_t m = out_indices.size(0);
      Tensor y = indiceConv(floats(c.features, {static_cast<int64_t>(c.sites.size()), cin}), filters(w, g, cin, cout),
                            pairs_t, num, m, false, false);
      EXPECT_EQ(y.device(), dev());
      expectNear(y.toVector<float>(), want, "features");
    }
  }
}

TEST_P(Spconv, SubmanifoldConvKeepsTheSitesAndMatchesTheDenseReference) {
  const std::vector<Geometry> geometries = {{{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}},
                                            {{3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}},
                                            {{5, 5, 5}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}},
                                            {{3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {2, 2, 2}},
                                            {{3, 1, 5}, {1, 1, 1}, {0, 0, 0}, {1, 3, 1}}};
  uint32_t seed = 100;
  for (const auto& [cin, cout] : kChannels) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(describe(g) + " Cin " + std::to_string(cin) + " Cout " + std::to_string(cout));
      const Case c = randomCase(seed++, 2, {6, 7, 8}, cin);
      const std::vector<float> w = randomValues(seed++, g.volume() * cin * cout);
      auto [out_indices, pairs_t, num] = pairs(c, g, true);
      ASSERT_EQ(sitesOf(out_indices), c.sites);  // the inputs, in their order
      expectOutputRowsAscend(pairs_t, num);
      // The dense reference: a stride-1 convolution with centred padding, sampled at the input sites.
      Geometry centred = g;
      for (int d = 0; d < 3; ++d) centred.padding[d] = g.dilation[d] * (g.kernel[d] - 1) / 2;
      const Dense in = densify(c.batch, c.shape, c.sites, toDouble(c.features), cin);
      Dense out(c.batch, c.shape, cout);
      forEachConnection(in, c.shape, centred, [&](int64_t o, int64_t i, int64_t k) {
        accumulate(&in.values[i * cin], w, k, cin, cout, out.at(o));
      });
      std::vector<double> want;
      for (const Site& s : c.sites) {
        const double* v = out.at(out.cell(s[0], s[1], s[2], s[3]));
        want.insert(want.end(), v, v + cout);
      }
      const int64_t n = static_cast<int64_t>(c.sites.size());
      const Tensor f = floats(c.features, {n, cin}), wt = filters(w, g, cin, cout);
      expectNear(indiceConv(f, wt, pairs_t, num, n, false, true).toVector<float>(), want, "subm=True");
      // subm=True only skips work: the same rulebook as a regular one gives the same result.
      expectNear(indiceConv(f, wt, pairs_t, num, n, false, false).toVector<float>(), want, "subm=False");
    }
  }
}

// The inverse of a strided convolution maps the strided outputs back onto
// the forward's input sites: a transposed convolution restricted to them.
TEST_P(Spconv, InverseConvMatchesTheDenseTransposedConvolution) {
  const std::vector<Geometry> geometries = {{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}},
                                            {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}},
                                            {{3, 3, 3}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}},
                                            {{3, 2, 3}, {2, 1, 2}, {1, 0, 2}, {1, 1, 2}}};
  uint32_t seed = 200;
  // Of the inverse; its rulebook is in the forward's output order, not its
  // own, so the CPU's direct kernel sorts the pairs first.
  for (const auto& [cin, cout] : std::vector<std::pair<int64_t, int64_t>>{{5, 2}, {3, 16}, {4, 32}, {2, 64}}) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(describe(g) + " Cin " + std::to_string(cin) + " Cout " + std::to_string(cout));
      const Case c = randomCase(seed++, 2, {7, 8, 9}, 1);
      auto [down_indices, pairs_t, num] = pairs(c, g, false);
      const std::vector<Site> down = sitesOf(down_indices);
      const int64_t m = static_cast<int64_t>(down.size()), n = static_cast<int64_t>(c.sites.size());
      const std::vector<float> f = randomValues(seed++, m * cin), w = randomValues(seed++, g.volume() * cin * cout);

      const Triple os = outShape(c.shape, g);
      const Dense fwd_in = densify(c.batch, c.shape, c.sites, std::vector<double>(n, 0.0), 1);
      const Dense inv_in = densify(c.batch, os, down, toDouble(f), cin);
      Dense inv_out(c.batch, c.shape, cout);
      forEachConnection(fwd_in, os, g, [&](int64_t o, int64_t i, int64_t k) {
        if (inv_in.active[o]) accumulate(&inv_in.values[o * cin], w, k, cin, cout, inv_out.at(i));
      });
      std::vector<double> want;
      for (const Site& s : c.sites) {
        const double* v = inv_out.at(inv_out.cell(s[0], s[1], s[2], s[3]));
        want.insert(want.end(), v, v + cout);
      }
      Tensor y = indiceConv(floats(f, {m, cin}), filters(w, g, cin, cout), pairs_t, num, n, true, false);
      expectNear(y.toVector<float>(), want, "inverse");
    }
  }
}

// A rulebook is any list of pairs per offset: one whose pairs are shuffled
// within each offset (not in get_indice_pairs' output order) gives the
// same result, bit for bit, since every output row still sums its offsets
// in offset order. (The grid has more output rows than a CPU task takes,
// so that pairs are found per tile.)
TEST_P(Spconv, ARulebookInAnyPairOrderGivesTheSameResult) {
  const Geometry g{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  uint32_t seed = 300;
  for (const auto& [cin, cout] : kChannels) {
    SCOPED_TRACE("Cin " + std::to_string(cin) + " Cout " + std::to_string(cout));
    const Case c = randomCase(seed++, 2, {16, 16, 16}, cin, 0.25);
    const int64_t n = static_cast<int64_t>(c.sites.size());
    auto [out_indices, pairs_t, num] = pairs(c, g, false);
    const Tensor f = floats(c.features, {n, cin}), w = filters(randomValues(seed++, 27 * cin * cout), g, cin, cout);
    const std::vector<float> want = indiceConv(f, w, pairs_t, num, out_indices.size(0), false, false).toVector<float>();

    std::vector<int32_t> p = pairs_t.toVector<int32_t>();
    const std::vector<int32_t> counts = num.toVector<int32_t>();
    const int64_t capacity = pairs_t.size(2);
    std::mt19937 rng(seed++);
    for (size_t k = 0; k < counts.size(); ++k) {
      std::vector<int32_t> perm(counts[k]);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      int32_t *in = p.data() + 2 * k * capacity, *out = in + capacity;
      const std::vector<int32_t> in0(in, in + counts[k]), out0(out, out + counts[k]);
      for (int32_t j = 0; j < counts[k]; ++j) {
        in[j] = in0[perm[j]];
        out[j] = out0[perm[j]];
      }
    }
    const Tensor shuffled = tensorFromVector<int32_t>(p, {27, 2, capacity}, dev());
    EXPECT_EQ(indiceConv(f, w, shuffled, num, out_indices.size(0), false, false).toVector<float>(), want);
  }
}

// Gradients of L = sum(out * G) against the dense reference's.
TEST_P(Spconv, BackwardMatchesTheDenseGradients) {
  struct Mode {
    Geometry g;
    bool subm, inverse;
  };
  const std::vector<Mode> modes = {{{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, false, false},
                                   {{{2, 3, 2}, {1, 2, 2}, {0, 1, 0}, {2, 1, 1}}, false, false},
                                   {{{3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, true, false},
                                   {{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, false, true}};
  uint32_t seed = 300;
  for (const Mode& mode : modes) {
    const Geometry& g = mode.g;
    SCOPED_TRACE(describe(g) + (mode.subm ? "subm" : mode.inverse ? "inverse" : "regular"));
    const int64_t cin = 3, cout = 4;
    const Case c = randomCase(seed++, 2, {6, 7, 8}, cin);
    auto [out_indices, pairs_t, num] = pairs(c, g, mode.subm);
    const int64_t n = static_cast<int64_t>(c.sites.size()), m = out_indices.size(0);
    // The forward's connectivity on dense grids: (input cell, output cell, k).
    Geometry dense_g = g;
    if (mode.subm)
      for (int d = 0; d < 3; ++d) dense_g.padding[d] = g.dilation[d] * (g.kernel[d] - 1) / 2;
    const Triple os = mode.subm ? c.shape : outShape(c.shape, g);
    const std::vector<Site> outs = sitesOf(out_indices);
    // The op's input / output sites (swapped for inverse).
    const std::vector<Site>& x_sites = mode.inverse ? outs : c.sites;
    const std::vector<Site>& y_sites = mode.inverse ? c.sites : outs;
    const int64_t nx = mode.inverse ? m : n, ny = mode.inverse ? n : m;
    const std::vector<float> x = randomValues(seed++, nx * cin), grad = randomValues(seed++, ny * cout),
                             w = randomValues(seed++, g.volume() * cin * cout);
    const Dense fwd_in = densify(c.batch, c.shape, c.sites, std::vector<double>(n, 0.0), 1);
    const Triple x_shape = mode.inverse ? os : c.shape, y_shape = mode.inverse ? c.shape : os;
    const Dense X = densify(c.batch, x_shape, x_sites, toDouble(x), cin);
    const Dense G = densify(c.batch, y_shape, y_sites, toDouble(grad), cout);
    Dense dX(c.batch, x_shape, cin);
    std::vector<double> dW(w.size(), 0.0);
    forEachConnection(fwd_in, os, dense_g, [&](int64_t o, int64_t i, int64_t k) {
      const int64_t xc = mode.inverse ? o : i, yc = mode.inverse ? i : o;
      if (!X.active[xc] || !G.active[yc]) return;
      for (int64_t a = 0; a < cin; ++a)
        for (int64_t b = 0; b < cout; ++b) {
          dX.values[xc * cin + a] += G.values[yc * cout + b] * w[(k * cin + a) * cout + b];
          dW[(k * cin + a) * cout + b] += X.values[xc * cin + a] * G.values[yc * cout + b];
        }
    });
    std::vector<double> want_dx;
    for (const Site& s : x_sites) {
      const int64_t cell = dX.cell(s[0], s[1], s[2], s[3]);
      want_dx.insert(want_dx.end(), &dX.values[cell * cin], &dX.values[(cell + 1) * cin]);
    }
    auto [dx, dw] = indiceConvBackward(floats(x, {nx, cin}), filters(w, g, cin, cout), floats(grad, {ny, cout}),
                                       pairs_t, num, mode.inverse, mode.subm);
    EXPECT_EQ(dx.device(), dev());
    expectNear(dx.toVector<float>(), want_dx, "input_grad");
    EXPECT_EQ(dw.sizes(), IntArrayRef({g.kernel[0], g.kernel[1], g.kernel[2], cin, cout}));
    expectNear(dw.toVector<float>(), dW, "filters_grad");
  }
}

TEST_P(Spconv, MaxPoolMatchesTheDenseReferenceAndRoutesEachGradientOnce) {
  const std::vector<Geometry> geometries = {{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}},
                                            {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}};
  uint32_t seed = 400;
  for (const Geometry& g : geometries) {
    SCOPED_TRACE(describe(g));
    const int64_t C = 3;
    Case c = randomCase(seed++, 2, {6, 7, 8}, C, 0.4);
    for (size_t i = 0; i < c.features.size(); i += 4) c.features[i] = 0;  // ties: the gradient goes to one input
    const int64_t n = static_cast<int64_t>(c.sites.size());
    auto [out_indices, pairs_t, num] = pairs(c, g, false);
    const int64_t m = out_indices.size(0);
    const Triple os = outShape(c.shape, g);
    const Dense in = densify(c.batch, c.shape, c.sites, toDouble(c.features), C);
    // Forward: the max over the window; backward: to the first input (in offset order) holding it.
    Dense out(c.batch, os, C);
    std::map<int64_t, std::vector<std::vector<int64_t>>> window;  // out cell -> inputs in offset order
    forEachConnection(in, os, g, [&](int64_t o, int64_t i, int64_t) {
      auto& w = window[o];
      if (w.empty()) out.active[o] = 1;
      w.push_back({i});
    });
    const std::vector<float> grad = randomValues(seed++, m * C);
    const std::vector<Site> outs = sitesOf(out_indices);
    std::vector<double> want_y, want_dx_dense(in.values.size(), 0.0);
    for (size_t r = 0; r < outs.size(); ++r) {
      const int64_t o = out.cell(outs[r][0], outs[r][1], outs[r][2], outs[r][3]);
      for (int64_t ch = 0; ch < C; ++ch) {
        double best = -INFINITY;
        int64_t arg = -1;
        for (const auto& i : window[o])
          if (in.values[i[0] * C + ch] > best) best = in.values[i[0] * C + ch], arg = i[0];
        want_y.push_back(best);
        want_dx_dense[arg * C + ch] += grad[r * C + ch];
      }
    }
    std::vector<double> want_dx;
    for (const Site& s : c.sites) {
      const int64_t cell = in.cell(s[0], s[1], s[2], s[3]);
      want_dx.insert(want_dx.end(), &want_dx_dense[cell * C], &want_dx_dense[(cell + 1) * C]);
    }
    const Tensor f = floats(c.features, {n, C});
    Tensor y = indiceMaxpool(f, pairs_t, num, m);
    EXPECT_EQ(y.device(), dev());
    expectNear(y.toVector<float>(), want_y, "maxpool");
    Tensor dx = indiceMaxpoolBackward(f, y, floats(grad, {m, C}), pairs_t, num);
    expectNear(dx.toVector<float>(), want_dx, "maxpool backward");
  }
}

TEST_P(Spconv, OutputsAreSortedAndDoNotDependOnTheInputOrderOrTheRun) {
  const Geometry g{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}};
  const int64_t cin = 8, cout = 8;
  Case c = randomCase(500, 3, {9, 10, 11}, cin);
  const std::vector<float> w = randomValues(501, g.volume() * cin * cout);
  const int64_t n = static_cast<int64_t>(c.sites.size());
  auto run = [&](const Case& cs) {
    auto [idx, p, num] = pairs(cs, g, false);
    return std::make_pair(sitesOf(idx), indiceConv(floats(cs.features, {n, cin}), filters(w, g, cin, cout), p, num,
                                                   idx.size(0), false, false)
                                            .toVector<float>());
  };
  const auto first = run(c);
  EXPECT_TRUE(std::is_sorted(first.first.begin(), first.first.end()));
  EXPECT_EQ(run(c), first);  // bit for bit
  // Reversing the input rows changes neither the output sites nor their features.
  Case reversed = c;
  std::reverse(reversed.sites.begin(), reversed.sites.end());
  for (int64_t i = 0; i < n; ++i)
    std::copy(c.features.begin() + (n - 1 - i) * cin, c.features.begin() + (n - i) * cin,
              reversed.features.begin() + i * cin);
  const auto second = run(reversed);
  EXPECT_EQ(second.first, first.first);
  expectNear(second.second, toDouble(first.second), "reversed input");
}

TEST_P(Spconv, EmptyInputGivesEmptyOutputs) {
  for (bool subm : {false, true}) {
    Case c{2, {5, 5, 5}, {}, {}, 3};
    const Geometry g{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
    auto [idx, p, num] = pairs(c, g, subm);
    EXPECT_EQ(idx.sizes(), IntArrayRef({0, 4}));
    EXPECT_EQ(p.sizes(), IntArrayRef({27, 2, 0}));
    EXPECT_EQ(num.toVector<int32_t>(), std::vector<int32_t>(27, 0));
    const Tensor f = floats({}, {0, 3}), w = filters(randomValues(1, 27 * 3 * 2), g, 3, 2);
    EXPECT_EQ(indiceConv(f, w, p, num, 0, false, subm).sizes(), IntArrayRef({0, 2}));
    auto [dx, dw] = indiceConvBackward(f, w, floats({}, {0, 2}), p, num, false, subm);
    EXPECT_EQ(dx.sizes(), IntArrayRef({0, 3}));
    EXPECT_EQ(dw.toVector<float>(), std::vector<float>(27 * 3 * 2, 0.0f));
    EXPECT_EQ(indiceMaxpool(f, p, num, 0).sizes(), IntArrayRef({0, 3}));
  }
}

TEST_P(Spconv, BadSitesAreRejectedNamingTheFirstOffendingRow) {
  const Geometry g;
  auto build = [&](std::vector<Site> sites, int64_t batch = 2, Triple shape = {4, 5, 6}) {
    return testing::errorOf([&] { pairs(Case{batch, shape, sites, {}, 1}, g, true); });
  };
  EXPECT_THAT(build({{0, 1, 1, 1}, {1, 2, 2, 2}, {0, 3, 3, 3}, {1, 2, 2, 2}, {0, 3, 3, 3}}),
              AllOf(HasSubstr("rows 1 and 3"), HasSubstr("(1, 2, 2, 2)"), HasSubstr("appear once")));
  EXPECT_THAT(build({{0, 1, 1, 1}, {0, 1, -1, 1}, {0, 9, 9, 9}}),
              AllOf(HasSubstr("row 1 = (0, 1, -1, 1)"), HasSubstr("y = -1 is negative")));
  EXPECT_THAT(
      build({{0, 1, 1, 1}, {0, 1, 1, 6}}),
      AllOf(HasSubstr("row 1"), HasSubstr("x = 6 is outside spatial_shape [4, 5, 6]"), HasSubstr("valid: 0 to 5")));
  EXPECT_THAT(build({{0, 1, 1, 1}, {0, 1, 1, 2}, {2, 0, 0, 0}}),
              AllOf(HasSubstr("row 2"), HasSubstr("batch index 2 is >= batch_size 2")));
  EXPECT_THAT(build({{-1, 0, 0, 0}}), AllOf(HasSubstr("row 0"), HasSubstr("batch index -1 is negative")));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(tensorFromVector<int64_t>({0, 0, 0, 0}, {1, 4}, dev()), 1, {4, 4, 4}, g.kernel, g.stride,
                               g.padding, g.dilation, false);
              }),
              AllOf(HasSubstr("dtype int32"), HasSubstr("int64")));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(tensorFromVector<int32_t>({0, 0, 0}, {1, 3}, dev()), 1, {4, 4, 4}, g.kernel, g.stride,
                               g.padding, g.dilation, false);
              }),
              HasSubstr("shape [N, 4]"));
  const Tensor one = indicesOf({{0, 1, 1, 1}});
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(one, 1, {4, 4, 4}, {2, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, true);
              }),
              HasSubstr("kernel sizes must be odd"));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(one, 1, {4, 4, 4}, {3, 3, 3}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, true);
              }),
              HasSubstr("stride must be 1"));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(one, 1, {4, 4, 4}, {5, 5, 5}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, false);
              }),
              HasSubstr("the kernel does not fit"));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(one, 1, {4, 0, 4}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, false);
              }),
              HasSubstr("spatial_shape values must be in [1, 2^31 - 1], got [4, 0, 4]"));
}

TEST_P(Spconv, BadConvArgumentsAreRejected) {
  const Geometry g;
  const Case c = randomCase(600, 1, {4, 4, 4}, 2);
  const int64_t n = static_cast<int64_t>(c.sites.size());
  auto [idx, p, num] = pairs(c, g, true);
  const Tensor f = floats(c.features, {n, 2});
  EXPECT_THAT(
      testing::errorOf([&] { indiceConv(f, filters(randomValues(1, 27 * 3 * 2), g, 3, 2), p, num, n, false, true); }),
      HasSubstr("take Cin = 3 channels but features have 2"));
  const Tensor w1 = floats(randomValues(1, 2 * 2), {1, 1, 1, 2, 2});
  EXPECT_THAT(testing::errorOf([&] { indiceConv(f, w1, p, num, n, false, true); }),
              HasSubstr("indice_pairs has 27 kernel offsets but the filters have 1"));
  const Tensor w = filters(randomValues(1, 27 * 2 * 2), g, 2, 2);
  EXPECT_THAT(testing::errorOf([&] { indiceConv(f, w, p, num, n + 1, false, true); }), HasSubstr("num_out must equal"));
  if (dev().isCpu()) {  // the CPU kernel reads the pairs themselves
    EXPECT_THAT(testing::errorOf([&] { indiceConv(f, w, p, num, n - 1, false, false); }),
                AllOf(HasSubstr("outside the"), HasSubstr("output rows")));
    const Geometry strided{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}};
    auto [idx2, p2, num2] = pairs(c, strided, false);
    EXPECT_THAT(testing::errorOf([&] { indiceConv(f, w, p2, num2, n, false, true); }),
                HasSubstr("does not pair every site with itself"));

    // A row twice within one offset is an error naming it, and leaves
    // nothing behind: the next call with a good rulebook is right.
    const std::vector<float> want = indiceConv(f, w, p, num, n, false, false).toVector<float>();
    const std::vector<int32_t> flat = p.toVector<int32_t>(), counts = num.toVector<int32_t>();
    const int64_t capacity = p.size(2);
    int64_t k = 0;
    while (k == 13 || counts[k] < 2) ++k;
    for (int row : {0, 1}) {  // 0: an input row repeats, 1: an output row
      std::vector<int32_t> bad = flat;
      int32_t* list = bad.data() + (2 * k + row) * capacity;
      list[1] = list[0];
      const Tensor bad_pairs = tensorFromVector<int32_t>(bad, {27, 2, capacity}, dev());
      const std::string expected = "kernel offset " + std::to_string(k) + " uses " + (row == 0 ? "input" : "output") +
                                   " row " + std::to_string(list[0]) + " twice";
      EXPECT_THAT(testing::errorOf([&] { indiceConv(f, w, bad_pairs, num, n, false, false); }), HasSubstr(expected));
      EXPECT_THAT(testing::errorOf([&] {
                    indiceConvBackward(f, w, floats(want, {n, 2}), bad_pairs, num, false, false);
                  }),
                  HasSubstr(expected));
      EXPECT_EQ(indiceConv(f, w, p, num, n, false, false).toVector<float>(), want);
    }
  }
}

// Note [Coordinate keys]: beyond 2^31 sites keys are 64-bit. In a 2048^3
// grid (2^33 sites) (0, 0, 0, 0) and (0, 1024, 0, 0) are 2^32 apart: 32-bit
// keys would merge them.
TEST_P(Spconv, HugeGridsUse64BitKeys) {
  const Triple huge{2048, 2048, 2048};
  const std::vector<Site> cluster = {{0, 1024, 0, 0}, {0, 1024, 0, 1}, {0, 1025, 1, 1}, {0, 0, 0, 0}, {0, 0, 1, 0}};
  const Geometry g;
  auto [idx, p, num] = getIndicePairs(indicesOf(cluster), 1, huge, g.kernel, g.stride, g.padding, g.dilation, true);
  // The same sites moved into a small grid (z 1024 -> 4) pair up the same way.
  std::vector<Site> small = cluster;
  for (Site& s : small)
    if (s[1] >= 1024) s[1] -= 1020;
  auto [idx_s, p_s, num_s] =
      getIndicePairs(indicesOf(small), 1, {8, 8, 8}, g.kernel, g.stride, g.padding, g.dilation, true);
  EXPECT_EQ(num.toVector<int32_t>(), num_s.toVector<int32_t>());
  EXPECT_EQ(p.toVector<int32_t>(), p_s.toVector<int32_t>());
  // A strided convolution far out in the grid: outputs decode from 64-bit keys.
  auto [down, p2, num2] = getIndicePairs(indicesOf({{1, 2046, 2046, 2000}, {1, 2047, 0, 0}}), 2, huge, {1, 1, 1},
                                         {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false);
  EXPECT_EQ(sitesOf(down), std::vector<Site>({{1, 1023, 1023, 1000}}));
  EXPECT_EQ(p2.toVector<int32_t>(), std::vector<int32_t>({0, -1, 0, -1}));  // (2047, 0, 0) falls between strides
}

TEST(SpconvPlugin, GenericPathMatchesTheCpuKernels) {
  const Geometry g{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}};
  const int64_t cin = 6, cout = 5;
  const Case c = randomCase(700, 2, {8, 9, 10}, cin);
  const int64_t n = static_cast<int64_t>(c.sites.size());
  const std::vector<float> w = randomValues(701, g.volume() * cin * cout);
  std::vector<int32_t> flat;
  for (const Site& s : c.sites) flat.insert(flat.end(), s.begin(), s.end());
  auto run = [&](Device d) {
    Tensor idx = tensorFromVector<int32_t>(flat, {n, 4}, d);
    auto [out_idx, p, num] = getIndicePairs(idx, c.batch, c.shape, g.kernel, g.stride, g.padding, g.dilation, false);
    Tensor f = tensorFromVector<float>(c.features, {n, cin}, d);
    Tensor wt = tensorFromVector<float>(w, {3, 3, 3, cin, cout}, d);
    Tensor y = indiceConv(f, wt, p, num, out_idx.size(0), false, false);
    auto [dx, dw] = indiceConvBackward(f, wt, y, p, num, false, false);
    return std::make_tuple(out_idx.toVector<int32_t>(), p.toVector<int32_t>(), y.toVector<float>(),
                           dx.toVector<float>(), dw.toVector<float>());
  };
  const auto here = run(Device::fromString("spgen:0")), cpu = run(Device(DeviceType::CPU));
  EXPECT_EQ(std::get<0>(here), std::get<0>(cpu));
  EXPECT_EQ(std::get<1>(here), std::get<1>(cpu));
  expectNear(std::get<2>(here), toDouble(std::get<2>(cpu)), "features");
  expectNear(std::get<3>(here), toDouble(std::get<3>(cpu)), "input_grad");
  expectNear(std::get<4>(here), toDouble(std::get<4>(cpu)), "filters_grad");
}

INSTANTIATE_TEST_SUITE_P(Devices, Spconv, ::testing::Values("cpu", "spgen:0"),
                         [](const auto& info) { return info.param == "cpu" ? "cpu" : "generic"; });

TEST(SpconvPlugin, GenericPathRunsNativelyOnTheNamedDeviceAndWarnsAboutUnknownNames) {
  EXPECT_THAT(g_load_log, AllOf(HasSubstr("nosuchdevice"), HasSubstr("not registered")));
  const DeviceType spgen = Device::fromString("spgen:0").type;
  for (const char* name : {"spconv::get_indice_pairs", "spconv::indice_conv", "spconv::indice_conv_backward"}) {
    EXPECT_EQ(Dispatcher::singleton().findOpOrThrow(name).kernelKind(backendKey(spgen)), KernelKind::Native) << name;
  }
  EXPECT_EQ(Dispatcher::singleton().findOpOrThrow("spconv::indice_maxpool").kernelKind(backendKey(spgen)),
            KernelKind::CpuFallback);
}

}  // namespace
}  // namespace backplane
