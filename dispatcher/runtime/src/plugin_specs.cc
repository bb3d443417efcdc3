// The sample notation of a plugin's conformance specs (Note [Sample
// notation] in plugin_specs.h). The registry of declared specs is
// plugin_registry.cc's.
#include "backplane/runtime/plugin_specs.h"

#include <cctype>
#include <charconv>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backplane/core/error.h"

namespace backplane {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at the commas outside brackets and quotes; `unterminated`: whether
// a quote was left open.
std::vector<std::string_view> splitArgs(std::string_view s, bool* unterminated = nullptr) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  if (unterminated) *unterminated = quoted;
  return out;
}

bool parseInt(std::string_view s, int64_t& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parseDouble(std::string_view s, double& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// "[2, 3]" -> {2, 3}; false if it is no list of integers.
bool parseIntList(std::string_view s, std::vector<int64_t>& out) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return false;
  out.clear();
  std::string_view body = trim(s.substr(1, s.size() - 2));
  if (body.empty()) return true;
  for (std::string_view item : splitArgs(body)) {
    int64_t v = 0;
    if (!parseInt(item, v)) return false;
    out.push_back(v);
  }
  return true;
}

// One argument in the notation, or an error text (without the line).
struct ParsedArg {
  SampleArg arg;
  bool uses_t = false;
};

absl::StatusOr<ParsedArg> parseArg(std::string_view tok) {
  ParsedArg p;
  SampleArg& a = p.arg;
  if (tok.empty()) return absl::InvalidArgumentError("an argument is empty");
  if (tok == "none") return p;
  if (tok == "true" || tok == "false") {
    a.kind = SampleArg::Kind::Bool;
    a.b = tok == "true";
    return p;
  }
  if (tok == "device") {
    a.kind = SampleArg::Kind::Device;
    return p;
  }
  if (tok.front() == '"') {
    if (tok.size() < 2 || tok.back() != '"') return absl::InvalidArgumentError(strCat("unterminated string ", tok));
    a.kind = SampleArg::Kind::String;
    a.str = std::string(tok.substr(1, tok.size() - 2));
    return p;
  }
  if (tok.front() == '[') {
    a.kind = SampleArg::Kind::IntList;
    if (!parseIntList(tok, a.ints))
      return absl::InvalidArgumentError(strCat("'", tok, "' is no list of integers such as [2, 3]"));
    return p;
  }
  if (int64_t v = 0; parseInt(tok, v)) {
    a.kind = SampleArg::Kind::Int;
    a.i = v;
    return p;
  }
  if (tok.find_first_not_of("-0123456789") == std::string_view::npos)
    return absl::InvalidArgumentError(strCat("'", tok, "' is out of the int64 range"));
  if (double v = 0; parseDouble(tok, v)) {
    a.kind = SampleArg::Kind::Double;
    a.d = v;
    return p;
  }
  const size_t bracket = tok.find('[');
  if (bracket == std::string_view::npos) {
    // A dtype argument.
    absl::StatusOr<ScalarType> t = parseScalarType(tok);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          strCat("'", tok,
                 "' is no argument: write a tensor (float32[4,8], T[8], with .T or @cpu), a number, true/false, "
                 "[ints], none, a dtype, \"text\" or device"));
    }
    a.kind = SampleArg::Kind::Dtype;
    a.dtype = *t;
    return p;
  }
  // A tensor: DTYPE[sizes] with optional .T and @cpu, in either order.
  a.kind = SampleArg::Kind::Tensor;
  std::string_view dtype = tok.substr(0, bracket);
  const size_t close = tok.find(']', bracket);
  if (close == std::string_view::npos) return absl::InvalidArgumentError(strCat("'", tok, "' has no closing ]"));
  if (!parseIntList(tok.substr(bracket, close - bracket + 1), a.sizes))
    return absl::InvalidArgumentError(strCat("'", tok, "': the shape must be integers, such as float32[4,8]"));
  // A sample is small: its tensors are made on the host and moved to the
  // device for every backend.
  constexpr int64_t kMaxElements = int64_t{1} << 24;
  int64_t numel = 1;
  for (int64_t s : a.sizes) {
    if (s < 0 || s > kMaxElements || (s > 0 && numel > kMaxElements / s))
      return absl::InvalidArgumentError(strCat("'", tok, "': a sample tensor has at most 16777216 elements"));
    numel *= s;
  }
  std::string_view rest = tok.substr(close + 1);
  while (!rest.empty()) {
    if (rest.starts_with(".T")) {
      a.transposed = true;
      rest.remove_prefix(2);
    } else if (rest.starts_with("@cpu")) {
      a.on_host = true;
      rest.remove_prefix(4);
    } else {
      return absl::InvalidArgumentError(
          strCat("'", tok, "': '", rest, "' after the shape; only .T and @cpu may follow"));
    }
  }
  if (a.transposed && a.sizes.size() < 2)
    return absl::InvalidArgumentError(strCat("'", tok, "': .T needs at least two dims"));
  if (dtype == "T") {
    p.uses_t = true;
  } else {
    absl::StatusOr<ScalarType> t = parseScalarType(dtype);
    if (!t.ok()) return absl::InvalidArgumentError(strCat("'", tok, "': ", t.status().message()));
    a.dtype = *t;
  }
  return p;
}

// Whether `a` can stand for an argument of `type`; else what would.
std::string mismatch(const SampleArg& a, const SchemaType& type) {
  using K = SampleArg::Kind;
  if (a.kind == K::None) return type.is_optional ? "" : "the argument is not optional";
  if (type.is_list) {
    if (a.kind == K::IntList && (type.base == BaseType::Int || type.base == BaseType::Float)) return "";
    return "the notation has lists of ints only";
  }
  switch (type.base) {
    case BaseType::Tensor: return a.kind == K::Tensor ? "" : "it takes a tensor, such as float32[4,8]";
    case BaseType::Int: return a.kind == K::Int ? "" : "it takes an int";
    case BaseType::Float: return a.kind == K::Int || a.kind == K::Double ? "" : "it takes a number";
    case BaseType::Scalar:
      return a.kind == K::Int || a.kind == K::Double || a.kind == K::Bool ? "" : "it takes a number or bool";
    case BaseType::Bool: return a.kind == K::Bool ? "" : "it takes true or false";
    case BaseType::Str: return a.kind == K::String ? "" : "it takes a \"string\"";
    case BaseType::ScalarType: return a.kind == K::Dtype ? "" : "it takes a dtype, such as float32";
    case BaseType::Device: return a.kind == K::Device ? "" : "it takes device (the backend's)";
    default: return strCat("the notation cannot give a ", type.str());
  }
}

}  // namespace

absl::StatusOr<std::vector<SampleDecl>> parseSampleNotation(const FunctionSchema& schema, std::string_view text) {
  const std::string op = schema.name().qualifiedName();
  std::vector<ScalarType> dtypes;
  std::vector<SampleDecl> out;
  std::set<std::string> names;
  size_t line_no = 0;
  auto fail = [&](std::string_view line, const std::string& what) {
    return absl::InvalidArgumentError(
        strCat("the samples of ", op, ", line ", line_no, " (", line, "): ", what, " (docs/conformance.md)"));
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const size_t colon_at = line.find(':');
    if (colon_at != std::string_view::npos && trim(line.substr(0, colon_at)) == "dtypes") {
      if (!dtypes.empty()) return fail(line, "a second dtypes: line");
      for (std::string_view name : splitArgs(line.substr(colon_at + 1))) {
        absl::StatusOr<ScalarType> t = parseScalarType(name);
        if (!t.ok()) return fail(line, std::string(t.status().message()));
        dtypes.push_back(*t);
      }
      if (dtypes.empty()) return fail(line, "no dtype listed");
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail(line, "no ':' between the sample's name and its arguments");
    SampleDecl d;
    std::string_view name = trim(line.substr(0, colon));
    if (name == "raises" || name.starts_with("raises ")) {
      d.must_raise = true;
      name = trim(name.substr(6));
    }
    if (name.empty()) return fail(line, "the sample has no name");
    d.name = std::string(name);
    if (!names.insert(d.name).second) return fail(line, strCat("a second sample named '", d.name, "'"));
    bool uses_t = false;
    bool unterminated = false;
    const std::vector<std::string_view> toks = splitArgs(line.substr(colon + 1), &unterminated);
    if (unterminated) return fail(line, "a string is not closed: write \"text\"");
    const auto& params = schema.arguments();
    if (toks.size() != params.size()) {
      return fail(line, strCat(toks.size(), " arguments, but ", schema.toString(), " takes ", params.size(),
                               " (give every argument, in order)"));
    }
    for (size_t i = 0; i < toks.size(); ++i) {
      absl::StatusOr<ParsedArg> a = parseArg(toks[i]);
      if (!a.ok()) return fail(line, std::string(a.status().message()));
      if (a->uses_t && dtypes.empty()) return fail(line, "T needs a dtypes: line before the samples");
      if (std::string why = mismatch(a->arg, params[i].type); !why.empty())
        return fail(line, strCat("argument ", i + 1, " (", params[i].str(), ") is '", toks[i], "': ", why));
      uses_t |= a->uses_t;
      d.args.push_back(std::move(a->arg));
    }
    if (!uses_t) {
      out.push_back(std::move(d));
      continue;
    }
    for (ScalarType t : dtypes) {
      SampleDecl e = d;
      e.name = strCat(d.name, " ", scalarTypeName(t));
      for (size_t i = 0; i < toks.size(); ++i)
        if (e.args[i].kind == SampleArg::Kind::Tensor && toks[i].starts_with("T[")) e.args[i].dtype = t;
      out.push_back(std::move(e));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(strCat(
        "the samples of ", op, " hold no sample call (docs/conformance.md, \"Samples of a plugin's own operator\")"));
  }
  return out;
}

}  // namespace backplane
