#pragma once
// Helpers shared by the CPU plugin's kernel families: argument checks with
// clear errors, dtype dispatch (plugins/common: float16 and bfloat16
// compute in float32), and the thread setting.

#include <omp.h>

#include <cstdint>
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
// setting is per thread) before a kernel runs parallel code.
int numThreads();
void initThreads();
class ThreadScope {
 public:
  ThreadScope() {
    const int n = numThreads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
  }
};

// --- Checks

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
