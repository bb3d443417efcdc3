#include "backplane/conformance/onnx_node_test.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
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

// Note [ONNX loading limits]
// The folders under --onnx are untrusted input: a test must not be able to
// hang discovery, exhaust memory or pass without checking anything.
// - Discovery follows symbolic links to directories (a corpus may be
//   assembled from links), but enters each directory (st_dev, st_ino) once;
//   a link back to a directory it is inside is a loop, reported with both
//   paths, never followed.
// - A test is any directory with an entry named model.onnx; one that is not
//   a regular file (a FIFO, a device, a directory) is refused when the test
//   loads, so it counts as a test in error. Files are opened with
//   O_NONBLOCK (opening a FIFO never waits for a writer) and checked with
//   fstat before a byte is read.
// - Each file is read once, into one buffer, and parsed from it. Its size
//   is checked against LoadLimits::max_file_bytes (64 MiB by default,
//   BACKPLANE_ONNX_MAX_FILE_BYTES) before reading, and reading stops one
//   byte past the limit for a file that grows meanwhile. The corpus's
//   largest file is 393,235 bytes. Messages nested deeper than
//   kMaxProtobufNesting do not parse. (A parsed repeated field may take up
//   to 8 times its packed bytes in memory, so a file at the limit costs at
//   most about 9 times it while it loads.)
// - The tensors one test holds, all data sets together, are capped by
//   max_tensor_bytes (256 MiB, BACKPLANE_ONNX_MAX_TENSOR_BYTES), checked
//   before each is allocated.
// - A tensor an op mapping creates with a size from the inputs' values
//   (ConstantOfShape's shape: a 200-byte test may ask for 8 GiB) is capped
//   by max_alloc_bytes (1 GiB, BACKPLANE_ONNX_MAX_ALLOC_BYTES), refused
//   before it is allocated, naming the op, the bytes and the cap
//   (checkCreation in onnx_ops.h).
// - opset versions outside [1, kMaxOpsetVersion] are refused, and so is a
//   test whose data sets give no expected output to compare with (a graph
//   that lists no outputs, or no output_K.pb): it would pass unchecked.

namespace backplane::conformance::onnx {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFileBytesVar = "BACKPLANE_ONNX_MAX_FILE_BYTES";
constexpr const char* kTensorBytesVar = "BACKPLANE_ONNX_MAX_TENSOR_BYTES";
constexpr const char* kAllocBytesVar = "BACKPLANE_ONNX_MAX_ALLOC_BYTES";

// "64M" -> 67108864; nullopt for anything but a positive size below 2^62.
std::optional<int64_t> parseSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) return std::nullopt;
  int64_t value = std::stoll(std::string(text.substr(0, digits)));
  std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (value <= 0 || value > (int64_t{1} << (62 - shift))) return std::nullopt;
  return value << shift;
}

// Sets `*value` from `var` when it is set and not empty.
absl::Status readSizeVar(const char* var, int64_t* value) {
  const char* text = std::getenv(var);
  if (text == nullptr || *text == '\0') return absl::OkStatus();
  std::optional<int64_t> v = parseSize(text);
  if (!v) {
    return absl::InvalidArgumentError(strCat(var, "='", text,
                                             "' is not a size: give a positive number of bytes, optionally with a "
                                             "K, M or G suffix (powers of 1024), e.g. ",
                                             var, "=128M"));
  }
  *value = *v;
  return absl::OkStatus();
}

// "a FIFO" for an st_mode that is not a regular file.
const char* fileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// `path`'s bytes, read once (Note [ONNX loading limits]). `what` names the
// file's role in errors: "model".
absl::StatusOr<std::string> readFileOnce(const fs::path& path, const char* what, int64_t limit) {
  const std::string name = path.string();
  auto tooLarge = [&](const std::string& size) {
    return absl::InvalidArgumentError(strCat(name, ": ", size, " bytes, past the limit of ", limit,
                                             " bytes on one ONNX file (the node test's ", what, "); raise it with ",
                                             kFileBytesVar, "=<bytes> if the file is meant to be this large"));
  };
  // stat first, so that a special file is not even opened.
  struct stat st;
  if (::stat(name.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(strCat(name, ": no such file (the node test's ", what, ")"));
    }
    return absl::InvalidArgumentError(strCat(name, ": cannot be read: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        strCat(name, ": is ", fileTypeName(st.st_mode), ", not a regular file (the node test's ", what, ")"));
  }
  FileDescriptor fd(::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return absl::InvalidArgumentError(strCat(name, ": cannot be opened: ", std::strerror(errno)));
  // Checked again on what was opened: the path may have changed since.
  if (::fstat(fd.get(), &st) != 0) {
    return absl::InvalidArgumentError(strCat(name, ": cannot be read: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        strCat(name, ": is ", fileTypeName(st.st_mode), ", not a regular file (the node test's ", what, ")"));
  }
  if (st.st_size > limit) return tooLarge(std::to_string(st.st_size));
  // One byte more than the size fstat gave shows a file that grew; reading
  // stops one byte past the limit whatever the file says.
  std::string bytes(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t have = 0;
  for (;;) {
    if (have == bytes.size()) {
      if (static_cast<int64_t>(have) > limit) return tooLarge(strCat("more than ", limit));
      bytes.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(have) * 2, limit + 1)));
    }
    const ssize_t n = ::read(fd.get(), bytes.data() + have, bytes.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InvalidArgumentError(strCat(name, ": cannot be read: ", std::strerror(errno)));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(have) > limit) return tooLarge(strCat("more than ", limit));
  bytes.resize(have);
  return bytes;
}

// What a node test's tensors may still take (LoadLimits::max_tensor_bytes).
struct TensorBudget {
  int64_t limit;
  int64_t used = 0;
};

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
absl::StatusOr<Proto> parseFile(const fs::path& path, const char* what, const LoadLimits& limits) {
  absl::StatusOr<std::string> bytes = readFileOnce(path, what, limits.max_file_bytes);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        strCat(path.string(), ": ", bytes->size(), " bytes; protobuf parses messages of less than 2 GiB"));
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes->data()),
                                            static_cast<int>(bytes->size()));
  in.SetRecursionLimit(kMaxProtobufNesting);
  Proto proto;
  if (!proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError(strCat(path.string(), ": not a valid ONNX ", what,
                                             " (the protobuf does not parse, or nests messages more than ",
                                             kMaxProtobufNesting, " deep)"));
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
absl::StatusOr<Tensor> tensorFromProto(const ::onnx::TensorProto& proto, const std::string& what,
                                       TensorBudget& budget) {
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
    if (static_cast<int64_t>(nbytes) > budget.limit - budget.used) {
      return absl::InvalidArgumentError(strCat(what, ": its ", nbytes, " bytes bring the node test's tensors to ",
                                               budget.used + static_cast<int64_t>(nbytes), " bytes, past the limit of ",
                                               budget.limit, " bytes; raise it with ", kTensorBytesVar,
                                               "=<bytes> if the test is meant to be this large"));
    }
    budget.used += static_cast<int64_t>(nbytes);
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

absl::StatusOr<AttributeValue> attributeValue(const ::onnx::AttributeProto& a, const std::string& what,
                                              TensorBudget& budget) {
  using A = ::onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return AttributeValue(a.i());
    case A::FLOAT: return AttributeValue(static_cast<double>(a.f()));
    case A::STRING: return AttributeValue(a.s());
    case A::INTS: return AttributeValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::FLOATS: return AttributeValue(std::vector<double>(a.floats().begin(), a.floats().end()));
    case A::STRINGS: return AttributeValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: {
      absl::StatusOr<Tensor> t = tensorFromProto(a.t(), what, budget);
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
    const char* prefix, const LoadLimits& limits, TensorBudget& budget) {
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
    absl::StatusOr<::onnx::TensorProto> proto = parseFile<::onnx::TensorProto>(path, "TensorProto", limits);
    if (!proto.ok()) return proto.status();
    // The file must hold the element type the graph declares: a runner
    // checks the node's output against the file's dtype.
    if (value.type().has_tensor_type() && value.type().tensor_type().has_elem_type() &&
        value.type().tensor_type().elem_type() != proto->data_type()) {
      return absl::InvalidArgumentError(strCat(what, " holds ONNX element type ",
                                               onnxElementTypeName(proto->data_type()), ", but the graph declares ",
                                               onnxElementTypeName(value.type().tensor_type().elem_type())));
    }
    absl::StatusOr<Tensor> tensor = tensorFromProto(*proto, what, budget);
    if (!tensor.ok()) return tensor.status();
    out[static_cast<size_t>(k)] = *std::move(tensor);
  }
  return out;
}

absl::StatusOr<NodeTest::DataSet> loadDataSet(const fs::path& set_dir, const ::onnx::GraphProto& graph,
                                              const ::onnx::NodeProto& node, const LoadLimits& limits,
                                              TensorBudget& budget) {
  NodeTest::DataSet set;
  set.name = set_dir.filename().string();
  absl::StatusOr<std::vector<std::optional<Tensor>>> graph_inputs =
      readDataFiles(set_dir, graph.input(), "input", limits, budget);
  if (!graph_inputs.ok()) return graph_inputs.status();
  absl::StatusOr<std::vector<std::optional<Tensor>>> graph_outputs =
      readDataFiles(set_dir, graph.output(), "output", limits, budget);
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
            *init, strCat("initializer '", name, "' in ", (set_dir.parent_path() / "model.onnx").string()), budget);
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

absl::StatusOr<LoadLimits> loadLimitsFromEnvironment() {
  LoadLimits limits;
  for (auto [var, value] :
       {std::pair{kFileBytesVar, &limits.max_file_bytes}, std::pair{kTensorBytesVar, &limits.max_tensor_bytes},
        std::pair{kAllocBytesVar, &limits.max_alloc_bytes}}) {
    absl::Status s = readSizeVar(var, value);
    if (!s.ok()) return s;
  }
  return limits;
}

absl::StatusOr<std::vector<std::string>> findNodeTests(const std::string& root) {
  // Refused here, in the parent, before any worker loads a test.
  if (absl::StatusOr<LoadLimits> limits = loadLimitsFromEnvironment(); !limits.ok()) return limits.status();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(strCat(root,
                                      ": not a directory (expected a folder of ONNX node tests, e.g. "
                                      "onnx/backend/test/data/node; scripts/fetch_onnx_tests.sh fetches one)"));
  }
  // Depth first, each directory entered once (Note [ONNX loading limits]):
  // a directory's identity, and the directories on the path to it with
  // their identities, to tell a loop (a link to one of them) from a second
  // link to a directory searched already.
  using Id = std::pair<dev_t, ino_t>;
  struct Pending {
    fs::path path;
    std::vector<std::pair<Id, fs::path>> ancestors;  // root first, this one last
  };
  auto identity = [](const fs::path& p, Id* id) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    *id = {st.st_dev, st.st_ino};
    return true;
  };
  std::set<Id> searched;
  std::vector<std::string> dirs;
  std::vector<Pending> stack;
  Id root_id;
  if (!identity(root, &root_id)) return absl::InvalidArgumentError(strCat(root, ": cannot be listed"));
  stack.push_back({fs::path(root), {{root_id, fs::path(root)}}});
  while (!stack.empty()) {
    Pending dir = std::move(stack.back());
    stack.pop_back();
    // Claimed when searched, so that of two paths to one directory the
    // first in name order is the one reported.
    if (!searched.insert(dir.ancestors.back().first).second) continue;
    std::vector<fs::path> children;
    for (fs::directory_iterator it(dir.path, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.filename() == "model.onnx" && dir.ancestors.size() > 1) {
        // Whatever its type (a FIFO, a folder): loadNodeTest refuses it, so
        // the test counts, in error.
        dirs.push_back(dir.path.string());
        continue;
      }
      // (A model.onnx in `root` itself is no test: `root` is a folder of them.)
      children.push_back(p);
    }
    if (ec) return absl::InvalidArgumentError(strCat(dir.path.string(), ": cannot be listed: ", ec.message()));
    std::sort(children.begin(), children.end());
    // Pushed in reverse, so popped (searched) in name order.
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      Id id;
      if (!identity(*it, &id)) continue;  // not a directory, nor a link to one (or a dangling link)
      for (const auto& [ancestor_id, ancestor] : dir.ancestors) {
        if (ancestor_id == id) {
          return absl::InvalidArgumentError(
              strCat(it->string(), ": leads back to ", ancestor.string(),
                     ", a directory it is inside (a loop of symbolic links or mounts); remove the link, or point "
                     "--onnx at a folder without it"));
        }
      }
      Pending child{*it, dir.ancestors};
      child.ancestors.emplace_back(id, *it);
      stack.push_back(std::move(child));
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir) {
  absl::StatusOr<LoadLimits> limits = loadLimitsFromEnvironment();
  if (!limits.ok()) return limits.status();
  return loadNodeTest(dir, *limits);
}

absl::StatusOr<NodeTest> loadNodeTest(const std::string& dir, const LoadLimits& limits) {
  const fs::path root(dir);
  const fs::path model_path = root / "model.onnx";
  absl::StatusOr<::onnx::ModelProto> model = parseFile<::onnx::ModelProto>(model_path, "model", limits);
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
    if (o.version() < 1 || o.version() > kMaxOpsetVersion) {
      return absl::InvalidArgumentError(strCat(model_path.string(), ": opset_import of domain '", domain,
                                               "' has version ", o.version(), ", which is no opset (ONNX numbers ",
                                               "them from 1; this runner takes 1 to ", kMaxOpsetVersion, ")"));
    }
    if (domain == test.domain) {
      test.opset = o.version();
      found_opset = true;
    }
  }
  if (!found_opset) {
    return absl::InvalidArgumentError(
        strCat(model_path.string(), ": no opset_import for the node's domain '", test.domain, "'"));
  }
  test.max_alloc_bytes = limits.max_alloc_bytes;
  TensorBudget budget{limits.max_tensor_bytes};
  for (const ::onnx::AttributeProto& a : node.attribute()) {
    absl::StatusOr<AttributeValue> v =
        attributeValue(a, strCat("attribute '", a.name(), "' of ", test.op_type, " in ", model_path.string()), budget);
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
    absl::StatusOr<NodeTest::DataSet> set = loadDataSet(path, graph, node, limits, budget);
    if (!set.ok()) return set.status();
    // Likewise a data set with no expected output: the node would run, and
    // pass, with nothing checked.
    if (std::none_of(set->outputs.begin(), set->outputs.end(), [](const auto& t) { return t.has_value(); })) {
      return absl::InvalidArgumentError(
          graph.output_size() == 0
              ? strCat(model_path.string(), ": the graph lists no outputs, so the test has nothing to compare")
              : strCat(path.string(), ": no output_K.pb for any of the node's outputs, so the data set has ",
                       "nothing to compare"));
    }
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
