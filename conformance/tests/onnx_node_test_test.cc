// Reading ONNX node tests (Note [ONNX node tests]): models and TensorProtos
// built here with the ONNX protobuf classes, written to a temporary folder
// and loaded; and, when BACKPLANE_ONNX_NODE_TESTS names a folder of them
// (scripts/fetch_onnx_tests.sh prints one), the whole corpus.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_node_test.h"
#include "backplane/ops/tensor.h"

namespace backplane::conformance::onnx {
namespace {

namespace fs = std::filesystem;
using ::onnx::AttributeProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

void writeProto(const fs::path& path, const google::protobuf::MessageLite& proto) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  ASSERT_TRUE(proto.SerializeToOstream(&out)) << path;
}

void addValue(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* values, const std::string& name,
              int32_t elem_type) {
  ::onnx::ValueInfoProto* v = values->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

TensorProto floatTensor(std::vector<int64_t> dims, std::vector<float> values) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

// A test folder per test case, removed afterwards.
class OnnxNodeTestLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) / ("onnx_node_test_" + std::to_string(getpid())) / info->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // A model of one node `op_type(inputs) -> outputs` whose graph inputs and
  // outputs are the node's non-empty names, all FLOAT.
  static ModelProto oneNodeModel(const std::string& op_type, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, int64_t opset = 17) {
    ModelProto m;
    m.set_ir_version(8);
    ::onnx::OperatorSetIdProto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    ::onnx::GraphProto* g = m.mutable_graph();
    NodeProto* n = g->add_node();
    n->set_op_type(op_type);
    for (const std::string& i : inputs) {
      n->add_input(i);
      if (!i.empty()) addValue(g->mutable_input(), i, TensorProto::FLOAT);
    }
    for (const std::string& o : outputs) {
      n->add_output(o);
      if (!o.empty()) addValue(g->mutable_output(), o, TensorProto::FLOAT);
    }
    return m;
  }

  fs::path writeTest(const std::string& name, const ModelProto& model, const std::vector<TensorProto>& inputs,
                     const std::vector<TensorProto>& outputs) {
    fs::path dir = root_ / name;
    writeProto(dir / "model.onnx", model);
    fs::create_directories(dir / "test_data_set_0");
    for (size_t i = 0; i < inputs.size(); ++i) {
      writeProto(dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"), inputs[i]);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      writeProto(dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb"), outputs[i]);
    }
    return dir;
  }

  // Loads a test `Identity(x) -> y` whose input_0.pb is `input`.
  absl::StatusOr<NodeTest> loadIdentityOf(const TensorProto& input) {
    ModelProto m = oneNodeModel("Identity", {"x"}, {"y"});
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(input.data_type());
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(input.data_type());
    return loadNodeTest(writeTest("identity", m, {input}, {input}).string());
  }

  fs::path root_;
};

TEST_F(OnnxNodeTestLoading, ReadsTheNodeItsOpsetAndItsDataSet) {
  ModelProto m = oneNodeModel("Add", {"a", "b"}, {"c"}, 14);
  ::onnx::OperatorSetIdProto* ml = m.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  fs::path dir =
      writeTest("test_add", m, {floatTensor({2}, {1, 2}), floatTensor({}, {10})}, {floatTensor({2}, {11, 12})});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "test_add");
  EXPECT_EQ(t->dir, dir.string());
  EXPECT_EQ(t->op_type, "Add");
  EXPECT_EQ(t->domain, "");
  EXPECT_EQ(t->opset, 14);
  EXPECT_EQ(t->inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t->outputs, (std::vector<std::string>{"c"}));
  ASSERT_EQ(t->data_sets.size(), 1u);
  const NodeTest::DataSet& s = t->data_sets[0];
  EXPECT_EQ(s.name, "test_data_set_0");
  ASSERT_EQ(s.inputs.size(), 2u);
  ASSERT_EQ(s.outputs.size(), 1u);
  ASSERT_TRUE(s.inputs[0] && s.inputs[1] && s.outputs[0]);
  EXPECT_EQ(s.inputs[0]->dtype(), ScalarType::Float32);
  EXPECT_EQ(s.inputs[0]->device(), Device(DeviceType::CPU));
  EXPECT_EQ(s.inputs[0]->toVector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(s.inputs[1]->dim(), 0);  // a 0-d tensor: no dims
  EXPECT_EQ(s.inputs[1]->item<float>(), 10.0f);
  EXPECT_EQ(s.outputs[0]->toVector<float>(), (std::vector<float>{11, 12}));
}

TEST_F(OnnxNodeTestLoading, ReadsTheNodesDomainAndItsOpset) {
  const TensorProto x = floatTensor({}, {1});
  ModelProto m = oneNodeModel("LinearClassifier", {"x"}, {"y"}, 17);
  m.mutable_graph()->mutable_node(0)->set_domain("ai.onnx.ml");
  ::onnx::OperatorSetIdProto* ml = m.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  absl::StatusOr<NodeTest> t = loadNodeTest(writeTest("ml", m, {x}, {x}).string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->domain, "ai.onnx.ml");
  EXPECT_EQ(t->opset, 3);

  // "ai.onnx" is the default domain, spelled out.
  ModelProto d = oneNodeModel("Relu", {"x"}, {"y"}, 17);
  d.mutable_graph()->mutable_node(0)->set_domain("ai.onnx");
  d.mutable_opset_import(0)->set_domain("ai.onnx");
  t = loadNodeTest(writeTest("default", d, {x}, {x}).string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->domain, "");
  EXPECT_EQ(t->opset, 17);
}

TEST_F(OnnxNodeTestLoading, TypedFieldsOfEveryDtype) {
  struct Case {
    int32_t onnx_type;
    ScalarType dtype;
    std::vector<double> expected;
  };
  const std::vector<Case> cases = {
      {TensorProto::INT8, ScalarType::Int8, {-128, 0, 127}},
      {TensorProto::UINT8, ScalarType::UInt8, {0, 7, 255}},
      {TensorProto::INT16, ScalarType::Int16, {-32768, 1, 32767}},
      {TensorProto::UINT16, ScalarType::UInt16, {0, 2, 65535}},
      {TensorProto::INT32, ScalarType::Int32, {-2147483648.0, 3, 2147483647}},
      {TensorProto::BOOL, ScalarType::Bool, {1, 0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(scalarTypeName(c.dtype));
    TensorProto p;
    p.set_data_type(c.onnx_type);
    p.add_dims(3);
    for (double v : c.expected) p.add_int32_data(static_cast<int32_t>(v));
    absl::StatusOr<NodeTest> t = loadIdentityOf(p);
    ASSERT_TRUE(t.ok()) << t.status();
    const Tensor& x = *t->data_sets[0].inputs[0];
    EXPECT_EQ(x.dtype(), c.dtype);
    EXPECT_EQ(x.toVector<double>(), c.expected);
  }

  TensorProto i64;
  i64.set_data_type(TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(-9000000000LL);
  i64.add_int64_data(5);
  absl::StatusOr<NodeTest> t = loadIdentityOf(i64);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<int64_t>(), (std::vector<int64_t>{-9000000000LL, 5}));

  TensorProto u64;
  u64.set_data_type(TensorProto::UINT64);
  u64.add_dims(1);
  u64.add_uint64_data(18446744073709551615ULL);
  t = loadIdentityOf(u64);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->dtype(), ScalarType::UInt64);
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<uint64_t>(), (std::vector<uint64_t>{18446744073709551615ULL}));

  TensorProto u32;
  u32.set_data_type(TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4294967295ULL);
  t = loadIdentityOf(u32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->dtype(), ScalarType::UInt32);
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<uint32_t>(), (std::vector<uint32_t>{4294967295U}));

  TensorProto f64;
  f64.set_data_type(TensorProto::DOUBLE);
  f64.add_dims(2);
  f64.add_double_data(0.1);
  f64.add_double_data(-1e300);
  t = loadIdentityOf(f64);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<double>(), (std::vector<double>{0.1, -1e300}));
}

TEST_F(OnnxNodeTestLoading, SixteenBitFloatsFromTheirBitsInInt32Data) {
  TensorProto h;
  h.set_data_type(TensorProto::FLOAT16);
  h.add_dims(3);
  h.add_int32_data(0x3c00);  // 1.0
  h.add_int32_data(0xc000);  // -2.0 (the bits zero-extended, not sign-extended)
  h.add_int32_data(0x7c00);  // inf
  absl::StatusOr<NodeTest> t = loadIdentityOf(h);
  ASSERT_TRUE(t.ok()) << t.status();
  const Tensor& x = *t->data_sets[0].inputs[0];
  ASSERT_EQ(x.dtype(), ScalarType::Float16);
  EXPECT_EQ(x.data_ptr<Half>()[1].bits, 0xc000);
  EXPECT_EQ(x.toVector<float>(), (std::vector<float>{1.0f, -2.0f, std::numeric_limits<float>::infinity()}));

  TensorProto b;
  b.set_data_type(TensorProto::BFLOAT16);
  b.add_dims(2);
  b.add_int32_data(0x3f80);  // 1.0
  b.add_int32_data(0xc040);  // -3.0
  t = loadIdentityOf(b);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->data_sets[0].inputs[0]->dtype(), ScalarType::BFloat16);
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<float>(), (std::vector<float>{1.0f, -3.0f}));

  TensorProto bad = h;
  bad.set_int32_data(1, -16384);  // 0xc000 sign-extended: not 16 bits
  t = loadIdentityOf(bad);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("int32_data[1] = -16384 is not the bits of a 16-bit float"), std::string::npos)
      << t.status();
}

TEST_F(OnnxNodeTestLoading, RawDataIsLittleEndianBytes) {
  const std::vector<int16_t> values = {-2, 300, 7};
  TensorProto r;
  r.set_data_type(TensorProto::INT16);
  r.add_dims(1);
  r.add_dims(3);
  r.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int16_t)));
  absl::StatusOr<NodeTest> t = loadIdentityOf(r);
  ASSERT_TRUE(t.ok()) << t.status();
  const Tensor& x = *t->data_sets[0].inputs[0];
  EXPECT_EQ(x.dtype(), ScalarType::Int16);
  EXPECT_EQ(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(x.toVector<int16_t>(), values);

  // raw_data of bool and float16 is one and two bytes an element.
  TensorProto rb;
  rb.set_data_type(TensorProto::BOOL);
  rb.add_dims(3);
  rb.set_raw_data(std::string("\x01\x00\x01", 3));
  t = loadIdentityOf(rb);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->toVector<bool>(), (std::vector<bool>{true, false, true}));

  TensorProto rh;
  rh.set_data_type(TensorProto::FLOAT16);
  rh.add_dims(1);
  rh.set_raw_data(std::string("\x00\x3c", 2));
  t = loadIdentityOf(rh);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->item<float>(), 1.0f);

  // A size that does not match the dims is an error naming the file.
  r.add_dims(2);
  t = loadIdentityOf(r);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("input_0.pb: raw_data has 6 bytes, but 6 elements of int16 need 12"),
            std::string::npos)
      << t.status();
}

TEST_F(OnnxNodeTestLoading, EmptyAndZeroDimensionalTensors) {
  TensorProto empty;
  empty.set_data_type(TensorProto::FLOAT);
  empty.add_dims(3);
  empty.add_dims(0);
  absl::StatusOr<NodeTest> t = loadIdentityOf(empty);
  ASSERT_TRUE(t.ok()) << t.status();
  const Tensor& e = *t->data_sets[0].inputs[0];
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(std::vector<int64_t>(e.sizes().begin(), e.sizes().end()), (std::vector<int64_t>{3, 0}));

  TensorProto scalar;
  scalar.set_data_type(TensorProto::INT64);
  scalar.add_int64_data(42);
  t = loadIdentityOf(scalar);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data_sets[0].inputs[0]->dim(), 0);
  EXPECT_EQ(t->data_sets[0].inputs[0]->item<int64_t>(), 42);

  // Dims that the data does not back are an error, not an allocation.
  TensorProto huge = floatTensor({1LL << 40, 1LL << 20}, {1});
  t = loadIdentityOf(huge);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("float_data has 1 values, but the dims [1099511627776, 1048576] hold"),
            std::string::npos)
      << t.status();
  huge.add_dims(1LL << 40);
  t = loadIdentityOf(huge);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("overflows int64"), std::string::npos) << t.status();

  // A count that does not match the dims names the field.
  TensorProto wrong = floatTensor({2, 2}, {1, 2, 3});
  t = loadIdentityOf(wrong);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("float_data has 3 values, but the dims [2, 2] hold 4"), std::string::npos)
      << t.status();
}

TEST_F(OnnxNodeTestLoading, OmittedOptionalInputsAndOutputsAreNullopt) {
  // Clip(x, "", max): the graph's inputs are (x, max), so input_1.pb is max.
  ModelProto m = oneNodeModel("Clip", {"x", "", "max"}, {"y"}, 13);
  m.mutable_graph()->mutable_node(0)->add_output("");
  fs::path dir = writeTest("test_clip_default_max", m, {floatTensor({2}, {-5, 5}), floatTensor({}, {1})},
                           {floatTensor({2}, {-5, 1})});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->inputs, (std::vector<std::string>{"x", "", "max"}));
  EXPECT_EQ(t->outputs, (std::vector<std::string>{"y", ""}));
  const NodeTest::DataSet& s = t->data_sets[0];
  ASSERT_EQ(s.inputs.size(), 3u);
  ASSERT_TRUE(s.inputs[0].has_value());
  EXPECT_FALSE(s.inputs[1].has_value());
  ASSERT_TRUE(s.inputs[2].has_value());
  EXPECT_EQ(s.inputs[0]->toVector<float>(), (std::vector<float>{-5, 5}));
  EXPECT_EQ(s.inputs[2]->item<float>(), 1.0f);
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_TRUE(s.outputs[0].has_value());
  EXPECT_FALSE(s.outputs[1].has_value());
}

TEST_F(OnnxNodeTestLoading, AFileOfAnotherElementTypeThanTheGraphDeclaresIsAnError) {
  TensorProto d;
  d.set_data_type(TensorProto::DOUBLE);
  d.add_double_data(1.0);
  fs::path dir = writeTest("mismatch", oneNodeModel("Relu", {"x"}, {"y"}), {d}, {floatTensor({}, {1})});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "input 0 ('x') in " + (dir / "test_data_set_0" / "input_0.pb").string() +
                                      " holds ONNX element type DOUBLE, but the graph declares FLOAT");
}

TEST_F(OnnxNodeTestLoading, AnInitializerFeedsANodeInputWithNoFile) {
  ModelProto m = oneNodeModel("Add", {"a"}, {"c"});
  m.mutable_graph()->mutable_node(0)->add_input("w");
  TensorProto w = floatTensor({1}, {100});
  w.set_name("w");
  *m.mutable_graph()->add_initializer() = w;
  absl::StatusOr<NodeTest> t =
      loadNodeTest(writeTest("init", m, {floatTensor({1}, {1})}, {floatTensor({1}, {101})}).string());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->data_sets[0].inputs.size(), 2u);
  EXPECT_EQ(t->data_sets[0].inputs[1]->item<float>(), 100.0f);
}

TEST_F(OnnxNodeTestLoading, DataSetsInNumericOrder) {
  fs::path dir =
      writeTest("sets", oneNodeModel("Identity", {"x"}, {"y"}), {floatTensor({}, {0})}, {floatTensor({}, {0})});
  for (int n : {10, 2}) {
    for (const char* file : {"input_0.pb", "output_0.pb"}) {
      writeProto(dir / ("test_data_set_" + std::to_string(n)) / file, floatTensor({}, {float(n)}));
    }
  }
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->data_sets.size(), 3u);
  EXPECT_EQ(t->data_sets[0].name, "test_data_set_0");
  EXPECT_EQ(t->data_sets[1].name, "test_data_set_2");
  EXPECT_EQ(t->data_sets[2].name, "test_data_set_10");
  EXPECT_EQ(t->data_sets[2].inputs[0]->item<float>(), 10.0f);
}

TEST_F(OnnxNodeTestLoading, AttributesOfEveryKindAndTheirLookups) {
  ModelProto m = oneNodeModel("Custom", {"x"}, {"y"});
  NodeProto* n = m.mutable_graph()->mutable_node(0);
  auto add = [&](const std::string& name, AttributeProto::AttributeType type) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  };
  add("axis", AttributeProto::INT)->set_i(-2);
  add("alpha", AttributeProto::FLOAT)->set_f(0.1f);
  add("mode", AttributeProto::STRING)->set_s("nearest");
  AttributeProto* ints = add("perm", AttributeProto::INTS);
  ints->add_ints(1);
  ints->add_ints(0);
  AttributeProto* floats = add("scales", AttributeProto::FLOATS);
  floats->add_floats(0.5f);
  floats->add_floats(2.0f);
  AttributeProto* strings = add("directions", AttributeProto::STRINGS);
  strings->add_strings("forward");
  strings->add_strings("reverse");
  TensorProto value;
  value.set_data_type(TensorProto::INT32);
  value.add_dims(2);
  value.add_int32_data(4);
  value.add_int32_data(5);
  *add("value", AttributeProto::TENSOR)->mutable_t() = value;

  const TensorProto x = floatTensor({}, {1});
  absl::StatusOr<NodeTest> t = loadNodeTest(writeTest("attrs", m, {x}, {x}).string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->attributes.size(), 7u);
  EXPECT_EQ(t->intAttr("axis", 0), -2);
  EXPECT_EQ(t->intAttr("absent", 7), 7);
  // FLOAT is read as the float's exact value, widened to double.
  EXPECT_EQ(t->floatAttr("alpha", 0), static_cast<double>(0.1f));
  EXPECT_EQ(t->floatAttr("absent", 1.5), 1.5);
  EXPECT_EQ(t->stringAttr("mode", ""), "nearest");
  EXPECT_EQ(t->stringAttr("absent", "linear"), "linear");
  EXPECT_EQ(t->intsAttr("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(t->intsAttr("absent").has_value());
  EXPECT_EQ(std::get<std::vector<double>>(t->attributes.at("scales")), (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(std::get<std::vector<std::string>>(t->attributes.at("directions")),
            (std::vector<std::string>{"forward", "reverse"}));
  const Tensor& v = std::get<Tensor>(t->attributes.at("value"));
  EXPECT_EQ(v.dtype(), ScalarType::Int32);
  EXPECT_EQ(v.toVector<int32_t>(), (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(t->has("axis"));
  EXPECT_FALSE(t->has("absent"));

  // A lookup of the wrong kind names the attribute and both kinds.
  try {
    t->intAttr("alpha", 0);
    ADD_FAILURE() << "intAttr of a FLOAT attribute did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(e.message(), "attribute 'alpha' of Custom in attrs is FLOAT, expected INT");
  }
  EXPECT_THROW(t->intsAttr("axis"), Error);
  EXPECT_THROW(t->floatAttr("mode", 0), Error);
  EXPECT_THROW(t->stringAttr("perm", ""), Error);
}

TEST_F(OnnxNodeTestLoading, AGraphAttributeIsUnimplemented) {
  ModelProto m = oneNodeModel("If", {"cond"}, {"y"});
  AttributeProto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("then_branch");
  a->set_type(AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  absl::StatusOr<NodeTest> t = loadNodeTest(writeTest("if", m, {}, {}).string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("attribute 'then_branch' of If in "), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("model.onnx is of kind GRAPH"), std::string::npos) << t.status();
}

TEST_F(OnnxNodeTestLoading, TwoNodesAreUnimplemented) {
  ModelProto m = oneNodeModel("Relu", {"x"}, {"y"});
  *m.mutable_graph()->add_node() = m.graph().node(0);
  fs::path dir = writeTest("two", m, {}, {});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(t.status().message(),
            (dir / "model.onnx").string() + ": the graph has 2 nodes; a node test runs exactly one");
}

TEST_F(OnnxNodeTestLoading, ElementTypesWithNoDtypeAreUnimplemented) {
  for (int32_t type :
       {int32_t{TensorProto::COMPLEX64}, int32_t{TensorProto::STRING}, 17 /* FLOAT8E4M3FN */, 22 /* INT4 */}) {
    TensorProto p;
    p.set_data_type(type);
    p.add_dims(1);
    p.set_raw_data(std::string(8, '\0'));
    absl::StatusOr<NodeTest> t = loadIdentityOf(p);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
    const std::string name = type == TensorProto::COMPLEX64 ? "COMPLEX64"
                             : type == TensorProto::STRING  ? "STRING"
                             : type == 17                   ? "FLOAT8E4M3FN"
                                                            : "INT4";
    EXPECT_NE(t.status().message().find("input 0 ('x') in "), std::string::npos) << t.status();
    EXPECT_NE(
        t.status().message().find("input_0.pb has ONNX element type " + name + ", which Backplane has no dtype for"),
        std::string::npos)
        << t.status();
  }
}

TEST_F(OnnxNodeTestLoading, ASequenceInputIsUnimplemented) {
  ModelProto m = oneNodeModel("SequenceLength", {"seq"}, {"n"});
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  absl::StatusOr<NodeTest> t = loadNodeTest(writeTest("seq", m, {floatTensor({}, {1})}, {}).string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("input_0.pb is an ONNX sequence, which Backplane has no type for"),
            std::string::npos)
      << t.status();
}

TEST_F(OnnxNodeTestLoading, MissingAndCorruptFilesAreNamed) {
  fs::path none = root_ / "no_such_test";
  absl::StatusOr<NodeTest> t = loadNodeTest(none.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), (none / "model.onnx").string() + ": no such file (the node test's model)");

  fs::path dir = writeTest("corrupt", oneNodeModel("Identity", {"x"}, {"y"}), {floatTensor({}, {1})}, {});
  {
    std::ofstream out(dir / "test_data_set_0" / "input_0.pb", std::ios::binary | std::ios::trunc);
    out << "\xff\xff\xff\xff";  // no valid protobuf starts with a field number this large and wire type 7
  }
  t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            (dir / "test_data_set_0" / "input_0.pb").string() +
                ": not a valid ONNX TensorProto (the protobuf does not parse, or nests messages more than 64 deep)");

  {
    std::ofstream out(dir / "model.onnx", std::ios::binary | std::ios::trunc);
    out << "\xff\xff\xff\xff";
  }
  t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            (dir / "model.onnx").string() +
                ": not a valid ONNX model (the protobuf does not parse, or nests messages more than 64 deep)");

  // A node input that has a graph input but no file and no initializer.
  fs::path nofile = writeTest("nofile", oneNodeModel("Identity", {"x"}, {"y"}), {}, {});
  t = loadNodeTest(nofile.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("no file for node input 0 ('x')"), std::string::npos) << t.status();

  // A test with no data set would check nothing.
  fs::remove_all(nofile / "test_data_set_0");
  t = loadNodeTest(nofile.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), nofile.string() + ": no test_data_set_N folder");
}

TEST_F(OnnxNodeTestLoading, FindsTestFoldersRecursivelySorted) {
  writeProto(root_ / "b" / "test_b" / "model.onnx", oneNodeModel("Relu", {"x"}, {"y"}));
  writeProto(root_ / "a" / "test_z" / "model.onnx", oneNodeModel("Relu", {"x"}, {"y"}));
  writeProto(root_ / "a" / "test_a" / "model.onnx", oneNodeModel("Relu", {"x"}, {"y"}));
  fs::create_directories(root_ / "a" / "not_a_test");
  absl::StatusOr<std::vector<std::string>> dirs = findNodeTests(root_.string());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_EQ(*dirs, (std::vector<std::string>{(root_ / "a" / "test_a").string(), (root_ / "a" / "test_z").string(),
                                             (root_ / "b" / "test_b").string()}));

  absl::StatusOr<std::vector<std::string>> missing = findNodeTests((root_ / "nowhere").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nowhere: not a directory"), std::string::npos) << missing.status();
}

// Note [ONNX loading limits]: a link back to a directory above it is a
// loop, reported, not followed; a second link to a directory searched
// already finds its tests once.
TEST_F(OnnxNodeTestLoading, DiscoveryReportsASymlinkLoopAndSearchesEachDirectoryOnce) {
  const fs::path corpus = root_ / "corpus";
  writeProto(corpus / "test_a" / "model.onnx", oneNodeModel("Relu", {"x"}, {"y"}));
  fs::create_symlink(corpus / "test_a", corpus / "again");  // the same test through a second path
  absl::StatusOr<std::vector<std::string>> dirs = findNodeTests(corpus.string());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_EQ(*dirs, (std::vector<std::string>{(corpus / "again").string()}));

  fs::create_directories(corpus / "sub");
  fs::create_directory_symlink("..", corpus / "sub" / "up");
  dirs = findNodeTests(corpus.string());
  EXPECT_EQ(dirs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dirs.status().message(), (corpus / "sub" / "up").string() + ": leads back to " + corpus.string() +
                                         ", a directory it is inside (a loop of symbolic links or mounts); remove "
                                         "the link, or point --onnx at a folder without it");
}

// A model.onnx or .pb that is a FIFO, a device or a directory: the test is
// found (it counts) and fails to load, saying what the file is, without
// blocking on the FIFO.
TEST_F(OnnxNodeTestLoading, SpecialFilesAreFoundAndRefusedWithoutBlocking) {
  const fs::path fifo_test = root_ / "corpus" / "test_fifo";
  fs::create_directories(fifo_test);
  ASSERT_EQ(::mkfifo((fifo_test / "model.onnx").c_str(), 0600), 0);
  fs::create_directories(root_ / "corpus" / "test_folder" / "model.onnx");
  absl::StatusOr<std::vector<std::string>> dirs = findNodeTests((root_ / "corpus").string());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_EQ(*dirs, (std::vector<std::string>{fifo_test.string(), (root_ / "corpus" / "test_folder").string()}));

  absl::StatusOr<NodeTest> t = loadNodeTest(fifo_test.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            (fifo_test / "model.onnx").string() + ": is a FIFO, not a regular file (the node test's model)");
  t = loadNodeTest((root_ / "corpus" / "test_folder").string());
  EXPECT_NE(t.status().message().find("model.onnx: is a directory, not a regular file"), std::string::npos)
      << t.status();

  const TensorProto x = floatTensor({1}, {1});
  const fs::path dir = writeTest("device_input", oneNodeModel("Identity", {"x"}, {"y"}), {x}, {x});
  fs::remove(dir / "test_data_set_0" / "input_0.pb");
  fs::create_symlink("/dev/zero", dir / "test_data_set_0" / "input_0.pb");
  t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().message(), (dir / "test_data_set_0" / "input_0.pb").string() +
                                      ": is a character device, not a regular file (the node test's TensorProto)");
}

// Sizes are checked before a file is read: a sparse 512 MiB model.onnx is
// refused from its size, naming the limit and how to raise it.
TEST_F(OnnxNodeTestLoading, FilesPastTheSizeLimitAreRefusedBeforeReading) {
  const fs::path dir = root_ / "test_sparse";
  fs::create_directories(dir);
  { std::ofstream(dir / "model.onnx", std::ios::binary); }
  fs::resize_file(dir / "model.onnx", uintmax_t{512} << 20);
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), (dir / "model.onnx").string() +
                                      ": 536870912 bytes, past the limit of 67108864 bytes on one ONNX file (the "
                                      "node test's model); raise it with BACKPLANE_ONNX_MAX_FILE_BYTES=<bytes> if "
                                      "the file is meant to be this large");

  // A smaller limit applies to the data files too.
  const TensorProto x = floatTensor({64}, std::vector<float>(64, 1.0f));
  const fs::path ok = writeTest("identity", oneNodeModel("Identity", {"x"}, {"y"}), {x}, {x});
  LoadLimits limits;
  limits.max_file_bytes = 200;
  t = loadNodeTest(ok.string(), limits);
  EXPECT_NE(t.status().message().find("input_0.pb: 263 bytes, past the limit of 200 bytes"), std::string::npos)
      << t.status();
  limits.max_file_bytes = 263;
  EXPECT_TRUE(loadNodeTest(ok.string(), limits).ok());

  // All the test's tensors together: 256 bytes each for input and output.
  limits.max_tensor_bytes = 500;
  t = loadNodeTest(ok.string(), limits);
  EXPECT_NE(t.status().message().find("output 0 ('y') in " + (ok / "test_data_set_0" / "output_0.pb").string() +
                                      ": its 256 bytes bring the node test's tensors to 512 bytes, past the limit "
                                      "of 500 bytes; raise it with BACKPLANE_ONNX_MAX_TENSOR_BYTES=<bytes>"),
            std::string::npos)
      << t.status();
}

TEST_F(OnnxNodeTestLoading, LimitsFromTheEnvironmentAreValidated) {
  struct Restore {
    ~Restore() {
      ::unsetenv("BACKPLANE_ONNX_MAX_FILE_BYTES");
      ::unsetenv("BACKPLANE_ONNX_MAX_ALLOC_BYTES");
    }
  } restore;
  ::setenv("BACKPLANE_ONNX_MAX_FILE_BYTES", "128M", 1);
  ::setenv("BACKPLANE_ONNX_MAX_ALLOC_BYTES", "5000", 1);
  absl::StatusOr<LoadLimits> limits = loadLimitsFromEnvironment();
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->max_file_bytes, int64_t{128} << 20);
  EXPECT_EQ(limits->max_tensor_bytes, LoadLimits::kDefaultMaxTensorBytes);
  EXPECT_EQ(limits->max_alloc_bytes, 5000);
  // The node carries its cap to the op mapping.
  const TensorProto x = floatTensor({1}, {1});
  absl::StatusOr<NodeTest> t =
      loadNodeTest(writeTest("identity", oneNodeModel("Identity", {"x"}, {"y"}), {x}, {x}).string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->max_alloc_bytes, 5000);

  for (const char* bad : {"0", "-1", "64X", "lots", "99999999999G"}) {
    ::setenv("BACKPLANE_ONNX_MAX_FILE_BYTES", bad, 1);
    limits = loadLimitsFromEnvironment();
    EXPECT_EQ(limits.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(limits.status().message(), std::string("BACKPLANE_ONNX_MAX_FILE_BYTES='") + bad +
                                             "' is not a size: give a positive number of bytes, optionally with a K, "
                                             "M or G suffix (powers of 1024), e.g. BACKPLANE_ONNX_MAX_FILE_BYTES=128M");
    // Discovery refuses it before any test runs.
    EXPECT_EQ(findNodeTests(root_.string()).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Protobuf's recursion limit, lowered to kMaxProtobufNesting: a graph input
// of 40 nested sequence types nests 80 messages.
TEST_F(OnnxNodeTestLoading, DeeplyNestedMessagesDoNotParse) {
  ModelProto m = oneNodeModel("Identity", {"x"}, {"y"});
  ::onnx::TypeProto* type = m.mutable_graph()->mutable_input(0)->mutable_type();
  for (int i = 0; i < 40; ++i) type = type->mutable_sequence_type()->mutable_elem_type();
  type->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  const TensorProto x = floatTensor({1}, {1});
  const fs::path dir = writeTest("nested", m, {x}, {x});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), (dir / "model.onnx").string() +
                                      ": not a valid ONNX model (the protobuf does not parse, or nests messages "
                                      "more than 64 deep)");
}

TEST_F(OnnxNodeTestLoading, ATestWithNothingToCompareIsAnError) {
  const TensorProto x = floatTensor({1}, {1});
  ModelProto m = oneNodeModel("Identity", {"x"}, {"y"});
  m.mutable_graph()->clear_output();
  fs::path dir = writeTest("no_graph_outputs", m, {x}, {});
  absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            (dir / "model.onnx").string() + ": the graph lists no outputs, so the test has nothing to compare");

  // The graph's output names no node output: nothing to compare either.
  m = oneNodeModel("Identity", {"x"}, {"y"});
  m.mutable_graph()->mutable_output(0)->set_name("other");
  dir = writeTest("unrelated_output", m, {x}, {x});
  t = loadNodeTest(dir.string());
  EXPECT_EQ(t.status().message(), (dir / "test_data_set_0").string() +
                                      ": no output_K.pb for any of the node's outputs, so the data set has "
                                      "nothing to compare");
}

TEST_F(OnnxNodeTestLoading, OpsetsOutsideOneToAThousandAreRefused) {
  const TensorProto x = floatTensor({1}, {1});
  for (int64_t opset : {int64_t{-5}, int64_t{0}, int64_t{1001}, int64_t{1} << 40}) {
    const fs::path dir = writeTest("opset", oneNodeModel("Identity", {"x"}, {"y"}, opset), {x}, {x});
    absl::StatusOr<NodeTest> t = loadNodeTest(dir.string());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << opset;
    EXPECT_EQ(t.status().message(), (dir / "model.onnx").string() + ": opset_import of domain '' has version " +
                                        std::to_string(opset) +
                                        ", which is no opset (ONNX numbers them from 1; this runner takes 1 to 1000)");
  }
  EXPECT_TRUE(loadNodeTest(writeTest("opset", oneNodeModel("Identity", {"x"}, {"y"}, 1000), {x}, {x}).string()).ok());
}

// The corpus: every test folder is found, and each loads or is
// kUnimplemented with a reason; nothing is malformed.
TEST(OnnxNodeTestCorpus, EveryTestLoadsOrSaysWhyNot) {
  const char* root = std::getenv("BACKPLANE_ONNX_NODE_TESTS");
  if (root == nullptr || *root == '\0') {
    GTEST_SKIP() << "set BACKPLANE_ONNX_NODE_TESTS to a folder of ONNX node tests (scripts/fetch_onnx_tests.sh)";
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<std::string>> dirs = findNodeTests(root);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  // Every folder of the corpus that holds a model.
  size_t models = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    if (e.path().filename() == "model.onnx") ++models;
  }
  EXPECT_EQ(dirs->size(), models);
  ASSERT_GT(dirs->size(), 0u);

  size_t loaded = 0;
  size_t spot_checked = 0;
  size_t unchecked_outputs = 0;  // node outputs the graph does not list
  std::map<std::string, size_t> unimplemented_reasons;
  size_t unimplemented = 0;
  for (const std::string& dir : *dirs) {
    absl::StatusOr<NodeTest> t = loadNodeTest(dir);
    if (t.ok()) {
      ++loaded;
      if (t->name == "test_clip_default_int8_max") {
        // Clip(x, "", max): input_1.pb is the graph's second input, max.
        ASSERT_EQ(t->data_sets.size(), 1u);
        const NodeTest::DataSet& s = t->data_sets[0];
        ASSERT_EQ(s.inputs.size(), 3u);
        EXPECT_FALSE(s.inputs[1].has_value());
        ASSERT_TRUE(s.inputs[2].has_value());
        EXPECT_EQ(s.inputs[2]->dtype(), ScalarType::Int8);
        EXPECT_EQ(s.inputs[2]->dim(), 0);
        EXPECT_EQ(s.inputs[0]->numel(), 60);
        ++spot_checked;
      }
      EXPECT_FALSE(t->op_type.empty()) << dir;
      EXPECT_GT(t->opset, 0) << dir;
      EXPECT_FALSE(t->data_sets.empty()) << dir;
      for (const NodeTest::DataSet& s : t->data_sets) {
        EXPECT_EQ(s.inputs.size(), t->inputs.size()) << dir;
        EXPECT_EQ(s.outputs.size(), t->outputs.size()) << dir;
        for (size_t i = 0; i < s.inputs.size(); ++i) {
          EXPECT_EQ(s.inputs[i].has_value(), !t->inputs[i].empty()) << dir << " input " << i;
        }
        for (size_t i = 0; i < s.outputs.size(); ++i) {
          if (!s.outputs[i] && !t->outputs[i].empty()) ++unchecked_outputs;
        }
      }
      continue;
    }
    ASSERT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
    ASSERT_FALSE(t.status().message().empty()) << dir;
    ++unimplemented;
    // The reason with the paths left out, to count alike reasons together.
    std::string reason(t.status().message());
    for (size_t at; (at = reason.find(dir)) != std::string::npos;) reason.replace(at, dir.size(), "<dir>");
    if (size_t at = reason.find("the graph has "); at != std::string::npos) {
      at += std::strlen("the graph has ");
      size_t end = reason.find(' ', at);
      reason.replace(at, end - at, "N");
    }
    for (size_t at; (at = reason.find("('")) != std::string::npos;) {
      size_t end = reason.find("')", at);
      if (end == std::string::npos) break;
      reason.replace(at, end + 2 - at, "(<name>)");
    }
    ++unimplemented_reasons[reason];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "ONNX node tests under " << root << ": " << dirs->size() << " found, " << loaded << " load, "
            << unimplemented << " unimplemented, in " << seconds << " s; " << unchecked_outputs
            << " node outputs that the graph does not list (not checked)\n";
  std::multimap<size_t, std::string, std::greater<>> by_count;
  for (const auto& [reason, count] : unimplemented_reasons) by_count.emplace(count, reason);
  for (const auto& [count, reason] : by_count) std::cout << "  " << count << "  " << reason << "\n";
  EXPECT_EQ(loaded + unimplemented, dirs->size());
  const bool has_clip = std::any_of(dirs->begin(), dirs->end(), [](const std::string& d) {
    return fs::path(d).filename() == "test_clip_default_int8_max";
  });
  EXPECT_EQ(spot_checked, has_clip ? 1u : 0u) << "test_clip_default_int8_max did not load";
}

}  // namespace
}  // namespace backplane::conformance::onnx
