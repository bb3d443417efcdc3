#include "backplane/dispatch/dispatch_key.h"

#include <string>

#include "backplane/core/device_type_registry.h"

namespace backplane {

std::string dispatchKeyName(DispatchKey k) {
  switch (k) {
    case DispatchKey::Undefined: return "Undefined";
    case DispatchKey::CPU: return "CPU";
    case DispatchKey::CUDA: return "CUDA";
    case DispatchKey::HIP: return "HIP";
    case DispatchKey::Autograd: return "Autograd";
    case DispatchKey::Tracing: return "Tracing";
    case DispatchKey::User0: return "User0";
    case DispatchKey::User1: return "User1";
    case DispatchKey::User2: return "User2";
    case DispatchKey::User3: return "User3";
    case DispatchKey::Profiling: return "Profiling";
    default: break;
  }
  if (isBackendKey(k)) return deviceTypeName(deviceTypeOf(k));
  return "Key" + std::to_string(static_cast<int>(k));
}

std::optional<DispatchKey> parseDispatchKey(std::string_view name) {
  for (int i = 1; i < kNumDispatchKeys; ++i) {
    auto k = static_cast<DispatchKey>(i);
    if (!isBackendKey(k) && !isFunctionalityKey(k)) continue;
    if (isBackendKey(k) && !DeviceTypeRegistry::global().isActive(deviceTypeOf(k))) continue;
    if (dispatchKeyName(k) == name) return k;
  }
  if (auto t = DeviceTypeRegistry::global().find(name)) return backendKey(*t);
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, DispatchKey k) { return os << dispatchKeyName(k); }

std::string DispatchKeySet::str() const {
  std::string out = "{";
  for (int i = 0; i < kNumDispatchKeys; ++i) {
    if (!(bits_ >> i & 1)) continue;
    if (out.size() > 1) out += "|";
    out += dispatchKeyName(static_cast<DispatchKey>(i));
  }
  return out + "}";
}

std::ostream& operator<<(std::ostream& os, DispatchKeySet ks) { return os << ks.str(); }

}  // namespace backplane
