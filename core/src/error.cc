#include "backplane/core/error.h"

#include <new>

namespace backplane {
namespace detail {
void throwError(absl::StatusCode code, std::string message) { throw Error(code, std::move(message)); }
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
