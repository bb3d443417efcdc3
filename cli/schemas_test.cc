// `backplane ops --schemas`: the listing a plugin author writes kernels
// from. The C++ declarations it prints must be what plugin.hpp accepts:
// each is compiled here as a function, and bp::kernel<> must make of it the
// cpp_signature the host checks (Note [Plugin kernel types]).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "backplane/plugin.hpp"
#include "gtest/gtest.h"

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result run(const std::string& args) {
  const std::string base = ::testing::TempDir() + "/schemas_test_" + std::to_string(getpid());
  const std::string out = base + ".out", err = base + ".err";
  const std::string cmd = std::string("'") + BACKPLANE_CLI_PATH + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out);
  r.err = readFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

// The value of the listing's line "  <field>: value" (first one).
std::string field(const std::string& listing, const std::string& name) {
  std::stringstream ss(listing);
  for (std::string l; std::getline(ss, l);) {
    const std::string key = "  " + name + ":";
    if (l.rfind(key, 0) != 0) continue;
    const size_t v = l.find_first_not_of(' ', key.size());
    return v == std::string::npos ? "" : l.substr(v);
  }
  return "";
}

// A kernel declared from the text the listing must print: the text and
// the function come from one source.
#define DECLARE_KERNEL(RET, NAME, PARAMS)        \
  [[noreturn]] RET NAME PARAMS { std::abort(); } \
  const std::string NAME##_text = #RET " " #NAME #PARAMS;

DECLARE_KERNEL(bp::Tensor, add_out,
               (const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out))
DECLARE_KERNEL(bp::Tensor, mm_out, (const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out))
DECLARE_KERNEL(bp::Tensor, sum_IntList_out,
               (const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim,
                std::optional<bp::ScalarType> dtype, const bp::Tensor& out))
DECLARE_KERNEL(bp::Tensor, cat, (const std::vector<bp::Tensor>& tensors, int64_t dim))
DECLARE_KERNEL(bp::Tensor, batch_norm,
               (const bp::Tensor& input, const std::optional<bp::Tensor>& weight, const std::optional<bp::Tensor>& bias,
                const std::optional<bp::Tensor>& running_mean, const std::optional<bp::Tensor>& running_var,
                bool training, double momentum, double eps, bool cudnn_enabled))
DECLARE_KERNEL(bp::Tensor, gelu, (const bp::Tensor& self, std::string_view approximate))
DECLARE_KERNEL(bp::Tensor, full,
               (bp::IntList size, const bp::Scalar& fill_value, std::optional<bp::ScalarType> dtype,
                std::optional<bp::Device> device))
DECLARE_KERNEL(bp::Tensor, clamp_out,
               (const bp::Tensor& self, const std::optional<bp::Scalar>& min, const std::optional<bp::Scalar>& max,
                const bp::Tensor& out))

TEST(OpsSchemas, ThePrintedKernelIsWhatPluginHppRegisters) {
  struct Case {
    const char* op;
    const std::string& text;
    std::string cpp_signature;  // what bp::kernel<> makes of the function
  };
  const Case cases[] = {
      {"add.out", add_out_text, bp::kernel<&add_out>().cpp_signature},
      {"mm.out", mm_out_text, bp::kernel<&mm_out>().cpp_signature},
      {"sum.IntList_out", sum_IntList_out_text, bp::kernel<&sum_IntList_out>().cpp_signature},
      {"cat", cat_text, bp::kernel<&cat>().cpp_signature},
      {"batch_norm", batch_norm_text, bp::kernel<&batch_norm>().cpp_signature},
      {"gelu", gelu_text, bp::kernel<&gelu>().cpp_signature},
      {"full", full_text, bp::kernel<&full>().cpp_signature},
      {"clamp.out", clamp_out_text, bp::kernel<&clamp_out>().cpp_signature},
  };
  for (const Case& c : cases) {
    // The '.' of an overload matches itself among others; ^ and $ keep one op.
    const Result r = run(std::string("ops --schemas '^bp::") + c.op + "$'");
    ASSERT_EQ(r.code, 0) << c.op << ": " << r.err;
    EXPECT_EQ(r.out.rfind(std::string("bp::") + c.op + "\n", 0), 0u) << "exactly one op: " << r.out;
    EXPECT_EQ(field(r.out, "C++ kernel"), c.text) << c.op;
    EXPECT_EQ(field(r.out, "cpp_signature"), c.cpp_signature) << c.op;
  }
}

TEST(OpsSchemas, ListsEachArgumentsAcceptedDtypes) {
  const Result r = run("ops --schemas '^bp::mm\\.out$'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(field(r.out, "schema"), "bp::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(field(r.out, "dtypes"),
            "self: every dtype but bool, uint16, uint32, uint64; mat2: every dtype but bool, uint16, uint32, uint64; "
            "out: checked against the result");
  const Result conv = run("ops --schemas '^bp::conv2d$'");
  EXPECT_NE(field(conv.out, "dtypes").find("input: every dtype but bool, uint16, uint32, uint64"), std::string::npos)
      << conv.out;
}

TEST(OpsSchemas, ARegexSelectsOpsAndAllOpsWithoutOne) {
  const Result some = run("ops --schemas '^bp::mm'");
  ASSERT_EQ(some.code, 0) << some.err;
  EXPECT_NE(some.out.find("bp::mm\n"), std::string::npos);
  EXPECT_NE(some.out.find("bp::mm.out\n"), std::string::npos);
  EXPECT_EQ(some.out.find("bp::add"), std::string::npos);
  const Result all = run("ops --schemas");
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("bp::add.out\n"), std::string::npos);
  EXPECT_NE(all.out.find("bp::mm.out\n"), std::string::npos);
}

TEST(OpsSchemas, MarkdownAndJson) {
  const Result md = run("ops --schemas '^bp::mm\\.out$' --format markdown");
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_EQ(md.out.rfind("| op | schema | accepted dtypes | C++ kernel | derivative |\n|---|---|---|---|---|\n", 0), 0u)
      << md.out;
  EXPECT_NE(md.out.find("| bp::mm.out | `bp::mm.out(Tensor self"), std::string::npos) << md.out;
  const Result js = run("ops --schemas '^bp::mm\\.out$' --format json");
  ASSERT_EQ(js.code, 0) << js.err;
  EXPECT_NE(js.out.find("\"name\": \"bp::mm.out\""), std::string::npos) << js.out;
  EXPECT_NE(js.out.find("\"dtypes\": {\"self\": \"every dtype but bool, uint16, uint32, uint64\""), std::string::npos)
      << js.out;
  EXPECT_NE(js.out.find("\"kernel\": \"bp::Tensor mm_out(const bp::Tensor& self"), std::string::npos) << js.out;
  EXPECT_NE(js.out.find("\"derivative\": {\"kind\": \"out_variant\""), std::string::npos) << js.out;
}

// A derived out= form (Note [Derived out= forms]) names the functional op a
// plugin implements; the others name none.
TEST(OpsSchemas, ADerivedOutFormNamesItsFunctionalOp) {
  EXPECT_EQ(field(run("ops --schemas '^bp::max\\.dim_max$'").out, "derived from"),
            "bp::max.dim (a composite calls it and copies the result; a plugin implements bp::max.dim, or this "
            "form's kernel above to serve it instead)");
  EXPECT_EQ(run("ops --schemas '^bp::mm\\.out$'").out.find("derived from"), std::string::npos);
  EXPECT_EQ(field(run("ops --schemas '^bp::zero$'").out, "derived from"),
            "bp::zero_ (a composite calls it on a new tensor like self; a plugin implements bp::zero_, or this form's "
            "kernel above to serve it instead)");
  const Result js = run("ops --schemas '^bp::(linear\\.out|mm\\.out)$' --format json");
  ASSERT_EQ(js.code, 0) << js.err;
  EXPECT_NE(js.out.find("\"derived_from\": \"bp::linear\""), std::string::npos) << js.out;
  EXPECT_NE(js.out.find("\"derived_from\": \"bp::linear\", \"derived_kind\": \"out\""), std::string::npos) << js.out;
  EXPECT_NE(js.out.find("\"derived_from\": null, \"derived_kind\": null"), std::string::npos) << js.out;
  EXPECT_NE(run("ops --schemas '^bp::zero$' --format json").out.find("\"derived_kind\": \"functional\""),
            std::string::npos);
  const Result md = run("ops --schemas '^bp::linear\\.out$' --format markdown");
  EXPECT_NE(md.out.find(" (derived from bp::linear) |"), std::string::npos) << md.out;
}

// How each op differentiates (docs/autograd.md): its formulas, or why none.
TEST(OpsSchemas, ListsHowEachOpDifferentiates) {
  EXPECT_EQ(field(run("ops --schemas '^bp::mul\\.Tensor$'").out, "derivative"),
            "formula (self: grad * other; other: grad * self)");
  EXPECT_EQ(field(run("ops --schemas '^bp::mul_\\.Tensor$'").out, "derivative"),
            "inplace (self: grad * other; other: grad * self)");
  EXPECT_EQ(field(run("ops --schemas '^bp::eq\\.Tensor$'").out, "derivative"),
            "non_differentiable (a comparison: its bool result carries no gradient)");
  EXPECT_EQ(field(run("ops --schemas '^bp::linear$'").out, "derivative"),
            "composite (differentiated through the standard ops its composite kernel calls)");
  EXPECT_EQ(field(run("ops --schemas '^bp::gelu_backward$'").out, "derivative"),
            "not_implemented (a backward op: differentiating it again (double backward) has no formula yet)");
  // A formula that calls a backward op names it, with what serves it where.
  EXPECT_NE(field(run("ops --schemas '^bp::gelu$'").out, "derivative")
                .find("calls bp::gelu_backward (cpu native (float32, float64), composite (others)"),
            std::string::npos)
      << run("ops --schemas '^bp::gelu$'").out;
  // A plugin op's declaration (Note [Declared derivatives]) names its declarer.
  const std::string conv = field(run("ops --schemas '^spconv::indice_conv$'").out, "derivative");
  EXPECT_EQ(conv.rfind("formula (declared by plugin spconv: spconv::indice_conv_backward(features, filters, grad, "
                       "indice_pairs, indice_pair_num, inverse, subm) -> (features, filters); calls "
                       "spconv::indice_conv_backward (cpu native",
                       0),
            0u)
      << conv;
  EXPECT_EQ(field(run("ops --schemas '^spconv::get_indice_pairs$'").out, "derivative"),
            "non_differentiable (declared by plugin spconv)");
}

TEST(OpsSchemas, UsageErrors) {
  const Result bad = run("ops --schemas '('");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("not a valid regular expression"), std::string::npos) << bad.err;
  const Result none = run("ops --schemas '^no_such::op$'");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no defined operator matches"), std::string::npos) << none.err;
  // RE2 (Note [Name patterns]): a pattern that makes a backtracking matcher
  // run for ages answers at once, and a huge one is refused, not a crash.
  const auto t0 = std::chrono::steady_clock::now();
  const Result slow = run("ops --schemas '(.+)+X'");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(slow.code, 2);
  EXPECT_NE(slow.err.find("no defined operator matches '(.+)+X'"), std::string::npos) << slow.err;
  const Result huge = run("ops --schemas " + std::string(90000, 'a'));
  EXPECT_EQ(huge.code, 2);
  EXPECT_NE(huge.err.find("the --schemas pattern is too large (90000 bytes; at most 65536)"), std::string::npos)
      << huge.err;
  const Result other = run("devices --schemas");
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("--schemas applies only to the 'ops' command"), std::string::npos) << other.err;
}

}  // namespace
