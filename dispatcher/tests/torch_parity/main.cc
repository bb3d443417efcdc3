// torch_parity_tests: one gtest per family and group of cases
// (torch_parity.<family>/<group>), each running its cases on Backplane and on
// libtorch and failing with the first disagreements it finds (Note
// [Differential tests against PyTorch] in harness.h).
//   --summary   prints, per family, the number of cases and of disagreements
//               (and of ops Backplane lacks), and exits 0; with --all, every
//               disagreement
//   --expect-families=a,b,...   exits 1 unless those are the families, in order
//               (CMake's one test per family needs the list)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>

#include "harness.h"

namespace backplane::torch_parity {
namespace {

constexpr size_t kExamplesShown = 8;

std::string testName(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::map<std::string, std::vector<Case>> byGroup(std::vector<Case> cases) {
  std::map<std::string, std::vector<Case>> groups;
  for (Case& c : cases) {
    const std::string g = c.group.empty() ? c.op : c.group;
    groups[g].push_back(std::move(c));
  }
  return groups;
}

class GroupTest : public ::testing::Test {
 public:
  GroupTest(std::string family, std::string group) : family_(std::move(family)), group_(std::move(group)) {}
  void TestBody() override {
    std::vector<Case> cases;
    for (const Family& f : families())
      if (f.name == family_) cases = std::move(byGroup(f.make())[group_]);
    ASSERT_FALSE(cases.empty());
    size_t disagree = 0, via32 = 0;
    std::string examples;
    for (const Case& c : cases) {
      const Outcome o = runCase(c);
      via32 += o.via_float32;
      if (o.kind == Outcome::Kind::Missing) {
        FAIL() << o.message << ": its " << cases.size() << " cases cannot run (an op PyTorch has; add it to the table)";
      }
      if (o.kind == Outcome::Kind::Disagree) {
        if (++disagree <= kExamplesShown) examples += "  " + o.message + "\n";
      }
    }
    RecordProperty("cases", static_cast<int>(cases.size()));
    RecordProperty("disagreements", static_cast<int>(disagree));
    std::printf("%s/%s: %zu cases, %zu disagree, %zu ran PyTorch on float32 copies\n", family_.c_str(), group_.c_str(),
                cases.size(), disagree, via32);
    EXPECT_EQ(disagree, 0u) << disagree << " of " << cases.size() << " cases disagree with PyTorch; the first:\n"
                            << examples;
  }

 private:
  std::string family_, group_;
};

// Runs every case and prints the counts per family and group.
int summary(bool all) {
  size_t total = 0, total_bad = 0;
  for (const Family& f : families()) {
    size_t n = 0, bad = 0, missing = 0;
    for (auto& [g, cases] : byGroup(f.make())) {
      size_t gbad = 0;
      std::string example;
      bool absent = false;
      for (const Case& c : cases) {
        Outcome o;
        try {
          o = runCase(c);
        } catch (const std::exception& e) {
          o = {Outcome::Kind::Disagree, std::string("harness error: ") + e.what()};
        }
        if (o.kind == Outcome::Kind::Missing) {
          absent = true;
          example = o.message;
          break;
        }
        if (o.kind == Outcome::Kind::Disagree && gbad++ == 0) example = o.message;
        if (o.kind == Outcome::Kind::Disagree && all) std::printf("    %s\n", o.message.c_str());
      }
      n += cases.size();
      if (absent) {
        ++missing;
        std::printf("  %-34s %5zu cases  MISSING  %s\n", g.c_str(), cases.size(), example.c_str());
      } else {
        bad += gbad;
        std::printf("  %-34s %5zu cases %5zu disagree%s%s\n", g.c_str(), cases.size(), gbad, gbad ? "  e.g. " : "",
                    example.c_str());
      }
    }
    std::printf("%s: %zu cases, %zu disagree, %zu groups whose op Backplane lacks\n\n", f.name.c_str(), n, bad,
                missing);
    total += n;
    total_bad += bad;
  }
  std::printf("total: %zu cases, %zu disagree\n", total, total_bad);
  return 0;
}

}  // namespace
}  // namespace backplane::torch_parity

int main(int argc, char** argv) {
  using namespace backplane::torch_parity;
  ::testing::InitGoogleTest(&argc, argv);
  bool want_summary = false, want_all = false;
  for (int i = 1; i < argc; ++i) {
    want_summary |= std::strcmp(argv[i], "--summary") == 0;
    want_all |= std::strcmp(argv[i], "--all") == 0;
    constexpr std::string_view kExpect = "--expect-families=";
    if (std::string_view(argv[i]).starts_with(kExpect)) {
      std::string names;
      for (const Family& f : families()) names += (names.empty() ? "" : ",") + f.name;
      const std::string_view expected = std::string_view(argv[i]).substr(kExpect.size());
      if (names == expected) return 0;
      std::fprintf(stderr,
                   "torch_parity: the families are %s, but CMake runs %s: update the list in "
                   "dispatcher/tests/torch_parity/CMakeLists.txt\n",
                   names.c_str(), std::string(expected).c_str());
      return 1;
    }
  }
  // Listing the tests (ctest's discovery) needs only the case tables.
  bool listing = ::testing::GTEST_FLAG(list_tests);
  if (!listing) {
    setUp();
    std::string left_out;
    for (const std::string& d : dtypesWithoutTorch()) left_out += (left_out.empty() ? "" : ", ") + d;
    if (!left_out.empty()) std::printf("torch_parity: dtypes libtorch 1.13 lacks, left out: %s\n", left_out.c_str());
  }
  if (want_summary) return summary(want_all);
  for (const Family& f : families()) {
    for (const auto& [group, cases] : byGroup(f.make())) {
      (void)cases;
      const std::string fam = f.name, grp = group;
      ::testing::RegisterTest(("torch_parity_" + testName(fam)).c_str(), testName(grp).c_str(), nullptr, nullptr,
                              __FILE__, __LINE__, [fam, grp]() -> ::testing::Test* { return new GroupTest(fam, grp); });
    }
  }
  return RUN_ALL_TESTS();
}
