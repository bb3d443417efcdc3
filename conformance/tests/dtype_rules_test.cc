// Note [Dtype rules live in metas]: a standard op's dtype rule is its meta's
// (or its composite's), never a kernel's, so a plugin kernel never sees a
// call it must refuse. This sweep keeps it so: every form of every op that
// a conformance spec covers, called on cpu with each sample's tensor
// arguments (one at a time, and all of them together) and its out= tensors
// cast to every dtype. A call the host's rule accepts must not be refused by
// the CPU plugin's kernel; a call it refuses must be refused with the rule's
// message, which names the accepted dtypes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane::conformance {
namespace {

const ::testing::Environment* const kCpuPlugin =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).leaveFallbackMode();

Tensor castOnHost(const Tensor& t, ScalarType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  return hostTensor(valuesOf(t), sizesOf(t), dtype);
}

IValue castArg(const IValue& v, ScalarType dtype) {
  if (v.isTensor()) return IValue(castOnHost(v.toTensor(), dtype));
  if (v.isTensorList()) {
    std::vector<TensorBase> list;
    for (const TensorBase& t : v.toTensorList()) list.push_back(castOnHost(Tensor(t), dtype));
    return IValue(std::move(list));
  }
  return v;
}

// A kernel's refusal of a dtype: the plugin host names the plugin kernel
// that raised. A value that does not fit the dtype ("value -inf cannot be
// converted to dtype int32", masked_fill's 0-d value tensor) is the
// kernel's to refuse: it is data, which the host cannot read on a device.
bool refusedByKernel(const std::string& message) {
  return message.find("kernel of plugin") != std::string::npos &&
         message.find("cannot be converted") == std::string::npos;
}

// Samples per spec: a dtype rule does not depend on shapes, and the first
// samples of a spec are its plain cases.
constexpr size_t kSamplesPerSpec = 3;

struct Finding {
  std::string op, sample, variant, message;
};

// Calls `op` with `args` (out= parameters filled with empty tensors of
// `out_dtype`, the rest with defaults); records a kernel refusal.
void sweepCall(const OperatorHandle& op, std::vector<IValue> args, std::optional<ScalarType> out_dtype,
               const std::string& sample, const std::string& variant, std::vector<Finding>& findings) {
  const std::vector<Argument>& params = op.schema().arguments();
  if (args.size() > params.size()) return;
  for (size_t i = args.size(); i < params.size(); ++i) {
    if (params[i].isOut()) {
      if (!out_dtype) return;
      args.emplace_back(emptyTensor({0}, *out_dtype));
    } else {
      args.push_back(defaultArgumentValue(params[i]));
    }
  }
  Stack stack(std::move(args));
  try {
    op.callBoxed(stack);
  } catch (const Error& e) {
    if (refusedByKernel(e.message()))
      findings.push_back({op.operatorName().qualifiedName(), sample, variant, e.message()});
  }
}

const std::vector<ScalarType>& everyDtype() { return kEveryType; }

// The sweep is split into kShards ctests (spec i goes to shard i % kShards)
// so that they run side by side: whole, it is one of the longest tests.
constexpr size_t kShards = 8;

class DtypeRules : public ::testing::TestWithParam<size_t> {};

TEST_P(DtypeRules, ACallTheHostsRuleAcceptsIsNeverRefusedByTheCpuKernel) {
  std::vector<Finding> findings;
  Dispatcher& d = Dispatcher::singleton();
  const std::vector<OpSpec>& specs = allSpecs();
  for (size_t spec_index = GetParam(); spec_index < specs.size(); spec_index += kShards) {
    const OpSpec& spec = specs[spec_index];
    const std::vector<Sample> samples = spec.samples();
    for (const std::string& name : {spec.op, spec.inplace, spec.out}) {
      if (name.empty()) continue;
      const OperatorHandle op = d.findOpOrThrow(name);
      bool has_out = false;
      for (const Argument& a : op.schema().arguments()) has_out |= a.isOut();
      size_t swept = 0;
      for (const Sample& s : samples) {
        if (s.must_raise || swept++ == kSamplesPerSpec) continue;
        std::vector<size_t> tensor_args;
        for (size_t i = 0; i < s.args.size(); ++i)
          if ((s.args[i].isTensor() && s.args[i].toTensor().defined()) || s.args[i].isTensorList())
            tensor_args.push_back(i);
        for (ScalarType dt : everyDtype()) {
          const std::string suffix = " as " + std::string(scalarTypeName(dt));
          // out= tensors of each dtype, inputs as the sample has them.
          if (has_out) sweepCall(op, s.args, dt, s.name, "out" + suffix, findings);
          const std::optional<ScalarType> out_dt = has_out ? std::optional<ScalarType>(dt) : std::nullopt;
          // Each tensor argument alone, then all of them together.
          for (size_t i : tensor_args) {
            std::vector<IValue> args = s.args;
            args[i] = castArg(args[i], dt);
            sweepCall(op, args, out_dt, s.name, "argument " + std::to_string(i) + suffix, findings);
          }
          if (tensor_args.size() > 1) {
            std::vector<IValue> args = s.args;
            for (size_t i : tensor_args) args[i] = castArg(args[i], dt);
            sweepCall(op, args, out_dt, s.name, "every tensor" + suffix, findings);
          }
        }
      }
    }
  }
  // One line per (op, message) so that a gap reads as a list.
  std::map<std::string, std::set<std::string>> by_op;
  for (const Finding& f : findings) by_op[f.op].insert(f.variant + " [" + f.sample + "]: " + f.message);
  std::string report;
  for (const auto& [op, lines] : by_op) {
    report += op + " (" + std::to_string(lines.size()) + " calls)\n";
    int n = 0;
    for (const std::string& l : lines)
      if (n++ < 3) report += "    " + l + "\n";
  }
  EXPECT_TRUE(findings.empty()) << findings.size()
                                << " calls that the host's rule accepted were refused by the cpu kernel:\n"
                                << report;
}

INSTANTIATE_TEST_SUITE_P(Shards, DtypeRules, ::testing::Range<size_t>(0, kShards));

}  // namespace
}  // namespace backplane::conformance
