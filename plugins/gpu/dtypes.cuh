#pragma once
// Element types of the GPU kernels: plugins/common's dtype rules
// (bp_common/dtypes.h: OpMath, load/store, PyTorch's casts, a Scalar as an
// element, the dtype visitors) with the GPU plugins' 16-bit storage types
// bp_gpu::Half and bp_gpu::BFloat16 (gpu_port.h), and the C math functions
// by overload (bp_common/arithmetic.h).
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "bp_common/arithmetic.h"
#include "bp_common/dtypes.h"
#include "gpu_port.h"

namespace bp_gpu {

using bp::ScalarType;
using bp_common::convert;
using bp_common::isFloating;
using bp_common::kAnyDtype;
using bp_common::kIsFloating;
using bp_common::kIsReduced;
using bp_common::load;
using bp_common::opmath_t;
using bp_common::scalarTo;
using bp_common::store;
using bp_common::visitItemSize;
namespace math = bp_common::math;

// GpuStorage (gpu_port.h's 16-bit types), visitDtype(t, f) and visitAnyDtype(t, f).
BP_COMMON_DTYPE_VISITORS(GpuStorage, bp_gpu::Half, bp_gpu::BFloat16, "gpu")

}  // namespace bp_gpu
