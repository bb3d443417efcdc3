// `backplane conformance --markdown`: the report as Markdown (reports.h).
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/suite.h"
#include "reports.h"

namespace backplane::conformance {

namespace {

// A message inside a Markdown table cell: no '|' and no line breaks.
std::string markdownCellText(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

// A matrix cell: what served the form and how it did.
std::string markdownCell(const Result& r, bool strict) {
  const std::string kernel = kernelTextOf(r);
  switch (r.outcome) {
    case Outcome::Pass:
      if (!r.kernel) return "✅ pass";  // a device check
      return (countsAsFailure(r, strict) ? "❌ " : "✅ ") + kernel;
    case Outcome::Fail: return "❌ fail (" + kernel + ")";
    case Outcome::Error: return "⚠️ error (" + kernel + ")";
    case Outcome::Crash: return "💥 crash";
    case Outcome::Unsupported: return "➖ unsupported: " + markdownCellText(r.message);
    case Outcome::ExpectedFailure: return "☑️ expected failure";
    case Outcome::Uncertified: return (strict ? "❌ uncertified (" : "❔ uncertified (") + kernel + ")";
  }
  return "?";
}

std::string markdownEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += "<br>";
    else
      out += c;
  }
  return out;
}

}  // namespace

void writeMarkdown(std::ostream& out, const std::vector<BackendRun>& all_runs, bool strict, bool passed) {
  // No escape sequence of a name or a message reaches the reader's terminal or renderer (Note [Report text]).
  const std::vector<BackendRun> runs = visibleRuns(all_runs);
  out << "# Backplane conformance\n\n**" << (passed ? "PASSED" : "FAILED") << "**"
      << (strict ? " (strict: a fallback counts as a failure)" : "") << "\n\n";
  const bool onnx = anyOnnx(runs);
  out << "| backend | provider | devices | device | " << (onnx ? "tests" : "forms") << " | pass | fail |"
      << (strict ? " fallback |" : "") << " error | crash |" << (onnx ? " unsupported | xfail |" : "") << " time |\n"
      << "|---|---|---|---|---|---|---|" << (strict ? "---|" : "") << "---|---|" << (onnx ? "---|---|" : "")
      << "---|\n";
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty()) {
      out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices
          << " | - | skipped: " << markdownEscape(b.skipped) << " | | |" << (strict ? " |" : "") << (onnx ? " | |" : "")
          << " | | |\n";
      continue;
    }
    const Counts c = countsOf(b, strict);
    out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices << " | "
        << b.device << " | " << c.forms << " | " << c.pass << " | " << c.fail << " | ";
    if (strict) out << c.fallback << " | ";
    out << c.error << " | " << c.crash << " | ";
    if (onnx) out << c.unsupported << " | " << c.xfail << " | ";
    out << secondsText(b.seconds) << " |\n";
  }
  if (onnx) {
    out << "\nONNX node tests:\n\n";
    for (const BackendRun& b : runs)
      if (b.skipped.empty()) out << "- **" << markdownEscape(b.label()) << "**: " << onnxFiguresText(b) << "\n";
  }
  if (strict) out << "\n_fallback_: forms that passed on a fallback kernel, failures under `--strict`.\n";
  // The op x backend matrix, rows in the order they ran.
  std::vector<const BackendRun*> ran;
  for (const BackendRun& b : runs)
    if (b.skipped.empty()) ran.push_back(&b);
  std::vector<std::pair<std::string, std::string>> rows;  // (op, form)
  std::set<std::pair<std::string, std::string>> seen;
  std::map<std::pair<std::string, std::string>, std::map<std::string, const Result*>> cells;
  for (const BackendRun* b : ran) {
    for (const Result& r : b->results) {
      const std::pair<std::string, std::string> key{r.op, r.form};
      if (seen.insert(key).second) rows.push_back(key);
      cells[key][b->label()] = &r;
    }
  }
  if (!rows.empty()) {
    out << "\n| op | form |";
    for (const BackendRun* b : ran) out << ' ' << markdownEscape(b->label()) << " |";
    out << "\n|---|---|";
    for (size_t i = 0; i < ran.size(); ++i) out << "---|";
    out << '\n';
    for (const auto& key : rows) {
      out << "| `" << markdownEscape(key.first) << "` | " << key.second << " |";
      for (const BackendRun* b : ran) {
        auto it = cells[key].find(b->label());
        out << ' ' << (it == cells[key].end() ? "·" : markdownCell(*it->second, strict)) << " |";
      }
      out << '\n';
    }
  }
  bool header = false;
  for (const BackendRun& b : runs) {
    if (!b.error.empty()) {
      if (!header) out << "\n## Failures\n\n";
      header = true;
      out << "- **" << markdownEscape(b.label()) << "**: run aborted: " << markdownEscape(b.error) << '\n';
    }
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\n## Failures\n\n";
      header = true;
      out << "- **" << markdownEscape(b.label()) << "** `" << markdownEscape(r.op) << "` (" << r.form << ", "
          << kernelTextOf(r) << "): " << markdownEscape(describeProblem(r, strict)) << '\n';
    }
  }
}

}  // namespace backplane::conformance
