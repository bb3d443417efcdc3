// A backend's conformance run and its figures (backend_run.h).
#include "backend_run.h"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "backplane/core/str_cat.h"

namespace backplane::conformance {

bool countsAsFailure(const Result& r, bool strict) {
  if (r.outcome == Outcome::Unsupported || r.outcome == Outcome::ExpectedFailure) return false;
  if (r.outcome == Outcome::Uncertified) return strict;
  if (r.outcome != Outcome::Pass) return true;
  return strict && r.kernel && isFallback(*r.kernel);
}

Counts countsOf(const BackendRun& b, bool strict) {
  Counts c;
  for (const Result& r : b.results) {
    ++c.forms;
    switch (r.outcome) {
      case Outcome::Pass: ++(countsAsFailure(r, strict) ? c.fallback : c.pass); break;
      case Outcome::Fail: ++c.fail; break;
      case Outcome::Error: ++c.error; break;
      case Outcome::Crash: ++c.crash; break;
      case Outcome::Unsupported: ++c.unsupported; break;
      case Outcome::ExpectedFailure: ++c.xfail; break;
      case Outcome::Uncertified: ++c.uncertified; break;
    }
    if (countsAsFailure(r, strict)) ++c.failures;
    if (r.kernel) ++c.kernels[*r.kernel];
  }
  if (!b.error.empty()) ++c.failures;
  return c;
}

std::string describeProblem(const Result& r, bool strict) {
  std::string s = outcomeName(r.outcome);
  if (r.outcome == Outcome::Pass && countsAsFailure(r, strict))
    s = std::string(kernelNameOf(r)) + " (counted as a failure: --strict)";
  if (!r.sample.empty()) s += " at sample '" + r.sample + "'";
  if (!r.message.empty()) s += ": " + r.message;
  if (r.outcome == Outcome::Fail && (r.max_abs_error > 0 || r.max_rel_error > 0)) {
    std::ostringstream os;
    os << " (max abs error " << r.max_abs_error << ", max rel error " << r.max_rel_error << ")";
    s += os.str();
  }
  return s;
}

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

bool anyOnnx(const std::vector<BackendRun>& runs) {
  for (const BackendRun& b : runs)
    for (const Result& r : b.results)
      if (r.form == kOnnxForm) return true;
  return false;
}

namespace {

// The figures of a run of ONNX's node tests, one line per backend: found,
// mapped (loadable, and an entry in the op table), passed, failed (+ expected failures),
// unsupported, crashed, and the time.
struct OnnxFigures {
  int found = 0, unmapped = 0, passed = 0, failed = 0, xfail = 0, unsupported = 0, crashed = 0, unexpected = 0;
};

OnnxFigures onnxFiguresOf(const BackendRun& b) {
  OnnxFigures f;
  for (const Result& r : b.results) {
    if (r.form != kOnnxForm) continue;
    ++f.found;
    if (r.message.rfind(kNoMappingPrefix, 0) == 0 || r.message.rfind(kUnloadablePrefix, 0) == 0) ++f.unmapped;
    switch (r.outcome) {
      case Outcome::Pass: ++f.passed; break;
      case Outcome::Fail:
      case Outcome::Error: ++f.failed; break;
      case Outcome::Crash: ++f.crashed; break;
      case Outcome::Unsupported: ++f.unsupported; break;
      case Outcome::ExpectedFailure: ++f.xfail; break;
      case Outcome::Uncertified: break;  // never an ONNX node test
    }
    if (r.note.find(kUnexpectedPassNote) != std::string::npos) ++f.unexpected;
  }
  return f;
}

}  // namespace

std::string onnxFiguresText(const BackendRun& b) {
  const OnnxFigures f = onnxFiguresOf(b);
  std::string s = strCat(f.found, " found, ", f.found - f.unmapped, " mapped, ", f.passed, " passed, ", f.failed,
                         " failed, ", f.xfail, " expected failures, ", f.unsupported, " unsupported, ", f.crashed,
                         " crashed, in ", secondsText(b.seconds));
  if (f.unexpected) s += strCat("; ", f.unexpected, " listed as expected failures passed or are unsupported (notes)");
  return s;
}

std::vector<BackendRun> visibleRuns(const std::vector<BackendRun>& runs) {
  std::vector<BackendRun> out = runs;
  for (BackendRun& b : out) {
    for (std::string* s : {&b.name, &b.provider, &b.skipped, &b.error}) *s = visibleText(*s);
    for (Result& r : b.results)
      for (std::string* s : {&r.op, &r.form, &r.backend, &r.sample, &r.message, &r.note}) *s = visibleText(*s);
  }
  return out;
}

void capMessages(std::vector<BackendRun>& runs) {
  for (BackendRun& b : runs) {
    for (std::string* s : {&b.skipped, &b.error}) *s = capText(*s);
    for (Result& r : b.results)
      for (std::string* s : {&r.sample, &r.message, &r.note}) *s = capText(*s);
  }
}

}  // namespace backplane::conformance
