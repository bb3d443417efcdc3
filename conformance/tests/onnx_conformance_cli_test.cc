// `backplane conformance --onnx DIR` end to end (Note [ONNX node tests]): a
// small corpus written here with the ONNX protobuf classes, run by the tool
// on the CPU plugin in its workers, with a list of expected failures.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

void writeProto(const fs::path& path, const google::protobuf::MessageLite& proto) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  ASSERT_TRUE(proto.SerializeToOstream(&out)) << path;
}

::onnx::TensorProto floats(const std::string& name, std::vector<float> values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) t.add_float_data(v);
  return t;
}

// A node test `op_type(x, y) -> z` (or `op_type(x) -> z` without y) with one data set.
void writeTest(const fs::path& dir, const std::string& op_type, std::vector<float> x, std::vector<float> y,
               std::vector<float> z) {
  const bool unary = y.empty();
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  ::onnx::OperatorSetIdProto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  ::onnx::GraphProto* g = m.mutable_graph();
  ::onnx::NodeProto* n = g->add_node();
  n->set_op_type(op_type);
  n->add_input("x");
  if (!unary) n->add_input("y");
  n->add_output("z");
  for (const char* name : {"x", "y"}) {
    if (unary && std::string(name) == "y") continue;
    ::onnx::ValueInfoProto* v = g->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  }
  ::onnx::ValueInfoProto* out = g->add_output();
  out->set_name("z");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  writeProto(dir / "model.onnx", m);
  writeProto(dir / "test_data_set_0" / "input_0.pb", floats("x", x));
  if (!unary) writeProto(dir / "test_data_set_0" / "input_1.pb", floats("y", y));
  writeProto(dir / "test_data_set_0" / "output_0.pb", floats("z", z));
}

struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun tool(const std::vector<std::string>& args, const std::string& extra_plugin = "") {
  std::string cmd = std::string(BACKPLANE_CLI_PATH) + " --no-default-plugins --plugin " + BACKPLANE_CPU_PLUGIN_PATH;
  if (!extra_plugin.empty()) cmd += " --plugin " + extra_plugin;
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  ToolRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class OnnxConformanceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("onnx_cli_" + std::to_string(getpid()));
    fs::remove_all(root_);
    corpus_ = root_ / "node";
    writeTest(corpus_ / "test_add_ok", "Add", {1, 2}, {10, 20}, {11, 22});
    writeTest(corpus_ / "test_add_listed_fails", "Add", {1, 2}, {10, 20}, {11, 99});
    writeTest(corpus_ / "test_add_unlisted_fails", "Add", {1, 2}, {10, 20}, {0, 22});
    writeTest(corpus_ / "test_add_listed_passes", "Add", {1}, {1}, {2});
    writeTest(corpus_ / "test_no_such_op", "NoSuchOp", {1}, {1}, {2});
    expected_ = root_ / "expected";
    fs::create_directories(expected_);
    std::ofstream(expected_ / "cpu.txt") << "# the cpu backend's known failures\n"
                                         << "test_add_listed_fails   the expected output is wrong on purpose\n"
                                         << "test_add_listed_passes  listed, but it passes\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path root_, corpus_, expected_;
};

TEST_F(OnnxConformanceCli, CountsPassesFailuresExpectedFailuresAndUnsupported) {
  const fs::path json = root_ / "r.json", junit = root_ / "r.xml";
  ToolRun r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--onnx-expected",
                    expected_.string(), "--json", json.string(), "--junit", junit.string()});
  // The unlisted failure fails the run.
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("cpu:0: 5 found, 4 mapped, 2 passed, 1 failed, 1 expected failures, 1 unsupported, 0 crashed"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("onnx::test_add_unlisted_fails"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 listed as expected failures passed"), std::string::npos) << r.out;
  const std::string j = read(json);
  EXPECT_NE(j.find("\"unsupported\": 1, \"xfail\": 1"), std::string::npos) << j;
  EXPECT_NE(j.find("\"op\": \"onnx::test_no_such_op\", \"form\": \"onnx\""), std::string::npos) << j;
  EXPECT_NE(j.find("no mapping for ONNX op_type"), std::string::npos) << j;
  EXPECT_NE(j.find("the expected output is wrong on purpose"), std::string::npos) << j;
  EXPECT_NE(j.find("passed, but is listed as an expected failure"), std::string::npos) << j;
  EXPECT_NE(read(junit).find("skipped=\"2\""), std::string::npos) << read(junit);
}

TEST_F(OnnxConformanceCli, PassesWhenEveryFailureIsListedOrLeftOut) {
  ToolRun r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--onnx-expected",
                    expected_.string(), "--ops", "^onnx::test_(add_ok|add_listed|no_such)"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("4 found, 3 mapped, 2 passed, 0 failed, 1 expected failures, 1 unsupported"), std::string::npos)
      << r.out;
}

TEST_F(OnnxConformanceCli, AnEntryWithoutAReasonIsAnError) {
  std::ofstream(expected_ / "cpu.txt") << "test_add_listed_fails\n";
  ToolRun r =
      tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--onnx-expected", expected_.string()});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cpu.txt:1: 'test_add_listed_fails' has no reason"), std::string::npos) << r.out;
}

TEST_F(OnnxConformanceCli, AHangIsACrashOfThatNodeTestAndCanBeAnExpectedFailure) {
  // The faulty test plugin's abs.out hangs; it has no mul kernel (the CPU fallback serves Mul).
  const fs::path corpus = root_ / "faulty_node";
  writeTest(corpus / "test_abs", "Abs", {-1, 2}, {}, {1, 2});
  writeTest(corpus / "test_mul", "Mul", {1, 2}, {3, 4}, {3, 8});
  ToolRun r = tool({"conformance", "--onnx", corpus.string(), "--backend", "faulty", "--timeout", "2"},
                   BACKPLANE_FAULTY_PLUGIN_PATH);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("2 found, 2 mapped, 1 passed, 0 failed, 0 expected failures, 0 unsupported, 1 crashed"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("onnx::test_abs (onnx, -): crash"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("while running this ONNX node test"), std::string::npos) << r.out;
  // Listed (with the onnx:: prefix and a '#' inside the reason), the hang is an expected failure.
  std::ofstream(expected_ / "faulty.txt") << "onnx::test_abs  abs.out of the faulty plugin hangs (#42)\n";
  r = tool({"conformance", "--onnx", corpus.string(), "--backend", "faulty", "--timeout", "2", "--onnx-expected",
            expected_.string()},
           BACKPLANE_FAULTY_PLUGIN_PATH);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 found, 2 mapped, 1 passed, 0 failed, 1 expected failures, 0 unsupported, 0 crashed"),
            std::string::npos)
      << r.out;
}

TEST_F(OnnxConformanceCli, NothingToRunIsAnError) {
  fs::create_directories(root_ / "empty");
  ToolRun r = tool({"conformance", "--onnx", (root_ / "empty").string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no ONNX node test (a folder with a model.onnx) found under"), std::string::npos) << r.out;
  r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--ops", "Add"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("matches none of the 5 ONNX node tests"), std::string::npos) << r.out;
  // Two corpora under one folder: two tests of one name.
  writeTest(root_ / "other" / "test_add_ok", "Add", {1}, {1}, {2});
  r = tool({"conformance", "--onnx", root_.string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("two ONNX node tests are named onnx::test_add_ok"), std::string::npos) << r.out;
  r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--onnx-expected",
            (expected_ / "cpu.txt").string()});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is not a folder"), std::string::npos) << r.out;
}

// Note [ONNX loading limits]: a model.onnx that is a FIFO is a test in
// error, counted, and nothing blocks on it; a symlink loop is reported.
TEST_F(OnnxConformanceCli, SpecialFilesCountAsErrorsAndLoopsAreReported) {
  fs::create_directories(corpus_ / "test_fifo");
  ASSERT_EQ(::mkfifo((corpus_ / "test_fifo" / "model.onnx").c_str(), 0600), 0);
  ToolRun r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--onnx-expected",
                    expected_.string(), "--timeout", "20"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("cpu:0: 6 found, 5 mapped, 2 passed, 2 failed, 1 expected failures, 1 unsupported"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("model.onnx: is a FIFO, not a regular file (the node test's model)"), std::string::npos)
      << r.out;

  fs::create_directory_symlink(".", corpus_ / "test_fifo" / "self");
  r = tool({"conformance", "--onnx", corpus_.string(), "--backend", "cpu", "--timeout", "20"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("self: leads back to " + (corpus_ / "test_fifo").string()), std::string::npos) << r.out;
}

TEST_F(OnnxConformanceCli, UsageErrors) {
  ToolRun r = tool({"conformance", "--onnx", (root_ / "missing").string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("missing"), std::string::npos) << r.out;
  r = tool({"conformance", "--onnx-expected", expected_.string(), "--backend", "cpu"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("give --onnx DIR too"), std::string::npos) << r.out;
}

}  // namespace
