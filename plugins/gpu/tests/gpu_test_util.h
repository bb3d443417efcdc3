#pragma once
// What the GPU plugin tests share: the plugins this build made, and a
// Runtime that loads the CPU plugin plus one of them (and nothing from the
// default directories, whose contents depend on the build).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/runtime.h"
#include "float16_test_cases.h"  // plugin_sdk/tests

namespace backplane::gpu_test {

// A GPU plugin of this build: its device type (which is also the prefix of
// its runtime's API and error names: cudaGetDeviceCount, hipErrorNoDevice)
// and its path.
struct GpuPlugin {
  const char* type;
  const char* path;
};
inline void PrintTo(const GpuPlugin& p, std::ostream* os) { *os << p.type; }

enum class WithSimulator { kNo, kYes };

// cuda and hip when this build made them; the simulator first if asked.
inline std::vector<GpuPlugin> builtPlugins(WithSimulator sim) {
  std::vector<GpuPlugin> out;
#ifdef BACKPLANE_GPUSIM_PLUGIN_PATH
  if (sim == WithSimulator::kYes) out.push_back({"gpusim", BACKPLANE_GPUSIM_PLUGIN_PATH});
#endif
#ifdef BACKPLANE_CUDA_PLUGIN_PATH
  out.push_back({"cuda", BACKPLANE_CUDA_PLUGIN_PATH});
#endif
#ifdef BACKPLANE_HIP_PLUGIN_PATH
  out.push_back({"hip", BACKPLANE_HIP_PLUGIN_PATH});
#endif
  return out;
}

// A Runtime with the CPU plugin and the plugin at `path` only; every plugin
// must load (a failure is reported on the calling test).
inline std::unique_ptr<Runtime> runtimeWith(const char* path) {
  RuntimeOptions o;
  o.plugin_paths = {BACKPLANE_CPU_PLUGIN_PATH, path};
  o.load_default_plugins = false;
  auto rt = std::make_unique<Runtime>(o);
  for (const PluginStatus& p : rt->plugins()) EXPECT_TRUE(p.loaded) << p.path << ": " << p.error;
  return rt;
}

// Whether `rt` has device `name` ("cuda:0").
inline bool hasDevice(Runtime& rt, const std::string& name) {
  for (const DeviceInfo& d : rt.devices())
    if (d.device.str() == name) return true;
  return false;
}

// The dtype conversions (Tensor::to, the device's _copy_on_device_ kernel)
// of device `dev` between float32 and float16 / bfloat16, as
// float16_test::Float16Conversions: the bits go to the device unchanged,
// are converted there, and come back unchanged.
inline float16_test::Float16Conversions castsOn(Device dev) {
  // A 1-d CPU tensor of `dtype` holding `bits`; the bits of a CPU tensor.
  const auto tensorOf = [](const auto& bits, ScalarType dtype) {
    Tensor t = emptyTensor({static_cast<int64_t>(bits.size())}, dtype);
    std::memcpy(t.data_ptr(), bits.data(), bits.size() * sizeof(bits[0]));
    return t;
  };
  const auto bitsOf = [](const Tensor& t, auto zero) {
    std::vector<decltype(zero)> bits(static_cast<size_t>(t.numel()));
    std::memcpy(bits.data(), t.data_ptr(), bits.size() * sizeof(zero));
    return bits;
  };
  const auto narrowing = [=](ScalarType to) {
    return [=](const std::vector<uint32_t>& in) {
      return bitsOf(tensorOf(in, ScalarType::Float32).to(dev).to(to).cpu(), uint16_t{0});
    };
  };
  const auto widening = [=](ScalarType from) {
    return [=](const std::vector<uint16_t>& in) {
      return bitsOf(tensorOf(in, from).to(dev).to(ScalarType::Float32).cpu(), uint32_t{0});
    };
  };
  float16_test::Float16Conversions c;
  c.half_from_float = narrowing(ScalarType::Float16);
  c.bfloat16_from_float = narrowing(ScalarType::BFloat16);
  c.float_from_half = widening(ScalarType::Float16);
  c.float_from_bfloat16 = widening(ScalarType::BFloat16);
  return c;
}

// Pooling windows for the forward and backward kernels' tests: strides
// smaller than, equal to and larger than the kernel, padding, ceil_mode
// windows past the input, an unbatched input and a dilated one (max only).
struct PoolCase {
  std::vector<int64_t> input, kernel, stride, padding, dilation;
  bool ceil_mode;
};
inline const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 7, 6}, {2, 2}, {}, {0, 0}, {1, 1}, false},    {{1, 2, 9, 8}, {3, 3}, {1, 2}, {1, 1}, {1, 1}, false},
    {{2, 2, 7, 8}, {3, 2}, {2, 3}, {1, 1}, {1, 1}, true}, {{1, 3, 3, 3}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
    {{2, 9, 8}, {3, 2}, {1, 2}, {1, 1}, {2, 1}, true},
};

// A suite on the simulator: one Runtime (the CPU plugin and gpusim) shared
// by its tests.
class GpusimSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { runtime() = runtimeWith(BACKPLANE_GPUSIM_PLUGIN_PATH); }
  static void TearDownTestSuite() { runtime().reset(); }
  static std::unique_ptr<Runtime>& runtime() {
    static std::unique_ptr<Runtime> rt;
    return rt;
  }
  static Device sim() { return runtime()->device("gpusim:0"); }
  static Device cpu() { return Device(DeviceType::CPU); }

  // Every element as float64 (exact for every dtype), row-major.
  static std::vector<double> valuesOf(const Tensor& t) { return t.cpu().to(ScalarType::Float64).toVector<double>(); }

  // |a - b| <= atol + rtol * |b| elementwise; NaN and infinities must match.
  static void expectClose(const Tensor& got, const Tensor& want, double atol, double rtol) {
    const std::vector<double> g = valuesOf(got), w = valuesOf(want);
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] == w[i]) continue;  // infinities included
      if (std::isnan(w[i])) {
        ASSERT_TRUE(std::isnan(g[i])) << "element " << i << ": got " << g[i] << ", want NaN";
        continue;
      }
      ASSERT_LE(std::abs(g[i] - w[i]), atol + rtol * std::abs(w[i]))
          << "element " << i << ": got " << g[i] << ", want " << w[i];
    }
  }

  // The simulator's count of `name` (kernel_launches, host_reads, ...: Note
  // [Launch counters] in plugins/gpu/gpu_port.h).
  static int64_t activity(const char* name) {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::activity_stat").typed<int64_t(std::string_view)>();
    return op.call(name);
  }
  static void synchronizeSim() {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::synchronize").typed<void(int64_t)>();
    op.call(0);
  }

  // Note [Deferred device errors]: `call` returns without waiting for the
  // device (no host read), and the error it leaves is raised, once, by the
  // next synchronization, with a message holding every one of `parts`.
  template <class F>
  static void expectDeferredError(F&& call, absl::StatusCode code, const std::vector<std::string>& parts) {
    const int64_t reads = activity("host_reads");
    call();
    EXPECT_EQ(activity("host_reads"), reads) << "the call waited for the device";
    try {
      synchronizeSim();
      ADD_FAILURE() << "the synchronization after the call raised nothing";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      for (const std::string& part : parts) EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("reported at the first synchronization after it"), std::string::npos) << e.message();
    }
    synchronizeSim();  // reported once: the next one is clean
  }

  // Whether `op` runs the plugin's kernel on gpusim, not the CPU fallback,
  // is what kernel tests are about: the fallback would produce the CPU's
  // numbers trivially.
  static void expectNative(const char* op) {
    EXPECT_EQ(Dispatcher::singleton().findOpOrThrow(op).kernelKind(backendKey(sim().type)), KernelKind::Native)
        << op << " has no gpusim kernel";
  }
};

}  // namespace backplane::gpu_test
