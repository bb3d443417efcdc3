#pragma once
// Autograd: gradients for every standard op on every device (docs/autograd.md).
//
// Note [The autograd layer]
// A tensor that requires grad carries the Autograd dispatch key (Note [Where
// the Autograd key sits]); the Autograd kernel, one boxed fallback for every
// op, runs the op below its key and records a node (grad_fn) holding what
// the op's derivative declaration needs (Note [Derivative declarations]).
// backward() walks the nodes from the output, newest first, and runs each
// formula with the ops of the device the forward ran on: no byte moves to
// the host that the forward did not move. Every formula and every saved
// tensor is an ordinary tensor on that device, so a backend that has the
// forward and backward ops, natively or by fallback, trains.
//
// What works as in PyTorch, and what raises instead:
//   * leaves (requires_grad_), non-leaves, detach, retain_grad, .grad
//     accumulation, retain_graph, create_graph (higher-order gradients
//     through formulas), grad(outputs, inputs), hooks on tensors and
//     post-accumulate hooks on leaves;
//   * in-place ops on a non-leaf that requires grad, and on a tensor that
//     does not when their other input does (its history is rewritten);
//   * version counters: backward raises, naming the op and its argument, when
//     a tensor a formula needs was written after it was saved;
//   * views of tensors that require grad (view, reshape, transpose, permute,
//     slice, select, narrow, expand, squeeze, unsqueeze, as_strided) are
//     differentiable;
//   * raises: an in-place op on a leaf that requires grad (outside no_grad),
//     an in-place op on a view of a tensor that requires grad (clone() the
//     view first), an out= form with arguments that require grad.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "backplane/ops/tensor.h"

namespace backplane::autograd {

// --- Grad mode (thread-local).
// Whether ops on this thread record graphs (true by default).
bool isGradEnabled();
// Sets the mode for a scope and restores the previous one when it ends
// (PyTorch's AutoGradMode); NoGradGuard and EnableGradGuard name the two.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};
// Sets the mode for this thread until changed.
void setGradEnabled(bool enabled);

// --- The engine.
// Accumulates the gradients of `outputs` into the grad() of the leaves
// they depend on. `grad_outputs`: one per output (an undefined one means
// ones for a one-element output); empty means all such. The graph is freed
// unless retain_graph (default: create_graph). create_graph records the
// backward itself, so its gradients can be differentiated again.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);
// The gradients of `outputs` with respect to each of `inputs`, returned
// instead of accumulated (no leaf's grad() changes). An input the outputs do
// not depend on is an error unless allow_unused (then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// --- Hooks.
// Called with the gradient flowing into `t` during backward; may return a
// replacement (a defined tensor of the same shape) or an undefined tensor
// to keep it. Returns an id for removeHook.
using TensorHook = std::function<Tensor(const Tensor&)>;
uint64_t registerHook(const Tensor& t, TensorHook hook);
// Called with the leaf `t` after its grad() was accumulated (what a
// distributed step overlaps its all-reduce with). Returns an id.
using PostAccumulateGradHook = std::function<void(const Tensor&)>;
uint64_t registerPostAccumulateGradHook(const Tensor& t, PostAccumulateGradHook hook);
// Removes a hook registered on t; false if it was not there.
bool removeHook(const Tensor& t, uint64_t id);

// --- Introspection.
// The number of times `t`'s storage was written by an op.
inline uint64_t version(const Tensor& t) { return t._version(); }

// --- Custom functions: an op whose forward and backward the caller writes.
//
//   struct MulConstant : Function<MulConstant> {
//     static Tensor forward(AutogradContext& ctx, const Tensor& x, double c) {
//       ctx.saved_data["c"] = c;
//       return x * c;
//     }
//     static std::vector<Tensor> backward(AutogradContext& ctx, std::vector<Tensor> grads) {
//       return {grads[0] * ctx.saved_data["c"], Tensor()};  // one per forward argument
//     }
//   };
//   Tensor y = MulConstant::apply(x, 2.0);
//
// forward runs with grad recording off; its tensor results get a node that
// calls backward with one gradient per result, which returns one gradient
// per forward argument (undefined for the non-tensor ones and for those that
// need none).
class AutogradContext {
 public:
  // Tensors backward() needs; checked against in-place writes (versions).
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> get_saved_variables() const;
  // Whether forward argument i needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  // Results that carry no gradient.
  void mark_non_differentiable(const std::vector<Tensor>& results);
  // Anything else backward needs.
  std::unordered_map<std::string, double> saved_data;

 private:
  template <typename T>
  friend struct Function;
  friend struct CustomFunctionAccess;
  std::vector<Tensor> saved_;
  std::vector<uint64_t> saved_versions_;
  std::vector<bool> needs_input_grad_;
  std::vector<const TensorImpl*> non_differentiable_;
  bool released_ = false;
  std::string name_;
};

namespace detail {
// The canonical signatures (Note [Canonical C++ signatures]) whose standard
// ops get a typed Autograd kernel (Note [Typed Autograd kernels]), for tests.
std::vector<std::string> typedAutogradSignatures();
// One tensor argument of a custom function's forward, or none.
inline void collectTensor(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
template <typename T>
void collectTensor(std::vector<Tensor>& out, const T&) {
  out.emplace_back();
}
using CustomBackward = std::function<std::vector<Tensor>(AutogradContext&, std::vector<Tensor>)>;
// Records the node of a custom function whose forward made `results` from
// `inputs` (one per forward argument, undefined for non-tensors).
void recordCustomFunction(const std::string& name, std::shared_ptr<AutogradContext> ctx,
                          const std::vector<Tensor>& inputs, std::vector<Tensor>& results, CustomBackward backward);
bool anyRequiresGrad(const std::vector<Tensor>& inputs);
}  // namespace detail

template <typename T>
struct Function {
  // Runs T::forward(ctx, args...) and records T::backward. The result is
  // forward's: a Tensor or a std::vector<Tensor>.
  template <typename... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    std::vector<Tensor> inputs;
    (detail::collectTensor(inputs, args), ...);
    const bool record = isGradEnabled() && detail::anyRequiresGrad(inputs);
    for (const Tensor& t : inputs) ctx->needs_input_grad_.push_back(record && t.defined() && t.requires_grad());
    using Result = decltype(T::forward(*ctx, std::forward<Args>(args)...));
    Result out = [&] {
      NoGradGuard no_grad;
      return T::forward(*ctx, std::forward<Args>(args)...);
    }();
    if (!record) return out;
    std::vector<Tensor> results;
    if constexpr (std::is_same_v<Result, Tensor>)
      results.push_back(out);
    else
      results = out;
    detail::recordCustomFunction(typeid(T).name(), ctx, inputs, results, [](AutogradContext& c, std::vector<Tensor> g) {
      return T::backward(c, std::move(g));
    });
    if constexpr (std::is_same_v<Result, Tensor>)
      return results[0];
    else
      return results;
  }
};

}  // namespace backplane::autograd
