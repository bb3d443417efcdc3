// Declared derivatives of operators outside the standard table, and
// per-device replacements of the table's (Note [Declared derivatives]).

#include <atomic>
#include <cctype>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derivatives.h"
#include "backplane/ops/standard_ops.h"

namespace backplane {

// One argument of the backward op's call.
struct BackwardArgument {
  enum class Kind : uint8_t { Argument, Grad, Result } kind;
  size_t index;  // the forward argument's position, or the result's
};

struct BackwardCall {
  OperatorHandle op;
  std::vector<BackwardArgument> arguments;
  // Backward result i is the gradient of the forward argument named
  // outputs[i] ("" for `_`).
  std::vector<std::string> outputs;
  std::string inputs;  // the named outputs, ", "-joined (DerivativeFormula::inputs)
  std::string text;    // the declaration as written (DerivativeFormula::text)
};

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "a, b ,c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> splitNames(std::string_view s) {
  std::vector<std::string> out;
  s = trim(s);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    out.emplace_back(trim(s.substr(0, comma)));
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  }
  return out;
}

// `grad`/`gradN` or `result`/`resultN`: N, or nullopt.
std::optional<size_t> numbered(std::string_view token, std::string_view word) {
  if (!token.starts_with(word)) return std::nullopt;
  std::string_view digits = token.substr(word.size());
  if (digits.empty()) return 0;
  size_t n = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || n > 1000) return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

// The backward formula of every declaration with a call: the backward op
// called boxed with the arguments the declaration names, its results set
// as the gradients of the inputs that need one.
void callDeclaredBackward(DerivativeContext& c) {
  const BackwardCall& call = *c.derivative()->backward_call;
  const auto& forward_args = c.schema().arguments();
  Stack stack;
  stack.reserve(call.arguments.size());
  for (const BackwardArgument& a : call.arguments) {
    switch (a.kind) {
      case BackwardArgument::Kind::Argument: stack.push_back(c.argument(forward_args[a.index].name)); break;
      case BackwardArgument::Kind::Grad: stack.emplace_back(static_cast<const TensorBase&>(c.grad(a.index))); break;
      case BackwardArgument::Kind::Result: stack.emplace_back(static_cast<const TensorBase&>(c.result(a.index))); break;
    }
  }
  call.op.callBoxed(stack);
  BP_CHECK(stack.size() == call.outputs.size(), call.op.operatorName().qualifiedName(), " returned ", stack.size(),
           " values where its declaration names ", call.outputs.size());
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    if (call.outputs[i].empty() || !c.needs(call.outputs[i])) continue;
    BP_CHECK(stack[i].isTensor(), call.op.operatorName().qualifiedName(), ": result ", i,
             " is not a tensor, but the declaration makes it the gradient of '", call.outputs[i], "'");
    c.set(call.outputs[i], Tensor(stack[i].toTensor()));
  }
}

absl::StatusOr<std::shared_ptr<const OpDerivative>> parseDeclaration(const OperatorHandle& op,
                                                                     std::string_view declaration) {
  const std::string name = op.operatorName().qualifiedName();
  auto derivative = std::make_shared<OpDerivative>();
  derivative->op = name;
  const std::string_view text = trim(declaration);
  if (text == "non_differentiable") {
    derivative->kind = Differentiability::NonDifferentiable;
    derivative->note = "declared non_differentiable";
    return derivative;
  }
  if (text == "not_implemented") {
    derivative->kind = Differentiability::NotImplemented;
    derivative->note = "declared not_implemented: it has no backward yet";
    return derivative;
  }
  auto bad = [&](auto&&... why) {
    return absl::InvalidArgumentError(strCat("derivative of ", name, ": '", text, "': ", why...,
                                             ". A declaration is non_differentiable, not_implemented, or "
                                             "ns::backward_op(arguments...) -> (inputs...)"));
  };
  const size_t open = text.find('('), close = text.rfind(')'), arrow = text.find("->");
  if (open == std::string_view::npos || arrow == std::string_view::npos || close == std::string_view::npos ||
      close < open || arrow < open)
    return bad("expected a call of a backward op and the inputs its results are the gradients of");
  const size_t args_close = text.rfind(')', arrow);
  if (args_close == std::string_view::npos || args_close < open) return bad("the call's ')' is missing");
  const std::string backward_name(trim(text.substr(0, open)));
  std::optional<OperatorHandle> backward = Dispatcher::singleton().findOp(backward_name);
  if (!backward || !backward->hasSchema())
    return bad("backward op '", backward_name, "' is not defined; def it before declaring the derivative");
  const auto call = std::make_shared<BackwardCall>(BackwardCall{*backward, {}, {}, "", std::string(text)});
  const FunctionSchema& forward = op.schema();
  const FunctionSchema& back = backward->schema();

  const std::vector<std::string> tokens = splitNames(text.substr(open + 1, args_close - open - 1));
  if (tokens.size() != back.arguments().size())
    return bad(backward_name, " takes ", back.arguments().size(), " arguments but the declaration passes ",
               tokens.size());
  for (const std::string& t : tokens) {
    if (std::optional<size_t> n = numbered(t, "grad")) {
      if (*n >= forward.returns().size())
        return bad("'", t, "' names result ", *n, " but ", name, " returns ", forward.returns().size());
      call->arguments.push_back({BackwardArgument::Kind::Grad, *n});
      continue;
    }
    if (std::optional<size_t> n = numbered(t, "result")) {
      if (*n >= forward.returns().size())
        return bad("'", t, "' names result ", *n, " but ", name, " returns ", forward.returns().size());
      call->arguments.push_back({BackwardArgument::Kind::Result, *n});
      continue;
    }
    std::optional<size_t> index;
    for (size_t i = 0; i < forward.arguments().size(); ++i)
      if (forward.arguments()[i].name == t) index = i;
    if (!index) {
      std::string known;
      for (const Argument& a : forward.arguments()) known += (known.empty() ? "" : ", ") + a.name;
      return bad("'", t, "' is neither an argument of ", name, " (", known, ") nor grad, gradN, result or resultN");
    }
    call->arguments.push_back({BackwardArgument::Kind::Argument, *index});
  }

  std::string_view outs = trim(text.substr(arrow + 2));
  if (outs.starts_with('(') && outs.ends_with(')')) outs = outs.substr(1, outs.size() - 2);
  call->outputs = splitNames(outs);
  if (call->outputs.size() != back.returns().size())
    return bad(backward_name, " returns ", back.returns().size(), " values but the declaration names ",
               call->outputs.size(), " gradients");
  for (std::string& o : call->outputs) {
    if (o == "_") {
      o.clear();
      continue;
    }
    bool tensor_input = false;
    for (const Argument& a : forward.arguments())
      tensor_input |= a.name == o && a.type.base == BaseType::Tensor && !a.type.is_list && !a.isOut();
    if (!tensor_input) return bad("'", o, "' is not a tensor argument of ", name);
    call->inputs += (call->inputs.empty() ? "" : ", ") + o;
  }
  if (call->inputs.empty()) return bad("no result is the gradient of an input; declare it non_differentiable");
  derivative->kind = Differentiability::Formula;
  derivative->formulas = {{call->inputs.c_str(), call->text.c_str(), &callDeclaredBackward}};
  derivative->backward_ops = {backward->operatorName().qualifiedName()};
  derivative->backward_call = call;
  return std::shared_ptr<const OpDerivative>(std::move(derivative));
}

constexpr int kEveryDevice = -1;

struct Declared {
  uint64_t id;
  DeclaredDerivativeInfo info;
  std::shared_ptr<const OpDerivative> derivative;
};

struct Registry {
  absl::Mutex mu;
  std::vector<Declared> all ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::pair<std::string, int>, std::shared_ptr<const OpDerivative>> by_op ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::atomic<uint64_t> generation{1};
};
Registry& registry() {
  static Registry* r = new Registry();  // outlives plugins unloaded at exit
  return *r;
}

int deviceKey(std::optional<DeviceType> d) { return d ? static_cast<int>(*d) : kEveryDevice; }

}  // namespace

DerivativeRegistration& DerivativeRegistration::operator=(DerivativeRegistration&& o) noexcept {
  if (this != &o) {
    DerivativeRegistration gone(std::exchange(id_, std::exchange(o.id_, 0)));
  }
  return *this;
}

DerivativeRegistration::~DerivativeRegistration() {
  if (id_ == 0) return;
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  for (auto it = r.all.begin(); it != r.all.end(); ++it) {
    if (it->id != id_) continue;
    r.by_op.erase({it->info.op, deviceKey(it->info.device)});
    r.all.erase(it);
    r.generation.fetch_add(1, std::memory_order_release);
    return;
  }
}

absl::StatusOr<DerivativeRegistration> declareDerivative(std::string_view op_name, std::optional<DeviceType> device,
                                                         std::string_view declaration, std::string owner) {
  std::optional<OperatorHandle> op = Dispatcher::singleton().findOp(op_name);
  if (!op || !op->hasSchema())
    return absl::NotFoundError(
        strCat("derivative: operator '", op_name, "' is not defined; def it before declaring how it differentiates"));
  const std::string name = op->operatorName().qualifiedName();
  absl::StatusOr<std::shared_ptr<const OpDerivative>> parsed = parseDeclaration(*op, declaration);
  if (!parsed.ok()) return parsed.status();
  if (!device && op->operatorName().ns == kStandardNamespace)
    return absl::InvalidArgumentError(
        strCat("derivative of ", name,
               ": the standard table declares how a standard op differentiates on every device; a plugin may "
               "replace it on its own device type only (pass that device type)"));
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  auto [it, inserted] = r.by_op.try_emplace({name, deviceKey(device)}, *parsed);
  if (!inserted) {
    std::string previous;
    for (const Declared& d : r.all)
      if (d.info.op == name && deviceKey(d.info.device) == deviceKey(device)) previous = d.info.owner;
    return absl::AlreadyExistsError(strCat("derivative of ", name, device ? " on " : "",
                                           device ? deviceTypeName(*device) : std::string(), ": already declared by ",
                                           previous, "; an op has one declaration per device"));
  }
  const uint64_t id = r.next_id++;
  r.all.push_back({id, {name, device, std::string(trim(declaration)), std::move(owner)}, *parsed});
  r.generation.fetch_add(1, std::memory_order_release);
  return DerivativeRegistration(id);
}

std::shared_ptr<const OpDerivative> declaredDerivative(std::string_view op, DeviceType device) {
  Registry& r = registry();
  absl::ReaderMutexLock lock(&r.mu);
  if (r.all.empty()) return nullptr;
  const std::string name(op);
  if (auto it = r.by_op.find({name, static_cast<int>(device)}); it != r.by_op.end()) return it->second;
  if (auto it = r.by_op.find({name, kEveryDevice}); it != r.by_op.end()) return it->second;
  return nullptr;
}

uint64_t declaredDerivativesGeneration() { return registry().generation.load(std::memory_order_acquire); }

std::vector<DeclaredDerivativeInfo> declaredDerivatives() {
  Registry& r = registry();
  absl::ReaderMutexLock lock(&r.mu);
  std::vector<DeclaredDerivativeInfo> out;
  for (const Declared& d : r.all) out.push_back(d.info);
  return out;
}

}  // namespace backplane
