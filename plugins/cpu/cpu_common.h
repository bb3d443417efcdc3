#pragma once
// Helpers shared by the CPU plugin's kernel families: argument checks with
// clear errors, dtype dispatch (plugins/common: float16 and bfloat16
// compute in float32), and the thread setting.

#include <omp.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/plugin.hpp"
#include "bp_common/dtypes.h"

namespace bp_cpu {

using bp::ScalarType;

inline constexpr int32_t kCpu = 0;
inline constexpr bp::Device kCpuDevice{kCpu, 0};

// --- Threads (Note [CPU threads])
// One setting governs every kernel, oneDNN included: BACKPLANE_NUM_THREADS
// (default: all cores). oneDNN uses OpenMP here, so the setting is OpenMP's
// thread count; ThreadScope applies it on the calling thread (OpenMP's
// setting is per thread) while a kernel runs parallel code, and gives the
// thread its own setting back when the kernel returns. That setting is not
// the plugin's: every OpenMP user in the process reads it on that thread
// (PyTorch's intra-op threads in the same Python process, an application's
// own parallel loops), so a kernel call must leave it as it found it.
int numThreads();
void initThreads();
class ThreadScope {
 public:
  ThreadScope() : callers_(omp_get_max_threads()) {
    const int n = numThreads();
    if (callers_ != n) omp_set_num_threads(n);
  }
  ~ThreadScope() {
    if (omp_get_max_threads() != callers_) omp_set_num_threads(callers_);
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int callers_;  // the calling thread's setting before the kernel
};

// --- Checks

// The dtypes most CPU kernels take (all but the barebones unsigned ones),
// the floating ones, and a compile-time test for a floating element type.
inline const std::initializer_list<ScalarType> kAllDtypes = {
    ScalarType::Bool,  ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
inline const std::initializer_list<ScalarType> kFloatDtypes = {ScalarType::Float16, ScalarType::BFloat16,
                                                               ScalarType::Float32, ScalarType::Float64};
template <class T>
inline constexpr bool kFloating = !std::is_integral_v<T>;  // float, double, bp::Half, bp::BFloat16

// "float32, float64" from a list, for messages.
std::string dtypeList(std::initializer_list<ScalarType> types);

// Throws unless t is on the CPU.
void checkCpu(const char* op, const bp::Tensor& t, const char* arg);

// Throws "<op> on cpu does not support dtype X for argument 'a'; supported:
// ..." unless t's dtype is in `supported`.
void checkDtype(const char* op, const bp::Tensor& t, const char* arg, std::initializer_list<ScalarType> supported);

// Contiguous (row-major) strides of `sizes`.
std::vector<int64_t> contiguousStrides(bp::IntList sizes);
inline std::vector<int64_t> toVector(bp::IntList l) { return std::vector<int64_t>(l.begin(), l.end()); }

// --- dtype dispatch: plugins/common's, with the SDK's 16-bit types

using bp_common::convert;
using bp_common::floatToIntegral;
using bp_common::isFloating;
using bp_common::kAnyDtype;
using bp_common::load;
using bp_common::opmath_t;
using bp_common::scalarTo;
using bp_common::store;
using bp_common::visitItemSize;

// CpuStorage (the SDK's 16-bit types), visitDtype(t, f) and visitAnyDtype(t, f).
BP_COMMON_DTYPE_VISITORS(CpuStorage, bp::Half, bp::BFloat16, "cpu")

// gelu_backward through oneDNN where it applies (elementwise.cc, Note [oneDNN
// gelu]): float32, dense, large; false if not (nothing written).
bool geluBackwardDnnl(bool tanh_form, const bp::Tensor& grad, const bp::Tensor& x, const bp::Tensor& out);

}  // namespace bp_cpu
