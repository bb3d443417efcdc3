#include "backplane/dispatch/function_schema.h"

#include <algorithm>
#include <charconv>
#include <ostream>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backplane {
namespace {

// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view), so StrCat cannot take std::string_view directly.
absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

struct TypeSpelling {
  std::string_view spelling;
  BaseType type;
};

// SymInt is accepted because native_functions.yaml uses it everywhere sizes
// appear; Backplane has no symbolic shapes, so it is just an int.
constexpr TypeSpelling kTypeSpellings[] = {
    {"Tensor", BaseType::Tensor},
    {"int", BaseType::Int},
    {"SymInt", BaseType::Int},
    {"float", BaseType::Float},
    {"bool", BaseType::Bool},
    {"str", BaseType::Str},
    {"Scalar", BaseType::Scalar},
    {"ScalarType", BaseType::ScalarType},
    {"Device", BaseType::Device},
    {"Layout", BaseType::Layout},
    {"MemoryFormat", BaseType::MemoryFormat},
};
// The largest fixed list size (`int[N]`). A bare default of a sized list is
// stored expanded to N elements, and callers that turn a scalar into a sized
// list do the same, so N must stay small: a fuzzed `int[99999999999] x=1`
// asked for terabytes (dispatcher/fuzz/corpus/schema_parser/crash-*).
constexpr int64_t kMaxListSize = 1024;

constexpr std::string_view kKnownTypes =
    "Tensor, int, SymInt, float, bool, str, Scalar, ScalarType, Device, "
    "Layout, MemoryFormat";

std::string formatDouble(double d) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, res.ptr);
  // Shortest form may look like an int ("2"); keep it a float literal so a
  // Scalar default stays a double across a round trip.
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  out += '"';
  return out;
}

std::string formatBool(bool b) { return b ? "True" : "False"; }

std::string formatDefault(const DefaultValue& value, const SchemaType& type) {
  struct Visitor {
    const SchemaType& type;
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return formatBool(b); }
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(double d) const { return formatDouble(d); }
    std::string operator()(const std::string& s) const {
      // Enum-like types take bare names (MemoryFormat=contiguous_format).
      bool quoted = type.base == BaseType::Str || type.base == BaseType::Device;
      return quoted ? quote(s) : s;
    }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", ", [](std::string* out, double d) { out->append(formatDouble(d)); }),
                          "]");
    }
    std::string operator()(const std::vector<bool>& v) const {
      std::vector<std::string> parts;
      for (bool b : v) parts.push_back(formatBool(b));
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
  };
  return std::visit(Visitor{type}, value);
}

std::string typeString(const SchemaType& t, const AliasInfo* alias) {
  std::string s(baseTypeName(t.base));
  if (alias != nullptr) {
    absl::StrAppend(&s, "(", alias->set, alias->is_write ? "!" : "", ")");
  }
  if (t.is_list) {
    if (t.element_optional) s += '?';
    s += '[';
    if (t.list_size) absl::StrAppend(&s, *t.list_size);
    s += ']';
  }
  if (t.is_optional) s += '?';
  return s;
}

// A lexed default-value token, before it is checked against the argument type.
struct Literal {
  enum class Kind { None, Bool, Int, Float, String, Ident } kind;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  absl::StatusOr<OperatorName> parseOperatorName() {
    skipWs();
    OperatorName result;
    std::string_view ns = identifier();
    if (ns.empty()) return error(pos_, "expected operator name 'ns::name'");
    if (text_.substr(pos_).substr(0, 2) != "::") {
      return error(pos_, absl::StrCat("expected '::' after '", av(ns),
                                      "' (operator names need a namespace, "
                                      "e.g. 'aten::",
                                      av(ns), "')"));
    }
    pos_ += 2;
    std::string_view name = identifier();
    if (name.empty()) return error(pos_, "expected operator name after '::'");
    result.ns = std::string(ns);
    result.name = std::string(name);
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      std::string_view overload = identifier();
      if (overload.empty()) {
        return error(pos_, "expected overload name after '.'");
      }
      result.overload = std::string(overload);
    }
    return result;
  }

  absl::StatusOr<FunctionSchema> parseSchema() {
    absl::StatusOr<OperatorName> name = parseOperatorName();
    if (!name.ok()) return name.status();
    if (!consume('(')) {
      return error(pos_, "expected '(' to start the argument list");
    }
    std::vector<Argument> args;
    NameSet arg_names;
    if (!consume(')')) {
      bool seen_star = false;
      while (true) {
        skipWs();
        std::string after;
        if (lookingAt('*')) {
          if (seen_star) {
            return error(pos_, "expected at most one '*' in the argument list");
          }
          seen_star = true;
          ++pos_;
          after = "'*'";
        } else {
          size_t name_pos = 0;
          absl::StatusOr<Argument> arg = parseArgument(
              /*kwarg_only=*/seen_star, /*is_return=*/false, &name_pos);
          if (!arg.ok()) return arg.status();
          if (absl::Status s = checkUnique(arg_names, *arg, name_pos); !s.ok()) {
            return s;
          }
          after = absl::StrCat("argument '", arg->name, "'");
          args.push_back(*std::move(arg));
        }
        if (consume(',')) continue;
        if (consume(')')) break;
        return error(pos_, absl::StrCat("expected ')' or ',' after ", after));
      }
    }

    skipWs();
    if (!consumeToken("->")) {
      return error(pos_, "expected '->' and return type(s) after ')'");
    }
    std::vector<Argument> returns;
    NameSet return_names;
    if (consume('(')) {
      if (!consume(')')) {
        while (true) {
          size_t name_pos = 0;
          absl::StatusOr<Argument> ret = parseArgument(
              /*kwarg_only=*/false, /*is_return=*/true, &name_pos);
          if (!ret.ok()) return ret.status();
          if (absl::Status s = checkUnique(return_names, *ret, name_pos); !s.ok()) {
            return s;
          }
          returns.push_back(*std::move(ret));
          if (consume(',')) continue;
          if (consume(')')) break;
          return error(pos_, "expected ')' or ',' after return");
        }
      }
    } else {
      size_t name_pos = 0;
      absl::StatusOr<Argument> ret = parseArgument(/*kwarg_only=*/false, /*is_return=*/true, &name_pos);
      if (!ret.ok()) return ret.status();
      returns.push_back(*std::move(ret));
    }
    if (absl::Status s = expectEnd("schema"); !s.ok()) return s;
    return FunctionSchema(*std::move(name), std::move(args), std::move(returns));
  }

  absl::Status expectEnd(std::string_view what) {
    skipWs();
    if (pos_ < text_.size()) {
      return error(pos_, absl::StrCat("expected end of ", av(what), " but found trailing text"));
    }
    return absl::OkStatus();
  }

 private:
  void skipWs() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool lookingAt(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool consume(char c) {
    skipWs();
    if (!lookingAt(c)) return false;
    ++pos_;
    return true;
  }
  bool consumeToken(std::string_view tok) {
    skipWs();
    if (text_.substr(pos_).substr(0, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  // Reads an identifier at the current position (no whitespace skipping);
  // returns "" if there is none.
  std::string_view identifier() {
    if (pos_ >= text_.size() || !isIdentStart(text_[pos_])) return {};
    size_t start = pos_;
    while (pos_ < text_.size() && isIdentChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  absl::Status error(size_t pos, std::string_view msg) const {
    pos = std::min(pos, text_.size());
    // Show only the offending line so the caret lines up in multi-line input.
    size_t line_start = pos == 0 ? std::string_view::npos : text_.rfind('\n', pos - 1);
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    size_t line_end = text_.find('\n', pos);
    if (line_end == std::string_view::npos) line_end = text_.size();
    // Of a long line, only kContext characters either side of the error
    // show: the message stays short whatever the schema's length.
    constexpr size_t kContext = 60;
    const bool cut_head = pos - line_start > kContext, cut_tail = line_end - pos > kContext;
    const size_t shown_start = cut_head ? pos - kContext : line_start;
    const size_t shown_end = cut_tail ? pos + kContext : line_end;
    std::string pad(cut_head ? 3 : 0, ' ');
    for (size_t i = shown_start; i < pos; ++i) {
      pad += text_[i] == '\t' ? '\t' : ' ';
    }
    std::string_view found = pos >= text_.size() ? " (reached end of input)" : "";
    return absl::InvalidArgumentError(
        absl::StrCat(av(what_), ": ", av(msg), av(found), " at position ", pos, ":\n  ", cut_head ? "..." : "",
                     av(text_.substr(shown_start, shown_end - shown_start)), cut_tail ? "..." : "", "\n  ", pad, "^"));
  }

  // The names seen so far in one list (arguments or returns), as views into
  // text_. A set, not a scan of the list: a schema of n arguments parses in
  // O(n), where a scan made it O(n^2) (a 1 MB schema took seconds).
  using NameSet = std::unordered_set<std::string_view>;

  absl::Status checkUnique(NameSet& seen, const Argument& arg, size_t name_pos) const {
    if (arg.name.empty()) return absl::OkStatus();
    if (!seen.insert(text_.substr(name_pos, arg.name.size())).second) {
      return error(name_pos, absl::StrCat("duplicate name '", arg.name, "'; expected unique names"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Argument> parseArgument(bool kwarg_only, bool is_return, size_t* name_pos) {
    Argument arg;
    arg.kwarg_only = kwarg_only;
    if (absl::Status s = parseType(&arg); !s.ok()) return s;
    skipWs();
    *name_pos = pos_;
    arg.name = std::string(identifier());
    if (arg.name.empty() && !is_return) {
      return error(pos_, absl::StrCat("expected argument name after type '", typeString(arg.type, nullptr), "'"));
    }
    skipWs();
    if (lookingAt('=')) {
      if (is_return) {
        return error(pos_,
                     "expected ',' or ')' after return; returns cannot "
                     "have default values");
      }
      ++pos_;
      absl::StatusOr<DefaultValue> value = parseDefault(arg);
      if (!value.ok()) return value.status();
      arg.default_value = *std::move(value);
    }
    return arg;
  }

  absl::Status parseType(Argument* arg) {
    skipWs();
    size_t start = pos_;
    std::string_view spelling = identifier();
    if (spelling.empty()) {
      return error(start, absl::StrCat("expected a type (one of ", av(kKnownTypes), ")"));
    }
    const TypeSpelling* found = nullptr;
    for (const TypeSpelling& t : kTypeSpellings) {
      if (t.spelling == spelling) found = &t;
    }
    if (found == nullptr) {
      return error(start, absl::StrCat("unknown type '", av(spelling), "'; expected one of ", av(kKnownTypes)));
    }
    SchemaType& type = arg->type;
    type.base = found->type;
    if (consume('(')) {
      if (absl::Status s = parseAlias(arg); !s.ok()) return s;
    }
    bool question = consume('?');
    if (consume('[')) {
      skipWs();
      if (pos_ < text_.size() && isDigit(text_[pos_])) {
        size_t size_start = pos_;
        while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
        int64_t size = 0;
        auto res = std::from_chars(text_.data() + size_start, text_.data() + pos_, size);
        if (res.ec != std::errc() || size > kMaxListSize) {
          return error(size_start, absl::StrCat("expected a list size of at most ", kMaxListSize,
                                                " (a fixed size counts dimensions or "
                                                "the like; use T[] for longer lists)"));
        }
        type.list_size = size;
      }
      if (!consume(']')) {
        return error(pos_, "expected list size or ']' in list type");
      }
      type.is_list = true;
      type.element_optional = question;
      type.is_optional = consume('?');
    } else {
      type.is_optional = question;
    }
    // Also accept the annotation after the suffixes (`Tensor?(a!)`), which
    // some PyTorch schemas use; it means the same thing.
    if (!arg->alias && consume('(')) {
      if (absl::Status s = parseAlias(arg); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Called just after '('.
  absl::Status parseAlias(Argument* arg) {
    skipWs();
    std::string_view set = identifier();
    if (set.empty()) {
      return error(pos_, "expected alias set name (e.g. 'a') after '('");
    }
    AliasInfo alias{std::string(set), consume('!')};
    if (!consume(')')) {
      return error(pos_, "expected '!' or ')' in alias annotation");
    }
    arg->alias = std::move(alias);
    return absl::OkStatus();
  }

  absl::StatusOr<Literal> lexLiteral() {
    skipWs();
    size_t start = pos_;
    Literal lit;
    if (lookingAt('"') || lookingAt('\'')) {
      char q = text_[pos_++];
      lit.kind = Literal::Kind::String;
      while (true) {
        if (pos_ >= text_.size()) {
          return error(start, absl::StrCat("unterminated string literal; "
                                           "expected closing ",
                                           std::string(1, q)));
        }
        char c = text_[pos_++];
        if (c == q) break;
        if (c == '\\' && pos_ < text_.size()) {
          char e = text_[pos_++];
          switch (e) {
            case 'n': lit.s += '\n'; break;
            case 't': lit.s += '\t'; break;
            case '\\':
            case '"':
            case '\'': lit.s += e; break;
            default: lit.s += '\\'; lit.s += e;
          }
        } else {
          lit.s += c;
        }
      }
      return lit;
    }
    bool negative = lookingAt('-');
    if (negative) ++pos_;
    std::string_view ident = identifier();
    if (!ident.empty()) {
      if (ident == "inf" || ident == "nan") {
        lit.kind = Literal::Kind::Float;
        std::string_view token = text_.substr(start, pos_ - start);
        std::from_chars(token.data(), token.data() + token.size(), lit.d);
        return lit;
      }
      if (negative) return error(start + 1, "expected a number after '-'");
      if (ident == "None") {
        lit.kind = Literal::Kind::None;
      } else if (ident == "True" || ident == "False") {
        lit.kind = Literal::Kind::Bool;
        lit.b = ident == "True";
      } else {
        lit.kind = Literal::Kind::Ident;
        lit.s = std::string(ident);
      }
      return lit;
    }
    size_t digits_start = pos_;
    bool is_float = false;
    while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
    if (lookingAt('.')) {
      is_float = true;
      ++pos_;
      while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
    }
    std::string_view mantissa = text_.substr(digits_start, pos_ - digits_start);
    if (mantissa.find_first_of("0123456789") == std::string_view::npos) {
      pos_ = start;
      return error(start,
                   "expected a default value (None, True, False, a "
                   "number, a string or a list)");
    }
    if (lookingAt('e') || lookingAt('E')) {
      size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p < text_.size() && isDigit(text_[p])) {
        is_float = true;
        pos_ = p;
        while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
      }
    }
    std::string_view token = text_.substr(start, pos_ - start);
    const char* end = token.data() + token.size();
    std::from_chars_result res;
    if (is_float) {
      lit.kind = Literal::Kind::Float;
      res = std::from_chars(token.data(), end, lit.d);
    } else {
      lit.kind = Literal::Kind::Int;
      res = std::from_chars(token.data(), end, lit.i);
    }
    if (res.ec == std::errc::result_out_of_range) {
      return error(start, "expected a number literal within range");
    }
    if (res.ec != std::errc() || res.ptr != end) {
      return error(start, "expected a well-formed number literal");
    }
    return lit;
  }

  // Parses one non-list default (or one list element) for `base`.
  absl::StatusOr<DefaultValue> parseElementDefault(const Argument& arg, BaseType base) {
    skipWs();
    size_t start = pos_;
    absl::StatusOr<Literal> lit = lexLiteral();
    if (!lit.ok()) return lit.status();
    using K = Literal::Kind;
    std::string_view expected;
    switch (base) {
      case BaseType::Tensor: expected = "None (Tensor defaults must be None)"; break;
      case BaseType::Int:
        if (lit->kind == K::Int) return DefaultValue(lit->i);
        expected = "an integer literal";
        break;
      case BaseType::Float:
        if (lit->kind == K::Float) return DefaultValue(lit->d);
        if (lit->kind == K::Int) return DefaultValue(static_cast<double>(lit->i));
        expected = "a number";
        break;
      case BaseType::Bool:
        if (lit->kind == K::Bool) return DefaultValue(lit->b);
        expected = "True or False";
        break;
      case BaseType::Scalar:
        if (lit->kind == K::Int) return DefaultValue(lit->i);
        if (lit->kind == K::Float) return DefaultValue(lit->d);
        if (lit->kind == K::Bool) return DefaultValue(lit->b);
        expected = "a number, True or False";
        break;
      case BaseType::Str:
      case BaseType::Device:
        if (lit->kind == K::String) return DefaultValue(lit->s);
        expected = "a quoted string";
        break;
      case BaseType::ScalarType:
      case BaseType::Layout:
      case BaseType::MemoryFormat:
        if (lit->kind == K::Ident) return DefaultValue(lit->s);
        expected = "a name (e.g. 'contiguous_format')";
        break;
    }
    return error(start, absl::StrCat("expected ", av(expected), " as default value for argument '", arg.name,
                                     "' of type '", typeString(arg.type, nullptr), "'"));
  }

  // Called just after '='.
  absl::StatusOr<DefaultValue> parseDefault(const Argument& arg) {
    const SchemaType& type = arg.type;
    std::string type_str = typeString(type, nullptr);
    skipWs();
    size_t start = pos_;
    if (identifier() == "None") {
      if (!type.is_optional) {
        return error(start, absl::StrCat("default None requires an optional type "
                                         "(expected '",
                                         type_str, "?'), but argument '", arg.name, "' has type '", type_str, "'"));
      }
      return DefaultValue(std::monostate{});
    }
    pos_ = start;
    if (!type.is_list) return parseElementDefault(arg, type.base);

    if (type.base != BaseType::Int && type.base != BaseType::Float && type.base != BaseType::Bool) {
      return error(start, absl::StrCat("expected None as default value for "
                                       "argument '",
                                       arg.name, "' of type '", type_str,
                                       "' (only int[], float[] and bool[] "
                                       "take list defaults)"));
    }
    std::vector<DefaultValue> elems;
    if (consume('[')) {
      if (!consume(']')) {
        while (true) {
          absl::StatusOr<DefaultValue> e = parseElementDefault(arg, type.base);
          if (!e.ok()) return e.status();
          elems.push_back(*std::move(e));
          if (consume(',')) continue;
          if (consume(']')) break;
          return error(pos_, "expected ',' or ']' in list default");
        }
      }
    } else {
      if (!type.list_size) {
        return error(start,
                     absl::StrCat("expected '[' to start list default for "
                                  "argument '",
                                  arg.name, "' of type '", type_str, "' (a single value needs a sized list like '",
                                  av(baseTypeName(type.base)), "[2]')"));
      }
      absl::StatusOr<DefaultValue> e = parseElementDefault(arg, type.base);
      if (!e.ok()) return e.status();
      elems.assign(static_cast<size_t>(*type.list_size), *e);
    }
    switch (type.base) {
      case BaseType::Int: {
        std::vector<int64_t> v;
        for (const auto& e : elems) v.push_back(std::get<int64_t>(e));
        return DefaultValue(std::move(v));
      }
      case BaseType::Float: {
        std::vector<double> v;
        for (const auto& e : elems) v.push_back(std::get<double>(e));
        return DefaultValue(std::move(v));
      }
      default: {
        std::vector<bool> v;
        for (const auto& e : elems) v.push_back(std::get<bool>(e));
        return DefaultValue(std::move(v));
      }
    }
  }

  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view baseTypeName(BaseType type) {
  switch (type) {
    case BaseType::Tensor: return "Tensor";
    case BaseType::Int: return "int";
    case BaseType::Float: return "float";
    case BaseType::Bool: return "bool";
    case BaseType::Str: return "str";
    case BaseType::Scalar: return "Scalar";
    case BaseType::ScalarType: return "ScalarType";
    case BaseType::Device: return "Device";
    case BaseType::Layout: return "Layout";
    case BaseType::MemoryFormat: return "MemoryFormat";
  }
  return "<invalid BaseType>";
}

std::string OperatorName::qualifiedName() const {
  if (overload.empty()) return absl::StrCat(ns, "::", name);
  return absl::StrCat(ns, "::", name, ".", overload);
}

absl::StatusOr<OperatorName> OperatorName::parse(std::string_view text) {
  Parser parser(text, "bad operator name");
  absl::StatusOr<OperatorName> name = parser.parseOperatorName();
  if (!name.ok()) return name;
  if (absl::Status s = parser.expectEnd("operator name"); !s.ok()) return s;
  return name;
}

std::string SchemaType::str() const { return typeString(*this, nullptr); }

bool Argument::isOut() const { return kwarg_only && alias.has_value() && alias->is_write; }

std::string Argument::str() const {
  std::string s = typeString(type, alias ? &*alias : nullptr);
  if (!name.empty()) absl::StrAppend(&s, " ", name);
  if (default_value) absl::StrAppend(&s, "=", formatDefault(*default_value, type));
  return s;
}

FunctionSchema::FunctionSchema(OperatorName name, std::vector<Argument> arguments, std::vector<Argument> returns)
    : name_(std::move(name)), arguments_(std::move(arguments)), returns_(std::move(returns)) {}

absl::StatusOr<FunctionSchema> FunctionSchema::parse(std::string_view text) {
  return Parser(text, "bad schema").parseSchema();
}

bool FunctionSchema::isMutable() const {
  return std::any_of(arguments_.begin(), arguments_.end(),
                     [](const Argument& a) { return a.alias && a.alias->is_write; });
}

std::optional<size_t> FunctionSchema::argumentIndex(std::string_view name) const {
  for (size_t i = 0; i < arguments_.size(); ++i) {
    if (arguments_[i].name == name) return i;
  }
  return std::nullopt;
}

std::string FunctionSchema::toString() const {
  std::string s = absl::StrCat(name_.qualifiedName(), "(");
  bool in_kwargs = false;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    if (i > 0) s += ", ";
    if (arguments_[i].kwarg_only && !in_kwargs) {
      s += "*, ";
      in_kwargs = true;
    }
    s += arguments_[i].str();
  }
  s += ") -> ";
  // A lone unnamed return prints bare; anything else needs the tuple form
  // (a bare name after the type would be ambiguous to a reader).
  if (returns_.size() == 1 && returns_[0].name.empty()) {
    s += returns_[0].str();
  } else {
    absl::StrAppend(
        &s, "(", absl::StrJoin(returns_, ", ", [](std::string* out, const Argument& a) { out->append(a.str()); }), ")");
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const OperatorName& name) { return os << name.qualifiedName(); }
std::ostream& operator<<(std::ostream& os, const SchemaType& type) { return os << type.str(); }
std::ostream& operator<<(std::ostream& os, const Argument& arg) { return os << arg.str(); }
std::ostream& operator<<(std::ostream& os, const FunctionSchema& schema) { return os << schema.toString(); }

}  // namespace backplane
