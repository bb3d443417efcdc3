// The conformance worker's wire format (wire_format.h): Results and sample
// announcements as lines of text, and the names of outcomes and kernels they
// carry. Needs only libbackplane (fuzz_conformance_wire links it alone).
#include "backplane/conformance/wire_format.h"

#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {

const char* outcomeName(Outcome o) {
  switch (o) {
    case Outcome::Pass: return "pass";
    case Outcome::Fail: return "fail";
    case Outcome::Error: return "error";
    case Outcome::Crash: return "crash";
    case Outcome::Unsupported: return "unsupported";
    case Outcome::ExpectedFailure: return "xfail";
    case Outcome::Uncertified: return "uncertified";
  }
  return "error";
}

std::optional<Outcome> outcomeFromName(std::string_view name) {
  for (Outcome o : {Outcome::Pass, Outcome::Fail, Outcome::Error, Outcome::Crash, Outcome::Unsupported,
                    Outcome::ExpectedFailure, Outcome::Uncertified})
    if (name == outcomeName(o)) return o;
  return std::nullopt;
}

const char* kernelNameOf(const Result& r) { return r.kernel ? kernelKindName(*r.kernel) : kNoKernelName; }

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
  // Each error is the whole field, as number() writes it (strtod, used
  // before, stopped at a NUL byte inside the field, skipped leading blanks
  // and read an empty field as 0).
  std::optional<double> max_abs = parseNumber<double>(f[9]), max_rel = parseNumber<double>(f[10]);
  if (!max_abs || !max_rel) return std::nullopt;
  r.max_abs_error = *max_abs;
  r.max_rel_error = *max_rel;
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
