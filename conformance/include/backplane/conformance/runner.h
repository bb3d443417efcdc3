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
#include "backplane/dispatcher/operator_entry.h"

namespace backplane::conformance {

// Crash: the process running the op died or ran past its time limit (set
// by the out-of-process runner, never by runSpec).
enum class Outcome { Pass, Fail, Error, Crash };
const char* outcomeName(Outcome o);

struct Result {
  std::string op;       // the form's op, e.g. "bp::add_.Tensor"
  std::string form;     // "functional", "inplace" or "out"
  std::string backend;  // "cpu", "cuda", ...
  // What served the op on the backend; none for a device check (no op).
  std::optional<KernelKind> kernel;
  Outcome outcome = Outcome::Pass;
  int samples = 0;      // samples run
  std::string sample;   // the failing sample's name
  std::string message;  // what went wrong
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

// Runs every form of `spec` on `device`; one Result per form.
std::vector<Result> runSpec(const OpSpec& spec, Device device);

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
