// Items of a conformance run (suite.h); the worker's wire format is wire_format.cc.
#include "backplane/conformance/suite.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backplane/conformance/name_pattern.h"
#include "backplane/conformance/onnx_node_test.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane::conformance {

std::vector<Item> selectItems(DeviceType type, const std::string& ops_regex, bool device_checks,
                              const std::string& onnx_root, bool native_only) {
  const NamePattern re = valueOrThrow(NamePattern::compile("--ops", ops_regex));  // Note [Name patterns]
  auto keep = [&](std::initializer_list<const std::string*> names) {
    if (re.matchesEverything()) return true;
    for (const std::string* n : names)
      if (!n->empty() && re.matches(*n)) return true;
    return false;
  };
  std::vector<Item> out;
  if (!onnx_root.empty()) {
    std::map<std::string, std::string> dirs;  // name -> folder: a name is one test
    for (std::string& dir : valueOrThrow(onnx::findNodeTests(onnx_root))) {
      std::string name = "onnx::" + std::filesystem::path(dir).filename().string();
      auto [it, fresh] = dirs.emplace(name, dir);
      BP_CHECK(fresh, "two ONNX node tests are named ", name, " (", it->second, " and ", dir, "); point --onnx at one ",
               "corpus");
      if (keep({&name})) out.push_back(Item{std::move(name), nullptr, std::move(dir)});
    }
    return out;
  }
  if (device_checks) {
    for (std::string& name : deviceCheckNames(type))
      if (keep({&name})) out.push_back(Item{std::move(name), nullptr});
  }
  auto native = [&](const OpSpec& s) {
    for (const std::string* n : {&s.op, &s.inplace, &s.out})
      if (!n->empty() && kernelKindOn(*n, type) == KernelKind::Native) return true;
    return false;
  };
  for (const OpSpec& s : allSpecs())
    if (keep({&s.op, &s.inplace, &s.out}) && (!native_only || native(s))) out.push_back(Item{s.op, &s});
  // The specs plugins declared for their own operators, after the standard ones.
  const std::vector<const OpSpec*> declared = pluginSpecs();
  for (const OpSpec* s : declared)
    if (keep({&s->op, &s->inplace, &s->out}) && (!native_only || native(*s))) out.push_back(Item{s->op, s});
  // Note [Uncertified operators]: native kernels no spec covers, by name.
  static const std::set<std::string> standard_covered = [] {
    std::set<std::string> names;
    for (const OpSpec& s : allSpecs())
      for (const std::string* n : {&s.op, &s.inplace, &s.out})
        if (!n->empty()) names.insert(*n);
    return names;
  }();
  std::set<std::string> covered = standard_covered;
  for (const OpSpec* s : declared)
    for (const std::string* n : {&s->op, &s->inplace, &s->out})
      if (!n->empty()) covered.insert(*n);
  std::vector<std::string> uncovered;
  for (const OperatorHandle& h : Dispatcher::singleton().definedOperators()) {
    std::string name = h.operatorName().qualifiedName();
    if (covered.count(name) || h.kernelKind(backendKey(type)) != KernelKind::Native) continue;
    if (keep({&name})) uncovered.push_back(std::move(name));
  }
  std::sort(uncovered.begin(), uncovered.end());  // definition order is the plugins' load order
  for (std::string& name : uncovered) out.push_back(Item{std::move(name), nullptr, "", true});
  return out;
}

Result uncertifiedResult(const std::string& op, DeviceType type) {
  Result r;
  r.op = op;
  r.backend = std::string(deviceTypeName(type));
  r.kernel = KernelKind::Native;
  r.outcome = Outcome::Uncertified;
  bool writes = false;
  if (std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(op); h && h->hasSchema())
    for (const Argument& a : h->schema().arguments()) writes |= a.isOut();
  const std::string_view base = std::string_view(op).substr(0, op.find('.'));
  r.form = writes ? "out" : base.ends_with('_') ? "inplace" : "functional";
  r.message =
      "no conformance spec covers this op, so its native kernel ran no sample: nothing certifies it (a "
      "plugin's own operator needs a spec; docs/conformance.md)";
  return r;
}

std::vector<Result> runItem(const Item& item, Device device, size_t first_form, const SpecObserver& observer) {
  if (!item.onnx_test.empty()) return {runOnnxTest(item.onnx_test, device)};
  if (item.uncertified) return {uncertifiedResult(item.name, device.type)};
  if (!item.spec) return {runDeviceCheck(item.name, device.type)};
  return runSpec(*item.spec, device, first_form, observer);
}

}  // namespace backplane::conformance
