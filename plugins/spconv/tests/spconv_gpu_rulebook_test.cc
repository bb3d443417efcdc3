// spconv::get_indice_pairs built on the GPU (Note [Rulebook on the GPU] in
// plugins/spconv/gpu/spconv_rulebook.cu), run on the simulator plugin's
// device "gpusim:0": the same tensors as the CPU kernel, bit for bit, the
// same errors naming the same row, and a budget of launches and host reads
// that does not grow with the number of sites. The CPU fallback is refused
// while these tests run, so every result comes from the device kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/errors.h"
#include "spconv_ops.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;
using namespace spconv_test;  // Triple, Site, PairsResult, get_indice_pairs

// The plugins are loaded once for the program (spconv_gpu_test_env.cc).

// The simulator's device (its type is known once the plugin has loaded).
Device sim() { return Device::fromString("gpusim:0"); }
const Device kCpu = Device(DeviceType::CPU);

int64_t activity(std::string_view name) { return simActivity(name); }

struct Geometry {
  Triple kernel{3, 3, 3}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
};

std::string describe(const Geometry& g, bool subm) {
  std::string s = subm ? "subm" : "regular";
  for (const auto& [name, t] : {std::pair<const char*, Triple>{" kernel", g.kernel},
                                {" stride", g.stride},
                                {" padding", g.padding},
                                {" dilation", g.dilation}}) {
    s += name;
    for (int64_t v : t) s += " " + std::to_string(v);
  }
  return s;
}

// Whether the kernel fits the grid in every dimension (else get_indice_pairs
// rejects the geometry, on every device).
bool fits(const Triple& shape, const Geometry& g) {
  for (int d = 0; d < 3; ++d)
    if (shape[d] + 2 * g.padding[d] - g.dilation[d] * (g.kernel[d] - 1) - 1 < 0) return false;
  return true;
}

// Random distinct sites (about `density` of the grid) in shuffled order.
std::vector<Site> randomSites(uint32_t seed, int64_t batch, Triple shape, double density) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<Site> sites;
  for (int32_t b = 0; b < batch; ++b)
    for (int32_t z = 0; z < shape[0]; ++z)
      for (int32_t y = 0; y < shape[1]; ++y)
        for (int32_t x = 0; x < shape[2]; ++x)
          if (coin(rng) < density) sites.push_back({b, z, y, x});
  std::shuffle(sites.begin(), sites.end(), rng);
  return sites;
}

Tensor indicesOn(const std::vector<Site>& sites, Device dev) {
  std::vector<int32_t> flat;
  for (const Site& s : sites) flat.insert(flat.end(), s.begin(), s.end());
  return tensorFromVector<int32_t>(flat, {static_cast<int64_t>(sites.size()), 4}, dev);
}

// The three results as host vectors with their shapes, for exact comparison.
struct Rulebook {
  std::vector<int64_t> out_shape, pairs_shape, num_shape;
  std::vector<int32_t> out_indices, pairs, num;
  bool operator==(const Rulebook&) const = default;
};
Rulebook hostCopy(const PairsResult& r) {
  const auto& [out, pairs, num] = r;
  return {out.sizes().vec(),
          pairs.sizes().vec(),
          num.sizes().vec(),
          out.cpu().toVector<int32_t>(),
          pairs.cpu().toVector<int32_t>(),
          num.cpu().toVector<int32_t>()};
}

// The kernel's own message, after the dispatcher's "kernel of plugin 'P'
// for OP failed: ", and P.
std::pair<std::string, std::string> kernelMessage(const std::string& error) {
  const std::string head = "kernel of plugin '", tail = " failed: ";
  const size_t quote = error.find('\'', head.size()), end = error.find(tail);
  if (error.rfind(head, 0) != 0 || quote == std::string::npos || end == std::string::npos) return {error, ""};
  return {error.substr(end + tail.size()), error.substr(head.size(), quote - head.size())};
}

class GpuRulebook : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = Dispatcher::singleton().fallbackMode();
    Dispatcher::singleton().setFallbackMode(FallbackMode::Error);
  }
  void TearDown() override { Dispatcher::singleton().setFallbackMode(previous_); }

  // Builds the rulebook of `sites` on the CPU and on the simulator and
  // expects the same tensors; returns the simulator's.
  Rulebook expectSameAsCpu(const std::vector<Site>& sites, int64_t batch, Triple shape, const Geometry& g, bool subm) {
    SCOPED_TRACE(describe(g, subm) + ", " + std::to_string(sites.size()) + " sites, batch " + std::to_string(batch));
    const Rulebook want =
        hostCopy(getIndicePairs(indicesOn(sites, kCpu), batch, shape, g.kernel, g.stride, g.padding, g.dilation, subm));
    const int64_t launches = activity("kernel_launches");
    const PairsResult on_sim =
        getIndicePairs(indicesOn(sites, sim()), batch, shape, g.kernel, g.stride, g.padding, g.dilation, subm);
    EXPECT_GT(activity("kernel_launches"), launches) << "the rulebook was not built by the device's kernels";
    EXPECT_EQ(std::get<0>(on_sim).device(), sim());
    EXPECT_EQ(std::get<1>(on_sim).device(), sim());
    EXPECT_EQ(std::get<2>(on_sim).device(), sim());
    const Rulebook got = hostCopy(on_sim);
    EXPECT_EQ(got.out_shape, want.out_shape);
    EXPECT_EQ(got.pairs_shape, want.pairs_shape);
    EXPECT_EQ(got.num, want.num);
    EXPECT_EQ(got.out_indices, want.out_indices);
    EXPECT_EQ(got.pairs, want.pairs);
    return got;
  }

 private:
  FallbackMode previous_ = FallbackMode::Warn;
};

TEST_F(GpuRulebook, RegularConvolutionsMatchTheCpuKernel) {
  const std::vector<Triple> kernels = {{3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {3, 1, 2}, {4, 3, 2}};
  const std::vector<Triple> strides = {{1, 1, 1}, {2, 2, 2}, {1, 2, 3}};
  const std::vector<Triple> paddings = {{0, 0, 0}, {1, 1, 1}, {2, 0, 1}};
  const std::vector<Triple> dilations = {{1, 1, 1}, {2, 1, 2}};
  uint32_t seed = 1;
  int built = 0;
  for (const Triple& kernel : kernels)
    for (const Triple& stride : strides)
      for (const Triple& padding : paddings)
        for (const Triple& dilation : dilations) {
          const Geometry g{kernel, stride, padding, dilation};
          const int64_t batch = 1 + seed % 3;
          const Triple shape = seed % 2 == 0 ? Triple{5, 6, 7} : Triple{7, 4, 6};
          if (!fits(shape, g)) continue;
          expectSameAsCpu(randomSites(seed++, batch, shape, 0.3), batch, shape, g, false);
          ++built;
        }
  EXPECT_EQ(built, 89);  // every combination but one whose kernel does not fit the grid
}

TEST_F(GpuRulebook, SubmanifoldConvolutionsMatchTheCpuKernel) {
  const std::vector<Triple> kernels = {{3, 3, 3}, {1, 1, 1}, {5, 3, 1}, {3, 5, 3}};
  const std::vector<Triple> dilations = {{1, 1, 1}, {2, 2, 1}, {1, 3, 2}};
  uint32_t seed = 100;
  for (const Triple& kernel : kernels)
    for (const Triple& dilation : dilations)
      for (int64_t batch : {1, 2, 4}) {
        const Geometry g{kernel, {1, 1, 1}, {0, 0, 0}, dilation};
        expectSameAsCpu(randomSites(seed++, batch, {6, 7, 5}, 0.35), batch, {6, 7, 5}, g, true);
      }
}

// Thousands of sites: several tiles per offset, several radix-sort tiles,
// sort keys of two bytes (two passes) and of one (one pass: the result in the
// sort's second buffer).
TEST_F(GpuRulebook, ManySitesMatchTheCpuKernel) {
  const std::vector<Site> sites = randomSites(7, 2, {20, 20, 20}, 0.3);
  ASSERT_GT(sites.size(), 4000u);
  expectSameAsCpu(sites, 2, {20, 20, 20}, Geometry{}, true);
  expectSameAsCpu(sites, 2, {20, 20, 20}, Geometry{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, false);
  expectSameAsCpu(sites, 2, {20, 20, 20}, Geometry{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, false);
  // Over 16k output sites: 256 digit counts per tile of 1024 keys fill the
  // one-block scan more than once (4096 counts per round).
  const std::vector<Site> dense = randomSites(10, 2, {24, 24, 24}, 0.5);
  const Rulebook big =
      expectSameAsCpu(dense, 2, {24, 24, 24}, Geometry{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, false);
  ASSERT_GT(big.out_shape[0], 4096 / 256 * 1024);
  const std::vector<Site> small = randomSites(8, 1, {4, 4, 4}, 0.6);
  expectSameAsCpu(small, 1, {4, 4, 4}, Geometry{{2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, false);
}

// An output grid of one site per sample: keys of one bit (one radix pass)
// or of none (no pass).
TEST_F(GpuRulebook, OutputGridsOfOneSiteMatchTheCpuKernel) {
  const Geometry whole{{3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
  expectSameAsCpu(randomSites(13, 2, {3, 3, 3}, 0.5), 2, {3, 3, 3}, whole, false);
  const Rulebook one = expectSameAsCpu({{0, 2, 1, 0}, {0, 0, 0, 0}}, 1, {3, 3, 3}, whole, false);
  EXPECT_EQ(one.out_indices, std::vector<int32_t>({0, 0, 0, 0}));
}

// indices read through its strides: a transposed [4, N] tensor.
TEST_F(GpuRulebook, StridedIndicesMatchTheCpuKernel) {
  const std::vector<Site> sites = randomSites(9, 2, {6, 6, 6}, 0.3);
  const int64_t n = static_cast<int64_t>(sites.size());
  std::vector<int32_t> columns(4 * n);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < 4; ++c) columns[c * n + i] = sites[i][c];
  const Tensor strided = tensorFromVector<int32_t>(columns, {4, n}, sim()).t();
  ASSERT_FALSE(strided.is_contiguous());
  for (bool subm : {true, false}) {
    const Geometry g{{3, 3, 3}, {subm ? 1 : 2, subm ? 1 : 2, subm ? 1 : 2}, {1, 1, 1}, {1, 1, 1}};
    const Rulebook want =
        hostCopy(getIndicePairs(indicesOn(sites, kCpu), 2, {6, 6, 6}, g.kernel, g.stride, g.padding, g.dilation, subm));
    EXPECT_EQ(hostCopy(getIndicePairs(strided, 2, {6, 6, 6}, g.kernel, g.stride, g.padding, g.dilation, subm)), want);
  }
}

TEST_F(GpuRulebook, EmptyInputGivesEmptyOutputs) {
  for (bool subm : {false, true}) {
    const Geometry g{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
    const Rulebook got = hostCopy(getIndicePairs(tensorFromVector<int32_t>({}, {0, 4}, sim()), 2, {5, 5, 5}, g.kernel,
                                                 g.stride, g.padding, g.dilation, subm));
    EXPECT_EQ(got.out_shape, std::vector<int64_t>({0, 4}));
    EXPECT_EQ(got.pairs_shape, std::vector<int64_t>({27, 2, 0}));
    EXPECT_EQ(got.num, std::vector<int32_t>(27, 0));
  }
  // Sites but no output: a 1x1x1 kernel of stride 2 reaches none from odd coordinates.
  expectSameAsCpu({{0, 1, 1, 1}, {0, 3, 1, 1}}, 1, {5, 5, 5}, Geometry{{1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}},
                  false);
}

// Note [Coordinate keys]: beyond 2^31 sites keys are 64-bit. In a 2048^3
// grid (2^33 sites) sites 2^32 apart would merge with 32-bit keys.
TEST_F(GpuRulebook, HugeGridsUse64BitKeysAsTheCpuKernelDoes) {
  const Triple huge{2048, 2048, 2048};
  std::vector<Site> sites = {{0, 1024, 0, 0}, {0, 1024, 0, 1},       {0, 1025, 1, 1}, {0, 0, 0, 0},
                             {0, 0, 1, 0},    {1, 2046, 2046, 2000}, {1, 2047, 0, 0}, {1, 2047, 2047, 2047}};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> near(0, 5);
  for (int i = 0; i < 300; ++i) {  // clusters around far-apart corners
    const int32_t base = i % 2 == 0 ? 0 : 2040;
    sites.push_back({i % 3 == 0 ? 1 : 0, base + near(rng), base + near(rng), base + near(rng)});
  }
  std::sort(sites.begin(), sites.end());
  sites.erase(std::unique(sites.begin(), sites.end()), sites.end());
  std::shuffle(sites.begin(), sites.end(), rng);
  expectSameAsCpu(sites, 2, huge, Geometry{}, true);
  expectSameAsCpu(sites, 2, huge, Geometry{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}}, false);
  expectSameAsCpu(sites, 2, huge, Geometry{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}}, false);
  const Rulebook one = expectSameAsCpu({{1, 2046, 2046, 2000}, {1, 2047, 0, 0}}, 2, huge,
                                       Geometry{{1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}}, false);
  EXPECT_EQ(one.out_indices, std::vector<int32_t>({1, 1023, 1023, 1000}));
}

// Every validation error: the CPU kernel's message, naming the same first
// offending row, on both paths; and the device stays usable afterwards.
TEST_F(GpuRulebook, BadSitesAreRejectedWithTheCpuKernelsMessages) {
  const std::vector<std::vector<Site>> bad = {
      {{0, 1, 1, 1}, {1, 2, 2, 2}, {0, 3, 3, 3}, {1, 2, 2, 2}, {0, 3, 3, 3}},  // rows 1 and 3 first
      {{0, 1, 1, 1}, {0, 1, -1, 1}, {0, 9, 9, 9}},                             // y negative
      {{0, 1, 1, 1}, {0, 1, 1, 6}},                                            // x outside
      {{0, 4, 1, 1}},                                                          // z outside
      {{0, 1, 5, 1}, {0, -1, 0, 0}},                                           // y outside before z negative
      {{0, 1, 1, 1}, {0, 1, 1, 2}, {2, 0, 0, 0}},                              // batch >= batch_size
      {{-1, 0, 0, 0}},                                                         // batch negative
      {{0, 1, 1, 1}, {0, 2, 2, 2}, {0, 1, 1, 1}, {0, 9, 0, 0}},                // a repeat before a bad row
      {{0, 1, 1, 1}, {0, 2, 2, 2}, {0, -3, 0, 0}, {0, 1, 1, 1}},               // a bad row before a repeat
      {{1, 3, 4, 5}, {0, 0, 0, 0}, {1, 3, 4, 5}, {1, 3, 4, 5}},                // three holders: rows 0 and 2
  };
  for (bool subm : {true, false}) {
    const Geometry g{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
    for (const std::vector<Site>& sites : bad) {
      const auto build = [&](Device dev) {
        return testing::errorOf([&] {
          getIndicePairs(indicesOn(sites, dev), 2, {4, 5, 6}, g.kernel, g.stride, g.padding, g.dilation, subm);
        });
      };
      const auto [want, cpu_plugin] = kernelMessage(build(kCpu));
      ASSERT_THAT(want, HasSubstr("spconv::get_indice_pairs: indices row"));
      EXPECT_EQ(cpu_plugin, "spconv");
      const auto [got, sim_plugin] = kernelMessage(build(sim()));
      EXPECT_EQ(got, want);
      EXPECT_EQ(sim_plugin, "gpusim");
    }
  }
  // Through the strided read of the offending row.
  const Tensor strided = tensorFromVector<int32_t>({0, 0, 1, 1, 1, 1, 1, 1}, {4, 2}, sim()).t();
  EXPECT_EQ(kernelMessage(testing::errorOf([&] {
              getIndicePairs(strided, 1, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, true);
            })).first,
            "spconv::get_indice_pairs: indices rows 0 and 1 both hold site (0, 1, 1, 1); every active site must "
            "appear once (merge duplicate voxels, e.g. by averaging their features, before building the rulebook)");
  // The shared argument checks, as on the CPU.
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(tensorFromVector<int64_t>({0, 0, 0, 0}, {1, 4}, sim()), 1, {4, 4, 4}, {3, 3, 3},
                               {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, false);
              }),
              HasSubstr("indices must have dtype int32"));
  EXPECT_THAT(testing::errorOf([&] {
                getIndicePairs(tensorFromVector<int32_t>({0, 0, 0}, {1, 3}, sim()), 1, {4, 4, 4}, {3, 3, 3}, {1, 1, 1},
                               {0, 0, 0}, {1, 1, 1}, false);
              }),
              HasSubstr("shape [N, 4]"));
  // A failed call leaves nothing behind.
  expectSameAsCpu(randomSites(11, 2, {4, 5, 6}, 0.4), 2, {4, 5, 6}, Geometry{}, true);
}

// The budget: indices never come to the host; one small synchronising read
// per call (the error word, and for a regular convolution the number of
// output sites); launches bounded and independent of the number of sites.
TEST_F(GpuRulebook, NoHostCopyOfTheIndicesAndABoundedNumberOfLaunches) {
  struct Cost {
    int64_t launches, reads, read_bytes;
    uint64_t transfer_bytes;
  };
  const auto costOf = [](const Tensor& indices, int64_t batch, Triple shape, const Geometry& g, bool subm) {
    const int64_t launches = activity("kernel_launches"), reads = activity("host_reads"),
                  read_bytes = activity("host_read_bytes");
    const uint64_t transfers = hostDeviceTransfers().bytes;
    const PairsResult r = getIndicePairs(indices, batch, shape, g.kernel, g.stride, g.padding, g.dilation, subm);
    return Cost{activity("kernel_launches") - launches, activity("host_reads") - reads,
                activity("host_read_bytes") - read_bytes, hostDeviceTransfers().bytes - transfers};
  };
  const Geometry subm{};
  const Geometry down{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}};
  for (double density : {0.05, 0.5}) {  // about 300 and 3200 sites
    SCOPED_TRACE("density " + std::to_string(density));
    const Tensor indices = indicesOn(randomSites(12, 2, {16, 10, 20}, density), sim());
    const Cost s = costOf(indices, 2, {16, 10, 20}, subm, true);
    EXPECT_EQ(s.launches, 4);  // insert, gather, scan, compact
    EXPECT_EQ(s.reads, 1);
    EXPECT_EQ(s.read_bytes, 8);
    EXPECT_EQ(s.transfer_bytes, 0u);
    const Cost r = costOf(indices, 2, {16, 10, 20}, down, false);
    // insert, outputs, 3 per radix pass (the largest key of 2 x 8 x 5 x 10
    // output sites has 10 bits: 2 passes), gather, scan, compact.
    EXPECT_EQ(r.launches, 2 + 3 * 2 + 3);
    EXPECT_EQ(r.reads, 1);
    EXPECT_EQ(r.read_bytes, 16);
    EXPECT_EQ(r.transfer_bytes, 0u);
  }
  // An error costs one more read: that row, 16 bytes.
  const Tensor repeated = indicesOn({{0, 1, 1, 1}, {0, 2, 2, 2}, {0, 1, 1, 1}}, sim());
  const int64_t reads = activity("host_reads"), read_bytes = activity("host_read_bytes");
  EXPECT_THAT(testing::errorOf([&] { costOf(repeated, 1, {4, 4, 4}, subm, true); }), HasSubstr("rows 0 and 2"));
  EXPECT_EQ(activity("host_reads") - reads, 2);
  EXPECT_EQ(activity("host_read_bytes") - read_bytes, 8 + 16);
}

// The CUDA and HIP plugins of this build, loaded after the spconv plugin
// (from the default directory they load before it; the simulator's kernels
// here were registered before it too): every spconv op gets their native
// kernel, whether or not a device is present, and nothing stays inactive.
TEST(GpuSpconvRegistration, GpuPluginsImplementEverySpconvOpWhicheverLoadsFirst) {
  std::vector<std::pair<const char*, DeviceType>> plugins_to_load;
#ifdef BACKPLANE_CUDA_PLUGIN_PATH
  plugins_to_load.emplace_back(BACKPLANE_CUDA_PLUGIN_PATH, DeviceType::CUDA);
#endif
#ifdef BACKPLANE_HIP_PLUGIN_PATH
  plugins_to_load.emplace_back(BACKPLANE_HIP_PLUGIN_PATH, DeviceType::HIP);
#endif
  std::vector<DeviceType> types = {sim().type};
  for (const auto& [path, type] : plugins_to_load) {
    const auto status = plugins().load(path);
    ASSERT_TRUE(status.ok()) << path << ": " << status.status().message();
    types.push_back(type);
  }
  for (const char* name : {"spconv::get_indice_pairs", "spconv::indice_conv", "spconv::indice_conv_backward",
                           "spconv::indice_maxpool", "spconv::indice_maxpool_backward"}) {
    const OperatorHandle op = Dispatcher::singleton().findOpOrThrow(name);
    for (DeviceType type : types) {
      EXPECT_EQ(op.kernelKind(backendKey(type)), KernelKind::Native) << name << " on " << deviceTypeName(type);
    }
  }
  for (const Dispatcher::InactiveKernel& k : Dispatcher::singleton().inactiveKernels()) {
    EXPECT_NE(k.op.rfind("spconv::", 0), 0u) << k.op << " " << k.registrant << ": " << k.reason;
  }
}

}  // namespace
}  // namespace backplane
