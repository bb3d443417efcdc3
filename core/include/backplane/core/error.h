#pragma once
// Errors. Loading, registration and parsing return absl::Status; operator
// calls and tensor operations throw backplane::Error, which carries a status
// code and a message that names what was wrong and what to do about it.

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backplane/core/str_cat.h"

namespace backplane {

// The one exception type thrown by Backplane's C++ API.
class Error : public std::exception {
 public:
  Error(absl::StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  explicit Error(const absl::Status& status) : code_(status.code()), message_(std::string(status.message())) {}

  absl::StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }
  // The error as a Status, for code that crosses into Status-returning APIs.
  absl::Status status() const { return absl::Status(code_, message_); }

 private:
  absl::StatusCode code_;
  std::string message_;
};

namespace detail {
[[noreturn]] void throwError(absl::StatusCode code, std::string message);
// Throws Error(kInternal) for a broken invariant (BP_INTERNAL_ASSERT).
[[noreturn]] void throwInternalError(const char* condition, const char* file, int line, std::string message);
}  // namespace detail

// Throws Error(status) unless status is OK.
inline void throwIfError(const absl::Status& status) {
  if (!status.ok()) detail::throwError(status.code(), std::string(status.message()));
}

// Returns the value of `s` or throws its error.
template <typename T>
T valueOrThrow(absl::StatusOr<T> s) {
  throwIfError(s.status());
  return *std::move(s);
}

// Converts the exception currently being handled into a Status; used where
// exceptions must not escape (C ABI boundaries, registration APIs).
absl::Status statusFromCurrentException();

}  // namespace backplane

// BP_CHECK(cond, parts...): throws Error(kInvalidArgument, StrCat(parts...))
// when cond is false. The message parts are only evaluated on failure. For
// what the caller passed in; a condition only a bug in Backplane can break
// is a BP_INTERNAL_ASSERT.
#define BP_CHECK(cond, ...)                                                                                    \
  do {                                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                                \
      ::backplane::detail::throwError(::absl::StatusCode::kInvalidArgument, ::backplane::strCat(__VA_ARGS__)); \
    }                                                                                                          \
  } while (0)

// BP_THROW(code, parts...): throws Error(absl::StatusCode::code, ...).
#define BP_THROW(code, ...) ::backplane::detail::throwError(::absl::StatusCode::code, ::backplane::strCat(__VA_ARGS__))

// BP_INTERNAL_ASSERT(cond, parts...): throws Error(kInternal) when cond is
// false, with a message that names the condition, the file and line and
// StrCat(parts...), and says that this is a Backplane bug to report. For
// invariants Backplane itself maintains, never for checks of what a caller
// passed in (BP_CHECK). The message parts are only evaluated on failure.
#define BP_INTERNAL_ASSERT(cond, ...)                                                              \
  do {                                                                                             \
    if (!(cond)) [[unlikely]] {                                                                    \
      ::backplane::detail::throwInternalError(#cond, __FILE__, __LINE__,                           \
                                              ::backplane::strCat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                              \
  } while (0)
