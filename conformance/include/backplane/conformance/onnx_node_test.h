#pragma once
// ONNX's node tests (onnx/backend/test/data/node/<test>/ in the onnx
// wheel): one model.onnx holding a single node, and test_data_set_N/ with
// input_K.pb / output_K.pb TensorProtos. Read with Debian's libonnx-dev
// protobuf classes (Note [ONNX node tests]).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "backplane/ops/tensor.h"

namespace backplane::conformance::onnx {

// An attribute's value. ONNX's INT/INTS/FLOAT/FLOATS/STRING/STRINGS/TENSOR;
// other kinds (GRAPH, SPARSE_TENSOR, TYPE_PROTO) make the test unloadable.
using AttributeValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                                    std::vector<std::string>, Tensor>;

struct NodeTest {
  std::string name;     // the directory's name: "test_add_bcast"
  std::string dir;      // its path
  std::string op_type;  // "Add"
  std::string domain;   // "" for the default ONNX domain ("ai.onnx" is read as "")
  int64_t opset = 0;    // the model's opset version for the node's domain
  std::map<std::string, AttributeValue> attributes;
  std::vector<std::string> inputs;   // the node's input names; "" for an omitted optional input
  std::vector<std::string> outputs;  // the node's output names; "" for an omitted optional output
  struct DataSet {
    std::string name;                            // "test_data_set_0"
    std::vector<std::optional<Tensor>> inputs;   // per node input (nullopt for an omitted one), CPU tensors
    std::vector<std::optional<Tensor>> outputs;  // per node output (nullopt for an omitted one), CPU tensors
  };
  std::vector<DataSet> data_sets;

  // Attribute lookups with a default; throw Error(kInvalidArgument) naming
  // the attribute when it is present with another kind.
  int64_t intAttr(const std::string& name, int64_t fallback) const;
  double floatAttr(const std::string& name, double fallback) const;
  std::string stringAttr(const std::string& name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> intsAttr(const std::string& name) const;
  bool has(const std::string& name) const { return attributes.count(name) != 0; }
};

// ONNX element types (TensorProto.DataType numbers, those newer than
// libonnx-dev 1.12 included), one table for the loader and the mapping: the
// dtype Backplane has for one (nullopt where it has none: string, complex,
// float8, int4, ...), its name ("FLOAT16"; "<unknown element type N>" for an
// unknown number), and the number a name stands for.
std::optional<ScalarType> dtypeOfOnnxElementType(int64_t type);
std::string elementTypeName(int64_t type);
std::optional<int64_t> elementTypeFromName(const std::string& name);

// The node-test directories under `root` (those holding a model.onnx),
// searched recursively, sorted by name. Fails if `root` is not a directory.
absl::StatusOr<std::vector<std::string>> findNodeTests(const std::string& root);

// Loads one node test. kUnimplemented (with the reason: "input 0 has ONNX
// element type COMPLEX64, which Backplane has no dtype for") for a test
// Backplane cannot represent; kInvalidArgument/kNotFound for a malformed
// or missing file, naming it.
absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir);

}  // namespace backplane::conformance::onnx
