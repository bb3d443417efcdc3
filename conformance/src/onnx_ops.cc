// The ONNX op_type -> standard-op table (backplane/conformance/onnx_ops.h).
//
// Note [ONNX op mapping]
// One table maps an ONNX op_type (default domain) to a NodeFunction that
// computes the node's outputs with Backplane's standard operators. The
// family files fill it (registerElementwiseNodes in onnx_ops_elementwise.cc,
// registerReductionNodes in onnx_ops_reduction.cc, and so on: one file per
// family of ops, listed in onnx_ops.h), once, the first time the table is
// used: a function-local static, so concurrent first uses wait for
// one initialisation (C++ guarantees it) and no static-initialisation order
// matters. Registering one op_type twice is a programming error and throws
// (from every use of the table, naming the op_type).

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/core/checked_math.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"

namespace backplane::conformance::onnx {
namespace {

// The entries as registered; written only while table() initialises.
std::map<std::string, NodeFunction>& entries() {
  static std::map<std::string, NodeFunction> map;
  return map;
}

const std::map<std::string, NodeFunction>& table() {
  // A registration that throws (an op_type registered twice) leaves the
  // table empty, so the next use retries and reports the same error rather
  // than a misleading one about the entries registered before it.
  static const bool filled = [] {
    try {
      registerElementwiseNodes();
      registerReductionNodes();
      registerMathNodes();
      registerConvPoolNodes();
      registerNormalizationNodes();
      registerAttentionNodes();
      registerIndexingNodes();
      registerDataMovementNodes();
      registerCreationNodes();
      registerResamplingNodes();
    } catch (...) {
      entries().clear();
      throw;
    }
    return true;
  }();
  (void)filled;
  return entries();
}

}  // namespace

void registerNode(const std::string& op_type, NodeFunction fn) {
  BP_CHECK(fn != nullptr, "registerNode: the entry for ONNX op_type ", op_type, " is empty");
  const bool inserted = entries().emplace(op_type, std::move(fn)).second;
  BP_CHECK(inserted, "registerNode: ONNX op_type ", op_type, " is registered twice (Note [ONNX op mapping])");
}

const NodeFunction* findNode(const std::string& op_type) {
  const auto& t = table();
  auto it = t.find(op_type);
  return it == t.end() ? nullptr : &it->second;
}

std::vector<std::string> mappedOpTypes() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;  // std::map iterates in sorted order
}

void checkCreation(const NodeTest& node, IntArrayRef sizes, ScalarType dtype, const char* what) {
  int64_t numel = 0;
  for (int64_t s : sizes) {
    BP_CHECK(s >= 0, node.op_type, ": ", what, " would have shape ", sizes, ", with a negative size");
  }
  // Past int64, the product is past any cap too.
  bool overflow = false;
  try {
    numel = checkedNumel(sizes);
  } catch (const Error&) {
    overflow = true;
  }
  int64_t bytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, static_cast<int64_t>(elementSize(dtype)), &bytes);
  if (overflow || bytes > node.max_alloc_bytes) {
    BP_THROW(kResourceExhausted, node.op_type, ": ", what, " of shape ", sizes, " and dtype ", scalarTypeName(dtype),
             " would take ", overflow ? std::string("more than 2^63") : std::to_string(bytes),
             " bytes, past the cap of ", node.max_alloc_bytes,
             " bytes on a tensor a node creates from its inputs' values; refused before allocating it (raise the "
             "cap with BACKPLANE_ONNX_MAX_ALLOC_BYTES=<bytes> if the test is meant to be this large)");
  }
}

NodeRun runNode(const NodeTest& node, const NodeInputs& inputs, Device device) {
  if (!node.domain.empty())
    return unsupported(strCat("no mapping for ONNX op_type ", node.op_type, " of domain ", node.domain));
  const NodeFunction* fn = findNode(node.op_type);
  if (fn == nullptr) return unsupported(strCat("no mapping for ONNX op_type ", node.op_type));
  return (*fn)(node, inputs, device);
}

}  // namespace backplane::conformance::onnx
