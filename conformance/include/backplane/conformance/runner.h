#pragma once
// Running conformance specs on one backend, in this process.
//
// Each form of each spec (functional, in-place, out=) gives one result per
// backend: how the backend serves the op (a KernelKind: native, composite,
// backend_fallback, cpu_fallback or missing) and whether every sample
// matched the reference (pass), one did not (fail: the sample, the max abs
// and rel error) or a call threw when it should not have (error: the
// message).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/device.h"
#include "backplane/dispatch/operator_entry.h"

namespace backplane::conformance {

// Crash: the process running the op died or ran past its time limit (set
// by the out-of-process runner, never by runSpec). Unsupported: an ONNX node
// test that no standard op expresses (the message says why); not a failure.
// ExpectedFailure: an ONNX node test that failed (or errored, or crashed)
// and is on the backend's list of expected failures (the note gives the
// list's reason); not a failure (Note [ONNX node tests]).
// Uncertified: an op with a native kernel on the backend and no conformance
// spec, so nothing checked it (Note [Uncertified operators] in suite.h); not
// a failure, but under --strict.
enum class Outcome { Pass, Fail, Error, Crash, Unsupported, ExpectedFailure, Uncertified };
const char* outcomeName(Outcome o);

struct Result {
  std::string op;       // the form's op, e.g. "bp::add_.Tensor"
  std::string form;     // "functional", "inplace" or "out"
  std::string backend;  // "cpu", "cuda", ...
  // What served the op on the backend; none for a device check (no op).
  std::optional<KernelKind> kernel;
  Outcome outcome = Outcome::Pass;
  int samples = 0;                              // samples run
  std::string sample;                           // the failing sample's name
  std::string message;                          // what went wrong
  double max_abs_error = 0, max_rel_error = 0;  // over the failing sample
  // Conformance certifies exactly what is declared (Note [Declared dtypes]):
  // for a native kernel that declares the dtypes it serves, those dtypes
  // and what served the samples of the others (the CPU fallback, usually),
  // by declaration. Such a result counts as native, also under --strict.
  std::optional<DtypeSet> dtypes;
  std::optional<KernelKind> declined;
  // Worth knowing, not a failure: e.g. a declared dtype no sample exercised.
  std::string note;
};

// Parses outcomeName()'s text.
std::optional<Outcome> outcomeFromName(std::string_view name);

// One form of a spec: the op it calls and its name ("functional",
// "inplace" or "out").
struct Form {
  std::string op;
  const char* name;
};
// The forms of `spec` in the order runSpec runs them (the functional form
// first); the index into this list names a form on the worker's wire
// (Note [Conformance workers] in src/workers.cc).
std::vector<Form> formsOf(const OpSpec& spec);

// What runSpec tells its caller as it goes, so that a process that dies in
// a kernel can still be blamed on the right sample: `before_sample` before
// each sample of a form is run (its 1-based number in the form and the
// sample), `form_done` with each form's Result as soon as the form ends.
// Either may be empty.
struct SpecObserver {
  std::function<void(size_t form, int number, const Sample& sample)> before_sample;
  std::function<void(size_t form, const Result& result)> form_done;
};

// Runs the forms of `spec` from formsOf(spec)[first_form] on, on `device`;
// one Result per form run.
std::vector<Result> runSpec(const OpSpec& spec, Device device, size_t first_form = 0,
                            const SpecObserver& observer = {});

// How a backend serves `op`; Missing for an op that is not defined.
KernelKind kernelKindOn(const std::string& op, DeviceType type);

// kernelKindName() of r.kernel, or kNoKernelName for a result without one
// (a device check): the text every report prints.
inline constexpr const char* kNoKernelName = "-";
const char* kernelNameOf(const Result& r);
// kernelNameOf(r), or for a kernel that declares its dtypes
// "native (float32), cpu_fallback (others)": what reports show to people.
std::string kernelTextOf(const Result& r);
// Sets r.dtypes and r.declined from how `type` serves r.op now.
void setDeclaredDtypes(Result& r, DeviceType type);

}  // namespace backplane::conformance
