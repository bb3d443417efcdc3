#pragma once
// The kinds of node (Note [The autograd layer]).

#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derivatives.h"
#include "graph.h"

namespace backplane::autograd {

// A leaf's accumulator: adds the gradient into its grad(), after the
// leaf's hooks, then runs its post-accumulate hooks. The leaf's autograd
// state owns it, and it refers back to the leaf weakly (Note [Leaf
// accumulators]).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(TensorImpl* leaf) : Node("AccumulateGrad"), leaf_(leaf) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) override;
  bool isAccumulator() const override { return true; }
  size_t numResults() const override { return 1; }
  // Called by the leaf's autograd state as the leaf is destroyed.
  void leafDestroyed();

 private:
  std::mutex mu_;     // orders leafDestroyed with apply's look at leaf_
  TensorImpl* leaf_;  // null once the leaf is gone
};

// A tensor a node saved, with the version it had then (Note [Version counters]).
// An input is kept with its autograd state (it is older than the node, so
// no reference cycle), so that create_graph can differentiate formulas that
// read it; a result is kept as a dataAlias (it would point back at the node)
// and gets its history back when a create_graph backward reads it.
struct SavedTensor {
  Tensor data;
  uint64_t version = 0;
  void save(const TensorBase& t, bool is_input = false);
  // Throws, naming op and what, if the tensor was written since.
  void check(const std::string& op, const std::string& what) const;
};

// The backward of a standard op with derivative formulas.
class FormulaNode final : public Node, public DerivativeContext::SavedCheck {
 public:
  // `derivative` stays alive as long as the node (a declared one may be
  // removed while a graph holds it: Note [Declared derivatives]).
  FormulaNode(const OperatorHandle& op, std::shared_ptr<const OpDerivative> derivative);
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) override;
  void release() override;
  std::string name() const override;
  void checkArgument(size_t index) const override;
  void checkResult(size_t index) const override;

  // Filled by the Autograd kernel.
  absl::InlinedVector<IValue, 4> arguments_;  // the call's arguments, as saved (Note [What a node saves])
  std::vector<std::tuple<size_t, size_t, SavedTensor>> saved_tensors_;  // (argument, element, saved)
  std::vector<Tensor> results_;
  std::vector<SavedTensor> saved_results_;
  using EdgeSlots = absl::InlinedVector<std::pair<size_t, size_t>, 2>;
  using InputMetas = absl::InlinedVector<TensorMeta, 2>;
  EdgeSlots edge_slots_;   // per next edge: (argument, element)
  InputMetas input_meta_;  // per next edge
  uint64_t needs_mask_ = 0;
  // Tensor arguments not kept, and whether the results are (Note [What a node saves]).
  uint64_t unsaved_mask_ = 0;
  bool saves_results_ = true;

 private:
  OperatorHandle op_;
  std::shared_ptr<const OpDerivative> derivative_;
  bool released_ = false;
};

// The backward of an op whose derivative is not implemented: raises.
class NotImplementedNode final : public Node {
 public:
  NotImplementedNode(std::string op, std::string why, std::vector<std::pair<std::string, Device>> needed)
      : Node(op + "Backward"), op_(std::move(op)), why_(std::move(why)), needed_(std::move(needed)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) override;

 private:
  std::string op_, why_;
  std::vector<std::pair<std::string, Device>> needed_;
};

// The backward of a view the core made (Note [Autograd in the core]).
class ViewNode final : public Node {
 public:
  ViewNode(std::string kind, const TensorBase& base, ViewReplay replay)
      : Node(kind + "Backward"),
        kind_(std::move(kind)),
        base_(TensorMeta::of(base)),
        base_contiguous_(base.is_contiguous() && base.storage_offset() == 0),
        replay_(std::move(replay)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) override;

 private:
  std::string kind_;
  TensorMeta base_;
  bool base_contiguous_;
  ViewReplay replay_;
};

// clone() and reshapes that copy: the gradient passes through.
class CopyNode final : public Node {
 public:
  CopyNode() : Node("CloneBackward") {}
  std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) override;
};

}  // namespace backplane::autograd
