#include "schemas.h"

#include <algorithm>
#include <vector>

#include "backplane/conformance/command.h"
#include "backplane/conformance/name_pattern.h"
#include "backplane/conformance/text_format.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/derivatives.h"
#include "backplane/ops/standard_ops.h"

namespace backplane::cli {
namespace {

using conformance::jsonString;

struct SchemaRow {
  std::string name;    // "bp::mm.out"
  std::string schema;  // its schema text
  // (argument, accepted dtypes) for each tensor argument, then "result"
  // where the op declares one; empty for an op outside the standard table,
  // whose dtypes its kernels decide.
  std::vector<std::pair<std::string, std::string>> dtypes;
  bool standard = false;      // in the standard table
  std::string kernel;         // the C++ declaration, or empty
  std::string cpp_signature;  // the host's notation, "(Tensor, Scalar) -> Tensor"
  // How it differentiates (Note [Derivative declarations]): the kind, and
  // per formula "inputs: text", or the declaration's note.
  std::string derivative_kind;
  std::string derivative;
  // For a derived out= form (Note [Derived out= forms]): its functional op,
  // whose kernel a plugin writes.
  std::string derived_from;
  bool derived_functional = false;  // the functional form of the in-place op derived_from
};

// "; calls bp::gelu_backward (cpu native (float32, float64), ...)": backward
// op `b` and what serves it on every backend.
std::string calls(const std::string& b) {
  const std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(b);
  if (!h || !h->hasSchema()) return "";
  std::string served;
  for (const conformance::Backend& be : conformance::activeBackends(true)) {
    const DispatchKey key = backendKey(be.type);
    std::string kind = kernelKindName(h->kernelKind(key));
    if (const std::optional<DtypeSet> declared = h->declaredDtypes(key)) {
      const std::optional<KernelKind> declined = h->declinedKind(key);
      kind += " (" + declared->str() + "), " + (declined ? kernelKindName(*declined) : "-") + " (others)";
    }
    served += (served.empty() ? "" : ", ") + be.name + " " + kind;
  }
  return "; calls " + b + " (" + served + ")";
}

// The backward op a declaration calls ("spconv::indice_conv_backward"), or "".
std::string declaredBackwardOp(const std::string& declaration) {
  const size_t open = declaration.find('(');
  return open == std::string::npos ? "" : declaration.substr(0, open);
}

// "formula", "self: grad * other; other: grad * self" for mul.Tensor; a
// plugin op's declaration (Note [Declared derivatives]) with its declarer;
// and any device's own declaration.
void describeDerivative(const OperatorHandle& op, SchemaRow& row) {
  std::string per_device;
  const DeclaredDerivativeInfo* every = nullptr;
  const std::vector<DeclaredDerivativeInfo> declared = declaredDerivatives();
  for (const DeclaredDerivativeInfo& info : declared) {
    if (info.op != row.name) continue;
    if (!info.device) {
      every = &info;
      continue;
    }
    per_device += "; on " + deviceTypeName(*info.device) + " (" + info.owner + "): " + info.declaration;
    if (const std::string b = declaredBackwardOp(info.declaration); !b.empty()) per_device += calls(b);
  }
  const OpDerivative* d = op.operatorName().ns == kStandardNamespace ? findDerivative(row.name) : nullptr;
  if (every != nullptr) {
    const bool plain = every->declaration == "non_differentiable" || every->declaration == "not_implemented";
    row.derivative_kind = plain ? every->declaration : "formula";
    row.derivative = "declared by " + every->owner + (plain ? "" : ": " + every->declaration);
    if (const std::string b = declaredBackwardOp(every->declaration); !b.empty()) row.derivative += calls(b);
  } else if (d == nullptr) {
    row.derivative_kind = "not_implemented";
    row.derivative = "declares none: backward through it raises";
  } else {
    row.derivative_kind = differentiabilityName(d->kind);
    for (const DerivativeFormula& f : d->formulas)
      row.derivative += (row.derivative.empty() ? "" : "; ") + std::string(f.inputs) + ": " + f.text;
    if (row.derivative.empty()) row.derivative = d->note;
    // The backward ops it calls, and what serves each on every backend.
    for (const std::string& b : d->backward_ops) row.derivative += calls(b);
  }
  row.derivative += per_device;
}

constexpr const char* kOutDtype = "checked against the result";

SchemaRow rowFor(const OperatorHandle& op) {
  const FunctionSchema& schema = op.schema();
  SchemaRow row{op.operatorName().qualifiedName(),
                schema.toString(),
                {},
                false,
                pluginKernelSignature(schema),
                cppSignatureForSchema(schema),
                "",
                "",
                "",
                false};
  describeDerivative(op, row);
  if (const StandardOp* s = op.operatorName().ns == kStandardNamespace ? findStandardOp(row.name) : nullptr) {
    row.standard = true;
    if (!s->derived_from.empty()) row.derived_from = strCat(kStandardNamespace, "::", s->derived_from);
    row.derived_functional = s->derived_functional;
    for (const Argument& a : schema.arguments())
      if (a.type.base == BaseType::Tensor) {
        // An out= tensor's dtype follows from the inputs' (the meta checks
        // it against the result), unless the op lists a rule for it.
        const bool listed = std::any_of(s->dtypes.begin(), s->dtypes.end(),
                                        [&](const ArgumentDtypes& d) { return a.name == d.argument; });
        row.dtypes.emplace_back(a.name, a.isOut() && !listed ? kOutDtype : acceptedDtypes(*s, a.name).toString());
      }
    for (const ArgumentDtypes& d : s->dtypes)
      if (std::string_view(d.argument) == "result") row.dtypes.emplace_back("result", d.accepted.toString());
  }
  return row;
}

constexpr const char* kUnlisted = "not declared: the op's kernels decide";
constexpr const char* kNoKernelType = "(plugin.hpp has no C++ type for one of its types; write a boxed kernel)";

std::string dtypeText(const SchemaRow& r) {
  if (r.dtypes.empty()) return r.standard ? "no tensor arguments" : kUnlisted;
  std::string s;
  for (const auto& [arg, accepted] : r.dtypes) s += (s.empty() ? "" : "; ") + arg + ": " + accepted;
  return s;
}

void printText(std::ostream& out, const std::vector<SchemaRow>& rows) {
  for (const SchemaRow& r : rows) {
    out << r.name << "\n"
        << "  schema:        " << r.schema << "\n"
        << "  dtypes:        " << dtypeText(r) << "\n"
        << "  C++ kernel:    " << (r.kernel.empty() ? kNoKernelType : r.kernel) << "\n";
    if (!r.derived_from.empty())
      out << "  derived from:  " << r.derived_from
          << (r.derived_functional ? " (a composite calls it on a new tensor like self"
                                   : " (a composite calls it and copies the result")
          << "; a plugin implements " << r.derived_from << ", or this form's kernel above to serve it instead)\n";
    out << "  cpp_signature: " << r.cpp_signature << "\n"
        << "  derivative:    " << r.derivative_kind << (r.derivative.empty() ? "" : " (" + r.derivative + ")") << "\n";
  }
}

std::string markdownCell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return "`" + out + "`";
}

std::string markdownText(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : c == '*' ? std::string("\\*") : std::string(1, c);
  return out;
}

void printMarkdown(std::ostream& out, const std::vector<SchemaRow>& rows) {
  out << "| op | schema | accepted dtypes | C++ kernel | derivative |\n|---|---|---|---|---|\n";
  for (const SchemaRow& r : rows) {
    out << "| " << r.name << " | " << markdownCell(r.schema) << " | " << dtypeText(r) << " | "
        << (r.kernel.empty() ? std::string(kNoKernelType) : markdownCell(r.kernel))
        << (r.derived_from.empty() ? std::string()
            : r.derived_functional ? " (the functional form of " + r.derived_from + ")"
                                   : " (derived from " + r.derived_from + ")")
        << " | " << r.derivative_kind << (r.derivative.empty() ? std::string() : ": " + markdownText(r.derivative))
        << " |\n";
  }
}

void printJson(std::ostream& out, const std::vector<SchemaRow>& rows) {
  out << "{\n  \"schemas\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SchemaRow& r = rows[i];
    out << (i ? ",\n" : "\n") << "    {\"name\": " << jsonString(r.name) << ", \"schema\": " << jsonString(r.schema)
        << ", \"dtypes\": ";
    if (r.dtypes.empty()) {
      out << (r.standard ? "{}" : "null");
    } else {
      out << "{";
      for (size_t j = 0; j < r.dtypes.size(); ++j)
        out << (j ? ", " : "") << jsonString(r.dtypes[j].first) << ": " << jsonString(r.dtypes[j].second);
      out << "}";
    }
    out << ", \"kernel\": " << (r.kernel.empty() ? std::string("null") : jsonString(r.kernel))
        << ", \"cpp_signature\": " << jsonString(r.cpp_signature)
        << ", \"derived_from\": " << (r.derived_from.empty() ? std::string("null") : jsonString(r.derived_from))
        << ", \"derived_kind\": "
        << (r.derived_from.empty() ? "null"
            : r.derived_functional ? "\"functional\""
                                   : "\"out\"")
        << ", \"derivative\": {\"kind\": " << jsonString(r.derivative_kind)
        << ", \"text\": " << jsonString(r.derivative) << "}}";
  }
  out << "\n  ]\n}\n";
}

}  // namespace

int runOpsSchemas(std::ostream& out, std::ostream& err, OpsFormat format, const std::string& regex) {
  // RE2, as --ops (Note [Name patterns] in conformance/src/name_pattern.cc).
  const absl::StatusOr<conformance::NamePattern> re = conformance::NamePattern::compile("--schemas", regex);
  if (!re.ok()) {
    err << "backplane: error: " << re.status().message() << "\n";
    return 2;
  }
  std::vector<SchemaRow> rows;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators())
    if (re->matches(op.operatorName().qualifiedName())) rows.push_back(rowFor(op));
  if (rows.empty()) {
    err << "backplane: error: --schemas: no defined operator matches " << conformance::quotedPattern(regex)
        << "; run 'backplane ops' to list their names\n";
    return 2;
  }
  switch (format) {
    case OpsFormat::Text: printText(out, rows); break;
    case OpsFormat::Markdown: printMarkdown(out, rows); break;
    case OpsFormat::Json: printJson(out, rows); break;
  }
  return 0;
}

}  // namespace backplane::cli
