#include "backplane/core/device.h"

#include <charconv>

#include "absl/strings/str_join.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"

namespace backplane {

absl::StatusOr<Device> Device::parse(std::string_view text) {
  auto& registry = DeviceTypeRegistry::global();
  std::string_view type_name = text;
  DeviceIndex index = -1;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    type_name = text.substr(0, colon);
    std::string_view digits = text.substr(colon + 1);
    int value = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value < 0 || value > 32767) {
      return absl::InvalidArgumentError(strCat("invalid device string '", text,
                                               "': the index after ':' must be a number "
                                               "from 0 to 32767, as in 'cuda:1'"));
    }
    index = static_cast<DeviceIndex>(value);
  }
  std::optional<DeviceType> type = registry.find(type_name);
  if (!type) {
    return absl::InvalidArgumentError(strCat("invalid device string '", text, "': unknown device type '", type_name,
                                             "'; known types: ", absl::StrJoin(registry.activeNames(), ", "),
                                             " (vendor types appear once their plugin is loaded)"));
  }
  return Device(*type, index);
}

Device Device::fromString(std::string_view text) { return valueOrThrow(parse(text)); }

std::string Device::str() const {
  std::string name = deviceTypeName(type);
  if (index < 0 || (type == DeviceType::CPU && index == 0)) return name;
  return strCat(name, ":", index);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }
std::ostream& operator<<(std::ostream& os, DeviceType t) { return os << deviceTypeName(t); }

std::string deviceTypeName(DeviceType t) { return DeviceTypeRegistry::global().name(t); }

}  // namespace backplane
