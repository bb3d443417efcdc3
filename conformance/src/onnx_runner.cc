// One ONNX node test as a conformance item (Note [ONNX node tests]).
//
// Note [ONNX node tests]
// ONNX publishes a corpus of node tests (onnx/backend/test/data/node/ in
// the onnx 1.22.0 wheel; scripts/fetch_onnx_tests.sh unpacks it): each a
// model.onnx holding one node and test_data_set_N/ with its inputs and
// expected outputs. `backplane conformance --onnx DIR` runs them on each
// selected backend through the same workers, time limits, crash isolation
// and reports as the op specs, one item per test:
// - The node is loaded (onnx_node_test.h); a test Backplane cannot
//   represent (a complex or string tensor, a graph attribute) is
//   `unsupported`, with the reason.
// - Each data set's inputs are copied to the device under test and the node
//   runs through the ONNX -> standard op mapping (onnx_ops.h): one entry per
//   op_type, honouring the attributes and the opset; a node no standard op
//   expresses is `unsupported` with the reason, decided before any op runs.
// - The outputs must have the expected dtype and shape, and values within
//   ONNX's own test tolerance (|actual - expected| <= 1e-7 + 1e-3 *
//   |expected|; NaN where NaN is expected; integers and bools exactly).
// - A backend's known failures are listed in a checked-in file, one per
//   backend (conformance/onnx/expected_failures/<backend>.txt, passed with
//   --onnx-expected DIR; the ONNX Runtime convention), each with its reason:
//   a listed test that fails counts as `xfail` (reported, not a failure); a
//   listed test that passes is noted, so that the list shrinks; an
//   unlisted failure is a failure, with or without --strict.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_node_test.h"
#include "backplane/conformance/onnx_ops.h"
#include "backplane/conformance/suite.h"
#include "backplane/core/error.h"

namespace backplane::conformance {
namespace {

constexpr double kRtol = 1e-3;  // onnx.backend.test's defaults
constexpr double kAtol = 1e-7;

std::string shapeText(const Tensor& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.sizes().size(); ++i) s += (i ? ", " : "") + std::to_string(t.sizes()[i]);
  return s + "]";
}

// "" if `actual` matches `expected`, else what differs; fills the errors.
std::string compare(const Tensor& actual_on_device, const Tensor& expected, double* max_abs, double* max_rel) {
  if (!actual_on_device.defined()) return "no output was produced";
  Tensor actual = actual_on_device.cpu();
  if (actual.dtype() != expected.dtype())
    return strCat("dtype ", scalarTypeName(actual.dtype()), ", expected ", scalarTypeName(expected.dtype()));
  if (actual.sizes() != expected.sizes())
    return strCat("shape ", shapeText(actual), ", expected ", shapeText(expected));
  const int64_t n = expected.numel();
  if (isFloatingType(expected.dtype())) {
    std::vector<double> a = actual.toVector<double>(), e = expected.toVector<double>();
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double x = a[static_cast<size_t>(i)], y = e[static_cast<size_t>(i)];
      bool ok;
      if (std::isnan(y))
        ok = std::isnan(x);
      else if (std::isinf(y))
        ok = x == y;
      else
        ok = std::fabs(x - y) <= kAtol + kRtol * std::fabs(y);
      if (!std::isnan(x) && !std::isnan(y) && std::isfinite(y)) {
        *max_abs = std::max(*max_abs, std::fabs(x - y));
        if (y != 0) *max_rel = std::max(*max_rel, std::fabs(x - y) / std::fabs(y));
      }
      if (!ok && first_bad < 0) first_bad = i;
    }
    if (first_bad >= 0) {
      return strCat("element ", first_bad, " is ", a[static_cast<size_t>(first_bad)], ", expected ",
                    e[static_cast<size_t>(first_bad)], " (tolerance ", kAtol, " + ", kRtol, " * |expected|)");
    }
    return "";
  }
  if (expected.dtype() == ScalarType::UInt64) {
    std::vector<uint64_t> a = actual.toVector<uint64_t>(), e = expected.toVector<uint64_t>();
    for (int64_t i = 0; i < n; ++i)
      if (a[static_cast<size_t>(i)] != e[static_cast<size_t>(i)])
        return strCat("element ", i, " is ", a[static_cast<size_t>(i)], ", expected ", e[static_cast<size_t>(i)]);
    return "";
  }
  std::vector<int64_t> a = actual.toVector<int64_t>(), e = expected.toVector<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (a[static_cast<size_t>(i)] != e[static_cast<size_t>(i)])
      return strCat("element ", i, " is ", a[static_cast<size_t>(i)], ", expected ", e[static_cast<size_t>(i)]);
  return "";
}

}  // namespace

Result runOnnxTest(const std::string& dir, Device device) {
  Result r;
  r.op = "onnx::" + std::filesystem::path(dir).filename().string();
  r.form = kOnnxForm;
  r.backend = deviceTypeName(device.type);
  absl::StatusOr<onnx::NodeTest> test = onnx::loadNodeTest(dir);
  if (!test.ok()) {
    const bool unimplemented = test.status().code() == absl::StatusCode::kUnimplemented;
    r.outcome = unimplemented ? Outcome::Unsupported : Outcome::Error;
    r.message = (unimplemented ? std::string(kUnloadablePrefix) : "") + std::string(test.status().message());
    return r;
  }
  r.note = strCat(test->op_type, " (opset ", test->opset, ")");
  for (const onnx::NodeTest::DataSet& data : test->data_sets) {
    r.sample = data.name;
    onnx::NodeRun run;
    try {
      onnx::NodeInputs inputs;
      for (const std::optional<Tensor>& in : data.inputs) {
        if (in)
          inputs.emplace_back(in->to(device, /*copy=*/true));
        else
          inputs.emplace_back(std::nullopt);
      }
      run = onnx::runNode(*test, inputs, device);
    } catch (const std::exception& e) {
      r.outcome = Outcome::Error;
      r.message = e.what();
      return r;
    }
    if (!run.supported) {
      r.outcome = Outcome::Unsupported;
      r.message = run.reason;
      return r;
    }
    ++r.samples;
    for (size_t k = 0; k < data.outputs.size(); ++k) {
      if (!data.outputs[k]) continue;
      std::string why;
      try {
        why = k < run.outputs.size() ? compare(run.outputs[k], *data.outputs[k], &r.max_abs_error, &r.max_rel_error)
                                     : "no output was produced";
      } catch (const std::exception& e) {
        r.outcome = Outcome::Error;
        r.message = strCat("output ", k, ": ", e.what());
        return r;
      }
      if (!why.empty()) {
        r.outcome = Outcome::Fail;
        r.message = strCat("output ", k, " ('", k < test->outputs.size() ? test->outputs[k] : "", "'): ", why);
        return r;
      }
    }
  }
  r.sample.clear();
  return r;
}

}  // namespace backplane::conformance
