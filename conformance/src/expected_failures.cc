// The expected failures of a backend's ONNX node tests (expected_failures.h).
#include "expected_failures.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/core/str_cat.h"

namespace backplane::conformance {

absl::StatusOr<std::map<std::string, ExpectedFailure>> readExpectedFailures(const std::string& path) {
  std::map<std::string, ExpectedFailure> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream f(path);
  if (!f || !std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(strCat("cannot read the expected failures ", path));
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    std::istringstream fields(line);
    std::string test;
    if (!(fields >> test) || test[0] == '#') continue;  // a blank line or a comment line
    if (test.rfind("onnx::", 0) == 0) test = test.substr(6);
    std::string reason;
    std::getline(fields >> std::ws, reason);
    while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back()))) reason.pop_back();
    if (reason.empty()) {
      return absl::InvalidArgumentError(
          strCat(path, ":", n, ": '", test, "' has no reason; write '<test> <why it fails>'"));
    }
    if (!out.emplace(test, ExpectedFailure{reason}).second)
      return absl::InvalidArgumentError(strCat(path, ":", n, ": '", test, "' is listed twice"));
  }
  return out;
}

std::vector<std::string> applyExpectedFailures(BackendRun& run, std::map<std::string, ExpectedFailure>& expected,
                                               const std::string& path) {
  for (Result& r : run.results) {
    if (r.form != kOnnxForm || r.op.rfind("onnx::", 0) != 0) continue;
    auto it = expected.find(r.op.substr(6));
    if (it == expected.end()) continue;
    it->second.seen = true;
    const std::string& reason = it->second.reason;
    if (r.outcome == Outcome::Fail || r.outcome == Outcome::Error || r.outcome == Outcome::Crash) {
      r.message = std::string(outcomeName(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
      r.outcome = Outcome::ExpectedFailure;
      r.note = "expected failure (" + path + "): " + reason + (r.note.empty() ? "" : "; " + r.note);
    } else if (r.outcome == Outcome::Pass) {
      r.note = std::string(kUnexpectedPassNote) + " in " + path + " (" + reason + "): remove it from the list" +
               (r.note.empty() ? "" : "; " + r.note);
    } else if (r.outcome == Outcome::Unsupported) {
      r.note = "unsupported, but " + std::string(kUnexpectedPassNote.substr(kUnexpectedPassNote.find("is listed"))) +
               " in " + path + " (" + reason + "): remove it from the list" + (r.note.empty() ? "" : "; " + r.note);
    }
  }
  std::vector<std::string> stale;
  for (const auto& [test, e] : expected)
    if (!e.seen) stale.push_back(test);
  return stale;
}

}  // namespace backplane::conformance
