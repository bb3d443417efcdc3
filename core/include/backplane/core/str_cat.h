#pragma once
// strCat(parts...): concatenates anything with an operator<< into a string.
// Used for error messages (off the hot path). Debian's Abseil is built with
// its own string_view, so absl::StrCat does not take std::string_view or our
// types; this does.

#include <sstream>
#include <string>

namespace backplane {

template <typename... Args>
std::string strCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace backplane
