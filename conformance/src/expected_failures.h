#pragma once
// The expected failures of a backend's ONNX node tests, which `backplane
// conformance --onnx-expected DIR` reads before anything runs and applies to
// each run of that backend (command.cc).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend_run.h"

namespace backplane::conformance {

// The expected failures of a backend's ONNX node tests (Note [ONNX node
// tests]): DIR/<backend>.txt, one test a line, "<test> <reason>" (the
// reason is required; an "onnx::" before the test is allowed); a line
// starting with '#' is a comment. No file: nothing is expected to fail.
struct ExpectedFailure {
  std::string reason;
  bool seen = false;
};
// DIR/<backend>.txt as test -> ExpectedFailure; an empty list when the
// file does not exist, an error naming the file and line for a bad one.
absl::StatusOr<std::map<std::string, ExpectedFailure>> readExpectedFailures(const std::string& path);

// Marks the run's listed failures as expected and notes listed tests that
// passed; returns the list's entries that matched no test of a whole-corpus
// run (stale entries), for a warning.
std::vector<std::string> applyExpectedFailures(BackendRun& run, std::map<std::string, ExpectedFailure>& expected,
                                               const std::string& path);

}  // namespace backplane::conformance
