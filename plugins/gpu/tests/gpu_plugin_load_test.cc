// The real GPU plugins (backplane_cuda, backplane_hip) on whatever machine
// runs the tests. Without a GPU they must load, report 0 devices with the
// runtime's reason, refuse `cuda:0` tensors naming the devices present, and
// leave "auto" to the cpu. With a GPU the same tests check the positive
// case instead: a GPU is never a reason to fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using gpu_test::GpuPlugin;

class GpuPluginLoadTest : public ::testing::TestWithParam<GpuPlugin> {
 protected:
  void SetUp() override { rt_ = gpu_test::runtimeWith(GetParam().path); }
  int deviceCount() const {
    int n = 0;
    for (const DeviceInfo& d : rt_->devices()) n += d.device.str().rfind(std::string(GetParam().type) + ":", 0) == 0;
    return n;
  }
  std::unique_ptr<Runtime> rt_;
};

TEST_P(GpuPluginLoadTest, Loads) {
  bool found = false;
  for (const PluginStatus& p : rt_->plugins()) {
    if (p.name != GetParam().type) continue;
    found = true;
    EXPECT_TRUE(p.loaded) << p.error;
  }
  EXPECT_TRUE(found) << GetParam().path;
}

TEST_P(GpuPluginLoadTest, ReportsDevicesOrTheRuntimesReason) {
  const std::string type = GetParam().type;
  bool listed_unavailable = false;
  for (const UnavailableDeviceType& u : rt_->unavailable()) {
    if (u.name != type) continue;
    listed_unavailable = true;
    EXPECT_EQ(u.provider, type);
    // "cudaGetDeviceCount failed: cudaErrorNoDevice: no CUDA-capable device is detected"
    EXPECT_THAT(u.reason, HasSubstr(std::string(GetParam().type) + "GetDeviceCount"));
  }
  EXPECT_EQ(listed_unavailable, deviceCount() == 0);
}

TEST_P(GpuPluginLoadTest, TensorsOnDeviceZero) {
  const std::string dev0 = std::string(GetParam().type) + ":0";
  if (deviceCount() == 0) {
    try {
      Tensor t = ones({2}, {.device = Device::fromString(dev0)});
      FAIL() << "a tensor was created on " << dev0 << " with no device present";
    } catch (const Error& e) {
      EXPECT_THAT(e.message(), AllOf(HasSubstr(dev0), HasSubstr("cpu")));
    }
  } else {
    Tensor t = ones({3}, {.device = Device::fromString(dev0)});
    EXPECT_EQ(t.device().str(), dev0);
    EXPECT_EQ(t.cpu().toVector<float>(), (std::vector<float>{1, 1, 1}));
  }
}

TEST_P(GpuPluginLoadTest, AutoPicksTheGpuOnlyWhenOneExists) {
  // The runtime may also have loaded plugins BACKPLANE_PLUGIN_PATH names (on
  // a GPU machine, the CUDA plugin beside this HIP one): `auto` picks device
  // 0 of the first type in the default order (cuda, hip, others, cpu) that
  // has one, which is this plugin's only when no type before it has a device.
  std::string expected = "cpu";
  for (const char* type : {"cuda", "hip"}) {
    for (const DeviceInfo& d : rt_->devices()) {
      if (expected == "cpu" && d.device.str() == std::string(type) + ":0") expected = d.device.str();
    }
  }
  for (const DeviceInfo& d : rt_->devices()) {
    if (expected == "cpu" && !d.device.isCpu() && d.device.index == 0) expected = d.device.str();
  }
  const std::string picked = rt_->device("auto").str();
  EXPECT_EQ(picked, expected);
  if (deviceCount() == 0) {
    EXPECT_NE(picked, std::string(GetParam().type) + ":0");
  }
}

TEST_P(GpuPluginLoadTest, CliListsTheDevicesOrTheReason) {
  const std::string cmd =
      std::string(BACKPLANE_CLI_PATH) + " --no-default-plugins --plugin " + GetParam().path + " devices 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  if (deviceCount() == 0) {
    EXPECT_THAT(out, HasSubstr(std::string(GetParam().type) + "GetDeviceCount")) << out;
  } else {
    EXPECT_THAT(out, HasSubstr(std::string(GetParam().type) + ":0")) << out;
  }
  EXPECT_THAT(out, HasSubstr("capabilities: streams, current_stream, events, event_wait, event_query"))
      << "the GPU plugins have streams and events\n"
      << out;
}

// Loading the CUDA plugin maps no cuBLAS or cuDNN (Note [Libraries opened
// on first use] in plugins/cuda/cublas_gemm.cu): libcublasLt alone costs
// ~60 ms of every start. Asking for the devices does not open them either;
// a product or a convolution does, on a machine with a GPU.
TEST_P(GpuPluginLoadTest, LoadingMapsNeitherCublasNorCudnn) {
  rt_->devices();
  std::unique_ptr<FILE, int (*)(FILE*)> maps(std::fopen("/proc/self/maps", "r"), &std::fclose);
  ASSERT_TRUE(maps);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, maps.get())) text.append(buf, n);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("libcublas"))) << "loading " << GetParam().path << " mapped cuBLAS";
  EXPECT_THAT(text, ::testing::Not(HasSubstr("libcudnn"))) << "loading " << GetParam().path << " mapped cuDNN";
  const std::string path = GetParam().path;
  EXPECT_THAT(text, HasSubstr(path.substr(path.rfind('/') + 1))) << "the plugin itself is mapped";
}

INSTANTIATE_TEST_SUITE_P(Built, GpuPluginLoadTest,
                         ::testing::ValuesIn(gpu_test::builtPlugins(gpu_test::WithSimulator::kNo)),
                         [](const ::testing::TestParamInfo<GpuPlugin>& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace backplane
