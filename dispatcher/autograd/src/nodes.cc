// The nodes the Autograd kernel, the view hook and custom functions record,
// and the per-tensor state (Note [The autograd layer]).

#include "nodes.h"

#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"

namespace backplane::autograd {

// ------------------------------------------------------------ tensor state

AutogradMeta* findMeta(const TensorBase& t) {
  const TensorImpl* impl = t.unsafeGetImpl();
  return impl ? static_cast<AutogradMeta*>(impl->autogradMeta()) : nullptr;
}

AutogradMeta& metaOf(const TensorBase& t) {
  TensorImpl* impl = t.unsafeGetImpl();
  BP_CHECK(impl != nullptr, "autograd: the tensor is undefined");
  if (impl->autogradMeta() == nullptr) impl->setAutogradMeta(std::make_unique<AutogradMeta>(), impl->requiresGrad());
  return *static_cast<AutogradMeta*>(impl->autogradMeta());
}

// Note [Leaf accumulators]
// A leaf's AccumulateGrad lives as long as the leaf: its AutogradMeta owns
// it, so each forward call on the leaf links the same node instead of
// making one (two allocations and a free per leaf per call, a fifth of a
// tiny add's recording). The accumulator points back at the leaf without
// owning it, which would be a cycle; the leaf's AutogradMeta tells it when
// the leaf is destroyed, and apply() takes a reference to the leaf only
// while its count is above zero (IntrusivePtr::tryLock, serialized with
// that notice by a mutex). A graph therefore does not keep a leaf alive, as
// PyTorch's does: the gradient of a leaf that no handle reaches any more is
// dropped, since nothing could read it (its post-accumulate hooks lived in
// its state and are gone with it).
AutogradMeta::~AutogradMeta() {
  if (grad_accumulator) static_cast<AccumulateGrad*>(grad_accumulator.get())->leafDestroyed();
}

Edge gradientEdge(const TensorBase& t) {
  AutogradMeta* m = findMeta(t);
  if (m == nullptr || !t.requires_grad()) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->grad_accumulator) m->grad_accumulator = std::make_shared<AccumulateGrad>(t.unsafeGetImpl());
  return {m->grad_accumulator, 0};
}

void setHistory(const TensorBase& result, std::shared_ptr<Node> node, uint32_t output_nr) {
  AutogradMeta& m = metaOf(result);
  Node& n = *node;
  m.grad_fn = std::move(node);
  m.output_nr = output_nr;
  result.unsafeGetImpl()->setRequiresGradBit(true);
  if (n.result_meta.size() <= output_nr) n.result_meta.resize(output_nr + 1);
  n.result_meta[output_nr] = TensorMeta::of(result);
}

Tensor dataAlias(const TensorBase& t) {
  if (!t.defined()) return Tensor();
  return Tensor(
      TensorBase(IntrusivePtr<TensorImpl>::make(t.storage(), t.storage_offset(), t.sizes(), t.strides(), t.dtype())));
}

// --------------------------------------------------------------- nodes

void AccumulateGrad::leafDestroyed() {
  std::lock_guard<std::mutex> lock(mu_);
  leaf_ = nullptr;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads, const std::shared_ptr<Node>&) {
  Tensor g = grads.empty() ? Tensor() : grads[0];
  if (!g.defined()) return {};
  IntrusivePtr<TensorImpl> alive;
  {
    std::lock_guard<std::mutex> lock(mu_);
    alive = IntrusivePtr<TensorImpl>::tryLock(leaf_);
  }
  if (!alive) return {};  // the leaf is gone: nothing can read its gradient
  const Tensor leaf{TensorBase(std::move(alive))};
  AutogradMeta& m = metaOf(leaf);
  for (auto& [id, hook] : m.hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  Tensor& slot = m.gradSlot();
  if (!slot.defined()) {
    // Steal the gradient when nothing else holds its storage; otherwise a
    // later in-place update of grad() would write another tensor too.
    const bool owned = g.use_count() == 1 && g.storage().useCount() == 1 && g.is_contiguous();
    slot = isGradEnabled() ? g : (owned ? g.detach() : g.detach().clone());
  } else if (!isGradEnabled() && slot.use_count() == 1 && slot.storage().useCount() == 1 && g.dtype() == slot.dtype()) {
    // Nothing but the leaf holds its gradient: add in place, as PyTorch
    // does, instead of a new tensor of the parameter's size per backward.
    slot.add_(g);
  } else {
    slot = isGradEnabled() ? slot + g : (slot.detach() + g.detach());
  }
  for (auto& [id, hook] : m.post_accumulate_hooks) hook(leaf);
  return {};
}

void SavedTensor::save(const TensorBase& t, bool is_input) {
  if (!t.defined()) return;
  data = is_input ? Tensor(t) : dataAlias(t);
  version = t._version();
}

void SavedTensor::check(const std::string& op, const std::string& what) const {
  if (!data.defined()) return;
  const uint64_t now = data._version();
  if (now == version) return;
  BP_THROW(kFailedPrecondition, op, ": one of the tensors its gradient needs (", what, ", ", data.str(),
           ") was modified by an in-place op after the forward saved it: it is at version ", now, ", it was saved at ",
           version,
           ". Find the in-place op that wrote it (add_, mul_, copy_, an out= argument, ...) and use its "
           "out-of-place form, or clone() the tensor before writing it");
}

namespace {
std::string argumentText(const FunctionSchema& schema, size_t index) {
  return strCat("argument '", schema.arguments()[index].name, "'");
}
}  // namespace

FormulaNode::FormulaNode(const OperatorHandle& op, std::shared_ptr<const OpDerivative> derivative)
    : op_(op), derivative_(std::move(derivative)) {}

std::string FormulaNode::name() const { return strCat(op_.operatorName().name, "Backward"); }

void FormulaNode::checkArgument(size_t index) const {
  BP_INTERNAL_ASSERT(index >= 64 || !((unsaved_mask_ >> index) & 1), name(), ": its derivative formula reads ",
                     argumentText(op_.schema(), index), ", which its declaration's saves (\"",
                     derivative_->saves ? derivative_->saves : "",
                     "\") leaves out; add it there (Note [What a node saves])");
  for (const auto& [i, j, saved] : saved_tensors_)
    if (i == index) saved.check(op_.operatorName().qualifiedName(), argumentText(op_.schema(), index));
}
void FormulaNode::checkResult(size_t index) const {
  BP_INTERNAL_ASSERT(saves_results_, name(), ": its derivative formula reads result ", index,
                     ", which its declaration's saves (\"", derivative_->saves ? derivative_->saves : "",
                     "\") leaves out; add \"result\" there (Note [What a node saves])");
  if (index < saved_results_.size())
    saved_results_[index].check(op_.operatorName().qualifiedName(), strCat("result ", index));
}

void FormulaNode::release() {
  arguments_.clear();
  saved_tensors_.clear();
  results_.clear();
  saved_results_.clear();
  released_ = true;
}

std::vector<Tensor> FormulaNode::apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) {
  const std::string& qualified = op_.operatorName().qualifiedName();
  BP_CHECK(!released_, qualified,
           ": backward ran through this part of the graph a second time, but the first backward freed what it "
           "saved; pass retain_graph=true to the first backward() (or grad()) to run it again");
  const FunctionSchema& schema = op_.schema();
  for (size_t i = 0; i < result_meta.size(); ++i) {
    if (i >= grads.size()) grads.emplace_back();
    if (!grads[i].defined() && !((derivative_->nondifferentiable_results >> i) & 1)) grads[i] = result_meta[i].zeros();
  }
  // create_graph: the results a formula reads get this node as history, so
  // that the backward's own graph reaches through them.
  std::vector<Tensor> results = results_;
  if (isGradEnabled()) {
    for (size_t r = 0; r < results.size(); ++r) {
      if (!results[r].defined() || r >= result_meta.size() || !isFloatingType(results[r].dtype()) ||
          ((derivative_->nondifferentiable_results >> r) & 1))
        continue;
      results[r] = dataAlias(results[r]);
      AutogradMeta& m = metaOf(results[r]);
      m.grad_fn = self;
      m.output_nr = static_cast<uint32_t>(r);
      results[r].unsafeGetImpl()->setRequiresGradBit(true);
    }
  }
  DerivativeContext ctx(schema, arguments_, results, grads, needs_mask_);
  ctx.setSavedCheck(this);
  ctx.setDerivative(derivative_.get());
  for (const DerivativeFormula& f : derivative_->formulas) {
    bool needed = false;
    forEachListedName(f.inputs, [&](std::string_view name) { needed = needed || ctx.needs(name); });
    if (needed) f.fn(ctx);
  }
  // One gradient per edge, summed to its input's sizes and cast to its dtype
  // (Note [Derivative declarations]).
  std::vector<Tensor> out(next_edges.size());
  for (size_t e = 0; e < next_edges.size(); ++e) {
    if (!next_edges[e].valid()) continue;
    const auto [arg, element] = edge_slots_[e];
    const auto& got = ctx.inputGrads()[arg];
    if (element >= got.size() || !got[element].defined()) continue;
    Tensor g = got[element];
    const TensorMeta& m = input_meta_[e];
    if (g.sizes() != IntArrayRef(m.sizes)) g = sumToSize(g, m.sizes);
    if (g.dtype() != m.dtype) g = g.to(m.dtype);
    BP_CHECK(g.device() == m.device, qualified, ": the gradient of ", argumentText(schema, arg), " is on ", g.device(),
             " but the input is on ", m.device, "; its derivative formula must stay on the input's device");
    out[e] = std::move(g);
  }
  return out;
}

std::vector<Tensor> NotImplementedNode::apply(std::vector<Tensor>, const std::shared_ptr<Node>&) {
  std::string inputs;
  for (const auto& [name, device] : needed_)
    inputs += strCat(inputs.empty() ? "" : ", ", "'", name, "' on ", device.str());
  BP_THROW(kUnimplemented, op_, ": its derivative is not implemented (", why_, "), and backward() reached it for ",
           inputs.empty() ? std::string("its inputs") : strCat("input ", inputs),
           ". Compute this op under no_grad (or on detach()ed inputs) if it needs no gradient; "
           "`backplane ops --schemas` lists how every op differentiates");
}

std::vector<Tensor> ViewNode::apply(std::vector<Tensor> grads, const std::shared_ptr<Node>&) {
  Tensor g = grads.empty() ? Tensor() : grads[0];
  if (!g.defined()) return {Tensor()};
  const IntArrayRef base_sizes(base_.sizes);
  if (kind_ == "expand") return {sumToSize(g, base_sizes)};
  if (kind_ == "view" || kind_ == "squeeze" || kind_ == "unsqueeze") return {g.reshape(base_sizes)};
  if (kind_ == "transpose" || kind_ == "t" || kind_ == "permute") {
    // A permutation of the base's dims: the gradient is g with the inverse
    // permutation, a view (no zeros to fill, no copy). The permutation is
    // read off the view replayed on a probe whose strides number its dims.
    const int64_t n = static_cast<int64_t>(base_sizes.size());
    DimVector ones(static_cast<size_t>(n), 1), numbered(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) numbered[static_cast<size_t>(i)] = i + 1;
    const TensorBase probe = replay_(emptyStridedTensor(ones, numbered, ScalarType::Float32));
    DimVector inverse(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) inverse[static_cast<size_t>(probe.stride(i) - 1)] = i;
    return {g.permute(inverse)};
  }
  BP_CHECK(kind_ != "as_strided" || base_contiguous_,
           "as_strided: the gradient of an as_strided view of a non-contiguous tensor is not implemented; call "
           "contiguous() before as_strided");
  if (isGradEnabled()) {
    // create_graph: the same gradient, written out of place with a
    // differentiable op (scatter_add of g at the view's positions in the
    // base), so the backward's own graph reaches g. The positions are the
    // view replayed on the base's element indices.
    int64_t n = 1;
    for (int64_t s : base_sizes) n *= s;
    const Tensor positions = Tensor(replay_(arange(Scalar(n), {ScalarType::Int64, g.device()}).view(base_sizes)));
    using ScatterAddSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);
    static const auto scatter_add = Dispatcher::singleton().findOpOrThrow("bp::scatter_add").typed<ScatterAddSig>();
    return {scatter_add.call(zeros({n}, {g.dtype(), g.device()}), 0, positions.reshape({-1}), g.reshape({-1}))
                .view(base_sizes)};
  }
  Tensor z = zeros(base_sizes, {g.dtype(), g.device()});
  Tensor(replay_(z)).copy_(g);
  return {z};
}

std::vector<Tensor> CopyNode::apply(std::vector<Tensor> grads, const std::shared_ptr<Node>&) {
  return {grads.empty() ? Tensor() : grads[0]};
}

}  // namespace backplane::autograd
