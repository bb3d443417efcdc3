#pragma once
// The host threads setting every plugin with parallel CPU code reads (Note
// [CPU threads] in plugins/cpu/cpu_common.h). Host code only.
#include <algorithm>
#include <cstdlib>
#include <thread>

namespace bp_common {

// BACKPLANE_NUM_THREADS: the number it names, or all cores when it is
// unset, empty or not an integer from 1 to 4096. In the last case
// `*invalid` (when given) points at the value, for a plugin that warns.
inline int threadSetting(const char** invalid = nullptr) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* env = std::getenv("BACKPLANE_NUM_THREADS");
  if (env == nullptr || *env == '\0') return cores;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || n < 1 || n > 4096) {
    if (invalid != nullptr) *invalid = env;
    return cores;
  }
  return static_cast<int>(n);
}

}  // namespace bp_common
