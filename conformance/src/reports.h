#pragma once
// `backplane conformance`'s reports, each from the runs of every backend:
// the summary on stdout (report_summary.cc) and the --json, --junit and
// --markdown files (report_json.cc, report_junit.cc, report_markdown.cc).
// `strict` is --strict; `passed` the run's verdict.

#include <ostream>
#include <vector>

#include "backend_run.h"

namespace backplane::conformance {

// The table counts what the verdict counts (Counts): under --strict a
// FALLBACK column holds the forms that passed on a fallback, so that FAIL,
// FALLBACK, ERROR and CRASH add up to the failures in the footer.
void printSummary(std::ostream& out, const std::vector<BackendRun>& runs, bool strict);

void writeJson(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed);

void writeJunit(std::ostream& out, const std::vector<BackendRun>& runs, bool strict);

void writeMarkdown(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed);

}  // namespace backplane::conformance
