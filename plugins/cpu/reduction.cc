// Reduction kernels of the CPU plugin.
#include <string>
#include <vector>

#include "cpu_common.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Sum of all elements as a 0-d tensor; integers accumulate into int64.
bp::Tensor sum(const bp::Tensor& self, std::optional<ScalarType> dtype) {
  checkCpu("bp::sum", self, "self");
  checkDtype("bp::sum", self, "self", {ScalarType::Float32, ScalarType::Float64, ScalarType::Int32, ScalarType::Int64});
  ScalarType out_t = dtype ? *dtype : (self.dtype() == ScalarType::Int32 ? ScalarType::Int64 : self.dtype());
  bp::Tensor out = bp::Tensor::empty({}, out_t, kCpuDevice);
  checkDtype("bp::sum", out, "dtype", {ScalarType::Float32, ScalarType::Float64, ScalarType::Int32, ScalarType::Int64});
  const std::vector<int64_t> sizes = toVector(self.sizes()), strides = toVector(self.strides());
  const int64_t n = self.numel();
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = self.data_ptr<const T>();
    double fsum = 0;
    int64_t isum = 0;
    std::vector<int64_t> index(sizes.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < sizes.size(); ++d) off += index[d] * strides[d];
      if constexpr (std::is_floating_point_v<T>) fsum += static_cast<double>(x[off]);
      else isum += static_cast<int64_t>(x[off]);
      for (size_t d = sizes.size(); d-- > 0;) {
        if (++index[d] < sizes[d]) break;
        index[d] = 0;
      }
    }
    visitDtype(out_t, [&](auto otag) {
      using O = decltype(otag);
      *out.data_ptr<O>() = std::is_floating_point_v<T> ? store<O>(fsum) : store<O>(isum);
    });
  });
  return out;
}

}  // namespace

namespace bp_cpu {

void registerReductionKernels(bp::Library& m) { m.impl("sum", kCpu, &sum); }

}  // namespace bp_cpu
