// bp::Error, bp::fail, bp::check and BP_PLUGIN_CHECK: how the SDK and a
// plugin's kernels report failure, and what happens to an exception at the
// ABI boundary. Part of <backplane/plugin.hpp>; compiles on its own.
//
// Note [Exceptions at the ABI boundary]
// C++ exceptions never cross into the host. Every function the SDK hands
// to the host (kernel adapters, device trampolines, the entry points) catches
// everything and returns a host-made BP_Error: bp::Error keeps its code,
// std::bad_alloc becomes BP_RESOURCE_EXHAUSTED, any other std::exception
// BP_INTERNAL with what(), anything else BP_UNKNOWN. Functions with no error
// return (deallocate, device_count, ...) log the exception instead. In the
// other direction, every host call that fails is turned into a bp::Error.
#ifndef BACKPLANE_PLUGIN_ERRORS_HPP_
#define BACKPLANE_PLUGIN_ERRORS_HPP_

#include <exception>
#include <string>
#include <utility>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// Readable name of an error code ("INVALID_ARGUMENT"), for messages.
constexpr const char* errorCodeName(BP_ErrorCode code) noexcept {
  switch (code) {
    case BP_OK: return "OK";
    case BP_CANCELLED: return "CANCELLED";
    case BP_UNKNOWN: return "UNKNOWN";
    case BP_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case BP_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case BP_NOT_FOUND: return "NOT_FOUND";
    case BP_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case BP_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case BP_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case BP_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case BP_ABORTED: return "ABORTED";
    case BP_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case BP_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case BP_INTERNAL: return "INTERNAL";
    case BP_UNAVAILABLE: return "UNAVAILABLE";
    case BP_DATA_LOSS: return "DATA_LOSS";
    case BP_DECLINED: return "DECLINED";
    default: return "UNKNOWN_CODE";
  }
}

// The one exception type of the SDK: a status code and a message. Thrown by
// every bp function that fails and by bp::fail; kernels may throw it to pick
// the code the caller sees (Note [Exceptions at the ABI boundary]).
class Error : public std::exception {
 public:
  Error(BP_ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  BP_ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  BP_ErrorCode code_;
  std::string message_;
};

// Throws bp::Error(code, message).
[[noreturn]] inline void fail(BP_ErrorCode code, std::string message) { throw Error(code, std::move(message)); }

// Declines the call from inside a kernel registered with impl (or
// implWhenDefined): the host runs the call where it would have gone without
// this kernel, e.g. the CPU fallback (Note [Declined calls] in
// plugin_api.h). Call it before writing any output; `reason` appears in
// reports and in the CPU fallback's warning. It throws (bp::Error with
// BP_DECLINED), so it costs an exception, about a microsecond: decline
// calls the kernel cannot serve, not a hot fraction of the ones it can.
// Needs ABI 1.7: a plugin built for an older minor (Note [The ABI a plugin's
// source targets]) has no decline.
#if BP_ABI_MINOR >= 7
[[noreturn]] inline void decline(std::string reason) { throw Error(BP_DECLINED, std::move(reason)); }
#endif

// Throws bp::Error(code, msg) unless `cond`. The message is built by the
// caller even when `cond` holds; in kernels prefer BP_PLUGIN_CHECK.
inline void check(bool cond, BP_ErrorCode code, std::string msg) {
  if (!cond) fail(code, std::move(msg));
}

}  // namespace bp

// Throws bp::Error(BP_INVALID_ARGUMENT, <the message parts streamed
// together>) unless `cond`; the message is built only on failure.
//   BP_PLUGIN_CHECK(dim >= 0, "dim must be non-negative, got ", dim);
#define BP_PLUGIN_CHECK(cond, ...)                                                   \
  do {                                                                               \
    if (!(cond)) ::bp::fail(BP_INVALID_ARGUMENT, ::bp::detail::concat(__VA_ARGS__)); \
  } while (0)

// BP_PLUGIN_CHECK with a chosen error code.
#define BP_PLUGIN_CHECK_CODE(cond, code, ...)                           \
  do {                                                                  \
    if (!(cond)) ::bp::fail((code), ::bp::detail::concat(__VA_ARGS__)); \
  } while (0)

#endif  // BACKPLANE_PLUGIN_ERRORS_HPP_
