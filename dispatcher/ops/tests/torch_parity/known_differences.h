#pragma once
// Note [Known differences from PyTorch]
// The differential tests (Note [Differential tests against PyTorch] in
// harness.h) fail on every disagreement, except those listed in
// known_differences.txt, a reviewed list read at run time. An entry names
//   group:      the case group as the tests print it ("binary/add.Tensor/out")
//   op:         the overload ("add.out")
//   differs:    how: values, dtype, shape, pytorch-raises (PyTorch raises,
//               Backplane returns), backplane-raises (the reverse), returns
//               (another number or kind of returned values)
//   reason:     one line
//   documented: docs/operators.md#<anchor of one of its headings>, or "bug, not yet fixed"
//   case:       a call exactly as the tests write it (repeatable), and/or
//   cases:      an ECMAScript regex the whole call must match (repeatable)
// and the list is strict both ways: a disagreement no entry lists fails; an
// entry's case or pattern that matches no disagreeing case of its group
// (stale: the difference was fixed or the case renamed) fails; a pattern
// matching a case that agrees, or one that differs in another way than the
// entry says, fails. So the list stays exactly the set of differences.
//
// This file and known_differences.cc see no libtorch: the matching is tested
// on its own (known_differences_tests.cc).
#include <cstddef>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::torch_parity {

// How a case's results differ.
enum class Difference { Values, Dtype, Shape, PytorchRaises, BackplaneRaises, Returns };
std::string_view differenceName(Difference d);
std::optional<Difference> parseDifference(std::string_view name);

struct KnownDifference {
  struct Pattern {
    std::string text;
    bool exact = true;  // `case:` (the call itself) or `cases:` (a regex)
    std::regex re;
    std::string where;  // "file:line"
  };
  std::string group;
  std::string op;
  Difference difference = Difference::Values;
  std::string reason;
  std::string documented;
  std::vector<Pattern> patterns;
  std::string where;  // "file:line" of the entry's first line

  bool matches(const std::string& group_name, const std::string& op_name, const std::string& call) const;
};

// Parses a list; throws std::invalid_argument naming "source:line" and what
// is wrong (an unknown key or difference, a missing field, a reason left
// "TODO", an invalid regex, a case not of the entry's op).
std::vector<KnownDifference> parseKnownDifferences(std::string_view text, const std::string& source);
// Reads and parses a file (throws std::invalid_argument if it cannot be read).
std::vector<KnownDifference> loadKnownDifferences(const std::string& path);
// The entries whose `documented` names an anchor that no heading (or
// <a id="...">) of `doc` (docs/operators.md's text) has, each written
// "file:line: docs/operators.md#anchor".
std::vector<std::string> missingAnchors(const std::vector<KnownDifference>& list, std::string_view doc);

// One case's outcome, as the list sees it.
struct CaseResult {
  std::string group;  // "family/group"
  std::string op;
  std::string call;                      // the call written out (describe())
  std::optional<Difference> difference;  // nullopt: the two agree
  std::string message;                   // what differs
};

struct Verdict {
  size_t cases = 0, known = 0;
  std::vector<std::string> unexpected;  // disagreements no entry lists
  std::vector<std::string> errors;      // stale entries, entries matching agreeing or otherwise-differing cases
  std::vector<CaseResult> unlisted;     // the unexpected cases themselves
  bool ok() const { return unexpected.empty() && errors.empty(); }
};
// Judges `results`, every case of the groups in `groups_run`, against the
// entries of those groups (entries of other groups are not looked at).
Verdict judge(const std::vector<KnownDifference>& list, const std::vector<CaseResult>& results,
              const std::set<std::string>& groups_run);

// Entries in the list's syntax for `cases` (disagreements), one per group, op
// and kind of difference, naming each case exactly; reasons are left "TODO",
// which the parser refuses until someone writes them.
std::string draftEntries(const std::vector<CaseResult>& cases);

}  // namespace backplane::torch_parity
