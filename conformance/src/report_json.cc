// `backplane conformance --json`: the report as JSON (reports.h).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "reports.h"

namespace backplane::conformance {

namespace {

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// The dtypes a result's kernel declares as a JSON list, or null for every dtype.
std::string dtypesJson(const Result& r) {
  if (!r.dtypes) return "null";
  std::string list;
  for (int t = 0; t < kNumScalarTypes; ++t) {
    if (r.dtypes->contains(static_cast<ScalarType>(t)))
      list += (list.empty() ? "" : ", ") + jsonString(scalarTypeName(static_cast<ScalarType>(t)));
  }
  return "[" + list + "]";
}

}  // namespace

void writeJson(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed) {
  out << "{\n  \"passed\": " << (passed ? "true" : "false") << ",\n  \"strict\": " << (strict ? "true" : "false")
      << ",\n  \"backends\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const BackendRun& b = runs[i];
    const Counts c = countsOf(b, strict);
    out << (i ? ",\n    " : "\n    ") << "{\"name\": " << jsonString(b.name)
        << ", \"provider\": " << jsonString(b.provider) << ", \"devices\": " << b.devices
        << ", \"device\": " << b.device << ", \"status\": "
        << jsonString(!b.skipped.empty() ? "skipped"
                      : !b.error.empty() ? "aborted"
                                         : "run")
        << ", \"reason\": " << jsonString(!b.skipped.empty() ? b.skipped : b.error)
        << ", \"seconds\": " << jsonNumber(b.seconds) << ", \"forms\": " << c.forms << ", \"pass\": " << c.pass
        << ", \"fail\": " << c.fail << ", \"fallback\": " << c.fallback << ", \"error\": " << c.error
        << ", \"crash\": " << c.crash << ", \"unsupported\": " << c.unsupported << ", \"xfail\": " << c.xfail
        << ", \"uncertified\": " << c.uncertified << ", \"failures\": " << c.failures << "}";
  }
  out << "\n  ],\n  \"results\": [";
  bool first = true;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      out << (first ? "\n    " : ",\n    ") << "{\"backend\": " << jsonString(r.backend) << ", \"device\": " << b.device
          << ", \"op\": " << jsonString(r.op) << ", \"form\": " << jsonString(r.form)
          << ", \"kernel\": " << jsonString(kernelNameOf(r)) << ", \"dtypes\": " << dtypesJson(r)
          << ", \"declined\": " << (r.declined ? jsonString(kernelKindName(*r.declined)) : "null")
          << ", \"note\": " << jsonString(r.note) << ", \"outcome\": " << jsonString(outcomeName(r.outcome))
          << ", \"counts_as_failure\": " << (countsAsFailure(r, strict) ? "true" : "false")
          << ", \"samples\": " << r.samples << ", \"sample\": " << jsonString(r.sample)
          << ", \"message\": " << jsonString(r.message) << ", \"max_abs_error\": " << jsonNumber(r.max_abs_error)
          << ", \"max_rel_error\": " << jsonNumber(r.max_rel_error) << "}";
      first = false;
    }
  }
  out << "\n  ]\n}\n";
}

}  // namespace backplane::conformance
