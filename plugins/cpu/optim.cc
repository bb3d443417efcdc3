// "optim" kernels of the CPU plugin: _fused_sgd_ and _fused_adamw_ (Note
// [Optimizer ops] in dispatcher/ops/src/optim.cc), one pass over each
// parameter's elements with bp_common/optim.h's arithmetic. The meta kernel
// has checked the lists (lengths, devices, dtypes, shapes, contiguity) and
// the hyperparameters.
#include <cmath>
#include <cstdint>
#include <vector>

#include "bp_common/optim.h"
#include "cpu_common.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Below this many elements a parameter is updated on the calling thread.
constexpr int64_t kOptimParallelNumel = 1 << 16;

const std::initializer_list<ScalarType> kOptimDtypes = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                                        ScalarType::BFloat16};

template <class T>
T* data(const bp::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

void checkList(const char* op, const std::vector<bp::Tensor>& list, const char* name) {
  for (const bp::Tensor& t : list) {
    checkCpu(op, t, name);
    checkDtype(op, t, name, kOptimDtypes);
  }
}

void fused_sgd(const std::vector<bp::Tensor>& self, const std::vector<bp::Tensor>& grads,
               const std::vector<bp::Tensor>& momentum_buffer_list, double weight_decay, double momentum, double lr,
               double dampening, bool nesterov, bool maximize, bool is_first_step) {
  static constexpr const char* kOp = "bp::_fused_sgd_";
  checkList(kOp, self, "self");
  checkList(kOp, grads, "grads");
  checkList(kOp, momentum_buffer_list, "momentum_buffer_list");
  ThreadScope threads;
  const bool has_momentum = momentum != 0;
  for (size_t i = 0; i < self.size(); ++i) {
    visitDtype(self[i].dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (bp_common::kIsFloating<T>) {
        using V = opmath_t<T>;
        const auto step =
            bp_common::SgdStep<V>::make(lr, weight_decay, momentum, dampening, nesterov, maximize, is_first_step);
        T* p = data<T>(self[i]);
        const T* g = data<T>(grads[i]);
        T* buf = has_momentum ? data<T>(momentum_buffer_list[i]) : nullptr;
        const int64_t n = self[i].numel();
#pragma omp parallel for schedule(static) if (n >= kOptimParallelNumel)
        for (int64_t k = 0; k < n; ++k) {
          V pv = load(p[k]);
          V bv = buf != nullptr ? load(buf[k]) : V(0);
          step(pv, load(g[k]), &bv);
          p[k] = store<T>(pv);
          if (buf != nullptr) buf[k] = store<T>(bv);
        }
      }
    });
  }
}

void fused_adamw(const std::vector<bp::Tensor>& self, const std::vector<bp::Tensor>& grads,
                 const std::vector<bp::Tensor>& exp_avgs, const std::vector<bp::Tensor>& exp_avg_sqs,
                 const std::vector<bp::Tensor>& max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize) {
  static constexpr const char* kOp = "bp::_fused_adamw_";
  checkList(kOp, self, "self");
  checkList(kOp, grads, "grads");
  checkList(kOp, exp_avgs, "exp_avgs");
  checkList(kOp, exp_avg_sqs, "exp_avg_sqs");
  checkList(kOp, max_exp_avg_sqs, "max_exp_avg_sqs");
  ThreadScope threads;
  for (size_t i = 0; i < self.size(); ++i) {
    visitDtype(self[i].dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (bp_common::kIsFloating<T>) {
        using V = opmath_t<T>;
        const auto update = bp_common::AdamwStep<V>::make(step, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize);
        T* p = data<T>(self[i]);
        const T* g = data<T>(grads[i]);
        T* m = data<T>(exp_avgs[i]);
        T* v = data<T>(exp_avg_sqs[i]);
        T* vmax = amsgrad ? data<T>(max_exp_avg_sqs[i]) : nullptr;
        const int64_t n = self[i].numel();
#pragma omp parallel for schedule(static) if (n >= kOptimParallelNumel)
        for (int64_t k = 0; k < n; ++k) {
          V pv = load(p[k]), mv = load(m[k]), vv = load(v[k]);
          V xv = vmax != nullptr ? load(vmax[k]) : V(0);
          update(pv, load(g[k]), mv, vv, &xv);
          p[k] = store<T>(pv);
          m[k] = store<T>(mv);
          v[k] = store<T>(vv);
          if (vmax != nullptr) vmax[k] = store<T>(xv);
        }
      }
    });
  }
}

}  // namespace

namespace bp_cpu {

void registerOptimKernels(bp::Library& m) {
  m.impl("_fused_sgd_", kCpu, &fused_sgd);
  m.impl("_fused_adamw_", kCpu, &fused_adamw);
}

}  // namespace bp_cpu
