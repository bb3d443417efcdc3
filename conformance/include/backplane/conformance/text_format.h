#pragma once
// Output helpers for the conformance reports and the `backplane` tool:
// aligned text tables and JSON string escaping. No dependencies beyond the standard library.

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

// `s` as a JSON string literal, quotes included: ", \ and control
// characters are escaped; other bytes (UTF-8) pass through.
std::string jsonString(std::string_view s);

}  // namespace backplane::conformance
