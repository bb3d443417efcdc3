// Items of a conformance run and the worker's wire format (suite.h).
#include "backplane/conformance/suite.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_node_test.h"
#include "backplane/core/error.h"

namespace backplane::conformance {

std::vector<Item> selectItems(DeviceType type, const std::string& ops_regex, bool device_checks,
                              const std::string& onnx_root) {
  std::optional<std::regex> re;
  if (!ops_regex.empty()) {
    try {
      re.emplace(ops_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      BP_THROW(kInvalidArgument, "--ops '", ops_regex, "' is not a valid regular expression (", e.what(), ")");
    }
  }
  auto keep = [&](std::initializer_list<const std::string*> names) {
    if (!re) return true;
    for (const std::string* n : names)
      if (!n->empty() && std::regex_search(*n, *re)) return true;
    return false;
  };
  std::vector<Item> out;
  if (!onnx_root.empty()) {
    std::map<std::string, std::string> dirs;  // name -> folder: a name is one test
    for (std::string& dir : valueOrThrow(onnx::findNodeTests(onnx_root))) {
      std::string name = "onnx::" + std::filesystem::path(dir).filename().string();
      auto [it, fresh] = dirs.emplace(name, dir);
      BP_CHECK(fresh, "two ONNX node tests are named ", name, " (", it->second, " and ", dir, "); point --onnx at one ",
               "corpus");
      if (keep({&name})) out.push_back(Item{std::move(name), nullptr, std::move(dir)});
    }
    return out;
  }
  if (device_checks) {
    for (std::string& name : deviceCheckNames(type))
      if (keep({&name})) out.push_back(Item{std::move(name), nullptr});
  }
  for (const OpSpec& s : allSpecs())
    if (keep({&s.op, &s.inplace, &s.out})) out.push_back(Item{s.op, &s});
  return out;
}

std::vector<Result> runItem(const Item& item, Device device, size_t first_form, const SpecObserver& observer) {
  if (!item.onnx_test.empty()) return {runOnnxTest(item.onnx_test, device)};
  if (!item.spec) return {runDeviceCheck(item.name, device.type)};
  return runSpec(*item.spec, device, first_form, observer);
}

namespace {

void appendEscaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    switch (s[i]) {
      case '\\': out += '\\'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: return std::nullopt;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

constexpr std::string_view kTag = "result";
constexpr size_t kFields = 14;  // the tag and thirteen fields
constexpr std::string_view kSampleTag = "sample";
constexpr size_t kSampleFields = 5;  // the tag and four fields

// The fields of a tab-separated line, unescaped; nothing if one is malformed.
std::optional<std::vector<std::string>> splitFields(std::string_view line) {
  std::vector<std::string> f;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    std::optional<std::string> field = unescape(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
    if (!field) return std::nullopt;
    f.push_back(std::move(*field));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return f;
}

// A whole field as a number of type T.
template <typename T>
std::optional<T> parseNumber(const std::string& s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string encodeSampleStart(const SampleStart& s) {
  std::string out(kSampleTag);
  out += '\t' + std::to_string(s.item) + '\t' + std::to_string(s.form) + '\t' + std::to_string(s.number) + '\t';
  appendEscaped(out, s.sample);
  return out;
}

std::optional<SampleStart> decodeSampleStart(std::string_view line) {
  std::optional<std::vector<std::string>> f = splitFields(line);
  if (!f || f->size() != kSampleFields || (*f)[0] != kSampleTag) return std::nullopt;
  std::optional<size_t> item = parseNumber<size_t>((*f)[1]), form = parseNumber<size_t>((*f)[2]);
  std::optional<int> number = parseNumber<int>((*f)[3]);
  if (!item || !form || !number) return std::nullopt;
  return SampleStart{*item, *form, *number, std::move((*f)[4])};
}

std::string encodeResult(const Result& r) {
  std::string out(kTag);
  for (std::string_view f : {std::string_view(r.op), std::string_view(r.form), std::string_view(r.backend),
                             std::string_view(kernelNameOf(r)), std::string_view(outcomeName(r.outcome))}) {
    out += '\t';
    appendEscaped(out, f);
  }
  out += '\t' + std::to_string(r.samples);
  out += '\t';
  appendEscaped(out, r.sample);
  out += '\t';
  appendEscaped(out, r.message);
  out += '\t' + number(r.max_abs_error) + '\t' + number(r.max_rel_error);
  // Note [Declared dtypes]: the mask (empty: every dtype), who serves the rest, the note.
  out += '\t' + (r.dtypes ? std::to_string(r.dtypes->mask()) : std::string());
  out += '\t';
  out += r.declined ? kernelKindName(*r.declined) : "";
  out += '\t';
  appendEscaped(out, r.note);
  return out;
}

std::optional<Result> decodeResult(std::string_view line) {
  std::optional<std::vector<std::string>> fields = splitFields(line);
  if (!fields) return std::nullopt;
  std::vector<std::string>& f = *fields;
  if (f.size() != kFields || f[0] != kTag) return std::nullopt;
  Result r;
  r.op = f[1];
  r.form = f[2];
  r.backend = f[3];
  if (f[4] != kNoKernelName) {
    r.kernel = kernelKindFromName(f[4]);
    if (!r.kernel) return std::nullopt;
  }
  std::optional<Outcome> o = outcomeFromName(f[5]);
  if (!o) return std::nullopt;
  r.outcome = *o;
  std::optional<int> samples = parseNumber<int>(f[6]);
  if (!samples) return std::nullopt;
  r.samples = *samples;
  r.sample = f[7];
  r.message = f[8];
  char* e = nullptr;
  r.max_abs_error = std::strtod(f[9].c_str(), &e);
  if (*e != '\0') return std::nullopt;
  r.max_rel_error = std::strtod(f[10].c_str(), &e);
  if (*e != '\0') return std::nullopt;
  if (!f[11].empty()) {
    uint64_t mask = 0;
    auto [mend, mec] = std::from_chars(f[11].data(), f[11].data() + f[11].size(), mask);
    if (mec != std::errc() || mend != f[11].data() + f[11].size()) return std::nullopt;
    absl::StatusOr<DtypeSet> dtypes = DtypeSet::fromMask(mask);
    if (!dtypes.ok()) return std::nullopt;
    r.dtypes = *dtypes;
  }
  if (!f[12].empty()) {
    r.declined = kernelKindFromName(f[12]);
    if (!r.declined) return std::nullopt;
  }
  r.note = f[13];
  return r;
}

}  // namespace backplane::conformance
