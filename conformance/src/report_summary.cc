// `backplane conformance`'s summary on stdout (reports.h): a table of the
// backends, the ONNX node-test figures, the failures and the kernels that
// declare their dtypes.
#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "reports.h"

namespace backplane::conformance {

namespace {

// The kinds the summary counts, a column each (a fallthrough never serves
// a backend key).
constexpr KernelKind kReportedKinds[] = {KernelKind::Native, KernelKind::Composite, KernelKind::BackendFallback,
                                         KernelKind::CpuFallback, KernelKind::Missing};

// "CPU_FALLBACK" for "cpu_fallback": a column header.
std::string upperCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Conformance certifies what is declared (Note [Declared dtypes]): each form
// whose native kernel serves some dtypes only, and what served the rest.
void printDeclaredDtypes(std::ostream& out, const std::vector<BackendRun>& runs) {
  bool header = false;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      if (!r.dtypes) continue;
      if (!header)
        out << "\nkernels that declare their dtypes (samples of other dtypes ran where the declaration sends them):\n";
      header = true;
      out << "  " << b.label() << "  " << r.op << " (" << r.form << "): " << kernelTextOf(r)
          << (r.note.empty() ? "" : "; note: " + r.note) << '\n';
    }
  }
}

// For ONNX node tests the kernel columns stay empty: a node may call
// several ops, and which kernels served them is not recorded, so --strict
// changes nothing for them (Note [ONNX node tests]).
void printOnnxSummary(std::ostream& out, const std::vector<BackendRun>& runs) {
  out << "\nONNX node tests:\n";
  for (const BackendRun& b : runs)
    if (b.skipped.empty()) out << "  " << b.label() << ": " << onnxFiguresText(b) << '\n';
}

}  // namespace

void printSummary(std::ostream& out, const std::vector<BackendRun>& all_runs, bool strict) {
  // What a plugin or a folder name holds never drives the terminal (Note [Report text]).
  const std::vector<BackendRun> runs = visibleRuns(all_runs);
  const bool onnx = anyOnnx(runs);
  bool uncertified = false;
  for (const BackendRun& b : runs)
    for (const Result& r : b.results) uncertified |= r.outcome == Outcome::Uncertified;
  std::vector<std::string> columns{"BACKEND", "PROVIDER", "DEVICES", "DEVICE", onnx ? "TESTS" : "FORMS",
                                   "PASS",    "FAIL"};
  if (strict) columns.push_back("FALLBACK");
  columns.insert(columns.end(), {"ERROR", "CRASH"});
  if (onnx) columns.insert(columns.end(), {"UNSUPPORTED", "XFAIL"});
  if (uncertified) columns.push_back("UNCERTIFIED");
  for (KernelKind kind : kReportedKinds) columns.push_back(upperCase(kernelKindName(kind)));
  columns.push_back("TIME");
  Table table(std::move(columns));
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty() || (b.results.empty() && !b.error.empty())) {
      table.addRow(
          {b.name, b.provider, std::to_string(b.devices), b.skipped.empty() ? std::to_string(b.device) : "-", "-"});
      table.addNote(b.skipped.empty() ? "failed: " + b.error : "skipped: " + b.skipped);
      continue;
    }
    Counts c = countsOf(b, strict);
    std::vector<std::string> row{b.name,
                                 b.provider,
                                 std::to_string(b.devices),
                                 std::to_string(b.device),
                                 std::to_string(c.forms),
                                 std::to_string(c.pass),
                                 std::to_string(c.fail)};
    if (strict) row.push_back(std::to_string(c.fallback));
    row.insert(row.end(), {std::to_string(c.error), std::to_string(c.crash)});
    if (onnx) row.insert(row.end(), {std::to_string(c.unsupported), std::to_string(c.xfail)});
    if (uncertified) row.push_back(std::to_string(c.uncertified));
    for (KernelKind kind : kReportedKinds) row.push_back(std::to_string(c.kernels[kind]));
    row.push_back(secondsText(b.seconds));
    table.addRow(std::move(row));
    if (!b.error.empty()) table.addNote("run aborted: " + b.error);
  }
  table.print(out);
  if (onnx) printOnnxSummary(out, runs);
  if (strict) {
    out << "\nFALLBACK: forms that passed on a fallback kernel (cpu_fallback, backend_fallback), failures under "
           "--strict\n";
  }
  bool header = false;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\nfailures:\n";
      header = true;
      out << "  " << b.label() << "  " << r.op << " (" << r.form << ", " << kernelTextOf(r)
          << "): " << describeProblem(r, strict) << '\n';
    }
  }
  if (uncertified && !strict) {
    out << "\nuncertified (a native kernel and no conformance spec: nothing checked them; --strict fails them):\n";
    for (const BackendRun& b : runs)
      for (const Result& r : b.results)
        if (r.outcome == Outcome::Uncertified) out << "  " << b.label() << "  " << r.op << " (" << r.form << ")\n";
  }
  printDeclaredDtypes(out, runs);
}

}  // namespace backplane::conformance
