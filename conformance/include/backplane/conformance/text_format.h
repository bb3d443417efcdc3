#pragma once
// Output helpers for the conformance reports and the `backplane` tool:
// aligned text tables, JSON and XML string escaping, text made safe for a
// terminal, long messages capped. No dependencies beyond the standard library.

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::conformance {

// A left-aligned table with two spaces between columns. Besides rows of
// cells it holds notes: free text on its own line, starting where column
// `column` starts (for details that would make a column too wide). Widths
// come from the header and the cells only; trailing blanks are never printed.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void addRow(std::vector<std::string> cells);
  void addNote(std::string text, size_t column = 1);
  void print(std::ostream& os) const;

 private:
  struct Line {
    std::vector<std::string> cells;  // a row, or
    std::string note;                // a note (when cells is empty)
    size_t note_column = 0;
  };
  std::vector<std::string> header_;
  std::vector<Line> lines_;
};

// Note [Report text]
// Names and messages in a report come from plugins, kernels, the workers'
// output and folder names: any bytes, escape sequences included. Every report
// stays well-formed and no terminal obeys what a name holds:
// - a byte that does not belong to a valid UTF-8 sequence (overlong forms and
//   surrogates included) becomes U+FFFD, one per byte, everywhere;
// - JSON escapes control characters (\u001b), so the text is kept exactly;
// - JUnit XML shows the control characters XML 1.0 cannot hold (all C0 but
//   tab, LF and CR) as the text \x1b, and U+FFFE/U+FFFF as U+FFFD;
// - Markdown and the terminal show every control character but newline and
//   tab as \x1b (C0 and DEL) or \u009b (C1), so an ANSI sequence in an op's
//   name or a message cannot recolour or rewrite the screen;
// - a message longer than kMessageLimit is cut (capText) unless
//   --full-errors asks for all of it: a kernel's 5 MB error must not make a
//   15 MB report or bury the summary.
// A backslash is not escaped in text (only in JSON): "\x1b" in a report may
// also be those four characters, which is fine for reading.

// `s` as a JSON string literal, quotes included: ", \ and control
// characters are escaped, bytes that are not UTF-8 become U+FFFD (Note [Report text]).
std::string jsonString(std::string_view s);

// `s` as XML 1.0 character data or attribute value (Note [Report text]).
std::string xmlText(std::string_view s);

// `s` as valid UTF-8 with no control characters but newline and tab, for a
// terminal or Markdown (Note [Report text]).
std::string visibleText(std::string_view s);

// How much of a message the reports keep by default (Note [Report text]).
inline constexpr size_t kMessageLimit = 4096;
// `s`, or its first `limit` bytes (cut at a UTF-8 character boundary) and
// "... (N more bytes; --full-errors to see all)".
std::string capText(std::string_view s, size_t limit = kMessageLimit);

}  // namespace backplane::conformance
