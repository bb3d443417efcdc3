// backplane.Error and one subclass per status code (Note [Python exceptions]).
//
// Note [Python exceptions]
// An operator call that fails in C++ throws backplane::Error (a status code
// and a message naming the op, devices, shapes and dtypes). Python gets the
// same message as an instance of the subclass for that code, which also
// derives from the built-in exception a Python user would catch for it:
// InvalidArgumentError is a ValueError, OutOfRangeError an IndexError,
// UnimplementedError a NotImplementedError, ResourceExhaustedError a
// MemoryError, NotFoundError a LookupError; the rest are RuntimeErrors.
// `e.code` is the status code's name ("INVALID_ARGUMENT"). Argument parsing
// in op_call.cc raises plain TypeError for an argument of the wrong type
// (as Python does) and InvalidArgumentError for a value the type allows
// but the argument does not.
#include <array>
#include <string>

#include "absl/status/status.h"
#include "backplane/core/error.h"
#include "bindings.h"

namespace backplane::python {
namespace {

struct ErrorClass {
  absl::StatusCode code;
  const char* name;   // backplane.<name>
  PyObject* builtin;  // the built-in exception it also derives from
};

constexpr int kNumCodes = 17;  // absl::StatusCode 0..16
PyObject* g_classes[kNumCodes] = {};
PyObject* g_error = nullptr;

}  // namespace

void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw nb::python_error();
}

std::string typeName(nb::handle o) { return Py_TYPE(o.ptr())->tp_name; }

void raiseError(const backplane::Error& e) noexcept {
  int code = static_cast<int>(e.code());
  PyObject* cls = code > 0 && code < kNumCodes && g_classes[code] ? g_classes[code] : g_error;
  // "replace": a message that is not UTF-8 (a plugin's bytes) still arrives.
  PyObject* message = PyUnicode_DecodeUTF8(e.message().data(), static_cast<Py_ssize_t>(e.message().size()), "replace");
  if (!message) return;  // the error of decoding it is raised instead
  PyObject* exc = PyObject_CallOneArg(cls, message);
  Py_DECREF(message);
  if (!exc) return;  // the error of constructing it is raised instead
  std::string name = absl::StatusCodeToString(e.code());
  PyObject* code_name = PyUnicode_FromString(name.c_str());
  if (code_name) {
    PyObject_SetAttrString(exc, "code", code_name);
    Py_DECREF(code_name);
  }
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
}

void bindErrors(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("backplane.Error",
                                      "An error from Backplane. `code` names its status code (\"INVALID_ARGUMENT\").",
                                      PyExc_Exception, nullptr);
  m.attr("Error") = nb::handle(g_error);
  const ErrorClass classes[] = {
      {absl::StatusCode::kCancelled, "CancelledError", PyExc_RuntimeError},
      {absl::StatusCode::kUnknown, "UnknownError", PyExc_RuntimeError},
      {absl::StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError},
      {absl::StatusCode::kDeadlineExceeded, "DeadlineExceededError", PyExc_TimeoutError},
      {absl::StatusCode::kNotFound, "NotFoundError", PyExc_LookupError},
      {absl::StatusCode::kAlreadyExists, "AlreadyExistsError", PyExc_RuntimeError},
      {absl::StatusCode::kPermissionDenied, "PermissionDeniedError", PyExc_PermissionError},
      {absl::StatusCode::kResourceExhausted, "ResourceExhaustedError", PyExc_MemoryError},
      {absl::StatusCode::kFailedPrecondition, "FailedPreconditionError", PyExc_RuntimeError},
      {absl::StatusCode::kAborted, "AbortedError", PyExc_RuntimeError},
      {absl::StatusCode::kOutOfRange, "OutOfRangeError", PyExc_IndexError},
      {absl::StatusCode::kUnimplemented, "UnimplementedError", PyExc_NotImplementedError},
      {absl::StatusCode::kInternal, "InternalError", PyExc_RuntimeError},
      {absl::StatusCode::kUnavailable, "UnavailableError", PyExc_RuntimeError},
      {absl::StatusCode::kDataLoss, "DataLossError", PyExc_RuntimeError},
      {absl::StatusCode::kUnauthenticated, "UnauthenticatedError", PyExc_PermissionError},
  };
  for (const ErrorClass& c : classes) {
    std::string qualified = std::string("backplane.") + c.name;
    PyObject* bases = PyTuple_Pack(2, g_error, c.builtin);
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases, nullptr);
    Py_DECREF(bases);
    if (!cls) throw nb::python_error();
    g_classes[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = nb::handle(cls);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const backplane::Error& e) {
      raiseError(e);
    }
  });
}

}  // namespace backplane::python
