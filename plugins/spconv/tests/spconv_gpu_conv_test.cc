// The sparse convolutions and max pooling on a GPU plugin (Note [Sparse
// convolution kernels on the GPU] in plugins/spconv/gpu/spconv_conv.cu), on
// the simulator "gpusim:0", against the CPU kernels: the rulebook is built
// on the CPU, the tensors are copied to the device, and every op runs on
// both. Submanifold, regular and inverse convolutions; float32 in the
// default (atomic) and the deterministic mode, float16 and bfloat16;
// channel counts that do not fill the kernels' 64-wide tiles; offsets with
// no pairs and output rows no pair reaches; max pooling with ties; the
// errors; and that the ops run on the device, with no fallback and no host
// round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "spconv_ops.h"

namespace backplane {
namespace {

using namespace spconv_test;  // Triple, PairsResult, the ops

// The plugins are loaded once for the program (spconv_gpu_test_env.cc).

Device gpu() { return Device::fromString("gpusim:0"); }
Device cpu() { return Device(DeviceType::CPU); }

// --- calling the ops

// get_indice_pairs without dilation.
PairsResult getIndicePairs(const Tensor& indices, int64_t batch, Triple shape, Triple kernel, Triple stride,
                           Triple padding, bool subm) {
  return spconv_test::getIndicePairs(indices, batch, shape, kernel, stride, padding, {1, 1, 1}, subm);
}

void setDeterministic(bool enabled) {
  static const auto op = Dispatcher::singleton().findOpOrThrow("gpusim::set_deterministic").typed<void(bool)>();
  op.call(enabled);
}
bool deterministic() {
  static const auto op = Dispatcher::singleton().findOpOrThrow("gpusim::deterministic").typed<bool()>();
  return op.call();
}
int64_t activity(std::string_view name) { return simActivity(name); }

// The deterministic mode for one scope, restored after.
class DeterministicScope {
 public:
  explicit DeterministicScope(bool enabled) : previous_(deterministic()) { setDeterministic(enabled); }
  ~DeterministicScope() { setDeterministic(previous_); }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool previous_;
};

// --- cases

std::vector<float> randomValues(uint32_t seed, size_t n, bool relu = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = relu ? std::max(0.0f, value(rng)) : value(rng);
  return v;
}
Tensor randomTensor(uint32_t seed, std::vector<int64_t> sizes, bool relu = false) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return tensorFromVector<float>(randomValues(seed, static_cast<size_t>(n), relu), sizes, cpu());
}

// Random distinct sites (about 30% of the grid), shuffled, as int32 [N, 4] on the CPU.
Tensor randomIndices(uint32_t seed, int64_t batch, Triple shape) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<std::array<int32_t, 4>> sites;
  for (int32_t b = 0; b < batch; ++b)
    for (int32_t z = 0; z < shape[0]; ++z)
      for (int32_t y = 0; y < shape[1]; ++y)
        for (int32_t x = 0; x < shape[2]; ++x)
          if (coin(rng) < 0.3) sites.push_back({b, z, y, x});
  std::shuffle(sites.begin(), sites.end(), rng);
  std::vector<int32_t> flat;
  for (const auto& s : sites) flat.insert(flat.end(), s.begin(), s.end());
  return tensorFromVector<int32_t>(flat, {static_cast<int64_t>(sites.size()), 4}, cpu());
}

// One convolution's rulebook (on the CPU) and how a call uses it.
struct Conv {
  std::string name;
  Tensor pairs, num;
  int64_t num_in, num_out;
  bool inverse, subm;
};

// Submanifold, strided regular, the same with rows no pair reaches, and its
// inverse, on one random grid.
std::vector<Conv> convolutions() {
  const Triple shape{5, 6, 7};
  const Tensor indices = randomIndices(7, 2, shape);
  const int64_t n = indices.size(0);
  auto [subm_out, subm_pairs, subm_num] = getIndicePairs(indices, 2, shape, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true);
  auto [out_indices, pairs, num] = getIndicePairs(indices, 2, shape, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false);
  const int64_t m = out_indices.size(0);
  return {
      {"subm", subm_pairs, subm_num, n, n, false, true},
      {"regular", pairs, num, n, m, false, false},
      {"regular, 5 rows no pair reaches", pairs, num, n, m + 5, false, false},
      {"inverse", pairs, num, m, n, true, false},
  };
}

// (Cin, Cout): below a tile, across two column tiles and a partial depth step, one exact tile.
const std::vector<std::pair<int64_t, int64_t>> kChannels = {{3, 4}, {17, 70}, {16, 64}};

struct Precision {
  const char* name;
  ScalarType dtype;
  bool deterministic;
  double tolerance;  // relative to 1 + |expected|
};
const std::vector<Precision> kPrecisions = {
    {"float32, default", ScalarType::Float32, false, 1e-5},
    {"float32, deterministic", ScalarType::Float32, true, 1e-5},
    {"float16", ScalarType::Float16, false, 2e-3},
    {"bfloat16", ScalarType::BFloat16, false, 1.6e-2},
};

// `t` on the device in `dtype`; `reference` receives the values the device
// holds, back on the CPU as float32 (so the CPU reference starts from the
// same rounded inputs).
Tensor onDevice(const Tensor& t, ScalarType dtype, Tensor& reference) {
  const Tensor d = t.to(gpu()).to(dtype);
  reference = d.to(cpu()).to(ScalarType::Float32);
  return d;
}
Tensor onDevice(const Tensor& t) { return t.to(gpu()); }

std::vector<float> hostValues(const Tensor& t) { return t.to(cpu()).to(ScalarType::Float32).toVector<float>(); }

void expectClose(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.device(), gpu()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<float> g = hostValues(got), w = want.toVector<float>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], tolerance * (1 + std::abs(w[i]))) << what << " at element " << i;
}

TEST(SpconvGpuConv, ForwardMatchesTheCpuKernels) {
  uint32_t seed = 100;
  for (const Conv& c : convolutions()) {
    for (const auto& [cin, cout] : kChannels) {
      const Tensor x = randomTensor(seed++, {c.num_in, cin}), w = randomTensor(seed++, {3, 3, 3, cin, cout});
      for (const Precision& p : kPrecisions) {
        SCOPED_TRACE(c.name + ", Cin " + std::to_string(cin) + ", Cout " + std::to_string(cout) + ", " + p.name);
        const DeterministicScope mode(p.deterministic);
        Tensor xr, wr;
        const Tensor xd = onDevice(x, p.dtype, xr), wd = onDevice(w, p.dtype, wr);
        const Tensor want = indiceConv(xr, wr, c.pairs, c.num, c.num_out, c.inverse, c.subm);
        const Tensor got = indiceConv(xd, wd, onDevice(c.pairs), onDevice(c.num), c.num_out, c.inverse, c.subm);
        EXPECT_EQ(got.dtype(), p.dtype);
        expectClose(got, want, p.tolerance, "output");
      }
    }
  }
}

TEST(SpconvGpuConv, BackwardMatchesTheCpuKernels) {
  uint32_t seed = 200;
  for (const Conv& c : convolutions()) {
    for (const auto& [cin, cout] : kChannels) {
      const Tensor x = randomTensor(seed++, {c.num_in, cin}), w = randomTensor(seed++, {3, 3, 3, cin, cout});
      const Tensor g = randomTensor(seed++, {c.num_out, cout});
      for (const Precision& p : kPrecisions) {
        SCOPED_TRACE(c.name + ", Cin " + std::to_string(cin) + ", Cout " + std::to_string(cout) + ", " + p.name);
        const DeterministicScope mode(p.deterministic);
        Tensor xr, wr, gr;
        const Tensor xd = onDevice(x, p.dtype, xr), wd = onDevice(w, p.dtype, wr), gd = onDevice(g, p.dtype, gr);
        const auto [want_dx, want_dw] = indiceConvBackward(xr, wr, gr, c.pairs, c.num, c.inverse, c.subm);
        const auto [dx, dw] = indiceConvBackward(xd, wd, gd, onDevice(c.pairs), onDevice(c.num), c.inverse, c.subm);
        expectClose(dx, want_dx, p.tolerance, "input_grad");
        expectClose(dw, want_dw, p.tolerance, "filters_grad");
      }
    }
  }
}

TEST(SpconvGpuConv, StridedInputsGiveTheResultsOfContiguousOnes) {
  // Transposed features, out_grad and counts, filters with a step of 2 in
  // Cout: the kernels take contiguous copies made on the device.
  const Conv c = convolutions()[1];
  const Tensor x = randomTensor(1, {c.num_in, 6}), w = randomTensor(2, {3, 3, 3, 6, 10});
  const Tensor g = randomTensor(3, {c.num_out, 5});
  const Tensor xs = onDevice(x.t().contiguous()).t(), ws = onDevice(w).slice(4, 0, 10, 2);
  const Tensor gs = onDevice(g.t().contiguous()).t();
  const Tensor num2 = onDevice(tensorFromVector<int32_t>(
      [&] {
        std::vector<int32_t> v;
        for (int32_t n : c.num.toVector<int32_t>()) v.insert(v.end(), {n, 0});
        return v;
      }(),
      {27, 2}, cpu()));
  const Tensor num = num2.select(1, 0);
  ASSERT_FALSE(xs.is_contiguous() || ws.is_contiguous() || gs.is_contiguous() || num.is_contiguous());
  const Tensor w_half = w.slice(4, 0, 10, 2).contiguous();
  const Tensor want = indiceConv(x, w_half, c.pairs, c.num, c.num_out, false, false);
  const auto [want_dx, want_dw] = indiceConvBackward(x, w_half, g, c.pairs, c.num, false, false);
  for (bool det : {false, true}) {
    SCOPED_TRACE(det ? "deterministic" : "default");
    const DeterministicScope mode(det);
    expectClose(indiceConv(xs, ws, onDevice(c.pairs), num, c.num_out, false, false), want, 1e-5, "output");
    const auto [dx, dw] = indiceConvBackward(xs, ws, gs, onDevice(c.pairs), num, false, false);
    expectClose(dx, want_dx, 1e-5, "input_grad");
    expectClose(dw, want_dw, 1e-5, "filters_grad");
  }
  const Tensor want_y = indiceMaxpool(x, c.pairs, c.num, c.num_out);
  const Tensor y = indiceMaxpool(xs, onDevice(c.pairs), num, c.num_out);
  EXPECT_EQ(hostValues(y), want_y.toVector<float>());
  const Tensor gy = randomTensor(4, {c.num_out, 6});
  EXPECT_EQ(hostValues(indiceMaxpoolBackward(xs, y, onDevice(gy.t().contiguous()).t(), onDevice(c.pairs), num)),
            indiceMaxpoolBackward(x, want_y, gy, c.pairs, c.num).toVector<float>());
}

TEST(SpconvGpuConv, DeterministicModeGivesTheSameBitsEveryRun) {
  const Conv c = convolutions()[1];
  const Tensor x = onDevice(randomTensor(1, {c.num_in, 24})), w = onDevice(randomTensor(2, {3, 3, 3, 24, 80}));
  const Tensor g = onDevice(randomTensor(3, {c.num_out, 80}));
  const Tensor pairs = onDevice(c.pairs), num = onDevice(c.num);
  const DeterministicScope mode(true);
  const std::vector<float> y1 = hostValues(indiceConv(x, w, pairs, num, c.num_out, false, false));
  const auto [dx1, dw1] = indiceConvBackward(x, w, g, pairs, num, false, false);
  const std::vector<float> y2 = hostValues(indiceConv(x, w, pairs, num, c.num_out, false, false));
  const auto [dx2, dw2] = indiceConvBackward(x, w, g, pairs, num, false, false);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(hostValues(dx1), hostValues(dx2));
  EXPECT_EQ(hostValues(dw1), hostValues(dw2));
}

TEST(SpconvGpuConv, TheEnvironmentSetsTheInitialMode) {
  // BACKPLANE_DETERMINISTIC=1 when the plugin loaded (Environment); every
  // test that changes the mode restores it.
  EXPECT_TRUE(deterministic());
}

TEST(SpconvGpuConv, TheDeterministicSwitchReadsBackWhatWasSet) {
  const bool initial = deterministic();
  setDeterministic(true);
  EXPECT_TRUE(deterministic());
  setDeterministic(false);
  EXPECT_FALSE(deterministic());
  setDeterministic(initial);
}

TEST(SpconvGpuConv, OffsetsWithoutPairsGiveZeros) {
  // A rulebook with room for pairs but none used: the outputs, the input
  // gradient and the filter gradient are all zero (in both modes, subm's
  // centre aside).
  const int64_t n = 10, m = 6, cin = 5, cout = 7;
  const Tensor pairs = tensorFromVector<int32_t>(std::vector<int32_t>(27 * 2 * n, -1), {27, 2, n}, cpu());
  const Tensor num = tensorFromVector<int32_t>(std::vector<int32_t>(27, 0), {27}, cpu());
  const Tensor x = randomTensor(1, {n, cin}), w = randomTensor(2, {3, 3, 3, cin, cout}), g = randomTensor(3, {m, cout});
  for (bool det : {false, true}) {
    SCOPED_TRACE(det ? "deterministic" : "default");
    const DeterministicScope mode(det);
    const Tensor y = indiceConv(onDevice(x), onDevice(w), onDevice(pairs), onDevice(num), m, false, false);
    EXPECT_EQ(hostValues(y), std::vector<float>(m * cout, 0.0f));
    const auto [dx, dw] =
        indiceConvBackward(onDevice(x), onDevice(w), onDevice(g), onDevice(pairs), onDevice(num), false, false);
    EXPECT_EQ(hostValues(dx), std::vector<float>(n * cin, 0.0f));
    EXPECT_EQ(hostValues(dw), std::vector<float>(27 * cin * cout, 0.0f));
    EXPECT_EQ(hostValues(indiceMaxpool(onDevice(x), onDevice(pairs), onDevice(num), m)),
              std::vector<float>(m * cin, 0.0f));
  }
}

TEST(SpconvGpuConv, EmptyTensorsGiveEmptyResults) {
  const DeterministicScope mode(false);  // (the deterministic mode's kernels take the same shapes)
  const Conv c = convolutions()[0];
  const Tensor pairs = onDevice(c.pairs), num = onDevice(c.num);
  const Tensor x = onDevice(randomTensor(1, {c.num_in, 4}));
  const Tensor w0 = onDevice(randomTensor(2, {3, 3, 3, 4, 0}));
  EXPECT_EQ(indiceConv(x, w0, pairs, num, c.num_in, false, true).sizes(), IntArrayRef({c.num_in, 0}));
  const auto [dx, dw] = indiceConvBackward(x, w0, onDevice(randomTensor(3, {c.num_in, 0})), pairs, num, false, true);
  EXPECT_EQ(hostValues(dx), std::vector<float>(c.num_in * 4, 0.0f));
  EXPECT_EQ(dw.numel(), 0);
  EXPECT_EQ(indiceMaxpool(x, pairs, num, 0).sizes(), IntArrayRef({0, 4}));
}

TEST(SpconvGpuConv, MaxPoolingMatchesTheCpuKernelsWithTies) {
  // After a ReLU about half the values are 0: many outputs' maxima are
  // ties, and the backward must route each gradient to one input, the
  // first in offset order, as the CPU does. float32 gives the CPU's bits.
  const Tensor indices = randomIndices(11, 2, {6, 6, 6});
  auto [out_indices, pairs, num] = getIndicePairs(indices, 2, {6, 6, 6}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false);
  const int64_t n = indices.size(0), m = out_indices.size(0);
  for (int64_t extra : {0, 3}) {  // 3 more output rows that no pair reaches
    for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16}) {
      SCOPED_TRACE(std::string(dtype == ScalarType::Float32 ? "float32" : "float16") + ", extra rows " +
                   std::to_string(extra));
      Tensor xr, gr;
      const Tensor x = onDevice(randomTensor(21, {n, 5}, true), dtype, xr);
      const Tensor g = onDevice(randomTensor(22, {m + extra, 5}), dtype, gr);
      const Tensor want = indiceMaxpool(xr, pairs, num, m + extra);
      const Tensor y = indiceMaxpool(x, onDevice(pairs), onDevice(num), m + extra);
      EXPECT_EQ(hostValues(y), want.toVector<float>());
      const Tensor want_dx = indiceMaxpoolBackward(xr, want, gr, pairs, num);
      const Tensor dx = indiceMaxpoolBackward(x, y, g, onDevice(pairs), onDevice(num));
      if (dtype == ScalarType::Float32) {
        EXPECT_EQ(hostValues(dx), want_dx.toVector<float>());
      } else {
        expectClose(dx, want_dx, 1e-3, "maxpool backward");
      }
    }
  }
}

// The kernel's message, without the host's "kernel of plugin 'P' for OP
// failed: " in front (which names the plugin, spconv's or gpusim's).
std::string kernelMessageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string m = e.message();
    const size_t at = m.find(" failed: ");
    return m.rfind("kernel of plugin '", 0) == 0 && at != std::string::npos ? m.substr(at + 9) : m;
  }
  return "(no error)";
}

TEST(SpconvGpuConv, BadCallsFailAsOnTheCpu) {
  const Conv c = convolutions()[1];
  const Conv s = convolutions()[0];
  // Each bad call, made with the tensors on `dev`.
  struct BadCall {
    const char* name;
    std::function<void(Device)> call;
  };
  const Tensor x = randomTensor(1, {c.num_in, 4}), w = randomTensor(2, {3, 3, 3, 4, 6});
  const Tensor g = randomTensor(3, {c.num_out, 6});
  const auto on = [](const Tensor& t, Device d) { return t.to(d); };
  const std::vector<BadCall> calls = {
      {"filters' Cin",
       [&](Device d) {
         indiceConv(on(x, d), on(randomTensor(4, {3, 3, 3, 5, 6}), d), on(c.pairs, d), on(c.num, d), c.num_out, false,
                    false);
       }},
      {"kernel volume",
       [&](Device d) {
         indiceConv(on(x, d), on(randomTensor(4, {3, 3, 1, 4, 6}), d), on(c.pairs, d), on(c.num, d), c.num_out, false,
                    false);
       }},
      {"negative num_out",
       [&](Device d) { indiceConv(on(x, d), on(w, d), on(c.pairs, d), on(c.num, d), -1, false, false); }},
      {"int64 pairs",
       [&](Device d) {
         indiceConv(on(x, d), on(w, d), on(c.pairs.to(ScalarType::Int64), d), on(c.num, d), c.num_out, false, false);
       }},
      {"counts' shape",
       [&](Device d) {
         indiceConv(on(x, d), on(w, d), on(c.pairs, d), on(c.num.slice(0, 0, 5), d), c.num_out, false, false);
       }},
      {"subm num_out",
       [&](Device d) {
         indiceConv(on(randomTensor(5, {s.num_in, 4}), d), on(w, d), on(s.pairs, d), on(s.num, d), s.num_in + 1, false,
                    true);
       }},
      {"filters' dtype",
       [&](Device d) {
         indiceConv(on(x, d), on(w.to(ScalarType::Float64), d), on(c.pairs, d), on(c.num, d), c.num_out, false, false);
       }},
      {"out_grad's Cout",
       [&](Device d) {
         indiceConvBackward(on(x, d), on(w, d), on(randomTensor(6, {c.num_out, 5}), d), on(c.pairs, d), on(c.num, d),
                            false, false);
       }},
      {"out_grad's rank",
       [&](Device d) {
         indiceConvBackward(on(x, d), on(w, d), on(randomTensor(6, {c.num_out}), d), on(c.pairs, d), on(c.num, d),
                            false, false);
       }},
      {"pool features' rank",
       [&](Device d) { indiceMaxpool(on(randomTensor(7, {c.num_in}), d), on(c.pairs, d), on(c.num, d), c.num_out); }},
      {"pool num_out", [&](Device d) { indiceMaxpool(on(x, d), on(c.pairs, d), on(c.num, d), -2); }},
      {"pool out_grad's channels",
       [&](Device d) {
         indiceMaxpoolBackward(on(x, d), on(randomTensor(8, {c.num_out, 4}), d), on(randomTensor(8, {c.num_out, 3}), d),
                               on(c.pairs, d), on(c.num, d));
       }},
      {"pool out_grad's rows",
       [&](Device d) {
         indiceMaxpoolBackward(on(x, d), on(randomTensor(8, {c.num_out, 4}), d),
                               on(randomTensor(8, {c.num_out + 1, 4}), d), on(c.pairs, d), on(c.num, d));
       }},
  };
  for (const BadCall& b : calls) {
    SCOPED_TRACE(b.name);
    const std::string on_cpu = kernelMessageOf([&] { b.call(cpu()); });
    EXPECT_NE(on_cpu, "(no error)");
    EXPECT_EQ(kernelMessageOf([&] { b.call(gpu()); }), on_cpu);
  }
  // A dtype the CPU does not take either, refused in the device's terms.
  const Tensor xi = x.to(ScalarType::Int32).to(gpu()), wi = w.to(ScalarType::Int32).to(gpu());
  EXPECT_EQ(kernelMessageOf([&] { indiceConv(xi, wi, onDevice(c.pairs), onDevice(c.num), c.num_out, false, false); }),
            "spconv::indice_conv on gpusim does not support dtype int32 (argument 'features'); supported: "
            "float16, bfloat16, float32, float64");
  // The rulebook on another device than the features.
  EXPECT_THAT(kernelMessageOf([&] { indiceConv(onDevice(x), onDevice(w), c.pairs, c.num, c.num_out, false, false); }),
              ::testing::HasSubstr("features, filters and indice_pairs must be on one device"));
  EXPECT_THAT(kernelMessageOf([&] { indiceMaxpool(onDevice(x), c.pairs, c.num, c.num_out); }),
              ::testing::HasSubstr("indice_pairs is on cpu"));
}

// A rulebook that does not fit the tensors (a pair's row outside them, a
// count beyond the capacity): the CPU kernels refuse it at the call; the
// GPU kernels, which never read the rulebook on the host, leave the bad
// entry out and report it at the next synchronization (Note [Deferred
// device errors]) in the CPU's words.
TEST(SpconvGpuConv, BrokenRulebooksAreReportedAtTheNextSynchronizationAsOnTheCpu) {
  static const auto synchronize = Dispatcher::singleton().findOpOrThrow("gpusim::synchronize").typed<void(int64_t)>();
  const Conv c = convolutions()[1];
  const std::vector<int32_t> flat = c.pairs.toVector<int32_t>(), counts = c.num.toVector<int32_t>();
  const int64_t K = c.pairs.size(0), P = c.pairs.size(2);
  int64_t k = 0;
  while (counts[k] < 2) ++k;
  // Pair 1 of offset k points past the output rows; offset k's count past P.
  std::vector<int32_t> bad_pair = flat, bad_count = counts;
  bad_pair[(2 * k + 1) * P + 1] = static_cast<int32_t>(c.num_out + 5);
  bad_count[k] = static_cast<int32_t>(P + 3);
  const Tensor pair_rb = tensorFromVector<int32_t>(bad_pair, {K, 2, P}, cpu());
  const Tensor count_rb = tensorFromVector<int32_t>(bad_count, {K}, cpu());
  const Tensor x = randomTensor(1, {c.num_in, 4}), w = randomTensor(2, {3, 3, 3, 4, 6});
  const Tensor y = randomTensor(3, {c.num_out, 4}), g = randomTensor(4, {c.num_out, 6});
  struct BadCall {
    const char* name;
    std::function<void(Device, const Tensor&, const Tensor&)> call;
  };
  const std::vector<BadCall> calls = {
      {"indice_conv",
       [&](Device d, const Tensor& p, const Tensor& n) {
         indiceConv(x.to(d), w.to(d), p.to(d), n.to(d), c.num_out, false, false);
       }},
      {"indice_conv_backward",
       [&](Device d, const Tensor& p, const Tensor& n) {
         indiceConvBackward(x.to(d), w.to(d), g.to(d), p.to(d), n.to(d), false, false);
       }},
      {"indice_maxpool",
       [&](Device d, const Tensor& p, const Tensor& n) { indiceMaxpool(x.to(d), p.to(d), n.to(d), c.num_out); }},
      {"indice_maxpool_backward",
       [&](Device d, const Tensor& p, const Tensor& n) {
         indiceMaxpoolBackward(x.to(d), y.to(d), y.to(d), p.to(d), n.to(d));
       }},
  };
  for (const BadCall& b : calls) {
    for (const auto& [what, p, n] :
         {std::tuple{"a pair outside", pair_rb, c.num}, {"a count past P", c.pairs, count_rb}}) {
      SCOPED_TRACE(::testing::Message() << b.name << ": " << what);
      const std::string on_cpu = kernelMessageOf([&] { b.call(cpu(), p, n); });
      ASSERT_NE(on_cpu, "(no error)");
      const int64_t reads = activity("host_reads");
      b.call(gpu(), p, n);
      EXPECT_EQ(activity("host_reads"), reads) << "the call waited for the device";
      const std::string on_gpu = kernelMessageOf([&] { synchronize.call(0); });
      EXPECT_EQ(on_gpu.substr(0, on_cpu.size()), on_cpu) << on_gpu;
      EXPECT_EQ(kernelMessageOf([&] { synchronize.call(0); }), "(no error)") << "reported once";
    }
  }
}

TEST(SpconvGpuConv, TheOpsRunOnTheDeviceWithoutFallbackOrHostRoundTrips) {
  for (const char* op : {"spconv::indice_conv", "spconv::indice_conv_backward", "spconv::indice_maxpool",
                         "spconv::indice_maxpool_backward"}) {
    EXPECT_EQ(Dispatcher::singleton().findOpOrThrow(op).kernelKind(backendKey(gpu().type)), KernelKind::Native)
        << op << " has no gpusim kernel";
  }
  const Conv c = convolutions()[0];
  const Tensor x = onDevice(randomTensor(1, {c.num_in, 8})), w = onDevice(randomTensor(2, {3, 3, 3, 8, 8}));
  const Tensor g = onDevice(randomTensor(3, {c.num_out, 8}));
  const Tensor pairs = onDevice(c.pairs), num = onDevice(c.num);
  Dispatcher& dispatcher = Dispatcher::singleton();
  const FallbackMode fallback = dispatcher.fallbackMode();
  dispatcher.setFallbackMode(FallbackMode::Error);  // any fallback throws
  for (bool det : {false, true}) {
    SCOPED_TRACE(det ? "deterministic" : "default");
    const DeterministicScope mode(det);
    const TransferCount before = hostDeviceTransfers();
    const int64_t launches = activity("kernel_launches"), reads = activity("host_reads");
    const Tensor y = indiceConv(x, w, pairs, num, c.num_out, false, true);
    const auto [dx, dw] = indiceConvBackward(x, w, g, pairs, num, false, true);
    const Tensor p = indiceMaxpool(x, pairs, num, c.num_out);
    const Tensor dp = indiceMaxpoolBackward(x, p, g, pairs, num);
    const TransferCount after = hostDeviceTransfers();
    EXPECT_EQ(after.bytes - before.bytes, 0u) << "bytes crossed between the host and the device";
    EXPECT_EQ(activity("host_reads"), reads) << "a kernel waited for the device";
    EXPECT_GE(activity("kernel_launches") - launches, 8) << "the kernels did not run on the device";
    for (const Tensor* t : {&y, &dx, &dw, &p, &dp}) EXPECT_EQ(t->device(), gpu());
  }
  dispatcher.setFallbackMode(fallback);
}

}  // namespace
}  // namespace backplane
