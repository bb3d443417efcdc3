// spconv::get_indice_pairs on the CPU at sizes where it runs in parallel
// (Note [Parallel rulebook building] in plugins/spconv/rulebook.cc): the
// rulebook equals one built by a plain serial reference written here from
// Note [Rulebook] and Note [Rulebook order] (sorted output keys, the
// inputs' order for subm, each offset's pairs in ascending output row),
// errors name the first offending row whichever thread finds it, and the
// bytes do not depend on BACKPLANE_NUM_THREADS: the setting is read once,
// so the test runs itself in child processes with 1, 2 and 3 threads and
// compares digests of every result and message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"
#include "spconv_ops.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;
using namespace spconv_test;  // Triple, Site, PairsResult

const auto* const kEnv =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH, BACKPLANE_SPCONV_PLUGIN_PATH}).leaveFallbackMode();

struct Conv {
  int64_t batch;
  Triple shape, kernel, stride, padding, dilation;
  bool subm;
};

PairsResult getIndicePairs(const std::vector<Site>& sites, const Conv& c) {
  std::vector<int32_t> flat;
  for (const Site& s : sites) flat.insert(flat.end(), s.begin(), s.end());
  const Tensor indices =
      tensorFromVector<int32_t>(flat, {static_cast<int64_t>(sites.size()), 4}, Device(DeviceType::CPU));
  return spconv_test::getIndicePairs(indices, c.batch, c.shape, c.kernel, c.stride, c.padding, c.dilation, c.subm);
}

// `n` distinct random sites of `c`'s grid, in random order.
std::vector<Site> randomSites(const Conv& c, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::set<Site> seen;
  std::vector<Site> sites;
  while (sites.size() < n) {
    Site s{static_cast<int32_t>(rng() % c.batch), static_cast<int32_t>(rng() % c.shape[0]),
           static_cast<int32_t>(rng() % c.shape[1]), static_cast<int32_t>(rng() % c.shape[2])};
    if (seen.insert(s).second) sites.push_back(s);
  }
  return sites;
}

// The rulebook as Note [Rulebook] defines it, built the slow, obvious way.
struct ReferenceRulebook {
  std::vector<int32_t> out_indices;       // [M, 4]
  std::vector<std::vector<int32_t>> in;   // per offset, the pairs' input rows
  std::vector<std::vector<int32_t>> out;  // per offset, the pairs' output rows
};

ReferenceRulebook reference(const std::vector<Site>& sites, const Conv& c) {
  const int64_t K = c.kernel[0] * c.kernel[1] * c.kernel[2];
  Triple out_shape;
  for (int d = 0; d < 3; ++d)
    out_shape[d] =
        c.subm ? c.shape[d] : (c.shape[d] + 2 * c.padding[d] - c.dilation[d] * (c.kernel[d] - 1) - 1) / c.stride[d] + 1;
  auto key = [&](int64_t b, int64_t z, int64_t y, int64_t x) {
    return ((b * out_shape[0] + z) * out_shape[1] + y) * out_shape[2] + x;
  };
  ReferenceRulebook r;
  r.in.resize(static_cast<size_t>(K));
  r.out.resize(static_cast<size_t>(K));
  // (output row, input row) per offset, sorted by output row at the end.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> pairs(static_cast<size_t>(K));
  if (c.subm) {
    std::map<int64_t, int32_t> row_of;
    for (size_t i = 0; i < sites.size(); ++i) row_of[key(sites[i][0], sites[i][1], sites[i][2], sites[i][3])] = i;
    for (size_t o = 0; o < sites.size(); ++o) {
      for (const int32_t v : sites[o]) r.out_indices.push_back(v);
      for (int64_t k = 0; k < K; ++k) {
        const Triple kk{k / (c.kernel[1] * c.kernel[2]), k / c.kernel[2] % c.kernel[1], k % c.kernel[2]};
        Triple p;
        bool inside = true;
        for (int d = 0; d < 3; ++d) {
          p[d] = sites[o][d + 1] + (kk[d] - (c.kernel[d] - 1) / 2) * c.dilation[d];
          inside = inside && p[d] >= 0 && p[d] < c.shape[d];
        }
        if (!inside) continue;
        const auto it = row_of.find(key(sites[o][0], p[0], p[1], p[2]));
        if (it != row_of.end()) pairs[k].push_back({static_cast<int32_t>(o), it->second});
      }
    }
  } else {
    std::map<int64_t, std::vector<std::pair<int64_t, int32_t>>> reached;  // output key -> (offset, input row)
    for (size_t i = 0; i < sites.size(); ++i) {
      for (int64_t k = 0; k < K; ++k) {
        const Triple kk{k / (c.kernel[1] * c.kernel[2]), k / c.kernel[2] % c.kernel[1], k % c.kernel[2]};
        Triple o;
        bool hit = true;
        for (int d = 0; d < 3 && hit; ++d) {
          const int64_t t = sites[i][d + 1] + c.padding[d] - kk[d] * c.dilation[d];
          hit = t >= 0 && t % c.stride[d] == 0 && t / c.stride[d] < out_shape[d];
          o[d] = t / c.stride[d];
        }
        if (hit) reached[key(sites[i][0], o[0], o[1], o[2])].push_back({k, static_cast<int32_t>(i)});
      }
    }
    int32_t row = 0;
    for (const auto& [k, list] : reached) {
      int64_t rest = k;
      std::array<int32_t, 4> s;
      for (int d = 3; d >= 1; --d) {
        s[d] = static_cast<int32_t>(rest % out_shape[d - 1]);
        rest /= out_shape[d - 1];
      }
      s[0] = static_cast<int32_t>(rest);
      r.out_indices.insert(r.out_indices.end(), s.begin(), s.end());
      for (const auto& [offset, input] : list) pairs[offset].push_back({row, input});
      ++row;
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    std::sort(pairs[k].begin(), pairs[k].end());
    for (const auto& [o, i] : pairs[k]) {
      r.in[k].push_back(i);
      r.out[k].push_back(o);
    }
  }
  return r;
}

// The geometries the tests build: subm and strided 3x3x3, the LiDAR
// backbone's 3x1x1 downsampling, a dilated one, a grid whose keys need 64
// bits (Note [Coordinate keys]), and subm ones dilated and on that grid.
std::vector<Conv> convs() {
  return {
      {2, {12, 60, 60}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true},
      {2, {12, 60, 60}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false},
      {2, {12, 60, 60}, {3, 1, 1}, {2, 1, 1}, {0, 0, 0}, {1, 1, 1}, false},
      {2, {12, 60, 60}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {2, 1, 2}, false},
      {3, {40, 40000, 40000}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false},
      {2, {12, 60, 60}, {3, 3, 3}, {1, 1, 1}, {2, 1, 2}, {2, 1, 2}, true},
      {3, {40, 40000, 40000}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true},
  };
}

// Enough sites that every stage runs on several threads (and several of
// the rulebook's row tasks).
constexpr size_t kSites = 30000;

// Each in random row order (a table of the sites) and in key order, as a
// voxelised scan or a regular convolution's output lists them (no table;
// Note [Sites in key order]).
TEST(SpconvRulebook, LargeRulebooksMatchTheSerialDefinition) {
  uint32_t seed = 1;
  for (const Conv& c : convs()) {
    for (bool in_key_order : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "subm " << c.subm << ", stride " << c.stride[0] << ", kernel " << c.kernel[0]
                                        << "x" << c.kernel[1] << "x" << c.kernel[2] << ", dilation " << c.dilation[0]
                                        << ", grid " << c.shape[1]
                                        << (in_key_order ? ", in key order" : ", unordered"));
      std::vector<Site> sites = randomSites(c, kSites, seed++);
      if (in_key_order) std::sort(sites.begin(), sites.end());  // (batch, z, y, x): the keys' order
      const auto [out_indices, pairs, counts] = getIndicePairs(sites, c);
      const ReferenceRulebook want = reference(sites, c);
      ASSERT_EQ(out_indices.toVector<int32_t>(), want.out_indices);
      const int64_t K = static_cast<int64_t>(want.in.size());
      const std::vector<int32_t> p = pairs.toVector<int32_t>(), n = counts.toVector<int32_t>();
      ASSERT_EQ(pairs.sizes(), (std::vector<int64_t>{K, 2, static_cast<int64_t>(kSites)}));
      for (int64_t k = 0; k < K; ++k) {
        const auto row = [&](int which) {
          return std::vector<int32_t>(p.begin() + (2 * k + which) * kSites, p.begin() + (2 * k + which + 1) * kSites);
        };
        std::vector<int32_t> in = want.in[k], out = want.out[k];
        ASSERT_EQ(n[k], static_cast<int32_t>(in.size())) << "offset " << k;
        in.resize(kSites, -1);
        out.resize(kSites, -1);
        ASSERT_EQ(row(0), in) << "offset " << k;
        ASSERT_EQ(row(1), out) << "offset " << k;
      }
    }
  }
}

std::string errorOf(const std::vector<Site>& sites, const Conv& c) {
  try {
    getIndicePairs(sites, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Bad rows placed far apart, in different threads' parts of the input.
TEST(SpconvRulebook, ErrorsInLargeInputsNameTheFirstOffendingRow) {
  const Conv c = convs()[1];
  const std::vector<Site> good = randomSites(c, kSites, 7);
  auto site = [](const Site& s) {
    return "(" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + ", " +
           std::to_string(s[3]) + ")";
  };
  {  // two repeated sites: the first row that repeats an earlier one is 21000, of row 100
    std::vector<Site> s = good;
    s[25000] = s[5];
    s[21000] = s[100];
    EXPECT_THAT(errorOf(s, c), HasSubstr("indices rows 100 and 21000 both hold site " + site(s[100])));
    s[29000] = s[100];  // a third holder of the site changes nothing
    EXPECT_THAT(errorOf(s, c), HasSubstr("indices rows 100 and 21000 both hold site " + site(s[100])));
  }
  {  // a row out of range after the repeat: the repeat is reported
    std::vector<Site> s = good;
    s[21000] = s[100];
    s[27000][2] = -3;
    EXPECT_THAT(errorOf(s, c), HasSubstr("indices rows 100 and 21000 both hold site"));
  }
  {  // a row out of range before the repeat: the range error is reported
    std::vector<Site> s = good;
    s[21000] = s[100];
    s[17000][3] = 60;
    EXPECT_THAT(errorOf(s, c), AllOf(HasSubstr("indices row 17000 = " + site(s[17000])),
                                     HasSubstr("x = 60 is outside spatial_shape [12, 60, 60]")));
    s[16999][0] = 2;
    EXPECT_THAT(errorOf(s, c), AllOf(HasSubstr("indices row 16999"), HasSubstr("batch index 2 is >= batch_size 2")));
    s[16000][0] = -1;
    EXPECT_THAT(errorOf(s, c), AllOf(HasSubstr("indices row 16000"), HasSubstr("batch index -1 is negative")));
  }
  {  // the repeat's earlier row is a later duplicate's partner, not the row before it
    std::vector<Site> s = good;
    s[20000] = s[3];
    s[20001] = s[3];
    EXPECT_THAT(errorOf(s, c), HasSubstr("indices rows 3 and 20000 both hold site"));
  }
}

// FNV-1a over every rulebook of convs() and a few error messages.
uint64_t digestOfEverything() {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  };
  uint32_t seed = 11;
  for (const Conv& c : convs()) {
    const std::vector<Site> sites = randomSites(c, kSites, seed++);
    const auto [out_indices, pairs, counts] = getIndicePairs(sites, c);
    for (const Tensor* t : {&out_indices, &pairs, &counts}) {
      const std::vector<int32_t> v = t->toVector<int32_t>();
      mix(v.data(), v.size() * sizeof(int32_t));
    }
    std::vector<Site> bad = sites;
    bad[22222] = bad[2];
    bad[23333] = bad[1];
    const std::string e = errorOf(bad, c);
    mix(e.data(), e.size());
  }
  return h;
}

// Run only as a child of ResultsDoNotDependOnTheThreadCount.
TEST(SpconvRulebook, DISABLED_Child) {
  std::printf("RULEBOOK_DIGEST=%llu\n", (unsigned long long)digestOfEverything());
}

uint64_t childDigest(const std::string& threads) {
  const std::string cmd = "BACKPLANE_NUM_THREADS=" + threads + " /proc/" + std::to_string(getpid()) +
                          "/exe --gtest_also_run_disabled_tests --gtest_filter=SpconvRulebook.DISABLED_Child 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  unsigned long long digest = 0;
  char line[512];
  while (std::fgets(line, sizeof line, p) != nullptr) std::sscanf(line, "RULEBOOK_DIGEST=%llu", &digest);
  pclose(p);
  return digest;
}

TEST(SpconvRulebook, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t here = digestOfEverything();
  for (const char* threads : {"1", "2", "3"}) EXPECT_EQ(childDigest(threads), here) << threads << " threads";
}

}  // namespace
}  // namespace backplane
