#pragma once
// The regular expressions that select names on the command line: `backplane
// conformance --ops REGEX` and `backplane ops --schemas REGEX` (and Python's
// conformance.run(ops=...)). See Note [Name patterns] in src/name_pattern.cc.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace re2 {
class RE2;
}

namespace backplane::conformance {

// A compiled name pattern: RE2 syntax, searched anywhere in a name. Copies
// share the compiled form; matching is thread-safe.
class NamePattern {
 public:
  // `option` names the pattern in messages ("--ops"). An empty pattern
  // matches every name. InvalidArgument, naming the pattern and RE2's reason,
  // for a syntax error or a pattern past the limits of Note [Name patterns].
  static absl::StatusOr<NamePattern> compile(std::string_view option, const std::string& pattern);

  bool matchesEverything() const { return re_ == nullptr; }
  bool matches(std::string_view name) const;

 private:
  std::shared_ptr<const re2::RE2> re_;  // null: the empty pattern
};

// `pattern` as messages quote it: in quotes, visibleText, and only the
// start of a long one.
std::string quotedPattern(const std::string& pattern);

}  // namespace backplane::conformance
