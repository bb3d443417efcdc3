// torch_parity_tests: one gtest per family and group of cases
// (torch_parity.<family>/<group>), each running its cases on Backplane and on
// libtorch and failing on disagreements known_differences.txt does not list,
// and on entries of that list that no longer match (Note [Differential tests
// against PyTorch] in harness.h, Note [Known differences from PyTorch] in
// known_differences.h).
//   --summary   prints, per family and group, the number of cases, of known
//               differences and of unexpected disagreements (and of ops
//               Backplane lacks), and the list's stale entries, and exits 0;
//               with --all, every unexpected disagreement
//   --print-known-differences-draft   runs every case and prints, in the
//               list's syntax, an entry for every disagreement the list does
//               not yet have (reasons left "TODO", which the list refuses)
//   --known-differences=PATH   reads the list from PATH instead
//   --check-known-differences   exits 1 unless every entry names a group
//               that exists and cases (or a pattern) of it, without running them
//   --expect-families=a,b,...   exits 1 unless those are the families, in order
//               (CMake's one test per family needs the list)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>

#include "harness.h"

namespace backplane::torch_parity {
namespace {

constexpr size_t kExamplesShown = 8;

std::string& knownDifferencesPath() {
  static std::string path = BACKPLANE_TORCH_PARITY_KNOWN_DIFFERENCES;
  return path;
}
// The list, read once (main() reads it first, so a malformed list fails every test).
const std::vector<KnownDifference>& knownDifferences() {
  static const std::vector<KnownDifference> list = loadKnownDifferences(knownDifferencesPath());
  return list;
}

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
    const std::string group = family_ + "/" + group_;
    size_t via32 = 0;
    std::vector<CaseResult> results;
    for (const Case& c : cases) {
      const Outcome o = runCase(c);
      via32 += o.via_float32;
      if (o.kind == Outcome::Kind::Missing) {
        FAIL() << o.message << ": its " << cases.size() << " cases cannot run (an op PyTorch has; add it to the table)";
      }
      results.push_back({group, c.op, describe(c), o.difference, o.message});
    }
    const Verdict v = judge(knownDifferences(), results, {group});
    RecordProperty("cases", static_cast<int>(cases.size()));
    RecordProperty("known_differences", static_cast<int>(v.known));
    RecordProperty("unexpected", static_cast<int>(v.unexpected.size()));
    std::printf(
        "%s: %zu cases, %zu known differences, %zu unexpected disagreements, %zu ran PyTorch on float32 copies\n",
        group.c_str(), cases.size(), v.known, v.unexpected.size(), via32);
    std::string examples;
    for (size_t i = 0; i < v.unexpected.size() && i < kExamplesShown; ++i) examples += "  " + v.unexpected[i] + "\n";
    EXPECT_TRUE(v.unexpected.empty()) << v.unexpected.size() << " of " << cases.size()
                                      << " cases disagree with PyTorch and are not in " << knownDifferencesPath()
                                      << " (fix them, or list them: --print-known-differences-draft); the first:\n"
                                      << examples;
    std::string errors;
    for (const std::string& e : v.errors) errors += "  " + e + "\n";
    EXPECT_TRUE(v.errors.empty()) << v.errors.size() << " problems with the known differences ("
                                  << knownDifferencesPath() << "):\n"
                                  << errors;
  }

 private:
  std::string family_, group_;
};

// Every case's result, and the groups whose cases all ran (not those whose op
// Backplane lacks), per family.
struct Run {
  std::vector<CaseResult> results;
  std::set<std::string> groups_run;
  std::vector<std::string> harness_errors;  // never listable: bugs of the test
};
Run runGroup(const std::string& group, const std::vector<Case>& cases, std::string* missing) {
  Run run;
  for (const Case& c : cases) {
    Outcome o;
    try {
      o = runCase(c);
    } catch (const std::exception& e) {
      run.harness_errors.push_back(describe(c) + ": harness error: " + e.what());
      continue;
    }
    if (o.kind == Outcome::Kind::Missing) {
      *missing = o.message;
      run.results.clear();
      return run;
    }
    run.results.push_back({group, c.op, describe(c), o.difference, o.message});
  }
  run.groups_run.insert(group);
  return run;
}

// Runs every case and prints the counts per family and group.
int summary(bool all) {
  size_t total = 0, total_known = 0, total_bad = 0, total_stale = 0;
  for (const Family& f : families()) {
    size_t n = 0, known = 0, bad = 0, missing = 0;
    for (auto& [g, cases] : byGroup(f.make())) {
      const std::string group = f.name + "/" + g;
      std::string absent;
      const Run run = runGroup(group, cases, &absent);
      n += cases.size();
      if (!absent.empty()) {
        ++missing;
        std::printf("  %-34s %5zu cases  MISSING  %s\n", g.c_str(), cases.size(), absent.c_str());
        continue;
      }
      const Verdict v = judge(knownDifferences(), run.results, run.groups_run);
      known += v.known;
      bad += v.unexpected.size() + run.harness_errors.size();
      for (const std::string& e : run.harness_errors) std::printf("    %s\n", e.c_str());
      total_stale += v.errors.size();
      std::printf("  %-34s %5zu cases %5zu known %5zu unexpected%s%s\n", g.c_str(), cases.size(), v.known,
                  v.unexpected.size(), v.unexpected.empty() ? "" : "  e.g. ",
                  v.unexpected.empty() ? "" : v.unexpected.front().c_str());
      if (all)
        for (size_t i = 1; i < v.unexpected.size(); ++i) std::printf("    %s\n", v.unexpected[i].c_str());
      for (const std::string& e : v.errors) std::printf("    LIST: %s\n", e.c_str());
    }
    std::printf(
        "%s: %zu cases, %zu known differences, %zu unexpected disagreements, %zu groups whose op Backplane "
        "lacks\n\n",
        f.name.c_str(), n, known, bad, missing);
    total += n;
    total_known += known;
    total_bad += bad;
  }
  std::printf(
      "total: %zu cases, %zu known differences (%s), %zu unexpected disagreements, %zu entries of the list "
      "that no longer hold\n",
      total, total_known, knownDifferencesPath().c_str(), total_bad, total_stale);
  return 0;
}

// Prints list entries for every disagreement the list lacks.
int printDraft() {
  std::printf(
      "# Draft entries for %s: one per group, op and kind of difference not yet listed.\n"
      "# Write each reason (one line), point 'documented' at the docs section where Backplane\n"
      "# differs on purpose (docs/operators.md#<anchor>) or leave 'bug, not yet fixed', narrow or merge\n"
      "# the case lines if you like (a 'cases:' regex must match only disagreeing cases), append.\n\n",
      knownDifferencesPath().c_str());
  size_t printed = 0, errors = 0;
  for (const Family& f : families()) {
    for (auto& [g, cases] : byGroup(f.make())) {
      const std::string group = f.name + "/" + g;
      std::string absent;
      const Run run = runGroup(group, cases, &absent);
      if (!absent.empty()) {
        std::printf("# %s: not run: %s\n\n", group.c_str(), absent.c_str());
        continue;
      }
      const Verdict v = judge(knownDifferences(), run.results, run.groups_run);
      for (const std::string& e : v.errors) std::fprintf(stderr, "torch_parity: %s\n", e.c_str());
      errors += v.errors.size();
      for (const std::string& e : run.harness_errors) std::printf("# %s\n\n", e.c_str());
      printed += v.unlisted.size();
      std::fputs(draftEntries(v.unlisted).c_str(), stdout);
    }
  }
  std::printf("# %zu disagreements drafted; %zu entries of the list no longer hold (see stderr)\n", printed, errors);
  return 0;
}

// Every entry names an existing group, an op of it, existing cases, and
// patterns that match some of its cases (whether those disagree is each
// family's test to say).
int checkKnownDifferences() {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> calls;  // group -> (op, call)
  for (const Family& f : families())
    for (auto& [g, cases] : byGroup(f.make()))
      for (const Case& c : cases) calls[f.name + "/" + g].emplace_back(c.op, describe(c));
  size_t bad = 0;
  for (const KnownDifference& e : knownDifferences()) {
    const auto it = calls.find(e.group);
    if (it == calls.end()) {
      std::fprintf(stderr, "%s: no group %s (the tests print family/group, e.g. binary/add.Tensor/out)\n",
                   e.where.c_str(), e.group.c_str());
      ++bad;
      continue;
    }
    for (const KnownDifference::Pattern& p : e.patterns) {
      bool found = false;
      for (const auto& [op, call] : it->second)
        found |= op == e.op && (p.exact ? p.text == call : std::regex_match(call, p.re));
      if (!found) {
        std::fprintf(stderr, "%s: '%s%s' names no case of %s %s\n", p.where.c_str(),
                     p.exact ? "case: " : "cases: ", p.text.c_str(), e.group.c_str(), e.op.c_str());
        ++bad;
      }
    }
  }
  std::printf("torch_parity: %zu known differences, %zu naming no case\n", knownDifferences().size(), bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace backplane::torch_parity

int main(int argc, char** argv) {
  using namespace backplane::torch_parity;
  ::testing::InitGoogleTest(&argc, argv);
  bool want_summary = false, want_all = false, want_draft = false, want_check = false;
  for (int i = 1; i < argc; ++i) {
    want_summary |= std::strcmp(argv[i], "--summary") == 0;
    want_all |= std::strcmp(argv[i], "--all") == 0;
    want_draft |= std::strcmp(argv[i], "--print-known-differences-draft") == 0;
    want_check |= std::strcmp(argv[i], "--check-known-differences") == 0;
    constexpr std::string_view kList = "--known-differences=";
    if (std::string_view(argv[i]).starts_with(kList))
      knownDifferencesPath() = std::string(std::string_view(argv[i]).substr(kList.size()));
    constexpr std::string_view kExpect = "--expect-families=";
    if (std::string_view(argv[i]).starts_with(kExpect)) {
      std::string names;
      for (const Family& f : families()) names += (names.empty() ? "" : ",") + f.name;
      const std::string_view expected = std::string_view(argv[i]).substr(kExpect.size());
      if (names == expected) return 0;
      std::fprintf(stderr,
                   "torch_parity: the families are %s, but CMake runs %s: update the list in "
                   "dispatcher/ops/tests/torch_parity/CMakeLists.txt\n",
                   names.c_str(), std::string(expected).c_str());
      return 1;
    }
  }
  try {
    knownDifferences();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "torch_parity: the known differences: %s\n", e.what());
    return 1;
  }
  if (want_check) return checkKnownDifferences();
  // Listing the tests (ctest's discovery) needs only the case tables.
  bool listing = ::testing::GTEST_FLAG(list_tests);
  if (!listing) {
    setUp();
    std::string left_out;
    for (const std::string& d : dtypesWithoutTorch()) left_out += (left_out.empty() ? "" : ", ") + d;
    if (!left_out.empty())
      std::printf("%storch_parity: dtypes libtorch 1.13 lacks, left out: %s\n", want_draft ? "# " : "",
                  left_out.c_str());
  }
  if (want_draft) return printDraft();
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
