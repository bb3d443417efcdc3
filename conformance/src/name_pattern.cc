// Name patterns (name_pattern.h).
//
// Note [Name patterns]
// A pattern comes from a user or a script and is matched against every op
// and test name, in the tool and again in each worker, so it must not be
// able to hang or crash the run: std::regex backtracks ('(.+)+X' never
// ends) and recurses per character (a 90,000-character pattern overflowed
// the stack). RE2 matches in time linear in the name, whatever the
// pattern, and refuses what it cannot compile within max_mem. The limits:
// - kMaxPatternBytes: the pattern also travels on each worker's command
//   line, where Linux takes at most 128 KiB per argument;
// - kMaxProgramMemory: what RE2 may spend compiling it. A list of thousands
//   of op names joined by '|' compiles to a few thousand instructions (RE2
//   merges common prefixes) and fits easily; 90,000 literal characters do not.
// Syntax is RE2's (close to ECMAScript and Python's for what selecting
// names needs; no backreferences, no lookaround); a name is selected when
// the pattern matches anywhere in it (anchor with ^ and $, or \b).
#include "backplane/conformance/name_pattern.h"

#include <re2/re2.h>

#include <string>

#include "backplane/conformance/text_format.h"

namespace backplane::conformance {

namespace {

constexpr size_t kMaxPatternBytes = 65536;
constexpr int64_t kMaxProgramMemory = int64_t{1} << 20;

}  // namespace

std::string quotedPattern(const std::string& pattern) {
  constexpr size_t kShown = 200;
  return "'" + visibleText(pattern.size() <= kShown ? pattern : pattern.substr(0, kShown) + "...") + "'";
}

absl::StatusOr<NamePattern> NamePattern::compile(std::string_view option, const std::string& pattern) {
  NamePattern p;
  if (pattern.empty()) return p;
  const std::string opt(option);
  if (pattern.size() > kMaxPatternBytes) {
    return absl::InvalidArgumentError("the " + opt + " pattern is too large (" + std::to_string(pattern.size()) +
                                      " bytes; at most " + std::to_string(kMaxPatternBytes) +
                                      "): select with a shorter pattern, e.g. a common prefix such as '^bp::add'");
  }
  RE2::Options options;
  options.set_log_errors(false);  // the message below says it once
  options.set_max_mem(kMaxProgramMemory);
  auto re = std::make_shared<const RE2>(pattern, options);
  if (re->error_code() == RE2::ErrorPatternTooLarge) {
    return absl::InvalidArgumentError("the " + opt + " pattern is too large (" + std::to_string(pattern.size()) +
                                      " bytes): it compiles past RE2's memory limit of " +
                                      std::to_string(kMaxProgramMemory >> 20) +
                                      " MiB; select with a shorter pattern, e.g. a common prefix such as '^bp::add'");
  }
  if (!re->ok()) {
    return absl::InvalidArgumentError(opt + " " + quotedPattern(pattern) +
                                      " is not a valid regular expression (RE2 syntax): " + visibleText(re->error()));
  }
  p.re_ = std::move(re);
  return p;
}

bool NamePattern::matches(std::string_view name) const { return !re_ || RE2::PartialMatch(name, *re_); }

}  // namespace backplane::conformance
