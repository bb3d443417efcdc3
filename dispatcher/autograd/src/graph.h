#pragma once
// The autograd graph: nodes (grad_fn), edges, and the per-tensor state
// (Note [The autograd layer]).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "backplane/autograd/autograd.h"
#include "backplane/core/tensor_base.h"
#include "backplane/ops/tensor.h"

namespace backplane::autograd {

class Node;

// Where a gradient goes: input `input_nr` of node `fn` (the forward
// result it was made for). An edge without a node leads nowhere.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// The sizes, dtype and device of a tensor a gradient is for.
struct TensorMeta {
  DimVector sizes;
  ScalarType dtype = ScalarType::Float32;
  Device device;
  static TensorMeta of(const TensorBase& t) {
    return {DimVector(t.sizes().begin(), t.sizes().end()), t.dtype(), t.device()};
  }
  Tensor zeros() const;
};

// A node of the graph: the backward of one forward call. Its inputs are
// the gradients of that call's results; its outputs go along next_edges,
// one per differentiable input of the call.
// Not enable_shared_from_this: its weak reference made every node's last
// release take the control block's slow path (three more atomic operations
// per recorded op); the engine hands apply() its own reference instead.
class Node {
 public:
  explicit Node(std::string name = "");
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads: one per forward result (undefined where none flowed); returns
  // one per next edge (undefined for none). `self` is the engine's
  // reference to this node, for a node whose backward records its own graph
  // (create_graph) with this node as its results' history.
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads, const std::shared_ptr<Node>& self) = 0;
  // Frees what the node saved (backward without retain_graph).
  virtual void release() {}
  // True for a leaf's AccumulateGrad, which grad() does not run.
  virtual bool isAccumulator() const { return false; }
  // How many gradients flow in: one per forward result.
  virtual size_t numResults() const { return result_meta.size(); }

  // "mulBackward"; built on demand (a node's hot path never needs it).
  virtual std::string name() const { return name_; }
  uint64_t sequenceNr() const { return sequence_nr_; }

  // Inline for the common one or two (Note [What a node saves]: a node
  // costs the call as few allocations as it can).
  using Edges = absl::InlinedVector<Edge, 2>;
  Edges next_edges;
  absl::InlinedVector<TensorMeta, 1> result_meta;  // per forward result
  // Tensor hooks of the results (registerHook on a non-leaf), by result.
  std::vector<std::pair<uint32_t, std::pair<uint64_t, TensorHook>>> pre_hooks;
  // Where retain_grad() keeps a result's gradient, by result.
  std::vector<std::pair<uint32_t, std::shared_ptr<Tensor>>> retained;

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

// What the autograd layer keeps per tensor (Note [Autograd in the core]).
struct AutogradMeta final : AutogradMetaInterface {
  ~AutogradMeta() override;       // tells the accumulator the leaf is gone
  std::shared_ptr<Node> grad_fn;  // null for a leaf
  uint32_t output_nr = 0;
  // A leaf's AccumulateGrad, made on first use and kept while the leaf
  // lives (Note [Leaf accumulators]).
  std::shared_ptr<Node> grad_accumulator;
  // The accumulated gradient (made on first use); shared with the
  // retain_grad hook of a non-leaf.
  std::shared_ptr<Tensor> grad;
  Tensor& gradSlot() {
    if (!grad) grad = std::make_shared<Tensor>();
    return *grad;
  }
  bool retains_grad = false;
  bool is_view = false;                                // a view of a tensor that requires grad
  std::vector<std::pair<uint64_t, TensorHook>> hooks;  // leaves' tensor hooks
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;
};

// t's AutogradMeta, made if it has none.
AutogradMeta& metaOf(const TensorBase& t);
// t's AutogradMeta, or nullptr.
AutogradMeta* findMeta(const TensorBase& t);
// The edge a gradient for t takes: its grad_fn, or its leaf accumulator
// (made on first use), or none when t does not require grad.
Edge gradientEdge(const TensorBase& t);
// Makes `result` the output `output_nr` of `node` (requires grad). Pass
// the caller's last reference with std::move: the result's state then takes
// it without a reference-count round trip.
void setHistory(const TensorBase& result, std::shared_ptr<Node> node, uint32_t output_nr);
// The same data and layout without autograd state: what nodes save.
Tensor dataAlias(const TensorBase& t);
// A unique id for hooks.
uint64_t nextHookId();

}  // namespace backplane::autograd
