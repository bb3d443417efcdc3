#include "backplane/ops/standard_ops.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>
#include <string_view>

#include <bit>

#include "absl/container/flat_hash_map.h"
#include "families.h"

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derived_forms.h"
#include "backplane/ops/tensor.h"

namespace backplane {

// Note [The standard operator table]
// The one place the standard operators are declared, the analogue of
// PyTorch's native_functions.yaml. Names, arguments, defaults, broadcasting
// and type promotion follow PyTorch so that code and kernels port over.
// Each family (dispatcher/ops/src/<family>.cc) appends its entries:
//
//   * Structured ops come as a triple: `op.out(..., *, Tensor(a!) out)` is
//     the kernel plugins implement; its meta kernel runs the shape/dtype
//     rule and checks `out` (device, castable dtype, shape; an empty `out`
//     is resized). The functional `op(...)` and, where PyTorch has it, the
//     in-place `op_(...)` get composite kernels that apply the same rule,
//     allocate (or check `self`), and call `op.out`. So a plugin that
//     implements only `op.out` gets all three, and one that implements the
//     functional form too keeps its own (a native kernel beats a composite).
//   * Ops that are compositions of others (linear, addmm, silu, ...) get a
//     composite kernel built from standard ops only.
//   * Ops with neither are plain schemas that every backend implements.
const std::vector<StandardOp>& standardOperators() {
  static const std::vector<StandardOp>* ops = [] {
    auto* v = new std::vector<StandardOp>();
    ops::addCreationOps(*v);
    ops::addElementwiseOps(*v);
    ops::addElementwiseMoreOps(*v);
    ops::addReductionOps(*v);
    ops::addLinalgOps(*v);
    ops::addNNOps(*v);
    ops::addDataMovementOps(*v);
    ops::addIndexingOps(*v);
    ops::addBackwardOps(*v);
    ops::addBackwardNNOps(*v);
    ops::addOptimOps(*v);
    // A derived out= form's family and dtypes are its functional op's.
    for (StandardOp& op : *v) {
      if (op.derived_from.empty()) continue;
      auto f = std::find_if(v->begin(), v->end(), [&](const StandardOp& s) {
        return std::string_view(s.schema).substr(0, s.schema.find('(')) == op.derived_from;
      });
      BP_INTERNAL_ASSERT(f != v->end(), op.schema, " is derived from ", op.derived_from, ", which is not in the table");
      op.family = f->family;
      op.dtypes = f->dtypes;
    }
    return v;
  }();
  return *ops;
}

std::string ScalarTypeSet::toString() const {
  if (isAll()) return "every dtype";
  const auto name = [](int i) { return std::string(scalarTypeName(static_cast<ScalarType>(i))); };
  if (std::popcount(bits_) >= kNumScalarTypes - 4) {  // "every dtype but bool, uint16, uint32, uint64"
    std::string s;
    for (int i = 0; i < kNumScalarTypes; ++i)
      if (!(bits_ & (1u << i))) s += (s.empty() ? "" : ", ") + name(i);
    return "every dtype but " + s;
  }
  std::string s;
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (bits_ & (1u << i)) s += (s.empty() ? "" : ", ") + name(i);
  return s.empty() ? "no dtype" : s;
}

const StandardOp* findStandardOp(std::string_view op) {
  static const auto* by_name = [] {
    auto* m = new absl::flat_hash_map<std::string, const StandardOp*>();
    for (const StandardOp& s : standardOperators()) m->emplace(s.schema.substr(0, s.schema.find('(')), &s);
    return m;
  }();
  const std::string prefix = strCat(kStandardNamespace, "::");
  if (op.starts_with(prefix)) op.remove_prefix(prefix.size());
  auto it = by_name->find(std::string(op));
  return it == by_name->end() ? nullptr : it->second;
}

namespace {
// The entry derived from `op` of the kind asked for, or nullptr.
const StandardOp* derivedOf(std::string_view op, bool functional) {
  using Index = absl::flat_hash_map<std::string, const StandardOp*>;
  static const auto* by_source = [] {
    auto* m = new std::array<Index, 2>();
    for (const StandardOp& s : standardOperators())
      if (!s.derived_from.empty()) (*m)[s.derived_functional].emplace(s.derived_from, &s);
    return m;
  }();
  const std::string prefix = strCat(kStandardNamespace, "::");
  if (op.starts_with(prefix)) op.remove_prefix(prefix.size());
  const Index& index = (*by_source)[functional];
  auto it = index.find(std::string(op));
  return it == index.end() ? nullptr : it->second;
}
}  // namespace

const StandardOp* derivedOutFormOf(std::string_view op) { return derivedOf(op, false); }
const StandardOp* derivedFunctionalOf(std::string_view op) { return derivedOf(op, true); }

ScalarTypeSet acceptedDtypes(const StandardOp& op, std::string_view argument) {
  ScalarTypeSet s = ScalarTypeSet::all();
  for (const ArgumentDtypes& a : op.dtypes)
    if (argument == a.argument) s = a.accepted;
  if (!servesBarebonesUnsigned(op)) s = s.without({ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64});
  return s;
}

// Note [Barebones unsigned dtypes]
// uint16, uint32 and uint64 are PyTorch 2.x's "barebones" unsigned types:
// they promote only with themselves and floating dtypes (promoteTypes), and
// have creation, copies, data movement and comparisons, but not arithmetic,
// reductions, linalg or nn. The ops below serve them; every other standard
// op refuses a uint16/32/64 tensor argument before any kernel runs (Note
// [Dtypes an operator accepts] in operator_entry.h), so no kernel, CPU,
// GPU or a vendor's, is handed one it was not written for.
bool servesBarebonesUnsigned(const StandardOp& op) {
  static constexpr std::string_view kServing[] = {"empty",
                                                  "empty_strided",
                                                  "fill_",
                                                  "zero_",
                                                  "zeros",
                                                  "ones",
                                                  "full",
                                                  "empty_like",
                                                  "fill",
                                                  "zero",
                                                  "copy",
                                                  "zeros_like",
                                                  "ones_like",
                                                  "full_like",
                                                  "_copy_on_device_",
                                                  "copy_",
                                                  "to",
                                                  "cat",
                                                  "stack",
                                                  "index_select",
                                                  "gather",
                                                  "masked_fill",
                                                  "masked_fill_",
                                                  "eq",
                                                  "eq_",
                                                  "ne",
                                                  "ne_",
                                                  "lt",
                                                  "lt_",
                                                  "le",
                                                  "le_",
                                                  "gt",
                                                  "gt_",
                                                  "ge",
                                                  "ge_"};
  const std::string_view name = std::string_view(op.schema).substr(0, op.schema.find_first_of(".("));
  return std::find(std::begin(kServing), std::end(kServing), name) != std::end(kServing);
}

// Note [Registering the standard operators]
// The dispatcher (the layer below) holds an empty table; this layer fills
// it when libbackplane.so is loaded: every schema first, then the meta and
// composite kernels that refer to them.
// A static initializer of the shared library runs before any code of a
// program that links it, and nothing in the library dispatches a standard
// op while the library itself initialises. The handles are never
// destroyed: the registrations last as long as the process, like the
// Dispatcher singleton.
namespace detail {
// The registrations' handles, never destroyed; a global, so leak checkers
// see them reachable.
std::vector<RegistrationHandle>* g_standard_registrations = nullptr;
}  // namespace detail

// Note [Dtype-fixed arguments]
// A kernel's declared dtypes (Note [Declared dtypes] in operator_entry.h)
// are about the tensors whose dtype the caller picks. An argument whose
// dtype the op's rule fixes does not count (OperatorEntry::
// setDtypeFixedArguments), so an index_select.out declaring float32 serves
// a float32 self with its int64 index, and never sees int64 data:
// - an input that this table lets take only index or mask dtypes (a subset
//   of bool, uint8, int32, int64) while another tensor argument takes a
//   floating dtype: index_select's and gather's index, embedding's and
//   index_put's indices, masked_fill's mask, where's condition;
// - an out= argument that holds indices: int64 (sort.values' and
//   topk.values' "indices", max.dim_max's "max_values" and min.dim_min's
//   "min_indices", named as in PyTorch; argsort.stable_out's "out";
//   _unique2.out's inverse and counts, "out1" and "out2");
// - the out= arguments of the ops whose result dtype is fixed, listed in
//   kFixedResultOps: the comparisons and logical ops (bool), isnan/isinf
//   (bool), argmax/argmin (int64), all/any (bool; uint8 for a uint8 input).
// The masks are computed once, at registration, from the table.
uint64_t dtypeFixedArguments(const StandardOp& op, const FunctionSchema& schema) {
  static constexpr std::string_view kFixedResultOps[] = {
      "eq",          "ne",          "lt",    "le",    "gt",     "ge",     "logical_and", "logical_or",
      "logical_xor", "logical_not", "isnan", "isinf", "argmax", "argmin", "all",         "any"};
  constexpr ScalarTypeSet kIndexOrMask = {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int32, ScalarType::Int64};
  auto accepted = [&](std::string_view name) {
    for (const ArgumentDtypes& a : op.dtypes)
      if (name == a.argument) return std::optional<ScalarTypeSet>(a.accepted);
    return std::optional<ScalarTypeSet>();
  };
  auto takesFloating = [](ScalarTypeSet s) {
    return s.contains(ScalarType::Float32) || s.contains(ScalarType::Float64) || s.contains(ScalarType::Float16);
  };
  const std::string_view base = std::string_view(op.schema).substr(0, op.schema.find_first_of(".("));
  const bool fixed_result =
      std::find(std::begin(kFixedResultOps), std::end(kFixedResultOps), base) != std::end(kFixedResultOps);
  const auto& args = schema.arguments();
  bool another_floating = false;
  for (const Argument& a : args) {
    std::optional<ScalarTypeSet> s = accepted(a.name);
    another_floating |= !a.isOut() && (!s || takesFloating(*s));
  }
  uint64_t mask = 0;
  for (size_t i = 0; i < args.size() && i < 64; ++i) {
    const Argument& a = args[i];
    bool fixed = false;
    if (a.isOut()) {
      fixed = fixed_result || a.name == "indices" || a.name == "max_values" || a.name == "min_indices" ||
              base == "argsort" || (base == "_unique2" && (a.name == "out1" || a.name == "out2"));
    } else if (std::optional<ScalarTypeSet> s = accepted(a.name)) {
      fixed = s->minus(kIndexOrMask) == ScalarTypeSet() && another_floating;
    }
    if (fixed) mask |= uint64_t{1} << i;
  }
  return mask;
}

namespace {

struct StandardOperatorRegistration {
  StandardOperatorRegistration() {
    auto* handles = detail::g_standard_registrations = new std::vector<RegistrationHandle>();
    Dispatcher& d = Dispatcher::singleton();
    for (const StandardOp& op : standardOperators())
      handles->push_back(
          valueOrThrow(d.registerDef(strCat(kStandardNamespace, "::", op.schema), "standard operators")));
    for (const StandardOp& op : standardOperators()) {
      std::string name = strCat(kStandardNamespace, "::", op.schema.substr(0, op.schema.find('(')));
      if (op.meta.isValid())
        handles->push_back(valueOrThrow(d.registerMeta(name, op.meta, "standard operators (shape rule)")));
      if (op.composite.isValid())
        handles->push_back(valueOrThrow(d.registerComposite(name, op.composite, "standard operators (composite)")));
      if (!op.derived_from.empty()) {
        const OperatorHandle from = d.findOpOrThrow(strCat(kStandardNamespace, "::", op.derived_from));
        const FunctionSchema& schema = d.findOpOrThrow(name).schema();
        KernelFunction k =
            valueOrThrow(op.derived_functional ? derivedFunctionalKernel(from, schema)
                                               : derivedOutKernel(from, schema, dtypeFixedArguments(op, schema)));
        handles->push_back(valueOrThrow(d.registerComposite(
            name, std::move(k), strCat("standard operators (derived from ", op.derived_from, ")"))));
      }
      OperatorEntry& entry = d.findOpOrThrow(name).entry();
      if (!servesBarebonesUnsigned(op)) entry.setAcceptedDtypes(kWithoutBarebones, kBarebonesNote);
      entry.setDtypeFixedArguments(dtypeFixedArguments(op, *entry.schema()));
    }
  }

  static constexpr uint64_t kWithoutBarebones =
      DtypeSet::kKnownBits &
      ~((uint64_t{1} << static_cast<int>(ScalarType::UInt16)) | (uint64_t{1} << static_cast<int>(ScalarType::UInt32)) |
        (uint64_t{1} << static_cast<int>(ScalarType::UInt64)));
  static constexpr const char* kBarebonesNote =
      "uint16, uint32 and uint64 have creation, copies, data movement and comparisons only, as in PyTorch 2.x.";
};

const StandardOperatorRegistration kStandardOperatorRegistration;

}  // namespace

}  // namespace backplane
