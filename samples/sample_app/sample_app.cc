#include "sample_app.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <variant>

#include "backplane/core/error.h"

namespace sample {

using namespace backplane;

namespace {

// Parses all of `text` as an integer.
template <typename T>
bool parseInteger(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// A finite number > 0 spelled by all of `text`.
bool parsePositive(std::string_view text, double& out) {
  const std::string copy(text);  // strtod needs a terminated string
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !(v > 0) || !std::isfinite(v)) return false;
  out = v;
  return true;
}

}  // namespace

bool parseFlags(int argc, char** argv, const std::map<std::string_view, FlagTarget>& flags, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    // "--name value" or "--name=value".
    const std::string_view arg = argv[i];
    const std::string_view name = arg.substr(0, arg.find('='));
    const auto flag = flags.find(name);
    if (flag == flags.end()) {
      error = strCat("unknown argument '", arg, "'");
      return false;
    }
    std::string_view value;
    if (name.size() < arg.size()) {
      value = arg.substr(name.size() + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      error = strCat(name, " needs a value");
      return false;
    }
    // What the value must be, or nullptr when it parsed.
    const char* wanted = std::visit(
        [&]<typename T>(T target) -> const char* {
          if constexpr (std::is_same_v<T, std::string*>) {
            *target = value;
            return nullptr;
          } else if constexpr (std::is_same_v<T, PositiveNumber>) {
            return parsePositive(value, *target.target) ? nullptr : "a positive number";
          } else {
            return parseInteger(value, *target) ? nullptr : "an integer";
          }
        },
        flag->second);
    if (wanted != nullptr) {
      error = strCat(name, " needs ", wanted, ", got '", value, "'");
      return false;
    }
  }
  return true;
}

std::string deviceLine(const Runtime& rt, std::string_view device_flag, Device dev) {
  std::string present;
  std::string name;
  for (const DeviceInfo& d : rt.devices()) {
    present += (present.empty() ? "" : ", ") + d.device.str();
    if (d.device == dev && d.properties.name != d.device.str()) name = " (" + d.properties.name + ")";
  }
  // Runtime::resolve lets BACKPLANE_DEVICE replace "auto" (Note [Choosing a device]).
  std::string origin = strCat("--device ", device_flag);
  const char* env = std::getenv("BACKPLANE_DEVICE");
  if (device_flag == "auto" && env && *env && std::string_view(env) != "auto") {
    origin = strCat("BACKPLANE_DEVICE=", env, " (over --device auto)");
  }
  return strCat(dev.str(), name, ", from ", origin, "; devices present: ", present);
}

std::string fallbackLine(const OpReport& report) {
  std::string ops;
  int count = 0;
  uint64_t bytes = 0;
  for (const OpStats& row : report.ops) {
    if (row.fallbackCalls() == 0) continue;
    ++count;
    bytes += row.fallback_bytes;
    ops += strCat(ops.empty() ? "" : ", ", row.op, " (", row.fallbackCalls(),
                  row.fallbackCalls() == 1 ? " call, " : " calls, ", formatBytes(row.fallback_bytes), ")");
  }
  if (count == 0) return "nothing fell back";
  return strCat(count, count == 1 ? " op" : " ops", " fell back to the CPU, ", formatBytes(bytes), " copied: ", ops);
}

Difference compareResults(const std::vector<double>& actual, const std::vector<double>& expected) {
  BP_CHECK(actual.size() == expected.size(), "compareResults: ", actual.size(), " values against ", expected.size());
  Difference d;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(actual[i] - expected[i]);
    if (!std::isfinite(diff)) return {std::numeric_limits<double>::infinity(), static_cast<int64_t>(i)};
    if (diff > d.max_abs) d = {diff, static_cast<int64_t>(i)};
  }
  return d;
}

}  // namespace sample
