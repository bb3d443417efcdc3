#pragma once
// The mapping from an ONNX node to Backplane's standard operators: one
// table, one entry per ONNX op_type (Note [ONNX op mapping]).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_node_test.h"
#include "backplane/core/device.h"
#include "backplane/ops/tensor.h"

namespace backplane::conformance::onnx {

// The inputs of one call of a node, already on the device under test, one
// per node input (nullopt for an omitted optional input).
using NodeInputs = std::vector<std::optional<Tensor>>;

// What running a node gave: its outputs (on `device`, one per node output;
// an omitted optional output may be an undefined Tensor), or, when no
// standard op expresses this node (an op_type with no entry, an attribute
// value or combination, a dtype or an opset it does not cover), the reason.
struct NodeRun {
  bool supported = true;
  std::string reason;  // when !supported: "Resize: mode 'cubic' has no standard op"
  std::vector<Tensor> outputs;
};

// A table entry: computes the node's outputs from its inputs with standard
// ops (Backplane's C++ API: backplane/ops/ops.h and Tensor's methods, or the
// dispatcher for ops without a C++ function) on `device`. Decides
// "unsupported" before calling any op wherever it can. Errors from the ops
// propagate as exceptions (the test then fails or errors, it is not
// "unsupported").
using NodeFunction = std::function<NodeRun(const NodeTest& node, const NodeInputs& inputs, Device device)>;

// Adds `op_type`'s entry; each family file registers its own
// (registerElementwiseNodes, registerReductionNodes, ...).
void registerNode(const std::string& op_type, NodeFunction fn);

// The entry for `op_type` (default domain), or nullptr.
const NodeFunction* findNode(const std::string& op_type);
// Every op_type with an entry, sorted.
std::vector<std::string> mappedOpTypes();

// Runs `node` on `inputs`: the entry's result, or unsupported ("no mapping
// for ONNX op_type X") when there is none or the domain is not the default.
NodeRun runNode(const NodeTest& node, const NodeInputs& inputs, Device device);

// For an entry about to create a tensor of `sizes` and `dtype` whose size
// comes from its inputs' values or attributes (ConstantOfShape's shape,
// Expand's, Tile's repeats, Range's bounds, Resize's sizes, Pad's pads):
// throws Error(kResourceExhausted) naming the op, the shape, the bytes and
// the cap when it would take more than node.max_alloc_bytes (Note [ONNX
// loading limits] in onnx_node_test.cc), and Error(kInvalidArgument) for a
// negative size; before anything is allocated.
void checkCreation(const NodeTest& node, IntArrayRef sizes, ScalarType dtype, const char* what = "the output");

// NodeRun helpers for entries.
inline NodeRun unsupported(std::string reason) { return NodeRun{false, std::move(reason), {}}; }
inline NodeRun outputs(std::vector<Tensor> outs) { return NodeRun{true, "", std::move(outs)}; }

// The family files' registrations (called once, in order, by the table).
void registerElementwiseNodes();    // onnx_ops_elementwise.cc
void registerReductionNodes();      // onnx_ops_reduction.cc
void registerMathNodes();           // onnx_ops_math.cc
void registerConvPoolNodes();       // onnx_ops_conv_pool.cc
void registerNormalizationNodes();  // onnx_ops_normalization.cc
void registerAttentionNodes();      // onnx_ops_attention.cc
void registerIndexingNodes();       // onnx_ops_indexing.cc
void registerDataMovementNodes();   // onnx_ops_data_movement.cc
void registerCreationNodes();       // onnx_ops_creation.cc
void registerResamplingNodes();     // onnx_ops_resampling.cc

}  // namespace backplane::conformance::onnx
