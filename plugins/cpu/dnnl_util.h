#pragma once
// oneDNN glue shared by the CPU plugin's families (linalg, nn): one engine
// for the process, one stream per calling thread (a stream is not meant to
// be shared between threads), and dtype / memory-descriptor mapping.
// Run primitives inside a bp_cpu::ThreadScope so that BACKPLANE_NUM_THREADS
// governs oneDNN's OpenMP threads (Note [CPU threads]).

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_common.h"

namespace bp_cpu::dnnl_util {

// The CPU engine, created on first use.
inline const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// This thread's stream on engine().
inline dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Whether oneDNN picked its slow reference ("ref") implementation for pd.
inline bool isReference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

// What make() builds for `key` (a primitive and what its calls need),
// cached per calling thread, as the streams are: no lock on the hot path.
// Each call site has its own cache (make's type differs), emptied when it
// reaches `capacity` entries.
template <size_t N, class Make>
const auto& cachedPerThread(const std::array<int64_t, N>& key, size_t capacity, Make&& make) {
  struct Hash {
    size_t operator()(const std::array<int64_t, N>& k) const noexcept {  // FNV-1a
      uint64_t h = 1469598103934665603ull;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  using Value = decltype(make());
  thread_local std::unordered_map<std::array<int64_t, N>, Value, Hash> cache;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= capacity) cache.clear();
  return cache.emplace(key, make()).first->second;
}

// oneDNN's data type for a backplane dtype, or undef where oneDNN has none
// (bool, int64, float64).
inline dnnl::memory::data_type dataType(ScalarType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case ScalarType::Float32: return dt::f32;
    case ScalarType::BFloat16: return dt::bf16;
    case ScalarType::Float16: return dt::f16;
    case ScalarType::Int32: return dt::s32;
    case ScalarType::Int8: return dt::s8;
    case ScalarType::UInt8: return dt::u8;
    default: return dt::undef;
  }
}

// A memory descriptor with t's sizes and strides (in elements), for an
// arbitrary strided layout; a 0-d tensor is described as [1].
inline dnnl::memory::desc stridedDesc(const bp::Tensor& t, dnnl::memory::data_type dt) {
  if (t.dim() == 0) return dnnl::memory::desc({1}, dt, dnnl::memory::dims{1});
  return dnnl::memory::desc(dnnl::memory::dims(t.sizes().begin(), t.sizes().end()), dt,
                            dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

}  // namespace bp_cpu::dnnl_util
