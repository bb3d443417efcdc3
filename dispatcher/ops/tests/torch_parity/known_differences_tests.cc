// The known-differences list's parsing and matching (Note [Known differences
// from PyTorch] in known_differences.h), without libtorch; and the checked-in
// list's syntax and its anchors in docs/operators.md.
#include "known_differences.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace backplane::torch_parity {
namespace {

constexpr const char* kGroup = "binary/add.Tensor/out";
constexpr const char* kCallA = "add.out(self=bool[4, 4] special, other=bool[4] special seed 1, out=float64[0] zeros)";
constexpr const char* kCallB = "add.out(self=uint8[4, 4] special, other=uint8[4] special seed 1, out=float64[0] zeros)";
constexpr const char* kCallC = "add.out(self=int8[4, 4] special, other=int8[4] special seed 1, out=float64[0] zeros)";

std::string entry(const std::string& patterns, const std::string& differs = "values") {
  return std::string("# a comment\ngroup: ") + kGroup + "\nop: add.out\ndiffers: " + differs +
         "\nreason: out= of another dtype computes in out's dtype\ndocumented: bug, not yet fixed\n" + patterns;
}

CaseResult differing(const char* call, Difference d = Difference::Values) {
  return {kGroup, "add.out", call, d, std::string(call) + ": element [0, 0]: PyTorch 1, Backplane 2"};
}
CaseResult agreeing(const char* call) { return {kGroup, "add.out", call, std::nullopt, ""}; }

Verdict judgeOne(const std::string& text, const std::vector<CaseResult>& results) {
  return judge(parseKnownDifferences(text, "list"), results, {kGroup});
}

TEST(KnownDifferences, ListedDisagreementIsKnown) {
  const Verdict v = judgeOne(entry(std::string("case: ") + kCallA + "\n"), {differing(kCallA), agreeing(kCallC)});
  EXPECT_TRUE(v.ok()) << (v.errors.empty() ? v.unexpected.front() : v.errors.front());
  EXPECT_EQ(v.known, 1u);
  EXPECT_EQ(v.cases, 2u);
}

TEST(KnownDifferences, UnlistedDisagreementFails) {
  const Verdict v = judgeOne(entry(std::string("case: ") + kCallA + "\n"), {differing(kCallA), differing(kCallB)});
  EXPECT_FALSE(v.ok());
  ASSERT_EQ(v.unexpected.size(), 1u);
  EXPECT_NE(v.unexpected[0].find("uint8"), std::string::npos) << v.unexpected[0];
  ASSERT_EQ(v.unlisted.size(), 1u);
  EXPECT_EQ(v.unlisted[0].call, kCallB);
  EXPECT_TRUE(v.errors.empty());
}

TEST(KnownDifferences, StaleEntryFails) {
  // kCallA agrees now: its `case:` must go.
  const Verdict v = judgeOne(entry(std::string("case: ") + kCallA + "\ncase: " + kCallB + "\n"),
                             {agreeing(kCallA), differing(kCallB)});
  EXPECT_FALSE(v.ok());
  EXPECT_TRUE(v.unexpected.empty());
  ASSERT_FALSE(v.errors.empty());
  EXPECT_NE(v.errors[0].find("agrees with PyTorch"), std::string::npos) << v.errors[0];
  EXPECT_NE(v.errors[0].find("list:7"), std::string::npos) << v.errors[0];  // the `case:` line
  // A case that no longer exists (renamed) leaves its line stale.
  const Verdict gone = judgeOne(entry(std::string("case: ") + kCallA + "\n"), {differing(kCallB)});
  ASSERT_EQ(gone.errors.size(), 1u);
  EXPECT_NE(gone.errors[0].find("remove it from the list"), std::string::npos) << gone.errors[0];
  EXPECT_EQ(gone.unexpected.size(), 1u);
}

TEST(KnownDifferences, PatternMatchingAnAgreeingCaseFails) {
  // A regex listing the bool and uint8 cases also matches int8's, which agrees.
  const std::string re = R"(cases: add\.out\(self=\w+\[4, 4\] special, .*out=float64\[0\] zeros\))";
  const Verdict v = judgeOne(entry(re + "\n"), {differing(kCallA), differing(kCallB), agreeing(kCallC)});
  EXPECT_EQ(v.known, 2u);
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_NE(v.errors[0].find("int8[4, 4]"), std::string::npos) << v.errors[0];
  // Narrowed to the two dtypes, it passes.
  const std::string narrow = R"(cases: add\.out\(self=(bool|uint8)\[4, 4\] special, .*out=float64\[0\] zeros\))";
  EXPECT_TRUE(judgeOne(entry(narrow + "\n"), {differing(kCallA), differing(kCallB), agreeing(kCallC)}).ok());
}

TEST(KnownDifferences, OtherKindOfDifferenceFails) {
  const Verdict v =
      judgeOne(entry(std::string("case: ") + kCallA + "\n", "dtype"), {differing(kCallA, Difference::Values)});
  EXPECT_FALSE(v.ok());
  ASSERT_FALSE(v.errors.empty());
  EXPECT_NE(v.errors[0].find("now differs in values"), std::string::npos) << v.errors[0];
  EXPECT_EQ(v.unexpected.size(), 1u);  // and the case itself is not listed
}

TEST(KnownDifferences, EntriesOfGroupsNotRunAreNotJudged) {
  const std::vector<KnownDifference> list = parseKnownDifferences(entry(std::string("case: ") + kCallA + "\n"), "l");
  EXPECT_TRUE(judge(list, {}, {"unary/abs"}).ok());
  EXPECT_FALSE(judge(list, {}, {kGroup}).ok());
}

TEST(KnownDifferences, ParseErrorsNameTheLine) {
  const auto error = [](const std::string& text) {
    try {
      parseKnownDifferences(text, "list");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string a = std::string("case: ") + kCallA + "\n";
  EXPECT_NE(error(entry(a, "bits")).find("list:4: 'differs: bits'"), std::string::npos) << error(entry(a, "bits"));
  EXPECT_NE(error(entry("")).find("no 'case:' or 'cases:'"), std::string::npos);
  EXPECT_NE(error(entry("cases: add.out(\n")).find("list:7: 'cases: add.out(' is not a valid"), std::string::npos);
  EXPECT_NE(error(entry("case: sub.out(self=bool[4])\n")).find("not a call of the entry's op add.out"),
            std::string::npos);
  EXPECT_NE(error("group: g\nop: o\ndiffers: values\nreason: TODO\n").find("list:4: the reason is still 'TODO'"),
            std::string::npos);
  EXPECT_NE(error("group: g\nop: o\ndiffers: values\nreason: r\ndocumented: somewhere\ncase: o(x)\n")
                .find("expected docs/operators.md#<anchor>"),
            std::string::npos);
  EXPECT_NE(error("group: g\nop: o\nop: p\n").find("a second 'op:'"), std::string::npos);
  EXPECT_NE(error("group: g\nflavour: x\n").find("unknown key 'flavour'"), std::string::npos);
  EXPECT_NE(error("op: o\ndiffers: values\nreason: r\ndocumented: bug, not yet fixed\ncase: o(x)\n")
                .find("list:1: the entry has no 'group:'"),
            std::string::npos);
  // Two entries separated by a blank line; an empty list.
  EXPECT_EQ(parseKnownDifferences(entry(a) + "\n\n" + entry(std::string("case: ") + kCallB), "list").size(), 2u);
  EXPECT_TRUE(parseKnownDifferences("# nothing yet\n", "list").empty());
}

TEST(KnownDifferences, DraftParsesOnceReasonsAreWritten) {
  const std::vector<CaseResult> rs = {differing(kCallA), differing(kCallB, Difference::Dtype), differing(kCallC)};
  const std::string draft = draftEntries(rs);
  EXPECT_THROW(parseKnownDifferences(draft, "draft"), std::invalid_argument);  // reasons left TODO
  std::string reviewed = draft;
  for (size_t at; (at = reviewed.find("reason: TODO")) != std::string::npos;)
    reviewed.replace(at, 12, "reason: reviewed");
  const std::vector<KnownDifference> list = parseKnownDifferences(reviewed, "draft");
  ASSERT_EQ(list.size(), 2u);  // values (A and C) and dtype (B)
  EXPECT_EQ(list[0].patterns.size(), 2u);
  const Verdict v = judge(list, rs, {kGroup});
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.known, 3u);
}

TEST(KnownDifferences, DocsAnchors) {
  const std::vector<KnownDifference> list = parseKnownDifferences(
      "group: g\nop: o\ndiffers: values\nreason: r\n"
      "documented: docs/operators.md#differences-from-pytorch\ncase: o(x)\n\n"
      "group: g\nop: o\ndiffers: dtype\nreason: r\n"
      "documented: docs/operators.md#no-such-heading\ncase: o(y)\n\n"
      "group: g\nop: o\ndiffers: shape\nreason: r\n"
      "documented: docs/operators.md#out-dtypes\ncase: o(z)\n",
      "list");
  const std::vector<std::string> missing = missingAnchors(
      list, "# Operators\n```\n# no-such-heading\n```\n### Differences from PyTorch\n<a id=\"out-dtypes\"></a>\n");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "list:8: docs/operators.md#no-such-heading");
}

// The checked-in list parses, and its anchors exist in docs/operators.md.
TEST(KnownDifferences, CheckedInListIsWellFormed) {
  const std::vector<KnownDifference> list = loadKnownDifferences(BACKPLANE_TORCH_PARITY_KNOWN_DIFFERENCES);
  std::ifstream in(BACKPLANE_OPERATORS_DOC);
  ASSERT_TRUE(in) << BACKPLANE_OPERATORS_DOC;
  std::ostringstream doc;
  doc << in.rdbuf();
  for (const std::string& m : missingAnchors(list, doc.str()))
    ADD_FAILURE() << m << ": docs/operators.md has no such heading or <a id>";
}

}  // namespace
}  // namespace backplane::torch_parity
