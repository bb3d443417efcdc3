// `backplane conformance --junit`: the report as JUnit XML (reports.h), its
// text escaped by xmlText (Note [Report text]).
#include <string>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "reports.h"

namespace backplane::conformance {

namespace {

// A backend's JUnit totals: a fail (or a fallback under --strict) is a
// failure; an error, a crash or an aborted run is an error; a skipped
// backend is one skipped test.
struct JunitCounts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  void add(const JunitCounts& o) { tests += o.tests, failures += o.failures, errors += o.errors, skipped += o.skipped; }
};

JunitCounts junitCountsOf(const BackendRun& b, bool strict) {
  JunitCounts j;
  if (!b.skipped.empty()) {
    j.tests = j.skipped = 1;
    return j;
  }
  const Counts c = countsOf(b, strict);
  const int aborted = b.error.empty() ? 0 : 1;
  j.tests = c.forms + aborted;
  j.errors = c.error + c.crash + aborted;
  j.failures = c.failures - j.errors;
  // ONNX node tests no standard op expresses, or listed as failing; ops with
  // no spec (failures under --strict)
  j.skipped = c.unsupported + c.xfail + (strict ? 0 : c.uncertified);
  return j;
}

void writeJunitCounts(std::ostream& out, const JunitCounts& j, double seconds) {
  out << " tests=\"" << j.tests << "\" failures=\"" << j.failures << "\" errors=\"" << j.errors << "\" skipped=\""
      << j.skipped << "\" time=\"" << seconds << "\">\n";
}

}  // namespace

void writeJunit(std::ostream& out, const std::vector<BackendRun>& runs, bool strict) {
  JunitCounts total;
  double seconds = 0;
  for (const BackendRun& b : runs) {
    total.add(junitCountsOf(b, strict));
    seconds += b.seconds;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"backplane conformance\"";
  writeJunitCounts(out, total, seconds);
  for (const BackendRun& b : runs) {
    const bool aborted = !b.error.empty();
    out << "  <testsuite name=\"" << xmlText(b.label()) << "\"";
    writeJunitCounts(out, junitCountsOf(b, strict), b.seconds);
    const std::string cls = "conformance." + xmlText(b.label());
    if (!b.skipped.empty()) {
      out << "    <testcase classname=\"" << cls << "\" name=\"backend\"><skipped message=\"" << xmlText(b.skipped)
          << "\"/></testcase>\n";
    }
    if (aborted) {
      out << "    <testcase classname=\"" << cls << "\" name=\"worker\"><error message=\"" << xmlText(b.error)
          << "\"/></testcase>\n";
    }
    for (const Result& r : b.results) {
      out << "    <testcase classname=\"" << cls << "\" name=\"" << xmlText(r.op + " [" + r.form + "]") << "\">";
      if (countsAsFailure(r, strict)) {
        const bool is_error = r.outcome == Outcome::Error || r.outcome == Outcome::Crash;
        out << "<" << (is_error ? "error" : "failure") << " type=\"" << outcomeName(r.outcome) << "\" message=\""
            << xmlText(describeProblem(r, strict)) << "\">kernel: " << xmlText(kernelTextOf(r)) << "</"
            << (is_error ? "error" : "failure") << ">";
      } else if (r.outcome == Outcome::Unsupported || r.outcome == Outcome::ExpectedFailure ||
                 r.outcome == Outcome::Uncertified) {
        out << "<skipped message=\"" << xmlText(describeProblem(r, strict)) << "\"/>";
      }
      out << "<system-out>kernel: " << xmlText(kernelTextOf(r)) << ", samples: " << r.samples
          << (r.note.empty() ? "" : ", note: " + xmlText(r.note)) << "</system-out></testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

}  // namespace backplane::conformance
