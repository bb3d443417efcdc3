// Items of a conformance run (suite.h); the worker's wire format is wire_format.cc.
#include "backplane/conformance/suite.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backplane/conformance/name_pattern.h"
#include "backplane/conformance/onnx_node_test.h"
#include "backplane/core/error.h"

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
  return out;
}

std::vector<Result> runItem(const Item& item, Device device, size_t first_form, const SpecObserver& observer) {
  if (!item.onnx_test.empty()) return {runOnnxTest(item.onnx_test, device)};
  if (!item.spec) return {runDeviceCheck(item.name, device.type)};
  return runSpec(*item.spec, device, first_form, observer);
}

}  // namespace backplane::conformance
