// The Autograd kernel (one boxed fallback for every op), the core's hooks,
// and custom functions (Note [The autograd layer]).

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "nodes.h"

namespace backplane::autograd {

namespace {

// The declaration an op without one in the standard table gets: a user's or
// a plugin's op that says nothing differentiates as not_implemented.
const OpDerivative kUndeclared{
    "", Differentiability::NotImplemented, {}, "it declares no derivative: a plugin or library op without one"};

const OpDerivative& lookupDerivative(const OperatorHandle& op) {
  if (op.operatorName().ns == kStandardNamespace) {
    std::string name = op.operatorName().name;
    if (!op.operatorName().overload.empty()) name += "." + op.operatorName().overload;
    if (const OpDerivative* d = findDerivative(name)) return *d;
  }
  return kUndeclared;
}

// What a node of a declaration keeps (Note [What a node saves]): bit i of
// `unsaved` set for an argument its formulas never read; `results`, whether
// they read the results.
struct SavePlan {
  uint64_t unsaved = 0;
  bool results = true;
};

SavePlan savePlanOf(const OpDerivative& d, const FunctionSchema& schema) {
  SavePlan plan;
  if (d.saves == nullptr) return plan;
  const auto& args = schema.arguments();
  uint64_t named = 0;
  plan.results = false;
  forEachListedName(d.saves, [&](std::string_view name) {
    if (name == "result") {
      plan.results = true;
      return;
    }
    auto it = std::find_if(args.begin(), args.end(), [&](const Argument& a) { return a.name == name; });
    BP_INTERNAL_ASSERT(it != args.end(), schema.name().qualifiedName(), ": its derivative declaration saves '", name,
                       "', which its schema ", schema.toString(), " does not have");
    const size_t i = static_cast<size_t>(it - args.begin());
    if (i < 64) named |= uint64_t{1} << i;
  });
  plan.unsaved = ~named;
  return plan;
}

// The declaration a call of `op` on device type `device` uses: one
// declared for it (Note [Declared derivatives]), else lookupDerivative's,
// with what its nodes save. Cached per thread by operator and device type
// (no lock, and no string built on the hot path); the cache is dropped when
// any declaration changes. A standard-table entry is held without
// ownership: the table lives as long as the process.
//
// The result refers into the cache (node-based: stable while other entries
// are added); the caller copies what it keeps into the node it makes before
// any op of its own runs, since a nested call may renew the cache.
struct Declared {
  std::shared_ptr<const OpDerivative> derivative;
  SavePlan plan;
};
const Declared& derivativeOf(const OperatorHandle& op, DeviceType device) {
  struct Cache {
    uint64_t generation = 0;
    absl::node_hash_map<std::pair<const OperatorEntry*, int>, Declared> map;
    // The last lookup's answer: an op called in a loop skips the map.
    std::pair<const OperatorEntry*, int> last_key{nullptr, 0};
    const Declared* last = nullptr;
  };
  thread_local Cache cache;
  const uint64_t generation = declaredDerivativesGeneration();
  const std::pair<const OperatorEntry*, int> key{&op.entry(), static_cast<int>(device)};
  if (cache.generation == generation && cache.last_key == key) [[likely]]
    return *cache.last;
  if (cache.generation != generation) {
    cache.map.clear();
    cache.generation = generation;
  }
  auto it = cache.map.find(key);
  if (it == cache.map.end()) {
    Declared d;
    d.derivative = declaredDerivative(op.operatorName().qualifiedName(), device);
    if (!d.derivative)
      d.derivative = std::shared_ptr<const OpDerivative>(std::shared_ptr<void>(), &lookupDerivative(op));
    d.plan = savePlanOf(*d.derivative, op.schema());
    it = cache.map.emplace(key, std::move(d)).first;
  }
  cache.last_key = key;
  cache.last = &it->second;
  return it->second;
}

// The device type of a call dispatched with `ks` (CPU when it has no backend key).
DeviceType callDeviceType(DispatchKeySet ks) {
  const DispatchKey backend = ks.highestBackendKey();
  return backend == DispatchKey::Undefined ? DeviceType::CPU : static_cast<DeviceType>(static_cast<int>(backend) - 1);
}

bool isFloating(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 || t == ScalarType::Float64;
}

// Calls `fn(argument index, element index, tensor)` for every tensor
// argument among the top `n` values of `stack` (list elements each).
template <typename Fn>
void forEachTensorArgument(const Stack& stack, size_t n, Fn&& fn) {
  const size_t base = stack.size() - n;
  for (size_t i = 0; i < n; ++i) {
    const IValue& v = stack[base + i];
    if (v.isTensor()) {
      fn(i, 0, v.toTensor());
    } else if (v.isTensorList()) {
      const auto& l = v.toTensorList();
      for (size_t j = 0; j < l.size(); ++j) fn(i, j, l[j]);
    } else if (v.isOptionalTensorList()) {
      const auto& l = v.toOptionalTensorList();
      for (size_t j = 0; j < l.size(); ++j)
        if (l[j]) fn(i, j, *l[j]);
    }
  }
}

// The call's own arguments, unchanged, to the kernel below the key.
void redispatchBelow(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
  op.redispatchBoxedSameArguments(ks & DispatchKeySet::below(DispatchKey::Autograd), *stack);
}

std::string firstRequiringGrad(const FunctionSchema& schema, const Stack& stack, size_t n) {
  std::string name;
  forEachTensorArgument(stack, n, [&](size_t i, size_t, const TensorBase& t) {
    if (name.empty() && t.defined() && t.requires_grad()) name = schema.arguments()[i].name;
  });
  return name;
}

// One tensor input of a recorded call (argument i, element j): the edge its
// gradient takes, where it came from and its metadata; bit i of `needs` set
// when a gradient flows to it.
void addInput(Node::Edges& edges, FormulaNode::EdgeSlots& slots, FormulaNode::InputMetas& metas, uint64_t& needs,
              size_t i, size_t j, const TensorBase& t) {
  Edge e = t.defined() ? gradientEdge(t) : Edge{};
  if (e.valid() && i < 64) needs |= uint64_t{1} << i;
  edges.push_back(std::move(e));
  slots.emplace_back(i, j);
  if (t.defined())
    metas.push_back(TensorMeta::of(t));
  else
    metas.emplace_back();
}

// Tensors are saved as aliases without autograd state; the written
// argument (if any) as its value before the write. A tensor the formulas
// never read was not kept at all (an empty IValue in f.arguments_).
void saveTensorArguments(FormulaNode& f, std::optional<size_t> written, const TensorBase& written_before_tensor) {
  const TensorImpl* written_before = written_before_tensor.unsafeGetImpl();
  Tensor written_clone;
  for (size_t i = 0; i < f.arguments_.size(); ++i) {
    IValue& v = f.arguments_[i];
    if (!v.isTensor() && !v.isTensorList()) continue;
    if (v.isTensor() && v.toTensor().defined()) {
      const TensorBase& t = v.toTensor();
      SavedTensor s;
      if (written && (*written == i || t.unsafeGetImpl() == written_before)) {
        // The written tensor's value from before the write (also when
        // another argument is the same tensor: x.mul_(x)).
        if (!written_clone.defined()) {
          NoGradGuard no_grad;
          written_clone = Tensor(written_before_tensor).clone();
        }
        s.save(written_clone);
      } else {
        s.save(t, /*is_input=*/true);
      }
      v = IValue(static_cast<const TensorBase&>(s.data));
      f.saved_tensors_.emplace_back(i, 0, std::move(s));
    } else if (v.isTensorList()) {
      std::vector<TensorBase> l = v.toTensorList();
      for (size_t j = 0; j < l.size(); ++j) {
        SavedTensor s;
        s.save(l[j], /*is_input=*/true);
        l[j] = s.data;
        f.saved_tensors_.emplace_back(i, j, std::move(s));
      }
      v = IValue(std::move(l));
    }
  }
}

// The impls of a recorded call's tensor arguments: a result that is one of
// them keeps its own history (recordResult).
using InputImpls = absl::InlinedVector<const TensorImpl*, 4>;

// Result r (defined) of num_results of a recorded call: saved if the
// formulas read results, and made an output of `node` if it is
// differentiable. The last result takes `node`'s reference.
void recordResult(std::shared_ptr<Node>& node, FormulaNode* formula, const OpDerivative& d, size_t r,
                  size_t num_results, const TensorBase& t, const InputImpls& input_impls,
                  const TensorImpl* written_impl) {
  if (formula && formula->saves_results_) {
    SavedTensor s;
    s.save(t);
    formula->results_.push_back(s.data);
    formula->saved_results_.push_back(std::move(s));
  }
  if (((d.nondifferentiable_results >> r) & 1) || !isFloating(t.dtype())) {
    node->result_meta[r] = TensorMeta::of(t);
    return;
  }
  // A result that is an input itself (to() without a copy) keeps its own
  // history, unless the op wrote it (an in-place op's self).
  const bool is_written = written_impl != nullptr && t.unsafeGetImpl() == written_impl;
  if (!is_written && std::find(input_impls.begin(), input_impls.end(), t.unsafeGetImpl()) != input_impls.end()) {
    node->result_meta[r] = TensorMeta::of(t);
    return;
  }
  // Sets result_meta[r]; the last result takes this call's reference.
  if (r + 1 == num_results)
    setHistory(t, std::move(node), static_cast<uint32_t>(r));
  else
    setHistory(t, node, static_cast<uint32_t>(r));
}

void autogradKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  const Declared& declared = derivativeOf(op, callDeviceType(ks));
  const OpDerivative& d = *declared.derivative;
  const FunctionSchema& schema = op.schema();
  // Built only where needed: errors, the composite's lookup, a not_implemented node.
  auto qualified = [&op] { return op.operatorName().qualifiedName(); };
  const size_t n = schema.arguments().size();
  const size_t base = stack->size() - n;

  switch (d.kind) {
    case Differentiability::NonDifferentiable: redispatchBelow(op, ks, stack); return;
    case Differentiability::Composite: {
      const StandardOp* s = findStandardOp(qualified());
      BP_CHECK(s != nullptr && s->composite.isValid(), qualified(),
               ": declared as differentiated through its composite kernel, but it has none");
      s->composite.callBoxed(op, ks & DispatchKeySet::below(DispatchKey::Autograd), stack);
      return;
    }
    case Differentiability::OutVariant: {
      const std::string arg = firstRequiringGrad(schema, *stack, n);
      BP_THROW(kInvalidArgument, qualified(), ": an out= form does not record gradients, but argument '", arg,
               "' requires grad. Call the functional form, or compute it under no_grad (or on detach()ed inputs)");
    }
    default: break;
  }

  // Formula, Inplace, NotImplemented: the edges to the inputs' nodes. A
  // formula's node is made first and filled in place (its vectors are
  // inline for one or two tensor arguments: no allocation but the node's).
  std::shared_ptr<FormulaNode> formula_node;
  if (d.kind != Differentiability::NotImplemented)
    formula_node = std::make_shared<FormulaNode>(op, declared.derivative);
  Node::Edges edges_here;
  FormulaNode::EdgeSlots slots_here;
  FormulaNode::InputMetas metas_here;
  Node::Edges& edges = formula_node ? formula_node->next_edges : edges_here;
  FormulaNode::EdgeSlots& slots = formula_node ? formula_node->edge_slots_ : slots_here;
  FormulaNode::InputMetas& metas = formula_node ? formula_node->input_meta_ : metas_here;
  uint64_t needs = 0;
  // The arguments the op writes: the dispatcher's mask (Note [Version counters]).
  const uint64_t written_mask = op.entry().writtenArguments();
  forEachTensorArgument(*stack, n, [&](size_t i, size_t j, const TensorBase& t) {
    if (i < 64 && ((written_mask >> i) & 1) && d.kind != Differentiability::Inplace &&
        d.kind != Differentiability::Formula)
      return;
    addInput(edges, slots, metas, needs, i, j, t);
  });

  // Which argument the op writes (self of an in-place op; the last, if several), if any.
  std::optional<size_t> written;
  if (written_mask) written = static_cast<size_t>(63 - __builtin_clzll(written_mask));
  if (written) {
    const TensorBase& self = (*stack)[base + *written].toTensor();
    if (self.requires_grad()) {
      AutogradMeta* m = findMeta(self);
      BP_CHECK(!(m && !m->grad_fn), qualified(), ": argument '", schema.arguments()[*written].name,
               "' is a leaf that requires grad, and an in-place op on it would lose the gradient's history. Write it "
               "under no_grad (as an optimizer step does), or compute out of place");
      BP_CHECK(!(m && m->is_view), qualified(), ": argument '", schema.arguments()[*written].name,
               "' is a view of a tensor that requires grad; an in-place op on such a view is not supported. "
               "clone() the view and write the clone, or write the base tensor");
    }
  }
  if (needs == 0) {
    redispatchBelow(op, ks, stack);
    return;
  }

  std::shared_ptr<Node> node;
  FormulaNode* formula = formula_node.get();
  if (!formula_node) {
    std::vector<std::pair<std::string, Device>> needed;
    for (size_t e = 0; e < edges.size(); ++e)
      if (edges[e].valid()) needed.emplace_back(schema.arguments()[slots[e].first].name, metas[e].device);
    node = std::make_shared<NotImplementedNode>(qualified(), d.note, std::move(needed));
    node->next_edges = std::move(edges);
  } else {
    FormulaNode* f = formula;
    node = std::move(formula_node);
    const uint64_t unsaved = declared.plan.unsaved;
    for (size_t i = 0; i < n; ++i) {
      const IValue& v = (*stack)[base + i];
      if (i < 64 && ((unsaved >> i) & 1) && (v.isTensor() || v.isTensorList())) {
        f->arguments_.emplace_back();
        f->unsaved_mask_ |= uint64_t{1} << i;
      } else {
        f->arguments_.push_back(v);
      }
    }
    saveTensorArguments(*f, written, written ? (*stack)[base + *written].toTensor() : TensorBase());
    f->saves_results_ = declared.plan.results;
    f->needs_mask_ = needs;
  }
  InputImpls input_impls;
  forEachTensorArgument(*stack, n,
                        [&](size_t, size_t, const TensorBase& t) { input_impls.push_back(t.unsafeGetImpl()); });
  const TensorImpl* written_impl = written ? (*stack)[base + *written].toTensor().unsafeGetImpl() : nullptr;

  redispatchBelow(op, ks, stack);

  // The results: each differentiable one becomes an output of the node.
  const size_t num_results = schema.returns().size();
  const size_t rbase = stack->size() - num_results;
  node->result_meta.resize(num_results);
  for (size_t r = 0; r < num_results; ++r) {
    const IValue& v = (*stack)[rbase + r];
    if (v.isTensor() && v.toTensor().defined())
      recordResult(node, formula, d, r, num_results, v.toTensor(), input_impls, written_impl);
  }
  if (formula && formula->saves_results_) {
    // Results saved after the call: results_ indexes by return position.
    while (formula->results_.size() < num_results) formula->results_.emplace_back();
  }
}

// Note [Typed Autograd kernels]
// A typed call of an op (TypedOperatorHandle::call, what ops.h and the
// samples use) on a tensor that requires grad reaches the Autograd key.
// The boxed fallback above would box the call's arguments into a scratch
// stack, and the kernel below the key would unbox them again: a tiny add's
// recording spent about a tenth of its time on that round trip (reference
// counts, the stack, variant dispatch). So each standard op whose canonical
// signature is one of kTypedAutogradSignatures below, and which writes no
// argument, gets an Autograd kernel of its own with an unboxed entry,
// TypedAutograd<Sig>::call. It records the same node as the fallback (the
// helpers above are shared: addInput, saveTensorArguments, recordResult)
// from the typed arguments, and calls the kernel below the key typed. Its
// boxed entry is the fallback itself, so a boxed call (Python, a profiled
// call, conformance) records exactly as before; an op whose declaration on
// the call's device is not a plain formula (composite, non-differentiable,
// not_implemented, a plugin's declared derivative of another kind) is
// boxed and handed to the fallback from the typed entry too. Ops outside
// the list, plugins' ops and in-place and out= forms keep the fallback.
// A kernel registered at Autograd for a standard op later than these (a
// user's) wins, as the newest registration does at every key; a fallback
// registered at Autograd later does not reach these ops (an op's own kernel
// outranks a fallback), so recording is switched off with no_grad, not
// with a fallthrough.

// The fallback as a kernel (boxed only), for a typed entry that hands it a call.
const KernelFunction& fallbackKernel() {
  static const KernelFunction* kernel = new KernelFunction(KernelFunction::makeFromBoxedFunction(&autogradKernel));
  return *kernel;
}

// The typed entry's state: the op it serves (an unboxed entry is not handed one).
struct TypedAutogradState final : OperatorKernel {
  explicit TypedAutogradState(OperatorHandle o) : op(std::move(o)) {}
  OperatorHandle op;
};

template <typename Sig>
struct TypedAutograd;
template <typename... Args>
struct TypedAutograd<Tensor(Args...)> {
  static std::string signature() { return backplane::detail::cppSignatureString<Tensor, Args...>(); }

  static Tensor call(OperatorKernel* functor, DispatchKeySet ks, Args... args) {
    const OperatorHandle& op = static_cast<const TypedAutogradState*>(functor)->op;
    const Declared& declared = derivativeOf(op, callDeviceType(ks));
    if (declared.derivative->kind != Differentiability::Formula) [[unlikely]]
      return boxed(op, ks, args...);
    const OpDerivative& d = *declared.derivative;
    auto formula_node = std::make_shared<FormulaNode>(op, declared.derivative);
    FormulaNode& f = *formula_node;
    uint64_t needs = 0;
    InputImpls input_impls;
    [&]<size_t... I>(std::index_sequence<I...>) {
      (record(f, needs, declared.plan.unsaved, input_impls, I, args), ...);
    }
    (std::index_sequence_for<Args...>());
    if (needs == 0) return below(op, ks, args...);
    saveTensorArguments(f, std::nullopt, TensorBase());
    f.saves_results_ = declared.plan.results;
    f.needs_mask_ = needs;
    std::shared_ptr<Node> node = std::move(formula_node);
    Tensor result = below(op, ks, args...);
    node->result_meta.resize(1);
    if (result.defined()) recordResult(node, &f, d, 0, 1, result, input_impls, nullptr);
    // Results saved after the call: results_ indexes by return position.
    if (f.saves_results_ && f.results_.empty()) f.results_.emplace_back();
    return result;
  }

  // What the boxed fallback makes of a tensor argument i (an optional one
  // only when it holds a defined tensor), or what boxing makes of any other.
  template <typename T>
  static void record(FormulaNode& f, uint64_t& needs, uint64_t unsaved, InputImpls& input_impls, size_t i,
                     const T& arg) {
    if constexpr (std::is_same_v<T, Tensor>) {
      recordTensor(f, needs, unsaved, input_impls, i, arg);
    } else if constexpr (std::is_same_v<T, std::optional<Tensor>>) {
      if (arg && arg->defined())
        recordTensor(f, needs, unsaved, input_impls, i, *arg);
      else
        f.arguments_.emplace_back();
    } else {
      // A tensor list would need an edge per element (forEachTensorArgument):
      // no listed signature has one.
      static_assert(!std::is_same_v<T, ArrayRef<Tensor>> && !std::is_same_v<T, ArrayRef<std::optional<Tensor>>>,
                    "TypedAutograd records Tensor and Tensor? arguments only; leave list signatures to the fallback");
      backplane::detail::ArgTraits<T>::push(f.arguments_, arg);
    }
  }
  static void recordTensor(FormulaNode& f, uint64_t& needs, uint64_t unsaved, InputImpls& input_impls, size_t i,
                           const Tensor& t) {
    addInput(f.next_edges, f.edge_slots_, f.input_meta_, needs, i, 0, t);
    input_impls.push_back(t.unsafeGetImpl());
    if (i < 64 && ((unsaved >> i) & 1)) {
      f.arguments_.emplace_back();
      f.unsaved_mask_ |= uint64_t{1} << i;
    } else {
      f.arguments_.emplace_back(static_cast<const TensorBase&>(t));
    }
  }

  // The kernel below the key, typed, with the call's own arguments (their
  // dtypes were checked when the call entered the op).
  static Tensor below(const OperatorHandle& op, DispatchKeySet ks, Args... args) {
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
    const DispatchKeySet rest = ks & DispatchKeySet::below(DispatchKey::Autograd);
    const OperatorEntry& entry = op.entry();
    return entry.servingFrom(&entry.slotFor(rest), args...).kernel.template call<Tensor, Args...>(op, rest, args...);
  }

  // The fallback's way: KernelFunction::call boxes the arguments for it.
  static Tensor boxed(const OperatorHandle& op, DispatchKeySet ks, Args... args) {
    return fallbackKernel().template call<Tensor, Args...>(op, ks, args...);
  }
};

// The signatures (Note [Canonical C++ signatures]) whose ops get a typed
// Autograd kernel: those of the standard ops a model's forward calls most
// (elementwise, reductions, softmax, the products, layer_norm, gelu,
// dropout, embedding, indexing). A test holds that each serves some
// standard op.
namespace typed_autograd_signatures {
using T = const Tensor&;
using OT = const std::optional<Tensor>&;
using S = const Scalar&;
template <typename... Sigs>
struct List {};
using All = List<
    Tensor(T), Tensor(T, T), Tensor(T, S), Tensor(T, T, S), Tensor(T, S, S), Tensor(T, T, T), Tensor(T, IntArrayRef),
    Tensor(T, int64_t), Tensor(T, std::optional<ScalarType>), Tensor(T, int64_t, std::optional<ScalarType>),
    Tensor(T, std::optional<IntArrayRef>, bool, std::optional<ScalarType>), Tensor(T, std::string_view),
    Tensor(T, T, OT), Tensor(T, T, T, S, S), Tensor(T, T, T, S, S, bool), Tensor(T, IntArrayRef, OT, OT, double, bool),
    Tensor(T, double, bool), Tensor(T, T, int64_t, bool, bool), Tensor(T, int64_t, T), Tensor(T, int64_t, T, bool)>;
}  // namespace typed_autograd_signatures

// Signature string -> the unboxed entry of its TypedAutograd.
const absl::flat_hash_map<std::string, void*>& typedAutogradEntries() {
  static const auto* table = []<typename... Sigs>(typed_autograd_signatures::List<Sigs...>) {
    auto* t = new absl::flat_hash_map<std::string, void*>();
    (t->emplace(TypedAutograd<Sigs>::signature(), reinterpret_cast<void*>(&TypedAutograd<Sigs>::call)), ...);
    return t;
  }(typed_autograd_signatures::All());
  return *table;
}

// --- The hooks the core calls (Note [Autograd in the core]).
class Hooks final : public AutogradHooks {
 public:
  void recordView(const TensorBase& base, TensorBase& view, const char* name, ViewReplay replay) const override {
    if (!isGradEnabled()) {
      return;  // a view made under no_grad does not require grad
    }
    auto node = std::make_shared<ViewNode>(name, base, std::move(replay));
    node->next_edges.push_back(gradientEdge(base));
    setHistory(view, std::move(node), 0);
    metaOf(view).is_view = true;
  }
  void recordCopy(const TensorBase& source, TensorBase& copy) const override {
    if (!isGradEnabled()) return;
    auto node = std::make_shared<CopyNode>();
    node->next_edges.push_back(gradientEdge(source));
    setHistory(copy, std::move(node), 0);
  }
  void setRequiresGrad(const TensorBase& t, bool requires_grad) const override {
    BP_CHECK(t.defined(), "requires_grad_: the tensor is undefined");
    AutogradMeta* m = findMeta(t);
    BP_CHECK(!(m && m->grad_fn), "requires_grad_: ", t.str(), " was made by ", m ? m->grad_fn->name() : "",
             "; only a leaf's requires_grad can change. Use detach() for a tensor that does not require grad, or "
             "detach().requires_grad_() for a new leaf");
    BP_CHECK(!requires_grad || isFloating(t.dtype()),
             "requires_grad_: only tensors of a floating dtype can require "
             "gradients, but this one is ",
             scalarTypeName(t.dtype()), "; convert it with to(float32) first");
    metaOf(t);
    t.unsafeGetImpl()->setRequiresGradBit(requires_grad);
  }
  TensorBase grad(const TensorBase& t) const override {
    AutogradMeta* m = findMeta(t);
    return m && m->grad ? *m->grad : TensorBase();
  }
  void setGrad(const TensorBase& t, const TensorBase& g) const override {
    if (g.defined()) {
      BP_CHECK(g.sizes() == t.sizes() && g.dtype() == t.dtype() && g.device() == t.device(), "set_grad: the gradient ",
               g.str(), " must have the tensor's sizes, dtype and device (", t.str(), ")");
    }
    metaOf(t).gradSlot() = g;
  }
  bool isLeaf(const TensorBase& t) const override {
    AutogradMeta* m = findMeta(t);
    return !(m && m->grad_fn);
  }
  std::string gradFnName(const TensorBase& t) const override {
    AutogradMeta* m = findMeta(t);
    return m && m->grad_fn ? m->grad_fn->name() : std::string();
  }
  TensorBase detach(const TensorBase& t) const override { return dataAlias(t); }
  void retainGrad(const TensorBase& t) const override {
    BP_CHECK(t.requires_grad(), "retain_grad: ", t.str(), " does not require grad, so it never gets a gradient");
    AutogradMeta& m = metaOf(t);
    if (!m.grad_fn || m.retains_grad) return;  // a leaf keeps its gradient anyway
    m.retains_grad = true;
    m.gradSlot();
    m.grad_fn->retained.emplace_back(m.output_nr, m.grad);
  }
  void backward(const TensorBase& t, const TensorBase& gradient, bool retain_graph, bool create_graph) const override {
    autograd::backward({Tensor(t)}, {Tensor(gradient)}, retain_graph || create_graph, create_graph);
  }
};

const Hooks kHooks;

// Registered when libbackplane.so loads: the fallback needs no op to exist,
// so the order of static initializers does not matter.
struct Registration {
  Registration() {
    setAutogradHooks(&kHooks);
    Dispatcher& d = Dispatcher::singleton();
    handle = valueOrThrow(d.registerFallback(DispatchKey::Autograd, fallbackKernel(), "autograd"));
    // Note [Typed Autograd kernels]: by name, for each op whether or not the
    // standard table has been defined yet (registerImplWhenDefined). A
    // defined op's schema is read from the dispatcher (libbackplane's link
    // order defines the table first); only an op not defined yet has its
    // schema text parsed here.
    const auto& entries = typedAutogradEntries();
    for (const StandardOp& op : standardOperators()) {
      const std::string_view text = op.schema;
      const std::string name = strCat(kStandardNamespace, "::", text.substr(0, text.find('(')));
      OperatorHandle handle = valueOrThrow(d.findOrAddOp(name));
      const FunctionSchema* schema = handle.entry().schema();
      std::optional<FunctionSchema> parsed;
      if (schema == nullptr) {
        absl::StatusOr<FunctionSchema> p = FunctionSchema::parse(strCat(kStandardNamespace, "::", text));
        BP_INTERNAL_ASSERT(p.ok(), "autograd: the standard table's schema ", text,
                           " does not parse: ", p.status().message());
        schema = &parsed.emplace(*std::move(p));
      }
      const auto& args = schema->arguments();
      if (std::any_of(args.begin(), args.end(), [](const Argument& a) { return a.alias && a.alias->is_write; }))
        continue;
      std::string signature = cppSignatureForSchema(*schema);
      auto it = entries.find(signature);
      if (it == entries.end()) continue;
      auto state = std::make_shared<TypedAutogradState>(std::move(handle));
      typed_handles.push_back(valueOrThrow(d.registerImplWhenDefined(
          name, DispatchKey::Autograd,
          KernelFunction::makeFromParts(std::move(state), &autogradKernel, it->second, std::move(signature)),
          "autograd (typed)")));
    }
  }
  RegistrationHandle handle;
  std::vector<RegistrationHandle> typed_handles;
};
}  // namespace

namespace detail {
std::vector<std::string> typedAutogradSignatures() {
  std::vector<std::string> out;
  for (const auto& [signature, entry] : typedAutogradEntries()) out.push_back(signature);
  std::sort(out.begin(), out.end());
  return out;
}

// The Autograd fallback's registration, never destroyed; a global outside
// any unnamed namespace, so leak checkers see it reachable.
const void* g_autograd_registration = new Registration();
}  // namespace detail

// --- Hooks API.
uint64_t registerHook(const Tensor& t, TensorHook hook) {
  BP_CHECK(t.requires_grad(), "registerHook: ", t.str(), " does not require grad, so no gradient flows into it");
  AutogradMeta& m = metaOf(t);
  const uint64_t id = nextHookId();
  if (m.grad_fn)
    m.grad_fn->pre_hooks.push_back({m.output_nr, {id, std::move(hook)}});
  else
    m.hooks.emplace_back(id, std::move(hook));
  return id;
}

uint64_t registerPostAccumulateGradHook(const Tensor& t, PostAccumulateGradHook hook) {
  BP_CHECK(t.requires_grad() && t.is_leaf(), "registerPostAccumulateGradHook: ", t.str(),
           " is not a leaf that requires grad; only leaves accumulate gradients");
  const uint64_t id = nextHookId();
  metaOf(t).post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

bool removeHook(const Tensor& t, uint64_t id) {
  AutogradMeta* m = findMeta(t);
  if (!m) return false;
  auto erase = [id](auto& v) {
    auto it = std::find_if(v.begin(), v.end(), [id](const auto& p) { return p.first == id; });
    if (it == v.end()) return false;
    v.erase(it);
    return true;
  };
  if (erase(m->hooks) || erase(m->post_accumulate_hooks)) return true;
  if (m->grad_fn) {
    auto& v = m->grad_fn->pre_hooks;
    auto it = std::find_if(v.begin(), v.end(), [id](const auto& p) { return p.second.first == id; });
    if (it != v.end()) {
      v.erase(it);
      return true;
    }
  }
  return false;
}

// --- Custom functions.
void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  saved_.clear();
  saved_versions_.clear();
  for (const Tensor& t : tensors) {
    saved_.push_back(dataAlias(t));
    saved_versions_.push_back(t.defined() ? t._version() : 0);
  }
}

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  BP_CHECK(!released_, name_, ": its saved tensors were freed by an earlier backward; pass retain_graph=true to it");
  for (size_t i = 0; i < saved_.size(); ++i) {
    if (!saved_[i].defined()) continue;
    BP_CHECK(saved_[i]._version() == saved_versions_[i], name_, ": saved tensor ", i, " (", saved_[i].str(),
             ") was modified by an in-place op after forward saved it (version ", saved_[i]._version(), ", saved at ",
             saved_versions_[i], "); clone() it before writing it");
  }
  return saved_;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& results) {
  for (const Tensor& t : results) non_differentiable_.push_back(t.unsafeGetImpl());
}

struct CustomFunctionAccess {
  static std::vector<const TensorImpl*>& nonDifferentiable(AutogradContext& c) { return c.non_differentiable_; }
  static void release(AutogradContext& c) {
    c.saved_.clear();
    c.released_ = true;
  }
  static void setName(AutogradContext& c, std::string n) { c.name_ = std::move(n); }
};

namespace {
class CustomNode final : public Node {
 public:
  CustomNode(std::string name, std::shared_ptr<AutogradContext> ctx, detail::CustomBackward fn,
             std::vector<TensorMeta> inputs)
      : Node(std::move(name)), ctx_(std::move(ctx)), fn_(std::move(fn)), inputs_(std::move(inputs)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>&) override {
    for (size_t i = 0; i < result_meta.size(); ++i) {
      if (i >= grads.size()) grads.emplace_back();
      if (!grads[i].defined() && !result_meta[i].sizes.empty()) grads[i] = result_meta[i].zeros();
      if (!grads[i].defined()) grads[i] = result_meta[i].zeros();
    }
    std::vector<Tensor> out = fn_(*ctx_, std::move(grads));
    BP_CHECK(out.size() == next_edges.size(), name(), ": backward returned ", out.size(),
             " gradients, but forward took ", next_edges.size(),
             " arguments; return one per forward argument (undefined for those without)");
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out[i].defined() || !next_edges[i].valid()) continue;
      if (out[i].sizes() != IntArrayRef(inputs_[i].sizes)) out[i] = sumToSize(out[i], inputs_[i].sizes);
      if (out[i].dtype() != inputs_[i].dtype) out[i] = out[i].to(inputs_[i].dtype);
    }
    return out;
  }
  void release() override { CustomFunctionAccess::release(*ctx_); }

 private:
  std::shared_ptr<AutogradContext> ctx_;
  detail::CustomBackward fn_;
  std::vector<TensorMeta> inputs_;
};
}  // namespace

namespace detail {
bool anyRequiresGrad(const std::vector<Tensor>& inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

void recordCustomFunction(const std::string& name, std::shared_ptr<AutogradContext> ctx,
                          const std::vector<Tensor>& inputs, std::vector<Tensor>& results, CustomBackward backward) {
  CustomFunctionAccess::setName(*ctx, name);
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back(t.defined() ? TensorMeta::of(t) : TensorMeta{});
  auto node = std::make_shared<CustomNode>(name + "Backward", ctx, std::move(backward), std::move(metas));
  for (const Tensor& t : inputs) node->next_edges.push_back(t.defined() ? gradientEdge(t) : Edge{});
  const auto& nondiff = CustomFunctionAccess::nonDifferentiable(*ctx);
  node->result_meta.resize(results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    Tensor& t = results[r];
    if (!t.defined()) continue;
    node->result_meta[r] = TensorMeta::of(t);
    if (std::find(nondiff.begin(), nondiff.end(), t.unsafeGetImpl()) != nondiff.end()) continue;
    if (!isFloating(t.dtype())) continue;
    // A result that is an input (or shares its TensorImpl) gets a fresh
    // handle, so the input keeps its own history.
    for (const Tensor& in : inputs)
      if (in.defined() && in.unsafeGetImpl() == t.unsafeGetImpl()) t = dataAlias(t);
    setHistory(t, node, static_cast<uint32_t>(r));
  }
}
}  // namespace detail

}  // namespace backplane::autograd
