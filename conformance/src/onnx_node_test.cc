#include "backplane/conformance/onnx_node_test.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <utility>

#include "backplane/core/checked_math.h"
#include "backplane/core/str_cat.h"

// Note [ONNX node tests]
// A node test is a directory holding model.onnx (a ModelProto whose graph
// has one node) and test_data_set_N/ folders of input_K.pb / output_K.pb
// (TensorProtos). ONNX's own runner (onnx/backend/test/runner) pairs
// input_K.pb with the graph's K-th input and output_K.pb with its K-th
// output, not with the node's: the graph lists only the inputs that are
// present, so a node `Clip(x, "", max)` has graph inputs (x, max) and files
// input_0.pb, input_1.pb. loadNodeTest does the same, then lays the tensors
// out per node input by name: an omitted optional input ("") is nullopt, a
// node input that is no graph input but an initializer takes the
// initializer's value, and a graph input with no file takes its initializer
// (ONNX: a graph input shadows an initializer of the same name only when
// fed). A node output the graph does not list is not checked by ONNX's
// runner either, so it is nullopt too.
//
// What Backplane cannot represent makes the whole test kUnimplemented with
// the reason (a STRING or COMPLEX64 tensor, a sequence or optional input, a
// GRAPH attribute, a graph of more than one node), so a runner can report
// it as unsupported instead of a failure; a file that is missing or does not
// parse is kNotFound / kInvalidArgument naming the file.
//
// The files are read with Debian's libonnx-dev (ONNX 1.12) classes while the
// corpus comes from ONNX 1.22: TensorProto.data_type is an int32 field, so
// element types newer than 1.12 (FLOAT8*, INT4, ...) still arrive as their
// numbers and are named from the table below; fields newer than 1.12
// (metadata_props, ...) are kept as unknown fields and ignored.

namespace backplane::conformance::onnx {
namespace {

namespace fs = std::filesystem;

// Backplane's tensors are little-endian in memory, as ONNX's raw_data is.
static_assert(std::endian::native == std::endian::little,
              "raw_data is little-endian; reading it on a big-endian host needs a byte swap");

// TensorProto.DataType, including the numbers later than libonnx-dev's 1.12.
std::string onnxElementTypeName(int32_t type) {
  static constexpr const char* kNames[] = {
      "UNDEFINED", "FLOAT",      "UINT8",      "INT8",         "UINT16",         "INT16",      "INT32",
      "INT64",     "STRING",     "BOOL",       "FLOAT16",      "DOUBLE",         "UINT32",     "UINT64",
      "COMPLEX64", "COMPLEX128", "BFLOAT16",   "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",     "INT4",       "FLOAT4E2M1", "FLOAT8E8M0",   "UINT2",          "INT2"};
  if (type >= 0 && type < static_cast<int32_t>(std::size(kNames))) return kNames[type];
  return strCat("<unknown element type ", type, ">");
}

std::optional<ScalarType> scalarTypeFor(int32_t type) {
  using P = ::onnx::TensorProto;
  switch (type) {
    case P::FLOAT: return ScalarType::Float32;
    case P::DOUBLE: return ScalarType::Float64;
    case P::FLOAT16: return ScalarType::Float16;
    case P::BFLOAT16: return ScalarType::BFloat16;
    case P::INT8: return ScalarType::Int8;
    case P::INT16: return ScalarType::Int16;
    case P::INT32: return ScalarType::Int32;
    case P::INT64: return ScalarType::Int64;
    case P::UINT8: return ScalarType::UInt8;
    case P::UINT16: return ScalarType::UInt16;
    case P::UINT32: return ScalarType::UInt32;
    case P::UINT64: return ScalarType::UInt64;
    case P::BOOL: return ScalarType::Bool;
    default: return std::nullopt;
  }
}

std::string attributeTypeName(int type) {
  if (::onnx::AttributeProto_AttributeType_IsValid(type)) {
    return ::onnx::AttributeProto_AttributeType_Name(static_cast<::onnx::AttributeProto_AttributeType>(type));
  }
  return strCat("<unknown attribute type ", type, ">");
}

// The kinds AttributeValue holds, in its alternatives' order.
const char* attributeValueKind(const AttributeValue& v) {
  static constexpr const char* kKinds[] = {"INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "TENSOR"};
  static_assert(std::size(kKinds) == std::variant_size_v<AttributeValue>);
  return kKinds[v.index()];
}

template <typename Proto>
absl::StatusOr<Proto> parseFile(const fs::path& path, const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::NotFoundError(strCat(path.string(), ": no such file (the node test's ", what, ")"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::InvalidArgumentError(strCat(path.string(), ": cannot be read"));
  Proto proto;
  if (!proto.ParseFromString(bytes.str())) {
    return absl::InvalidArgumentError(
        strCat(path.string(), ": not a valid ONNX ", what, " (the protobuf does not parse)"));
  }
  return proto;
}

// Copies `values` (a repeated typed field) into `out`'s elements of type T,
// checking that each fits T.
template <typename T, typename Field>
absl::Status copyTypedValues(const Field& values, void* out, const std::string& what, const char* field) {
  auto* dst = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (auto v : values) {
    T t;
    if constexpr (std::is_same_v<T, bool>) {
      t = v != 0;
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      // int32_data holds the 16 bits of the value, zero-extended.
      if (v < 0 || v > 0xffff) {
        return absl::InvalidArgumentError(
            strCat(what, ": ", field, "[", i, "] = ", v, " is not the bits of a 16-bit float (0..65535)"));
      }
      t = T::fromBits(static_cast<uint16_t>(v));
    } else if constexpr (std::is_same_v<T, std::remove_cvref_t<decltype(v)>>) {
      t = v;
    } else {
      if (!std::in_range<T>(v)) {
        return absl::InvalidArgumentError(strCat(what, ": ", field, "[", i, "] = ", v, " does not fit ",
                                                 scalarTypeName(CppTypeToScalarType<T>::value)));
      }
      t = static_cast<T>(v);
    }
    std::memcpy(dst + i * sizeof(T), &t, sizeof(T));
    ++i;
  }
  return absl::OkStatus();
}

// A CPU tensor holding `proto`'s value. `what` names it in errors: "input 0
// ('x') in /path/test_data_set_0/input_0.pb".
absl::StatusOr<Tensor> tensorFromProto(const ::onnx::TensorProto& proto, const std::string& what) {
  using P = ::onnx::TensorProto;
  const int32_t type = proto.data_type();
  std::optional<ScalarType> dtype = scalarTypeFor(type);
  if (!dtype) {
    if (type == P::UNDEFINED) return absl::InvalidArgumentError(strCat(what, ": the TensorProto has no data_type"));
    return absl::UnimplementedError(
        strCat(what, " has ONNX element type ", onnxElementTypeName(type), ", which Backplane has no dtype for"));
  }
  if (proto.data_location() == P::EXTERNAL) {
    return absl::UnimplementedError(strCat(what, " keeps its data in an external file, which is not read"));
  }
  if (proto.has_segment()) {
    return absl::UnimplementedError(strCat(what, " is one segment of a tensor, which is not read"));
  }
  DimVector sizes;
  for (int64_t d : proto.dims()) {
    if (d < 0) return absl::InvalidArgumentError(strCat(what, ": negative dimension ", d));
    sizes.push_back(d);
  }
  int64_t numel = 0;
  size_t nbytes = 0;
  try {
    numel = checkedNumel(sizes);
    nbytes = static_cast<size_t>(checkedMul(numel, static_cast<int64_t>(elementSize(*dtype)), "the tensor's bytes"));
  } catch (const Error& e) {
    return absl::InvalidArgumentError(strCat(what, ": ", e.message()));
  }
  // A tensor of these dims. Dims with no elements can still be too large
  // for a tensor ([0, 2^62, 4]: the strides overflow), which the core
  // refuses with an Error: a malformed file, not a crash of the loader.
  auto allocate = [&]() -> absl::StatusOr<Tensor> {
    try {
      return emptyTensor(sizes, *dtype);
    } catch (const Error& e) {
      return absl::InvalidArgumentError(strCat(what, ": dims ", ArrayRef<int64_t>(sizes), ": ", e.message()));
    }
  };
  // The data's size is checked before the tensor is allocated, so that dims
  // the data does not back never allocate.
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes) {
      return absl::InvalidArgumentError(strCat(what, ": raw_data has ", proto.raw_data().size(), " bytes, but ", numel,
                                               " elements of ", scalarTypeName(*dtype), " need ", nbytes));
    }
    absl::StatusOr<Tensor> tensor = allocate();
    if (tensor.ok() && nbytes != 0) std::memcpy(tensor->data_ptr(), proto.raw_data().data(), nbytes);
    return tensor;
  }

  auto typed = [&]<typename T>(const auto& field, const char* field_name) -> absl::StatusOr<Tensor> {
    if (field.size() != numel) {
      return absl::InvalidArgumentError(strCat(what, ": ", field_name, " has ", field.size(), " values, but the dims ",
                                               ArrayRef<int64_t>(sizes), " hold ", numel));
    }
    absl::StatusOr<Tensor> tensor = allocate();
    if (!tensor.ok()) return tensor;
    absl::Status s = copyTypedValues<T>(field, tensor->data_ptr(), what, field_name);
    if (!s.ok()) return s;
    return tensor;
  };
  switch (*dtype) {
    case ScalarType::Float32: return typed.template operator()<float>(proto.float_data(), "float_data");
    case ScalarType::Float64: return typed.template operator()<double>(proto.double_data(), "double_data");
    case ScalarType::Int64: return typed.template operator()<int64_t>(proto.int64_data(), "int64_data");
    case ScalarType::UInt64: return typed.template operator()<uint64_t>(proto.uint64_data(), "uint64_data");
    case ScalarType::UInt32: return typed.template operator()<uint32_t>(proto.uint64_data(), "uint64_data");
    case ScalarType::Int32: return typed.template operator()<int32_t>(proto.int32_data(), "int32_data");
    case ScalarType::Int16: return typed.template operator()<int16_t>(proto.int32_data(), "int32_data");
    case ScalarType::Int8: return typed.template operator()<int8_t>(proto.int32_data(), "int32_data");
    case ScalarType::UInt16: return typed.template operator()<uint16_t>(proto.int32_data(), "int32_data");
    case ScalarType::UInt8: return typed.template operator()<uint8_t>(proto.int32_data(), "int32_data");
    case ScalarType::Bool: return typed.template operator()<bool>(proto.int32_data(), "int32_data");
    case ScalarType::Float16: return typed.template operator()<Half>(proto.int32_data(), "int32_data");
    case ScalarType::BFloat16: return typed.template operator()<BFloat16>(proto.int32_data(), "int32_data");
  }
  detail::invalidScalarType("tensorFromProto", static_cast<int>(*dtype));
}

absl::StatusOr<AttributeValue> attributeValue(const ::onnx::AttributeProto& a, const std::string& what) {
  using A = ::onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return AttributeValue(a.i());
    case A::FLOAT: return AttributeValue(static_cast<double>(a.f()));
    case A::STRING: return AttributeValue(a.s());
    case A::INTS: return AttributeValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::FLOATS: return AttributeValue(std::vector<double>(a.floats().begin(), a.floats().end()));
    case A::STRINGS: return AttributeValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: {
      absl::StatusOr<Tensor> t = tensorFromProto(a.t(), what);
      if (!t.ok()) return t.status();
      return AttributeValue(*std::move(t));
    }
    default:
      return absl::UnimplementedError(
          strCat(what, " is of kind ", attributeTypeName(a.type()), ", which Backplane's ONNX runner does not take"));
  }
}

// "test_data_set_12" -> 12; nullopt for other names.
std::optional<int64_t> numberAfter(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  std::string_view digits(name.data() + prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(std::string(digits));
}

const char* valueKindOf(const ::onnx::TypeProto& type) {
  switch (type.value_case()) {
    case ::onnx::TypeProto::kSequenceType: return "an ONNX sequence";
    case ::onnx::TypeProto::kMapType: return "an ONNX map";
    case ::onnx::TypeProto::kOptionalType: return "an ONNX optional";
    case ::onnx::TypeProto::kSparseTensorType: return "an ONNX sparse tensor";
    default: return nullptr;  // a tensor, or no type given
  }
}

// Reads test_data_set_*/<prefix>_K.pb for graph values `values` (graph
// inputs or outputs, in order): the result is indexed like `values`, and
// nullopt where there is no file.
absl::StatusOr<std::vector<std::optional<Tensor>>> readDataFiles(
    const fs::path& set_dir, const google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>& values,
    const char* prefix) {
  std::vector<std::optional<Tensor>> out(static_cast<size_t>(values.size()));
  // In K order, so that the first file that fails is the same on every
  // file system.
  std::vector<std::pair<int64_t, fs::path>> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(set_dir, ec)) {
    std::optional<int64_t> k = numberAfter(e.path().filename().string(), strCat(prefix, "_"), ".pb");
    if (k) files.emplace_back(*k, e.path());
  }
  if (ec) return absl::InvalidArgumentError(strCat(set_dir.string(), ": cannot be listed: ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& [k, path] : files) {
    if (k >= values.size()) {
      return absl::InvalidArgumentError(strCat(path.string(), ": the graph has only ", values.size(), " ", prefix,
                                               "s, so there is no ", prefix, " ", k));
    }
    const ::onnx::ValueInfoProto& value = values.Get(static_cast<int>(k));
    const std::string what = strCat(prefix, " ", k, " ('", value.name(), "') in ", path.string());
    if (const char* kind = valueKindOf(value.type())) {
      return absl::UnimplementedError(strCat(what, " is ", kind, ", which Backplane has no type for"));
    }
    absl::StatusOr<::onnx::TensorProto> proto = parseFile<::onnx::TensorProto>(path, "TensorProto");
    if (!proto.ok()) return proto.status();
    // The file must hold the element type the graph declares: a runner
    // checks the node's output against the file's dtype.
    if (value.type().has_tensor_type() && value.type().tensor_type().has_elem_type() &&
        value.type().tensor_type().elem_type() != proto->data_type()) {
      return absl::InvalidArgumentError(strCat(what, " holds ONNX element type ",
                                               onnxElementTypeName(proto->data_type()), ", but the graph declares ",
                                               onnxElementTypeName(value.type().tensor_type().elem_type())));
    }
    absl::StatusOr<Tensor> tensor = tensorFromProto(*proto, what);
    if (!tensor.ok()) return tensor.status();
    out[static_cast<size_t>(k)] = *std::move(tensor);
  }
  return out;
}

absl::StatusOr<NodeTest::DataSet> loadDataSet(const fs::path& set_dir, const ::onnx::GraphProto& graph,
                                              const ::onnx::NodeProto& node) {
  NodeTest::DataSet set;
  set.name = set_dir.filename().string();
  absl::StatusOr<std::vector<std::optional<Tensor>>> graph_inputs = readDataFiles(set_dir, graph.input(), "input");
  if (!graph_inputs.ok()) return graph_inputs.status();
  absl::StatusOr<std::vector<std::optional<Tensor>>> graph_outputs = readDataFiles(set_dir, graph.output(), "output");
  if (!graph_outputs.ok()) return graph_outputs.status();

  // The value a node input takes: its graph input's file, else an
  // initializer of that name.
  auto initializer = [&](const std::string& name) -> const ::onnx::TensorProto* {
    for (const ::onnx::TensorProto& t : graph.initializer()) {
      if (t.name() == name) return &t;
    }
    return nullptr;
  };
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    if (name.empty()) {
      set.inputs.emplace_back(std::nullopt);
      continue;
    }
    std::optional<Tensor> value;
    bool is_graph_input = false;
    for (int k = 0; k < graph.input_size(); ++k) {
      if (graph.input(k).name() != name) continue;
      is_graph_input = true;
      value = (*graph_inputs)[static_cast<size_t>(k)];
      break;
    }
    if (!value) {
      if (const ::onnx::TensorProto* init = initializer(name)) {
        absl::StatusOr<Tensor> t = tensorFromProto(
            *init, strCat("initializer '", name, "' in ", (set_dir.parent_path() / "model.onnx").string()));
        if (!t.ok()) return t.status();
        value = *std::move(t);
      }
    }
    if (!value) {
      return absl::InvalidArgumentError(is_graph_input ? strCat(set_dir.string(), ": no file for node input ", i, " ('",
                                                                name, "'), a graph input with no initializer")
                                                       : strCat(set_dir.string(), ": node input ", i, " ('", name,
                                                                "') is neither a graph input nor an initializer"));
    }
    set.inputs.emplace_back(std::move(value));
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    std::optional<Tensor> value;
    for (int k = 0; k < graph.output_size() && !name.empty(); ++k) {
      if (graph.output(k).name() == name) {
        value = (*graph_outputs)[static_cast<size_t>(k)];
        if (!value) {
          return absl::InvalidArgumentError(
              strCat(set_dir.string(), ": no output_", k, ".pb for node output ", i, " ('", name, "')"));
        }
        break;
      }
    }
    set.outputs.emplace_back(std::move(value));
  }
  return set;
}

}  // namespace

std::optional<ScalarType> dtypeOfOnnxElementType(int64_t type) {
  if (type < 0 || type > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return scalarTypeFor(static_cast<int32_t>(type));
}

std::string elementTypeName(int64_t type) {
  if (type < 0 || type > std::numeric_limits<int32_t>::max()) return strCat("<unknown element type ", type, ">");
  return onnxElementTypeName(static_cast<int32_t>(type));
}

std::optional<int64_t> elementTypeFromName(const std::string& name) {
  for (int32_t t = 0; t < 64; ++t)
    if (onnxElementTypeName(t) == name) return t;
  return std::nullopt;
}

absl::StatusOr<std::vector<std::string>> findNodeTests(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(strCat(root,
                                      ": not a directory (expected a folder of ONNX node tests, e.g. "
                                      "onnx/backend/test/data/node; scripts/fetch_onnx_tests.sh fetches one)"));
  }
  std::vector<std::string> dirs;
  fs::recursive_directory_iterator it(root, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && fs::is_regular_file(it->path() / "model.onnx", ec)) {
      dirs.push_back(it->path().string());
    }
  }
  if (ec) return absl::InvalidArgumentError(strCat(root, ": cannot be listed: ", ec.message()));
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir) {
  const fs::path root(dir);
  const fs::path model_path = root / "model.onnx";
  absl::StatusOr<::onnx::ModelProto> model = parseFile<::onnx::ModelProto>(model_path, "model");
  if (!model.ok()) return model.status();
  const ::onnx::GraphProto& graph = model->graph();
  if (graph.node_size() != 1) {
    return absl::UnimplementedError(
        strCat(model_path.string(), ": the graph has ", graph.node_size(), " nodes; a node test runs exactly one"));
  }
  const ::onnx::NodeProto& node = graph.node(0);

  NodeTest test;
  test.name = root.filename().string();
  if (test.name.empty()) test.name = root.parent_path().filename().string();  // "dir/"
  test.dir = dir;
  test.op_type = node.op_type();
  test.domain = node.domain() == "ai.onnx" ? "" : node.domain();
  bool found_opset = false;
  for (const ::onnx::OperatorSetIdProto& o : model->opset_import()) {
    const std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    if (domain == test.domain) {
      test.opset = o.version();
      found_opset = true;
    }
  }
  if (!found_opset) {
    return absl::InvalidArgumentError(
        strCat(model_path.string(), ": no opset_import for the node's domain '", test.domain, "'"));
  }
  for (const ::onnx::AttributeProto& a : node.attribute()) {
    absl::StatusOr<AttributeValue> v =
        attributeValue(a, strCat("attribute '", a.name(), "' of ", test.op_type, " in ", model_path.string()));
    if (!v.ok()) return v.status();
    test.attributes.insert_or_assign(a.name(), *std::move(v));
  }
  test.inputs.assign(node.input().begin(), node.input().end());
  test.outputs.assign(node.output().begin(), node.output().end());

  std::vector<std::pair<int64_t, fs::path>> sets;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    std::optional<int64_t> n = numberAfter(e.path().filename().string(), "test_data_set_", "");
    if (n && e.is_directory(ec)) sets.emplace_back(*n, e.path());
  }
  if (ec) return absl::InvalidArgumentError(strCat(dir, ": cannot be listed: ", ec.message()));
  // A test with nothing to compare would pass without checking anything.
  if (sets.empty()) return absl::InvalidArgumentError(strCat(dir, ": no test_data_set_N folder"));
  std::sort(sets.begin(), sets.end());
  for (const auto& [n, path] : sets) {
    absl::StatusOr<NodeTest::DataSet> set = loadDataSet(path, graph, node);
    if (!set.ok()) return set.status();
    test.data_sets.push_back(*std::move(set));
  }
  return test;
}

namespace {
template <typename T>
const T* attributeAs(const NodeTest& test, const std::string& name, const char* kind) {
  auto it = test.attributes.find(name);
  if (it == test.attributes.end()) return nullptr;
  if (const T* v = std::get_if<T>(&it->second)) return v;
  BP_THROW(kInvalidArgument, "attribute '", name, "' of ", test.op_type, " in ", test.name, " is ",
           attributeValueKind(it->second), ", expected ", kind);
}
}  // namespace

int64_t NodeTest::intAttr(const std::string& name, int64_t fallback) const {
  const int64_t* v = attributeAs<int64_t>(*this, name, "INT");
  return v ? *v : fallback;
}

double NodeTest::floatAttr(const std::string& name, double fallback) const {
  const double* v = attributeAs<double>(*this, name, "FLOAT");
  return v ? *v : fallback;
}

std::string NodeTest::stringAttr(const std::string& name, const std::string& fallback) const {
  const std::string* v = attributeAs<std::string>(*this, name, "STRING");
  return v ? *v : fallback;
}

std::optional<std::vector<int64_t>> NodeTest::intsAttr(const std::string& name) const {
  const std::vector<int64_t>* v = attributeAs<std::vector<int64_t>>(*this, name, "INTS");
  if (!v) return std::nullopt;
  return *v;
}

}  // namespace backplane::conformance::onnx
