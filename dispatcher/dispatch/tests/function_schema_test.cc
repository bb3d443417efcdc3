#include "backplane/dispatch/function_schema.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace backplane {
namespace {

// gtest-only substring check (no gmock dependency) that prints both strings.
::testing::AssertionResult HasSubstr(std::string_view haystack, std::string_view needle) {
  if (haystack.find(needle) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' does not contain '" << needle << "'";
}

FunctionSchema MustParse(std::string_view text) {
  absl::StatusOr<FunctionSchema> schema = FunctionSchema::parse(text);
  EXPECT_TRUE(schema.ok()) << schema.status();
  if (!schema.ok()) return FunctionSchema({"invalid", "invalid", ""}, {}, {});
  return *std::move(schema);
}

// ---------------------------------------------------------------------------
// Round trips: canonical text parses and prints back byte-for-byte, and the
// printed text re-parses to an equal schema.

class CanonicalRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(CanonicalRoundTrip, PrintsBackIdentically) {
  const std::string text = GetParam();
  FunctionSchema schema = MustParse(text);
  EXPECT_EQ(schema.toString(), text);
  absl::StatusOr<FunctionSchema> reparsed = FunctionSchema::parse(schema.toString());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(*reparsed, schema);
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    RealisticSchemas, CanonicalRoundTrip,
    ::testing::Values(
        "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
        "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) "
            "-> Tensor(a!)",
        "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], "
            "int[2] padding=[0, 0], int[2] dilation=[1, 1], int groups=1) -> Tensor",
        "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
            "ScalarType? dtype=None) -> Tensor",
        "aten::max.dim(Tensor self, int dim, bool keepdim=False) "
            "-> (Tensor values, Tensor indices)",
        "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
            "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
        "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
        "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
        "aten::to.device(Tensor(a) self, Device device, ScalarType dtype, "
            "bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) "
            "-> Tensor(a)",
        "test::reduce(Tensor self, str reduce=\"mean\") -> Tensor",
        "aten::full(int[] size, Scalar fill_value, *, ScalarType? dtype=None, "
            "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "test::noop(Tensor self) -> Tensor",
        "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()",
        "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
            "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
        "aten::native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
            "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, "
            "Tensor? save_invstd, bool train, float eps, bool[3] output_mask) "
            "-> (Tensor, Tensor, Tensor)",
        "aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) "
            "-> Tensor(a)",
        "aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
        "aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
        "aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        "aten::std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, "
            "bool keepdim=False) -> Tensor",
        "aten::size.int(Tensor self, int dim) -> int",
        "aten::q_scale(Tensor self) -> float",
        "aten::is_nonzero(Tensor self) -> bool",
        "aten::item(Tensor self) -> Scalar",
        "aten::chunk(Tensor(a) self, int chunks, int dim=0) -> Tensor[]",
        "aten::pdist(Tensor self, float p=2.0) -> Tensor",
        "test::lists(float[2] scales=[1.0, 2.5], bool[2] mask=[True, False], "
            "int[]? sizes=[-1, 3], float x=-inf) -> Tensor",
        "test::strings(str a=\"it's \\\"quoted\\\" \\\\ ok\", Device d=\"cuda:0\") -> Tensor",
        "test::no_args() -> ()",
        "test::kwargs_only(*, Tensor(a!) out) -> (Tensor(a!) out)"));
// clang-format on

// Non-canonical spellings normalize to a known canonical text.
struct Normalization {
  const char* input;
  const char* canonical;
};

void PrintTo(const Normalization& n, std::ostream* os) { *os << n.input; }

class NormalizingRoundTrip : public ::testing::TestWithParam<Normalization> {};

TEST_P(NormalizingRoundTrip, PrintsCanonicalForm) {
  FunctionSchema schema = MustParse(GetParam().input);
  EXPECT_EQ(schema.toString(), GetParam().canonical);
  absl::StatusOr<FunctionSchema> reparsed = FunctionSchema::parse(schema.toString());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(*reparsed, schema);
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Spellings, NormalizingRoundTrip,
    ::testing::Values(
        // Bare int default for a sized list expands, as in PyTorch.
        Normalization{
            "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor",
            "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, "
                "int[2] stride=[1, 1], int[2] padding=[0, 0], int[2] dilation=[1, 1], "
                "int groups=1) -> Tensor"},
        Normalization{"aten::gelu(Tensor self, *, str approximate='none') -> Tensor",
                      "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor"},
        Normalization{"aten::full(SymInt[] size, Scalar fill_value) -> Tensor",
                      "aten::full(int[] size, Scalar fill_value) -> Tensor"},
        Normalization{
            "  aten::add.Tensor ( Tensor  self ,Tensor other,*,Scalar alpha = 1 )->Tensor  ",
            "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
        Normalization{"aten::f(Tensor ( a ! ) x, int [ 2 ] ? y) -> ( Tensor )",
                      "aten::f(Tensor(a!) x, int[2]? y) -> Tensor"},
        Normalization{"aten::f(Tensor?(a!) x) -> Tensor",
                      "aten::f(Tensor(a!)? x) -> Tensor"},
        Normalization{"aten::f(float eps=1e-5, float p=2, Scalar s=1.) -> Tensor",
                      "aten::f(float eps=1e-05, float p=2.0, Scalar s=1.0) -> Tensor"},
        Normalization{"aten::f(bool[3] m=True) -> Tensor",
                      "aten::f(bool[3] m=[True, True, True]) -> Tensor"},
        Normalization{"aten::f(Tensor self) -> Tensor out",
                      "aten::f(Tensor self) -> (Tensor out)"}));
// clang-format on

// ---------------------------------------------------------------------------
// Field-level checks.

TEST(FunctionSchemaTest, AddTensorFields) {
  FunctionSchema s = MustParse(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> "
      "Tensor");
  EXPECT_EQ(s.name(), (OperatorName{"aten", "add", "Tensor"}));
  ASSERT_EQ(s.arguments().size(), 3u);
  const Argument& alpha = s.arguments()[2];
  EXPECT_EQ(alpha.name, "alpha");
  EXPECT_EQ(alpha.type.base, BaseType::Scalar);
  EXPECT_TRUE(alpha.kwarg_only);
  EXPECT_FALSE(s.arguments()[1].kwarg_only);
  ASSERT_TRUE(alpha.default_value.has_value());
  ASSERT_TRUE(std::holds_alternative<int64_t>(*alpha.default_value));
  EXPECT_EQ(std::get<int64_t>(*alpha.default_value), 1);
  EXPECT_FALSE(s.isMutable());
  EXPECT_EQ(s.argumentIndex("self"), 0u);
  EXPECT_EQ(s.argumentIndex("other"), 1u);
  EXPECT_EQ(s.argumentIndex("alpha"), 2u);
  EXPECT_EQ(s.argumentIndex("out"), std::nullopt);
  ASSERT_EQ(s.returns().size(), 1u);
  EXPECT_EQ(s.returns()[0].name, "");
  EXPECT_EQ(s.returns()[0].type, SchemaType{BaseType::Tensor});
}

TEST(FunctionSchemaTest, InPlaceIsMutableButNotOut) {
  FunctionSchema s = MustParse(
      "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> "
      "Tensor(a!)");
  EXPECT_TRUE(s.isMutable());
  ASSERT_TRUE(s.arguments()[0].alias.has_value());
  EXPECT_EQ(*s.arguments()[0].alias, (AliasInfo{"a", true}));
  EXPECT_FALSE(s.arguments()[0].isOut());  // positional, not out=
  EXPECT_FALSE(s.arguments()[1].alias.has_value());
  ASSERT_TRUE(s.returns()[0].alias.has_value());
  EXPECT_EQ(*s.returns()[0].alias, (AliasInfo{"a", true}));
}

TEST(FunctionSchemaTest, OutVariant) {
  FunctionSchema s = MustParse(
      "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) "
      "out) -> Tensor(a!)");
  EXPECT_TRUE(s.isMutable());
  ASSERT_EQ(s.arguments().size(), 4u);
  EXPECT_FALSE(s.arguments()[2].isOut());  // kwarg-only but no alias
  EXPECT_TRUE(s.arguments()[3].isOut());
  EXPECT_TRUE(s.arguments()[3].kwarg_only);
  EXPECT_EQ(s.argumentIndex("out"), 3u);

  // A keyword-only argument that only aliases (no '!') is not an out= argument.
  FunctionSchema view = MustParse("test::f(Tensor self, *, Tensor(a) base) -> Tensor(a)");
  EXPECT_TRUE(view.arguments()[1].kwarg_only);
  EXPECT_FALSE(view.arguments()[1].isOut());
  EXPECT_FALSE(view.isMutable());
}

TEST(FunctionSchemaTest, ReadOnlyAliasIsNotMutable) {
  FunctionSchema s = MustParse("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)");
  EXPECT_FALSE(s.isMutable());
  ASSERT_TRUE(s.arguments()[0].alias.has_value());
  EXPECT_EQ(*s.arguments()[0].alias, (AliasInfo{"a", false}));
  EXPECT_EQ(s.arguments()[1].type.base, BaseType::Int);
  EXPECT_TRUE(s.arguments()[1].type.is_list);
}

TEST(FunctionSchemaTest, Conv2dListDefaultsExpand) {
  FunctionSchema s = MustParse(
      "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] "
      "stride=1, "
      "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor");
  const Argument& bias = s.arguments()[2];
  EXPECT_TRUE(bias.type.is_optional);
  ASSERT_TRUE(bias.default_value.has_value());
  EXPECT_TRUE(std::holds_alternative<std::monostate>(*bias.default_value));

  const Argument& stride = s.arguments()[3];
  EXPECT_TRUE(stride.type.is_list);
  EXPECT_EQ(stride.type.list_size, 2);
  EXPECT_FALSE(stride.type.is_optional);
  EXPECT_EQ(stride.type.str(), "int[2]");
  ASSERT_TRUE(stride.default_value.has_value());
  EXPECT_EQ(std::get<std::vector<int64_t>>(*stride.default_value), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(*s.arguments()[4].default_value), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(std::get<int64_t>(*s.arguments()[6].default_value), 1);
}

TEST(FunctionSchemaTest, SumDimIntList) {
  FunctionSchema s = MustParse(
      "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor");
  const SchemaType& dim = s.arguments()[1].type;
  EXPECT_EQ(dim.base, BaseType::Int);
  EXPECT_TRUE(dim.is_list);
  EXPECT_EQ(dim.list_size, 1);
  EXPECT_TRUE(dim.is_optional);
  EXPECT_FALSE(dim.element_optional);
  EXPECT_EQ(dim.str(), "int[1]?");
  EXPECT_FALSE(s.arguments()[1].default_value.has_value());
  EXPECT_EQ(std::get<bool>(*s.arguments()[2].default_value), false);
  EXPECT_FALSE(s.arguments()[2].kwarg_only);
  const Argument& dtype = s.arguments()[3];
  EXPECT_TRUE(dtype.kwarg_only);
  EXPECT_EQ(dtype.type.base, BaseType::ScalarType);
  EXPECT_TRUE(dtype.type.is_optional);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(*dtype.default_value));
}

TEST(FunctionSchemaTest, NamedTupleReturns) {
  FunctionSchema s = MustParse(
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor "
      "values, Tensor indices)");
  ASSERT_EQ(s.returns().size(), 2u);
  EXPECT_EQ(s.returns()[0].name, "values");
  EXPECT_EQ(s.returns()[1].name, "indices");
  EXPECT_EQ(s.returns()[1].type.base, BaseType::Tensor);
}

TEST(FunctionSchemaTest, EmptyAndScalarReturns) {
  EXPECT_TRUE(MustParse("test::f(Tensor x) -> ()").returns().empty());
  EXPECT_EQ(MustParse("test::f(Tensor x) -> int").returns()[0].type.base, BaseType::Int);
  EXPECT_EQ(MustParse("test::f(Tensor x) -> float").returns()[0].type.base, BaseType::Float);
  EXPECT_EQ(MustParse("test::f(Tensor x) -> bool").returns()[0].type.base, BaseType::Bool);
  EXPECT_EQ(MustParse("test::f(Tensor x) -> Scalar").returns()[0].type.base, BaseType::Scalar);
  const SchemaType list = MustParse("test::f(Tensor x) -> Tensor[]").returns()[0].type;
  EXPECT_TRUE(list.is_list);
  EXPECT_EQ(list.base, BaseType::Tensor);
}

TEST(FunctionSchemaTest, ListTypeVariants) {
  FunctionSchema s = MustParse(
      "test::f(Tensor[] a, Tensor?[] b, int[]? c, int[2]? d, Tensor? e, "
      "Tensor?[]? f, "
      "Tensor(a!)[] g) -> ()");
  const auto& args = s.arguments();
  EXPECT_EQ(args[0].type, (SchemaType{BaseType::Tensor, true, std::nullopt, false, false}));
  EXPECT_EQ(args[1].type, (SchemaType{BaseType::Tensor, true, std::nullopt, true, false}));
  EXPECT_EQ(args[2].type, (SchemaType{BaseType::Int, true, std::nullopt, false, true}));
  EXPECT_EQ(args[3].type, (SchemaType{BaseType::Int, true, 2, false, true}));
  EXPECT_EQ(args[4].type, (SchemaType{BaseType::Tensor, false, std::nullopt, false, true}));
  EXPECT_EQ(args[5].type, (SchemaType{BaseType::Tensor, true, std::nullopt, true, true}));
  EXPECT_TRUE(args[6].type.is_list);
  EXPECT_EQ(*args[6].alias, (AliasInfo{"a", true}));
  EXPECT_EQ(args[1].type.str(), "Tensor?[]");
  EXPECT_EQ(args[2].type.str(), "int[]?");
  EXPECT_EQ(args[4].type.str(), "Tensor?");
  EXPECT_EQ(args[5].type.str(), "Tensor?[]?");
  EXPECT_EQ(args[6].str(), "Tensor(a!)[] g");
}

TEST(FunctionSchemaTest, ToDeviceTypes) {
  FunctionSchema s = MustParse(
      "aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool "
      "non_blocking=False, "
      "bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)");
  EXPECT_EQ(s.arguments()[1].type.base, BaseType::Device);
  EXPECT_EQ(s.arguments()[2].type.base, BaseType::ScalarType);
  EXPECT_EQ(s.arguments()[5].type.base, BaseType::MemoryFormat);
  EXPECT_EQ(s.argumentIndex("memory_format"), 5u);
}

TEST(FunctionSchemaTest, DefaultValueKinds) {
  FunctionSchema s = MustParse(
      "test::f(str reduce=\"mean\", str q='single', float eps=1e-05, float "
      "p=2, Scalar a=0.5, "
      "Scalar b=-3, float[2] f=[1.0, 2], bool[2] m=[True, False], int[] e=[], "
      "MemoryFormat mf=contiguous_format, float big=inf, int neg=-7, int? "
      "maybe=4) -> Tensor");
  auto def = [&](std::string_view name) -> const DefaultValue& {
    return *s.arguments()[*s.argumentIndex(name)].default_value;
  };
  EXPECT_EQ(std::get<std::string>(def("reduce")), "mean");
  EXPECT_EQ(std::get<std::string>(def("q")), "single");
  EXPECT_DOUBLE_EQ(std::get<double>(def("eps")), 1e-05);
  EXPECT_DOUBLE_EQ(std::get<double>(def("p")),
                   2.0);  // int literal widened for float
  EXPECT_DOUBLE_EQ(std::get<double>(def("a")),
                   0.5);  // Scalar keeps the literal's kind
  EXPECT_EQ(std::get<int64_t>(def("b")), -3);
  EXPECT_EQ(std::get<std::vector<double>>(def("f")), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(std::get<std::vector<bool>>(def("m")), (std::vector<bool>{true, false}));
  EXPECT_TRUE(std::get<std::vector<int64_t>>(def("e")).empty());
  EXPECT_EQ(std::get<std::string>(def("mf")), "contiguous_format");
  EXPECT_EQ(std::get<double>(def("big")), std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<int64_t>(def("neg")), -7);
  EXPECT_EQ(std::get<int64_t>(def("maybe")), 4);
}

TEST(FunctionSchemaTest, StringEscapes) {
  FunctionSchema s = MustParse(R"(test::f(str a="x\"y\\z\n", str b='it\'s') -> ())");
  EXPECT_EQ(std::get<std::string>(*s.arguments()[0].default_value), "x\"y\\z\n");
  EXPECT_EQ(std::get<std::string>(*s.arguments()[1].default_value), "it's");
  EXPECT_EQ(s.toString(), R"(test::f(str a="x\"y\\z\n", str b="it's") -> ())");
}

TEST(FunctionSchemaTest, ManuallyBuiltSchemaPrintsAndReparses) {
  Argument self{"self", SchemaType{BaseType::Tensor}};
  Argument dims{"dims", SchemaType{BaseType::Int, true, 2, false, false}, DefaultValue(std::vector<int64_t>{3, 4})};
  Argument out{"out", SchemaType{BaseType::Tensor}, std::nullopt, true, AliasInfo{"a", true}};
  FunctionSchema s({"test", "f", "out"}, {self, dims, out}, {Argument{"", out.type, {}, false, out.alias}});
  EXPECT_EQ(s.toString(),
            "test::f.out(Tensor self, int[2] dims=[3, 4], *, Tensor(a!) out) "
            "-> Tensor(a!)");
  absl::StatusOr<FunctionSchema> reparsed = FunctionSchema::parse(s.toString());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(*reparsed, s);
}

TEST(FunctionSchemaTest, EqualityDistinguishesSchemas) {
  EXPECT_EQ(MustParse("test::f(Tensor x) -> Tensor"), MustParse("test::f(Tensor  x)->Tensor"));
  EXPECT_NE(MustParse("test::f(Tensor x) -> Tensor"), MustParse("test::f(Tensor y) -> Tensor"));
  EXPECT_NE(MustParse("test::f(Tensor x) -> Tensor"), MustParse("test::f(Tensor? x) -> Tensor"));
  EXPECT_NE(MustParse("test::f(Scalar x=1) -> Tensor"), MustParse("test::f(Scalar x=1.0) -> Tensor"));
  EXPECT_NE(MustParse("test::f(Tensor x, Tensor y) -> Tensor"), MustParse("test::f(Tensor x, *, Tensor y) -> Tensor"));
}

// ---------------------------------------------------------------------------
// OperatorName.

TEST(OperatorNameTest, ParseAndPrint) {
  absl::StatusOr<OperatorName> n = OperatorName::parse("aten::add.Tensor");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->ns, "aten");
  EXPECT_EQ(n->name, "add");
  EXPECT_EQ(n->overload, "Tensor");
  EXPECT_EQ(n->qualifiedName(), "aten::add.Tensor");

  absl::StatusOr<OperatorName> plain = OperatorName::parse("aten::relu");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->overload, "");
  EXPECT_EQ(plain->qualifiedName(), "aten::relu");
}

TEST(OperatorNameTest, Errors) {
  absl::Status s = OperatorName::parse("add").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "expected '::' after 'add'"));
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "at position 3"));

  s = OperatorName::parse("aten::").status();
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "expected operator name after '::'"));
  s = OperatorName::parse("aten::add.").status();
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "expected overload name after '.'"));
  s = OperatorName::parse("aten::add.Tensor(").status();
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "expected end of operator name"));
  EXPECT_TRUE(HasSubstr(std::string(s.message()), "at position 16"));
  s = OperatorName::parse("").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(OperatorNameTest, HashableInFlatHashMap) {
  absl::flat_hash_map<OperatorName, int> map;
  map[OperatorName{"aten", "add", "Tensor"}] = 1;
  map[OperatorName{"aten", "add", ""}] = 2;
  map[OperatorName{"aten", "add", "out"}] = 3;
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.at(*OperatorName::parse("aten::add.Tensor")), 1);
  EXPECT_EQ(map.at(*OperatorName::parse("aten::add")), 2);
  EXPECT_FALSE(map.contains(OperatorName{"test", "add", "Tensor"}));
}

// ---------------------------------------------------------------------------
// Errors: each must be InvalidArgument, say what was expected, give the
// position, and draw a caret under it.

void ExpectParseError(std::string_view text, std::string_view expected_msg, size_t pos) {
  SCOPED_TRACE(text);
  absl::StatusOr<FunctionSchema> schema = FunctionSchema::parse(text);
  ASSERT_FALSE(schema.ok()) << "unexpectedly parsed as " << *schema;
  const absl::Status& s = schema.status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  std::string msg(s.message());
  EXPECT_TRUE(HasSubstr(msg, std::string(expected_msg)));
  EXPECT_TRUE(HasSubstr(msg, "at position " + std::to_string(pos) + ":"));
  // Last two lines: the text, then the caret under `pos` (both indented by 2).
  std::string caret_line = msg.substr(msg.rfind('\n') + 1);
  EXPECT_EQ(caret_line, std::string(pos + 2, ' ') + "^");
  EXPECT_TRUE(HasSubstr(msg, "\n  " + std::string(text) + "\n"));
}

TEST(FunctionSchemaErrorTest, ExactMessageFormat) {
  absl::Status s = FunctionSchema::parse("aten::add.Tensor(Tensor self, Tensor other -> Tensor").status();
  EXPECT_EQ(s.message(),
            "bad schema: expected ')' or ',' after argument 'other' at position 43:\n"
            "  aten::add.Tensor(Tensor self, Tensor other -> Tensor\n"
            "                                             ^");
}

TEST(FunctionSchemaErrorTest, EmptyInput) {
  ExpectParseError("", "expected operator name", 0);
  ExpectParseError("   ", "expected operator name", 3);
}

TEST(FunctionSchemaErrorTest, MissingNamespace) {
  ExpectParseError("add.Tensor(Tensor self) -> Tensor", "expected '::' after 'add'", 3);
}

TEST(FunctionSchemaErrorTest, UnknownType) {
  ExpectParseError("aten::f(Tensor self, Tensr other) -> Tensor", "unknown type 'Tensr'", 21);
  ExpectParseError("aten::f(Tensor self) -> Generator", "unknown type 'Generator'", 24);
  ExpectParseError("aten::f(Tensor self, 3 x) -> Tensor", "expected a type", 21);
}

TEST(FunctionSchemaErrorTest, DuplicateArgumentNames) {
  ExpectParseError("aten::f(Tensor self, int dim, *, Tensor self) -> Tensor", "duplicate name 'self'", 40);
  ExpectParseError("aten::f(Tensor x) -> (Tensor a, Tensor a)", "duplicate name 'a'", 39);
}

// A schema of n arguments parses in time linear in n: checking names for
// duplicates by scanning the arguments seen so far made it quadratic (a
// 1 MB schema took seconds). 64,000 arguments (about 700 KB) took 3.7 s
// with the scan and take about 30 ms without; the bound leaves room for
// sanitizer builds and a busy machine (a ratio of two sizes' times, tried
// first, was too noisy on a shared machine).
TEST(FunctionSchemaTest, ParsingIsLinearInTheArgumentCount) {
  auto schemaOf = [](int n) {
    std::string text = "bp::many(";
    for (int i = 0; i < n; ++i) text += (i ? ", int a" : "int a") + std::to_string(i);
    return text + ") -> Tensor";
  };
  constexpr int kArgs = 64000;
  const std::string text = schemaOf(kArgs);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<FunctionSchema> schema = FunctionSchema::parse(text);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->arguments().size(), size_t{kArgs});
  EXPECT_LT(took.count(), 1.0) << kArgs << " arguments took " << took.count() << " s";
  constexpr int kSmall = 4000;
  // A duplicate far down a long list is still found.
  std::string duplicated = schemaOf(kSmall);
  duplicated.insert(duplicated.find(") ->"), ", int a17");
  absl::StatusOr<FunctionSchema> refused = FunctionSchema::parse(duplicated);
  ASSERT_FALSE(refused.ok());
  const std::string message(refused.status().message());
  EXPECT_TRUE(HasSubstr(message, "duplicate name 'a17'"));
  // The message quotes the text around the error, not the whole line.
  EXPECT_LT(message.size(), 400u) << message;
  EXPECT_TRUE(HasSubstr(message, ", int a3999, int a17) -> Tensor\n"));
}

TEST(FunctionSchemaErrorTest, DefaultTypeMismatch) {
  ExpectParseError("aten::f(int x=True) -> Tensor",
                   "expected an integer literal as default value for argument "
                   "'x' of type 'int'",
                   14);
  ExpectParseError("aten::f(Tensor x=1) -> Tensor",
                   "expected None (Tensor defaults must be None) as default "
                   "value for argument 'x'",
                   17);
  ExpectParseError("aten::f(int x=1.5) -> Tensor", "expected an integer literal", 14);
  ExpectParseError("aten::f(bool b=1) -> Tensor", "expected True or False", 15);
  ExpectParseError("aten::f(str s=mean) -> Tensor", "expected a quoted string", 14);
  ExpectParseError("aten::f(ScalarType t=6) -> Tensor", "expected a name (e.g. 'contiguous_format') as default", 21);
  ExpectParseError("aten::f(int[2] s=[1, True]) -> Tensor",
                   "expected an integer literal as default value for argument "
                   "'s' of type 'int[2]'",
                   21);
  ExpectParseError("aten::f(Tensor[] t=[]) -> Tensor",
                   "expected None as default value for argument 't' of type 'Tensor[]'", 19);
}

TEST(FunctionSchemaErrorTest, NoneRequiresOptional) {
  ExpectParseError("aten::f(int x=None) -> Tensor", "default None requires an optional type (expected 'int?')", 14);
  ExpectParseError("aten::f(Tensor?[] x=None) -> Tensor", "expected 'Tensor?[]?'", 20);
}

TEST(FunctionSchemaErrorTest, BareDefaultNeedsSizedList) {
  ExpectParseError("aten::f(int[] x=1) -> Tensor", "expected '[' to start list default", 16);
}

TEST(FunctionSchemaErrorTest, TrailingGarbage) {
  ExpectParseError("aten::f(Tensor x) -> Tensor y z", "expected end of schema", 30);
  ExpectParseError("aten::f(Tensor x) -> Tensor)", "expected end of schema", 27);
  ExpectParseError("aten::f(int x=1abc) -> Tensor", "expected ')' or ',' after argument 'x'", 15);
}

TEST(FunctionSchemaErrorTest, UnterminatedString) {
  ExpectParseError("aten::f(str s=\"mean) -> Tensor", "unterminated string literal", 14);
  ExpectParseError("aten::f(str s='mean) -> Tensor", "expected closing '", 14);
}

TEST(FunctionSchemaErrorTest, StarTwice) {
  ExpectParseError("aten::f(Tensor x, *, int y, *, int z) -> Tensor", "expected at most one '*'", 28);
}

TEST(FunctionSchemaErrorTest, StructuralErrors) {
  ExpectParseError("aten::f Tensor x) -> Tensor", "expected '(' to start the argument list", 8);
  ExpectParseError("aten::f(Tensor x) Tensor", "expected '->'", 18);
  ExpectParseError("aten::f(Tensor x)", "expected '->'", 17);
  ExpectParseError("aten::f(Tensor x) ->", "expected a type", 20);
  ExpectParseError("aten::f(Tensor x,) -> Tensor", "expected a type", 17);
  ExpectParseError("aten::f(Tensor) -> Tensor", "expected argument name after type 'Tensor'", 14);
  ExpectParseError("aten::f(Tensor?? x) -> Tensor", "expected argument name after type 'Tensor?'", 15);
  ExpectParseError("aten::f(int[2 x) -> Tensor", "expected list size or ']'", 14);
  ExpectParseError("aten::f(Tensor x) -> (Tensor y=None)", "returns cannot have default values", 30);
  ExpectParseError("aten::f(Tensor x) -> (Tensor a Tensor b)", "expected ')' or ',' after return", 31);
  ExpectParseError("aten::f(int[2] x=[1, 2) -> Tensor", "expected ',' or ']' in list default", 22);
}

TEST(FunctionSchemaErrorTest, BadAliasAnnotation) {
  ExpectParseError("aten::f(Tensor(a! x) -> Tensor", "expected '!' or ')' in alias annotation", 18);
  ExpectParseError("aten::f(Tensor() x) -> Tensor", "expected alias set name", 15);
}

TEST(FunctionSchemaErrorTest, BadNumbers) {
  ExpectParseError("aten::f(int x=99999999999999999999) -> Tensor", "expected a number literal within range", 14);
  ExpectParseError("aten::f(int x=-) -> Tensor", "expected a default value", 14);
  ExpectParseError("aten::f(int x=) -> Tensor", "expected a default value", 14);
}

// Found by fuzz_schema_parser: a bare default of a huge sized list was
// expanded element by element (terabytes); sizes are now bounded.
TEST(FunctionSchemaErrorTest, ListSizeIsBounded) {
  ExpectParseError("aten::f(int[99999999999] x=1) -> Tensor", "expected a list size of at most 1024", 12);
  ExpectParseError("aten::f(int[1025] x) -> Tensor", "expected a list size of at most 1024", 12);
  ExpectParseError("aten::f(int[99999999999999999999] x) -> Tensor", "expected a list size of at most 1024", 12);
  absl::StatusOr<FunctionSchema> s = FunctionSchema::parse("aten::f(int[1024] x=1) -> Tensor");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::get<std::vector<int64_t>>(*s->arguments()[0].default_value).size(), 1024u);
}

TEST(FunctionSchemaErrorTest, EndOfInputIsCalledOut) {
  absl::Status s = FunctionSchema::parse("aten::f(Tensor x").status();
  EXPECT_TRUE(HasSubstr(std::string(s.message()),
                        "expected ')' or ',' after argument 'x' (reached end of "
                        "input) at position 16"));
}

TEST(FunctionSchemaErrorTest, CaretPointsIntoCorrectLineOfMultilineInput) {
  absl::Status s = FunctionSchema::parse("aten::f(Tensor x,\n        Tensr y) -> Tensor").status();
  EXPECT_EQ(s.message(),
            "bad schema: unknown type 'Tensr'; expected one of Tensor, int, SymInt, "
            "float, bool, "
            "str, Scalar, ScalarType, Device, Layout, MemoryFormat at position 26:\n"
            "          Tensr y) -> Tensor\n"
            "          ^");
}

}  // namespace
}  // namespace backplane
