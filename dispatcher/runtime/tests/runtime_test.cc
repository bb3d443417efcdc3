// Runtime: loading plugins, listing devices and resolving device strings
// (Note [Choosing a device]), with and without GPUs.
#include "backplane/runtime/runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"

namespace backplane {
namespace {

using testing::errorOf;

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTpGood = std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/tp_good.so";

// Stands in for a GPU plugin on the built-in cuda type: only the device count
// matters to device resolution; no memory is ever allocated through it.
class CountOnlyDevice final : public DeviceInterface {
 public:
  explicit CountOnlyDevice(int count) : count_(count) {}
  int deviceCount() const override { return count_; }
  std::string unavailableReason() const override { return count_ ? "" : "driver says: no devices"; }
  Allocator& allocator() override { BP_THROW(kUnimplemented, "CountOnlyDevice has no memory"); }
  void copyHostToDevice(void*, Device, const void*, size_t) override { unusable(); }
  void copyDeviceToHost(void*, const void*, Device, size_t) override { unusable(); }
  void copyDeviceToDevice(void*, Device, const void*, Device, size_t) override { unusable(); }
  void memset(void*, Device, uint8_t, size_t) override { unusable(); }
  void synchronize(Device) override {}

 private:
  [[noreturn]] static void unusable() { BP_THROW(kUnimplemented, "CountOnlyDevice has no memory"); }
  int count_;
};

// Installs `iface` on the cuda type for one test.
class ScopedCuda {
 public:
  explicit ScopedCuda(DeviceInterface* iface) {
    EXPECT_TRUE(DeviceTypeRegistry::global().setInterface(DeviceType::CUDA, iface).ok());
  }
  ~ScopedCuda() { (void)DeviceTypeRegistry::global().setInterface(DeviceType::CUDA, nullptr); }
};

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// Only the test plugin: the default directories hold the build's GPU
// plugins, whose devices (or reasons for having none) depend on the machine.
RuntimeOptions withTpGood(std::vector<std::string> order = RuntimeOptions{}.auto_order) {
  RuntimeOptions o;
  o.plugin_paths = {kTpGood};
  o.load_default_plugins = false;
  o.auto_order = std::move(order);
  return o;
}

std::vector<std::string> names(const std::vector<DeviceInfo>& devices) {
  std::vector<std::string> out;
  for (const DeviceInfo& d : devices) out.push_back(d.device.str());
  return out;
}

TEST(Runtime, LoadsTheDefaultPluginsAndListsTheCpu) {
  Runtime rt;
  bool cpu_plugin = false;
  for (const PluginStatus& p : rt.plugins()) cpu_plugin = cpu_plugin || (p.loaded && p.name == "cpu");
  EXPECT_TRUE(cpu_plugin) << rt.describe();
  std::vector<DeviceInfo> devices = rt.devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.back().device, Device(DeviceType::CPU));  // cpu comes last in the default order
  EXPECT_EQ(devices.back().provider, "built-in");
  EXPECT_FALSE(devices.back().properties.name.empty());
}

TEST(Runtime, ListsPluginDevicesWithTheirProviderAndUnavailableTypesWithTheReason) {
  Runtime rt(withTpGood());
  std::vector<DeviceInfo> devices = rt.devices();
  EXPECT_THAT(names(devices), ::testing::IsSupersetOf({"tpdev:0", "tpdev:1", "cpu"}));
  for (const DeviceInfo& d : devices) {
    if (d.device.str() == "tpdev:0") {
      EXPECT_EQ(d.provider, "tp_good");
    }
  }
  bool cuda_listed = false;
  for (const UnavailableDeviceType& u : rt.unavailable()) {
    if (u.name != "cuda") continue;
    cuda_listed = true;
    EXPECT_EQ(u.provider, "no plugin");
    EXPECT_THAT(u.reason, HasSubstr("no plugin provides cuda"));
  }
  EXPECT_TRUE(cuda_listed);
  EXPECT_THAT(rt.describe(), HasSubstr("tpdev:0"));
  EXPECT_THAT(rt.describe(), HasSubstr("cuda: unavailable: no plugin provides cuda"));
}

// An app asks what a device can do without reaching into core: tp_good's
// device has streams (with a current stream) and events (with event_wait
// and event_wait_device, without event_query), and memory the host cannot
// read; the cpu has host memory and no streams.
TEST(Runtime, SaysWhatEachDeviceCanDo) {
  Runtime rt(withTpGood());
  const Device tp = rt.device("tpdev:0");
  const DeviceCapabilities c = rt.capabilities(tp);
  EXPECT_TRUE(c.streams);
  EXPECT_TRUE(c.current_stream);
  EXPECT_TRUE(c.events);
  EXPECT_TRUE(c.event_wait);
  EXPECT_FALSE(c.event_query) << "tp_good has no event_query";
  EXPECT_TRUE(c.event_wait_device);
  EXPECT_FALSE(c.host_accessible);
  EXPECT_FALSE(c.dlpack);
  EXPECT_EQ(c.str(), "streams, current_stream, events, event_wait, event_wait_device");
  const DeviceCapabilities cpu = rt.capabilities(Device(DeviceType::CPU));
  EXPECT_EQ(cpu.str(), "host_accessible");
  for (const DeviceInfo& d : rt.devices()) {
    if (d.device == tp) {
      EXPECT_EQ(d.capabilities.str(), c.str());
    }
  }
  EXPECT_THAT(rt.describe(), HasSubstr("tpdev:0  "));
  EXPECT_THAT(rt.describe(), HasSubstr("(tp_good); streams, current_stream, events, event_wait"));
  try {
    rt.capabilities(Device(static_cast<DeviceType>(kMaxDeviceTypes - 1), 0));
    ADD_FAILURE() << "capabilities of an unregistered type";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(e.message(), HasSubstr("is not registered; devices present:"));
  }
}

TEST(Runtime, AutoWithoutGpusPicksTheFirstOtherTypeThenTheCpu) {
  Runtime rt(withTpGood());
  EXPECT_EQ(rt.device("auto").str(), "tpdev:0");  // "*": a vendor type before the cpu
  Runtime gpus_then_cpu(withTpGood({"cuda", "hip", "cpu"}));
  EXPECT_EQ(gpus_then_cpu.device("auto"), Device(DeviceType::CPU));
}

TEST(Runtime, AutoWithAGpuPicksIt) {
  CountOnlyDevice two_gpus(2);
  ScopedCuda cuda(&two_gpus);
  Runtime rt(withTpGood());
  EXPECT_EQ(rt.device("auto").str(), "cuda:0");
  EXPECT_EQ(rt.device("cuda:1").str(), "cuda:1");
  EXPECT_EQ(rt.device("cuda").str(), "cuda:0");
  EXPECT_EQ(names(rt.devices()).front(), "cuda:0");
  // The order is the application's to choose.
  Runtime cpu_first(withTpGood({"cpu", "*"}));
  EXPECT_EQ(cpu_first.device("auto"), Device(DeviceType::CPU));
  EXPECT_EQ(names(cpu_first.devices()).front(), "cpu");
}

TEST(Runtime, AGpuPluginWithoutDevicesIsSkippedByAutoAndNamedInErrors) {
  CountOnlyDevice no_gpu(0);
  ScopedCuda cuda(&no_gpu);
  Runtime rt(withTpGood({"cuda", "cpu"}));
  EXPECT_EQ(rt.device("auto"), Device(DeviceType::CPU));
  absl::StatusOr<Device> d = rt.resolve("cuda:0");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("device 'cuda:0' is not available: cuda has no devices"));
  EXPECT_THAT(d.status().message(), HasSubstr("driver says: no devices"));
  EXPECT_THAT(d.status().message(), HasSubstr("devices present: cpu, tpdev:0, tpdev:1"));
}

TEST(Runtime, BadDeviceStringsSayWhatExists) {
  Runtime rt(withTpGood());
  EXPECT_THAT(errorOf([&] { rt.device("tpdev:5"); }),
              HasSubstr("device 'tpdev:5' does not exist: tpdev has 2 devices (tpdev:0..tpdev:1)"));
  std::string unknown = errorOf([&] { rt.device("warpdrive:0"); });
  EXPECT_THAT(unknown, HasSubstr("device 'warpdrive:0'"));
  EXPECT_THAT(unknown, HasSubstr("tpdev"));  // the known types
  EXPECT_THAT(unknown, HasSubstr("or use 'auto'"));
  EXPECT_THAT(errorOf([&] { rt.device("cuda:0"); }), HasSubstr("no plugin provides cuda"));
  EXPECT_FALSE(rt.resolve("").ok());
  EXPECT_FALSE(rt.resolve("cpu:1").ok());
}

TEST(Runtime, BackplaneDeviceOverridesAutoButNotAnExplicitDevice) {
  Runtime rt(withTpGood());
  {
    ScopedEnv env("BACKPLANE_DEVICE", "tpdev:1");
    EXPECT_EQ(rt.device("auto").str(), "tpdev:1");
    EXPECT_EQ(rt.device("cpu"), Device(DeviceType::CPU));
  }
  {
    ScopedEnv env("BACKPLANE_DEVICE", "cuda:0");
    std::string msg = errorOf([&] { rt.device("auto"); });
    EXPECT_THAT(msg, HasSubstr("BACKPLANE_DEVICE 'cuda:0' is not available"));
  }
  {
    ScopedEnv env("BACKPLANE_DEVICE", "auto");
    EXPECT_EQ(rt.device("auto").str(), "tpdev:0");
  }
}

TEST(Runtime, AnOrderWithoutAvailableTypesIsAnError) {
  Runtime rt(withTpGood({"cuda", "hip"}));
  absl::StatusOr<Device> d = rt.resolve("auto");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("none of the device types tried (cuda, hip) has a device"));
  EXPECT_THAT(errorOf([] {
                RuntimeOptions o;
                o.auto_order = {"CUDA"};
                Runtime bad(o);
              }),
              HasSubstr("'CUDA' is neither a device type name"));
}

TEST(Runtime, APluginThatFailsToLoadIsReportedAndTheRuntimeGoesOn) {
  RuntimeOptions o;
  o.plugin_paths = {std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/tp_not_a_library.so", "/nonexistent/plugin.so"};
  Runtime rt(o);
  std::string text = rt.describe();
  EXPECT_THAT(text, HasSubstr("tp_not_a_library.so failed to load"));
  EXPECT_THAT(text, HasSubstr("/nonexistent/plugin.so failed to load"));
  EXPECT_EQ(rt.device("cpu"), Device(DeviceType::CPU));
}

TEST(Runtime, TensorsOnAMissingDeviceNameTheDevicesPresent) {
  Runtime rt(withTpGood());
  std::string msg = errorOf([] { (void)emptyTensor({2}, ScalarType::Float32, Device(DeviceType::CUDA, 0)); });
  EXPECT_THAT(msg, HasSubstr("cuda"));
  EXPECT_THAT(msg, HasSubstr("devices present: cpu, tpdev:0, tpdev:1"));
  EXPECT_THAT(errorOf([] { (void)emptyTensor({2}, ScalarType::Float32, Device::fromString("tpdev:3")); }),
              HasSubstr("devices present: cpu, tpdev:0, tpdev:1"));
}

}  // namespace
}  // namespace backplane
