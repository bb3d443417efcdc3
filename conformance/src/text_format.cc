#include "backplane/conformance/text_format.h"

#include <algorithm>
#include <cstdio>

namespace backplane::conformance {

void Table::addRow(std::vector<std::string> cells) {
  if (cells.empty()) cells.emplace_back();
  lines_.push_back(Line{std::move(cells), {}, 0});
}

void Table::addNote(std::string text, size_t column) { lines_.push_back(Line{{}, std::move(text), column}); }

void Table::print(std::ostream& os) const {
  std::vector<size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& cells) {
    if (cells.size() > width.size()) width.resize(cells.size(), 0);
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  widen(header_);
  for (const Line& l : lines_) widen(l.cells);

  auto printCells = [&](const std::vector<std::string>& cells) {
    size_t last = cells.size();
    while (last > 0 && cells[last - 1].empty()) --last;  // no trailing blanks
    std::string out;
    for (size_t i = 0; i < last; ++i) {
      out += cells[i];
      if (i + 1 < last) out.append(width[i] - cells[i].size() + 2, ' ');
    }
    os << out << '\n';
  };
  printCells(header_);
  for (const Line& l : lines_) {
    if (!l.cells.empty()) {
      printCells(l.cells);
      continue;
    }
    size_t indent = 0;
    for (size_t i = 0; i < l.note_column && i < width.size(); ++i) indent += width[i] + 2;
    os << std::string(indent, ' ') << l.note << '\n';
  }
}

std::string jsonString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace backplane::conformance
