// The list of known differences from PyTorch and its matching (Note [Known
// differences from PyTorch] in known_differences.h).
#include "known_differences.h"

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace backplane::torch_parity {
namespace {

constexpr std::pair<Difference, std::string_view> kDifferenceNames[] = {
    {Difference::Values, "values"},
    {Difference::Dtype, "dtype"},
    {Difference::Shape, "shape"},
    {Difference::PytorchRaises, "pytorch-raises"},
    {Difference::BackplaneRaises, "backplane-raises"},
    {Difference::Returns, "returns"},
};

constexpr std::string_view kBug = "bug, not yet fixed";
// The page that documents the operators' differences from PyTorch.
constexpr std::string_view kDocsAnchor = "docs/operators.md#";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

// Checks a finished entry (its lines are already parsed).
void finish(KnownDifference& e, bool has_differs, std::vector<KnownDifference>& out) {
  const auto need = [&](const std::string& value, const char* key) {
    if (value.empty()) fail(e.where, std::string("the entry has no '") + key + ":' line");
  };
  need(e.group, "group");
  need(e.op, "op");
  if (!has_differs) fail(e.where, "the entry has no 'differs:' line");
  need(e.reason, "reason");
  need(e.documented, "documented");
  if (e.patterns.empty()) fail(e.where, "the entry has no 'case:' or 'cases:' line: it would list nothing");
  for (KnownDifference::Pattern& p : e.patterns) {
    if (p.exact) {
      if (!p.text.starts_with(e.op + "("))
        fail(p.where, "'case: " + p.text + "' is not a call of the entry's op " + e.op +
                          " (the call as the tests "
                          "write it, e.g. " +
                          e.op + "(self=...))");
    } else {
      try {
        p.re = std::regex(p.text, std::regex::ECMAScript);
      } catch (const std::regex_error& err) {
        fail(p.where, "'cases: " + p.text + "' is not a valid ECMAScript regex: " + err.what());
      }
    }
  }
  out.push_back(std::move(e));
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string anchorOf(std::string_view heading) {
  std::string slug;
  for (char c : heading) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || u >= 0x80)
      slug += static_cast<char>(std::tolower(u));
    else if (c == ' ')
      slug += '-';
  }
  return slug;
}

}  // namespace

std::string_view differenceName(Difference d) {
  for (const auto& [k, name] : kDifferenceNames)
    if (k == d) return name;
  return "?";
}

std::optional<Difference> parseDifference(std::string_view name) {
  for (const auto& [k, n] : kDifferenceNames)
    if (n == name) return k;
  return std::nullopt;
}

bool KnownDifference::matches(const std::string& group_name, const std::string& op_name,
                              const std::string& call) const {
  if (group_name != group || op_name != op) return false;
  for (const Pattern& p : patterns)
    if (p.exact ? p.text == call : std::regex_match(call, p.re)) return true;
  return false;
}

std::vector<KnownDifference> parseKnownDifferences(std::string_view text, const std::string& source) {
  std::vector<KnownDifference> out;
  std::optional<KnownDifference> e;
  bool has_differs = false;
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  lines.emplace_back();  // the end ends the last entry
  for (size_t k = 0; k < lines.size(); ++k) {
    const std::string where = source + ":" + std::to_string(k + 1);
    const std::string_view line = trim(lines[k]);
    if (line.starts_with("#")) continue;
    if (line.empty()) {  // a blank line ends an entry
      if (e) finish(*e, has_differs, out);
      e.reset();
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) fail(where, "expected 'key: value', got '" + std::string(line) + "'");
    const std::string key(trim(line.substr(0, colon)));
    const std::string value(trim(line.substr(colon + 1)));
    if (!e) {
      e.emplace();
      e->where = where;
      has_differs = false;
    }
    if (value.empty()) fail(where, "'" + key + ":' has no value");
    const auto single = [&](std::string& field) {
      if (!field.empty()) fail(where, "a second '" + key + ":' line in one entry (blank lines separate entries)");
      field = value;
    };
    if (key == "group") {
      single(e->group);
    } else if (key == "op") {
      single(e->op);
    } else if (key == "differs") {
      if (has_differs) fail(where, "a second 'differs:' line in one entry (blank lines separate entries)");
      const std::optional<Difference> d = parseDifference(value);
      if (!d)
        fail(where, "'differs: " + value +
                        "': expected one of values, dtype, shape, pytorch-raises, backplane-raises, returns");
      e->difference = *d;
      has_differs = true;
    } else if (key == "reason") {
      if (value.starts_with("TODO"))
        fail(where, "the reason is still '" + value + "': write why Backplane differs (one line)");
      single(e->reason);
    } else if (key == "documented") {
      if (value != kBug && !(value.starts_with(kDocsAnchor) && value.size() > kDocsAnchor.size()))
        fail(where, "'documented: " + value + "': expected docs/operators.md#<anchor> or '" + std::string(kBug) + "'");
      single(e->documented);
    } else if (key == "case" || key == "cases") {
      e->patterns.push_back({value, key == "case", {}, where});
    } else {
      fail(where, "unknown key '" + key + "' (expected group, op, differs, reason, documented, case, cases)");
    }
  }
  return out;
}

std::vector<KnownDifference> loadKnownDifferences(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read the known differences from " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return parseKnownDifferences(s.str(), path);
}

std::vector<std::string> missingAnchors(const std::vector<KnownDifference>& list, std::string_view doc) {
  std::set<std::string> anchors;
  bool fenced = false;
  while (!doc.empty()) {
    const size_t nl = doc.find('\n');
    const std::string_view line = doc.substr(0, nl);
    doc = nl == std::string_view::npos ? std::string_view() : doc.substr(nl + 1);
    if (line.starts_with("```")) fenced = !fenced;
    if (fenced) continue;
    if (line.starts_with("#")) anchors.insert(anchorOf(trim(line.substr(line.find_first_not_of('#')))));
    for (std::string_view attr : {"<a id=\"", "<a name=\""}) {
      const size_t at = line.find(attr);
      if (at == std::string_view::npos) continue;
      const std::string_view rest = line.substr(at + attr.size());
      anchors.insert(std::string(rest.substr(0, rest.find('"'))));
    }
  }
  std::vector<std::string> missing;
  for (const KnownDifference& e : list) {
    if (!e.documented.starts_with(kDocsAnchor)) continue;
    if (!anchors.contains(e.documented.substr(kDocsAnchor.size()))) missing.push_back(e.where + ": " + e.documented);
  }
  return missing;
}

Verdict judge(const std::vector<KnownDifference>& list, const std::vector<CaseResult>& results,
              const std::set<std::string>& groups_run) {
  Verdict v;
  // Per entry and pattern: how many disagreeing cases it lists.
  std::vector<std::vector<size_t>> used(list.size());
  for (size_t i = 0; i < list.size(); ++i) used[i].assign(list[i].patterns.size(), 0);
  for (const CaseResult& r : results) {
    ++v.cases;
    bool listed = false;
    for (size_t i = 0; i < list.size(); ++i) {
      const KnownDifference& e = list[i];
      if (e.group != r.group || e.op != r.op) continue;
      for (size_t j = 0; j < e.patterns.size(); ++j) {
        const KnownDifference::Pattern& p = e.patterns[j];
        if (!(p.exact ? p.text == r.call : std::regex_match(r.call, p.re))) continue;
        const std::string line = std::string(p.exact ? "case: " : "cases: ") + p.text;
        if (!r.difference) {
          v.errors.push_back(p.where + ": '" + line + "' lists " + r.group + ": " + r.call +
                             ", which agrees with PyTorch: remove it from the list (or narrow the pattern)");
        } else if (*r.difference != e.difference) {
          v.errors.push_back(p.where + ": the entry says 'differs: " + std::string(differenceName(e.difference)) +
                             "', but " + r.group + ": " + r.call + " now differs in " +
                             std::string(differenceName(*r.difference)) + " (" + r.message +
                             "): update or split the entry");
        } else {
          ++used[i][j];
          listed = true;
        }
      }
    }
    if (!r.difference) continue;
    if (listed) {
      ++v.known;
    } else {
      v.unexpected.push_back(r.group + ": " + r.message);
      v.unlisted.push_back(r);
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (!groups_run.contains(list[i].group)) continue;
    for (size_t j = 0; j < list[i].patterns.size(); ++j) {
      if (used[i][j] != 0) continue;
      const KnownDifference::Pattern& p = list[i].patterns[j];
      v.errors.push_back(p.where + ": '" + (p.exact ? "case: " : "cases: ") + p.text + "' matches no case of " +
                         list[i].group + " that differs in " + std::string(differenceName(list[i].difference)) +
                         ": the difference is gone (or the case was renamed); remove it from the list");
    }
  }
  return v;
}

std::string draftEntries(const std::vector<CaseResult>& cases) {
  // One entry per group, op and kind of difference, in the order first seen.
  std::vector<std::tuple<std::string, std::string, Difference>> order;
  std::map<std::tuple<std::string, std::string, Difference>, std::vector<const CaseResult*>> entries;
  for (const CaseResult& r : cases) {
    if (!r.difference) continue;
    const auto key = std::make_tuple(r.group, r.op, *r.difference);
    if (!entries.contains(key)) order.push_back(key);
    entries[key].push_back(&r);
  }
  std::string s;
  for (const auto& key : order) {
    const std::vector<const CaseResult*>& rs = entries[key];
    s += "group: " + std::get<0>(key) + "\nop: " + std::get<1>(key) +
         "\ndiffers: " + std::string(differenceName(std::get<2>(key))) +
         "\nreason: TODO\ndocumented: " + std::string(kBug) + "\n";
    s += "# e.g. " + oneLine(rs.front()->message) + "\n";
    std::set<std::string> seen;  // a case the tables make twice is listed once
    for (const CaseResult* r : rs)
      if (seen.insert(r->call).second) s += "case: " + oneLine(r->call) + "\n";
    s += "\n";
  }
  return s;
}

}  // namespace backplane::torch_parity
