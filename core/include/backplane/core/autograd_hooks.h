#pragma once
// The core's side of autograd: what a TensorImpl carries for it and the
// interface through which the core and the ops layer reach the autograd
// layer above them.
//
// Note [Autograd in the core]
// Autograd lives in its own layer (dispatcher/autograd), above the ops it
// differentiates, but three things must be known below it:
//   * whether a tensor requires grad: one bit in TensorImpl, which the
//     dispatcher turns into the Autograd key of a call's key set (boxing.h's
//     addTensorKeys), so a call on tensors that do not require grad never
//     reaches the Autograd kernel;
//   * the rest of a tensor's autograd state (its gradient, grad_fn, hooks),
//     which TensorImpl owns through AutogradMetaInterface and only the
//     autograd layer reads;
//   * the views the core makes (Note [Views live in the core]) and the
//     copies Tensor makes without an operator (clone): the autograd layer
//     records them through AutogradHooks, which it installs when
//     libbackplane.so loads, as PyTorch's c10 reaches torch::autograd
//     through VariableHooksInterface.
// Every tensor operation that needs the engine (backward, grad,
// requires_grad_) goes through the hooks as well, so Tensor's methods work
// while the ops layer stays below autograd.
// A storage's version counter (StorageImpl::version) is here too: every op
// that writes a tensor bumps it (Note [Version counters] in
// dispatcher/autograd), and backward compares it with the version each
// saved tensor had.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace backplane {

class TensorBase;

// What the autograd layer keeps per tensor; opaque to the core.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
};

// Re-applies a view to another tensor of the base's shape (the view's
// backward replays it on a gradient).
using ViewReplay = std::function<TensorBase(const TensorBase&)>;

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
  // `view` was made by the view function `name` from `base`, which
  // requires grad.
  virtual void recordView(const TensorBase& base, TensorBase& view, const char* name, ViewReplay replay) const = 0;
  // `copy` is a copy of `source`, which requires grad (clone() and the
  // reshapes that copy).
  virtual void recordCopy(const TensorBase& source, TensorBase& copy) const = 0;
  virtual void setRequiresGrad(const TensorBase& t, bool requires_grad) const = 0;
  virtual TensorBase grad(const TensorBase& t) const = 0;
  virtual void setGrad(const TensorBase& t, const TensorBase& grad) const = 0;
  virtual bool isLeaf(const TensorBase& t) const = 0;
  // The name of t's grad_fn ("MulBackward"), or "" for a leaf.
  virtual std::string gradFnName(const TensorBase& t) const = 0;
  virtual TensorBase detach(const TensorBase& t) const = 0;
  virtual void retainGrad(const TensorBase& t) const = 0;
  virtual void backward(const TensorBase& t, const TensorBase& gradient, bool retain_graph,
                        bool create_graph) const = 0;
};

// The installed hooks; throws Error if none are (libbackplane.so installs
// them when it loads).
const AutogradHooks& autogradHooks();
void setAutogradHooks(const AutogradHooks* hooks);

}  // namespace backplane
