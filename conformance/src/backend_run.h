#pragma once
// A backend's conformance run, as `backplane conformance` (command.cc)
// collects it from its workers (workers.cc), and the figures every report
// (reports.h) counts from it.

#include <map>
#include <string>
#include <vector>

#include "backplane/conformance/suite.h"

namespace backplane::conformance {

// One backend's run on one device (with --all-devices, one per device),
// or a backend that was skipped or could not run.
struct BackendRun {
  std::string name;
  std::string provider;  // the plugin that registered the type
  int devices = 0;
  int device = 0;             // the device the op specs ran on
  bool device_checks = true;  // whether the run began with the device checks
  // "faulty:1": the run's name in lists, the JUnit suite and the Markdown
  // matrix; a skipped backend ran on no device ("hip").
  std::string label() const { return skipped.empty() ? name + ":" + std::to_string(device) : name; }
  std::string skipped;          // why the backend was not run (no devices)
  std::string error;            // why the run could not finish (a failure)
  std::vector<Result> results;  // every form of every item, in order
  double seconds = 0;
};

// Whether `r` counts against the verdict: a form that did not pass (an
// unsupported ONNX node test or an expected failure aside), or under
// --strict one that passed on a fallback kernel.
bool countsAsFailure(const Result& r, bool strict);

// Every form in exactly one of pass, fail, fallback, error and crash, so
// that the columns add up to the verdict: `fallback` counts the forms that
// passed on a fallback kernel, failures under --strict (0 without it), and
// `pass` the forms that passed and count as passes. failures = fail +
// fallback + error + crash (+ 1 for an aborted run), plus uncertified under
// --strict.
struct Counts {
  int forms = 0, pass = 0, fail = 0, fallback = 0, error = 0, crash = 0, failures = 0;
  int unsupported = 0, xfail = 0;     // ONNX node tests (Note [ONNX node tests]): neither is a failure
  int uncertified = 0;                // ops with no spec (Note [Uncertified operators]); failures under --strict
  std::map<KernelKind, int> kernels;  // forms served by each kind (device checks have none)
};

Counts countsOf(const BackendRun& b, bool strict);

// "fail at sample 'x': message (max abs 1, max rel 0.5)"
std::string describeProblem(const Result& r, bool strict);

// "12.3 s"
std::string secondsText(double s);

// Whether any of the runs ran ONNX node tests (Note [ONNX node tests]).
bool anyOnnx(const std::vector<BackendRun>& runs);

// The figures of a run of ONNX's node tests as one line (OnnxFigures in
// backend_run.cc).
std::string onnxFiguresText(const BackendRun& b);

// A copy of `runs` whose every text is visibleText (Note [Report text]):
// what the Markdown report and the terminal show.
std::vector<BackendRun> visibleRuns(const std::vector<BackendRun>& runs);

// Cuts every message, note, sample name and reason of `runs` longer than
// kMessageLimit (capText, Note [Report text]); --full-errors skips it.
void capMessages(std::vector<BackendRun>& runs);

}  // namespace backplane::conformance
