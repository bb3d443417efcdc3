// The engine: runs a graph's nodes from the outputs back to the leaves
// (Note [The autograd layer]).

#include <algorithm>
#include <atomic>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "backplane/autograd/autograd.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatch_key.h"
#include "backplane/ops/ops.h"
#include "graph.h"

namespace backplane::autograd {

namespace {
std::atomic<uint64_t> g_hook_id{0};
thread_local bool tls_grad_enabled = true;
// Per thread, as PyTorch's: the engine only breaks ties between nodes that
// are ready together (the newest first), and a node is ready only once
// every node that feeds it has run, so nodes recorded on different threads
// need no common order. An atomic counter shared by all threads cost every
// recorded op a locked increment.
thread_local uint64_t tls_sequence_nr = 0;
}  // namespace

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(tls_sequence_nr++) {}

uint64_t nextHookId() { return g_hook_id.fetch_add(1) + 1; }

Tensor TensorMeta::zeros() const { return backplane::zeros(sizes, {dtype, device}); }

// --- Grad mode: a thread-local flag, and the Autograd key excluded for the
// thread while it is off (Note [Where the Autograd key sits]).
bool isGradEnabled() { return tls_grad_enabled; }
void setGradEnabled(bool enabled) {
  tls_grad_enabled = enabled;
  auto& excluded = backplane::detail::tls_local_dispatch_key_set.excluded;
  excluded = enabled ? excluded.remove(DispatchKey::Autograd) : excluded.add(DispatchKey::Autograd);
}
GradModeGuard::GradModeGuard(bool enabled) : previous_(isGradEnabled()) { setGradEnabled(enabled); }
GradModeGuard::~GradModeGuard() { setGradEnabled(previous_); }

namespace {

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? slot + g : g;
}

struct Capture {
  const Node* node;
  uint32_t input_nr;
  size_t index;
};

// Runs the graph from `roots` (with `root_grads`). With `accumulate_leaves`
// leaves' grad() receive their gradients; the gradients arriving at
// `captures` are returned instead when given.
std::vector<Tensor> runGraph(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
                             bool create_graph, bool accumulate_leaves, const std::vector<Capture>& captures,
                             size_t num_captures) {
  // Dependencies: how many edges lead into each node.
  absl::flat_hash_map<Node*, int> deps;
  {
    std::vector<Node*> stack;
    absl::flat_hash_map<Node*, bool> seen;
    for (const Edge& e : roots)
      if (e.valid() && !seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        ++deps[e.fn.get()];
        if (!seen[e.fn.get()]) {
          seen[e.fn.get()] = true;
          stack.push_back(e.fn.get());
        }
      }
    }
  }
  absl::flat_hash_map<Node*, std::vector<Tensor>> buffers;
  auto bufferOf = [&](Node* n) -> std::vector<Tensor>& {
    auto& b = buffers[n];
    if (b.size() < n->numResults()) b.resize(n->numResults());
    return b;
  };
  auto newer = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequenceNr() < b->sequenceNr();  // the newest node runs first
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(newer)> ready(newer);
  absl::flat_hash_map<Node*, bool> queued;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge& e = roots[i];
    if (!e.valid()) continue;
    auto& b = bufferOf(e.fn.get());
    accumulate(b[e.input_nr], root_grads[i]);
    if (deps[e.fn.get()] == 0 && !queued[e.fn.get()]) {
      queued[e.fn.get()] = true;
      ready.push(e.fn);
    }
  }
  std::vector<Tensor> captured(num_captures);
  GradModeGuard mode(create_graph);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(bufferOf(node.get()));
    buffers.erase(node.get());
    for (auto& [nr, hook] : node->pre_hooks) {
      if (nr >= grads.size() || !grads[nr].defined()) continue;
      Tensor replaced = hook.second(grads[nr]);
      if (replaced.defined()) grads[nr] = replaced;
    }
    for (auto& [nr, slot] : node->retained)
      if (nr < grads.size() && grads[nr].defined()) *slot = create_graph ? grads[nr] : grads[nr].detach();
    bool is_capture_only = false;
    for (const Capture& c : captures) {
      if (c.node != node.get()) continue;
      if (c.input_nr < grads.size()) captured[c.index] = grads[c.input_nr];
    }
    const bool is_leaf_node = node->isAccumulator();
    if (is_leaf_node && !accumulate_leaves) is_capture_only = true;
    std::vector<Tensor> outputs;
    if (!is_capture_only) {
      outputs = node->apply(std::move(grads), node);
      if (!keep_graph) node->release();
    }
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) accumulate(bufferOf(e.fn.get())[e.input_nr], outputs[i]);
      if (--deps[e.fn.get()] == 0 && !queued[e.fn.get()]) {
        queued[e.fn.get()] = true;
        ready.push(e.fn);
      }
    }
  }
  return captured;
}

// The roots of a backward or grad call: each output's edge and gradient.
void prepareRoots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, const char* api,
                  std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  BP_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), api, ": got ", outputs.size(),
           " outputs but ", grad_outputs.size(), " gradients; pass one gradient per output (or none)");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    BP_CHECK(out.defined(), api, ": output ", i, " is undefined");
    BP_CHECK(out.requires_grad(), api, ": output ", i, " (", out.str(),
             ") does not require grad and has no grad_fn: no op that made it had an input that requires grad. "
             "Call requires_grad_() on the leaves first, and do not compute it under no_grad");
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      BP_CHECK(out.numel() == 1, api, ": a gradient can be left out only for a one-element output, but output ", i,
               " is ", out.str(), "; pass a gradient of its shape");
      g = ones_like(out);
    } else {
      BP_CHECK(g.sizes() == out.sizes(), api, ": the gradient for output ", i, " is ", g.str(), " but the output is ",
               out.str(), "; they must have the same sizes");
      BP_CHECK(g.device() == out.device(), api, ": the gradient for output ", i, " is on ", g.device(),
               " but the output is on ", out.device());
    }
    edges.push_back(gradientEdge(out));
    grads.push_back(g);
  }
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              std::optional<bool> retain_graph, bool create_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepareRoots(outputs, grad_outputs, "backward", edges, grads);
  runGraph(edges, grads, retain_graph.value_or(create_graph), create_graph, /*accumulate_leaves=*/true, {}, 0);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepareRoots(outputs, grad_outputs, "grad", edges, grads);
  std::vector<Capture> captures;
  std::vector<Edge> input_edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BP_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i, " (", inputs[i].str(),
             ") does not require grad, so no gradient can be computed for it");
    input_edges.push_back(gradientEdge(inputs[i]));
    captures.push_back({input_edges.back().fn.get(), input_edges.back().input_nr, i});
  }
  std::vector<Tensor> result = runGraph(edges, grads, retain_graph.value_or(create_graph), create_graph,
                                        /*accumulate_leaves=*/false, captures, inputs.size());
  for (size_t i = 0; i < result.size(); ++i) {
    BP_CHECK(result[i].defined() || allow_unused, "grad: input ", i, " (", inputs[i].str(),
             ") was not used to compute the outputs; pass allow_unused=true to get an undefined gradient for it");
    if (result[i].defined() && !create_graph) result[i] = result[i].detach();
  }
  return result;
}

}  // namespace backplane::autograd
