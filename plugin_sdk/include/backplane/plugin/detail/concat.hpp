// bp::detail::concat, which streams message parts into one string (used by
// BP_PLUGIN_CHECK and every error message of the SDK).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_CONCAT_HPP_
#define BACKPLANE_PLUGIN_DETAIL_CONCAT_HPP_

#include <sstream>
#include <string>

namespace bp {
namespace detail {

// Streams every argument into one string ("x must be > 0, got ", x).
template <class... A>
std::string concat(const A&... parts) {
  std::ostringstream os;
  (void)(os << ... << parts);
  return os.str();
}

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_CONCAT_HPP_
