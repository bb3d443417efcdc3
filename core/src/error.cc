#include "backplane/core/error.h"

#include <new>

namespace backplane {
namespace detail {
void throwError(absl::StatusCode code, std::string message) { throw Error(code, std::move(message)); }

void throwInternalError(const char* condition, const char* file, int line, std::string message) {
  throw Error(absl::StatusCode::kInternal,
              strCat("internal error: ", message.empty() ? "" : message + " ", "(invariant `", condition,
                     "` failed at ", file, ":", line,
                     "). This is a Backplane bug, not a problem with your code or data: please report it with "
                     "this message and how to reproduce it"));
}
}  // namespace detail

absl::Status statusFromCurrentException() {
  try {
    throw;
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(strCat("out of memory: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(strCat("unexpected exception: ", e.what()));
  } catch (...) {
    return absl::UnknownError("unknown exception (not derived from std::exception)");
  }
}
}  // namespace backplane
