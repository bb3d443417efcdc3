#include "backplane/conformance/text_format.h"

#include <algorithm>
#include <cstdio>
#include <string>

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

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The length of the valid UTF-8 sequence at s[i], with its code point in
// `cp`, or 0 when the byte there starts none (a stray continuation byte, a
// truncated sequence, an overlong form, a surrogate, past U+10FFFF).
size_t utf8Sequence(std::string_view s, size_t i, char32_t& cp) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t n = 0;
  char32_t least = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F, least = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F, least = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07, least = 0x10000;
  } else {
    return 0;
  }
  if (n > s.size() - i) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Calls fn(code point, its bytes) for each character of `s`, with U+FFFD
// for each byte that is not part of a valid UTF-8 sequence.
template <typename Fn>
void forEachCharacter(std::string_view s, Fn fn) {
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = utf8Sequence(s, i, cp);
    if (n == 0) {
      fn(char32_t{0xFFFD}, kReplacement);
      ++i;
    } else {
      fn(cp, s.substr(i, n));
      i += n;
    }
  }
}

void appendEscape(std::string& out, const char* format, char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(cp));
  out += buf;
}

}  // namespace

std::string jsonString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  forEachCharacter(s, [&](char32_t cp, std::string_view bytes) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20 || cp == 0x7f)
          appendEscape(out, "\\u%04x", cp);
        else
          out += bytes;
    }
  });
  out += '"';
  return out;
}

std::string xmlText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  forEachCharacter(s, [&](char32_t cp, std::string_view bytes) {
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r')
          appendEscape(out, "\\x%02x", cp);
        else if (cp == 0xFFFE || cp == 0xFFFF)
          out += kReplacement;
        else
          out += bytes;
    }
  });
  return out;
}

std::string visibleText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  forEachCharacter(s, [&](char32_t cp, std::string_view bytes) {
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7f)
      appendEscape(out, "\\x%02x", cp);
    else if (cp >= 0x80 && cp < 0xA0)
      appendEscape(out, "\\u%04x", cp);
    else
      out += bytes;
  });
  return out;
}

std::string capText(std::string_view s, size_t limit) {
  if (s.size() <= limit) return std::string(s);
  size_t cut = limit;
  // Back to the start of the UTF-8 character that would be cut (at most 3
  // continuation bytes; an invalid run is cut where it is).
  for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80; ++k) --cut;
  if ((static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) cut = limit;
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size() - cut) +
         " more bytes; --full-errors to see all)";
}

}  // namespace backplane::conformance
