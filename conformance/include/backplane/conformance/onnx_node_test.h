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

// What loading and running one node test may cost (Note [ONNX loading
// limits] in onnx_node_test.cc). Each limit has a default and an
// environment variable that sets it, in bytes (a number, optionally with a
// K, M or G suffix: powers of 1024), read by findNodeTests (which refuses
// a bad value before any test runs) and by loadNodeTest.
struct LoadLimits {
  static constexpr int64_t kDefaultMaxFileBytes = int64_t{64} << 20;
  static constexpr int64_t kDefaultMaxTensorBytes = int64_t{256} << 20;
  static constexpr int64_t kDefaultMaxAllocBytes = int64_t{1} << 30;
  // One file: model.onnx or a test_data_set_N/*.pb (BACKPLANE_ONNX_MAX_FILE_BYTES).
  int64_t max_file_bytes = kDefaultMaxFileBytes;
  // All tensors one node test holds: every data set's, the initializers and
  // the attributes' (BACKPLANE_ONNX_MAX_TENSOR_BYTES).
  int64_t max_tensor_bytes = kDefaultMaxTensorBytes;
  // One tensor a node's mapping creates with a size taken from its inputs'
  // values or attributes (ConstantOfShape's shape, Expand, Tile, Range,
  // Resize, Pad, ...), refused before it is allocated (BACKPLANE_ONNX_MAX_ALLOC_BYTES).
  int64_t max_alloc_bytes = kDefaultMaxAllocBytes;
};
// Messages nested deeper than this in one file do not parse (protobuf's
// recursion limit: subgraphs, nested TypeProtos).
inline constexpr int kMaxProtobufNesting = 64;
// opset_import versions outside [1, kMaxOpsetVersion] are refused.
inline constexpr int64_t kMaxOpsetVersion = 1000;

// The limits from the environment; kInvalidArgument naming the variable
// and what it takes for a value that is not a positive size.
absl::StatusOr<LoadLimits> loadLimitsFromEnvironment();

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
  // The cap on one tensor the mapping creates from the inputs' values
  // (LoadLimits::max_alloc_bytes); checked with checkCreation in onnx_ops.h.
  int64_t max_alloc_bytes = LoadLimits::kDefaultMaxAllocBytes;

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

// The node-test directories under `root` (those with an entry named
// model.onnx, of whatever file type: loadNodeTest refuses one that is not a
// regular file, so that it counts as a test in error rather than vanishing),
// searched recursively, sorted by name. Symbolic links to directories are
// followed, each directory searched once; one that leads back to a
// directory it is inside (a loop) is an error naming both. Fails if `root`
// is not a directory, or the environment's limits are invalid.
absl::StatusOr<std::vector<std::string>> findNodeTests(const std::string& root);

// Loads one node test. kUnimplemented (with the reason: "input 0 has ONNX
// element type COMPLEX64, which Backplane has no dtype for") for a test
// Backplane cannot represent; kInvalidArgument/kNotFound for a malformed
// or missing file, naming it, one past a limit, and a test with nothing to
// compare. The first form takes its limits from the environment.
absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir);
absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir, const LoadLimits& limits);

}  // namespace backplane::conformance::onnx
