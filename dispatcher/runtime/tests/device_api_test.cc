// DeviceInterface's properties, streams and events: through the plugin bridge
// (tp_good's tpdev implements them all; tp_absent's device type none), on the
// built-in cpu, and on the in-tree test device (the defaults).
//
// Like plugin_loader_test.cc, each test unloads what it loaded; ctest runs
// every test in a process of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/stream.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using ::testing::HasSubstr;
using Stream = DeviceInterface::StreamHandle;
using Event = DeviceInterface::EventHandle;

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }

using testing::expectError;

DeviceInterface& interfaceOf(DeviceType t) { return DeviceTypeRegistry::global().interfaceOrThrow(t); }

// Loads tp_good for the test and unloads it after. liveObjects() is its
// count of streams and events not yet destroyed, which tp_good reports as
// multiprocessor_count (a test hook).
class TpGoodDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_good"));
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->devices.size(), 1u);
    type_ = s->devices[0].type;
  }
  void TearDown() override {
    absl::Status u = plugins().unload("tp_good");
    EXPECT_TRUE(u.ok()) << u;
  }
  Device dev(DeviceIndex i = 0) const { return Device(type_, i); }
  DeviceInterface& iface() const { return interfaceOf(type_); }
  int liveObjects() const { return iface().properties(dev()).multiprocessor_count; }

  DeviceType type_{};
};

TEST_F(TpGoodDeviceTest, PropertiesComeFromThePlugin) {
  for (DeviceIndex i : {0, 1}) {
    DeviceProperties p = iface().properties(dev(i));
    EXPECT_EQ(p.name, strCat("tp good device ", i));
    EXPECT_EQ(p.total_memory, uint64_t{1} << 30);
    EXPECT_EQ(p.compute_major, 0);
    EXPECT_EQ(p.compute_minor, 0);
    EXPECT_EQ(p.multiprocessor_count, 0) << "no streams or events alive";
  }
  // Plugin errors arrive as Error with the plugin's code and context.
  expectError([&] { (void)iface().properties(dev(7)); }, absl::StatusCode::kInvalidArgument,
              {"device type 'tpdev' get_properties failed", "no such device"});
}

TEST_F(TpGoodDeviceTest, StreamsAndEventsRoundTrip) {
  DeviceInterface& d = iface();
  ASSERT_TRUE(d.hasStreams());
  ASSERT_TRUE(d.hasEvents());
  EXPECT_EQ(d.currentStream(dev()), nullptr) << "the default stream";

  Stream s = d.createStream(dev());
  ASSERT_NE(s, nullptr);
  Stream s1 = d.createStream(dev(1));
  EXPECT_EQ(liveObjects(), 2);
  d.setCurrentStream(dev(), s);
  EXPECT_EQ(d.currentStream(dev()), s);
  EXPECT_EQ(d.currentStream(dev(1)), nullptr) << "current streams are per device";
  d.synchronizeStream(dev(), s);
  d.synchronizeStream(dev(), nullptr);

  Event e = d.createEvent(dev());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(liveObjects(), 3);
  d.recordEvent(dev(), e, s);
  d.waitEvent(dev(), e, nullptr);
  d.synchronizeEvent(dev(), e);

  // Handles are checked by the plugin; its errors carry the call.
  expectError([&] { d.synchronizeStream(dev(), s1); }, absl::StatusCode::kInvalidArgument,
              {"device type 'tpdev' stream_synchronize failed", "is not a live stream of tpdev:0"});
  expectError([&] { d.recordEvent(dev(), s, s); }, absl::StatusCode::kInvalidArgument,
              {"device type 'tpdev' event_record failed", "is not a live event"});

  d.setCurrentStream(dev(), nullptr);
  EXPECT_EQ(d.currentStream(dev()), nullptr);
  d.destroyEvent(dev(), e);
  d.destroyStream(dev(), s);
  d.destroyStream(dev(1), s1);
  EXPECT_EQ(liveObjects(), 0);
  expectError([&] { d.synchronizeEvent(dev(), e); }, absl::StatusCode::kInvalidArgument,
              {"event_synchronize failed", "is not a live event"});
}

TEST_F(TpGoodDeviceTest, DestroyingTheCurrentStreamRestoresTheDefault) {
  DeviceInterface& d = iface();
  Stream s = d.createStream(dev(1));
  d.setCurrentStream(dev(1), s);
  d.destroyStream(dev(1), s);
  EXPECT_EQ(d.currentStream(dev(1)), nullptr);
  EXPECT_EQ(liveObjects(), 0);
}

// event_query is optional within the events group (ABI 1.3); tp_good
// leaves it NULL, as a plugin built before 1.3 does.
TEST_F(TpGoodDeviceTest, EventQueryIsUnimplementedWhenThePluginLeavesItOut) {
  DeviceInterface& d = iface();
  Event e = d.createEvent(dev());
  expectError([&] { (void)d.queryEvent(dev(), e); }, absl::StatusCode::kUnimplemented,
              {"queryEvent", "device type 'tpdev' has no event_query"});
  d.destroyEvent(dev(), e);
}

// The application API over tp_good's two devices: an event is recorded on
// its own device's streams, orders a stream of the other device through
// event_wait_device (ABI 1.8), and the guard is per device.
TEST_F(TpGoodDeviceTest, AppStreamsAndEventsBelongToOneDevice) {
  EXPECT_TRUE(DeviceTypeRegistry::global().interfaceOrThrow(dev(0).type).capabilities().event_wait_device);
  {
    backplane::Stream s1 = backplane::Stream::create(dev(1));
    backplane::Event e0(dev(0));
    expectError([&] { e0.record(s1); }, absl::StatusCode::kInvalidArgument,
                {"Event::record: the event is on tpdev:0 but the stream on tpdev:1", "use an Event made on tpdev:1"});
    e0.record();
    e0.wait(s1);  // tp_good checks the event is live on tpdev:0 and the stream on tpdev:1
    {
      backplane::StreamGuard on(s1);
      EXPECT_EQ(backplane::Stream::current(dev(1)), s1);
      EXPECT_TRUE(backplane::Stream::current(dev(0)).isDefault()) << "a guard changes its stream's device only";
    }
    EXPECT_TRUE(backplane::Stream::current(dev(1)).isDefault());
    backplane::Event moved = std::move(e0);
    expectError([&] { e0.synchronize(); }, absl::StatusCode::kFailedPrecondition, {"moved from"});
    EXPECT_EQ(liveObjects(), 2);
  }
  EXPECT_EQ(liveObjects(), 0) << "Stream and Event destroy what they made";
}

// A plugin device type that fills neither group, nor get_properties.
TEST(PluginDeviceWithoutStreams, ThrowsUnimplementedNamingTheType) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_absent"));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->devices.size(), 1u);
  const Device dev(s->devices[0].type, 0);
  {
    DeviceInterface& d = interfaceOf(dev.type);
    EXPECT_FALSE(d.hasStreams());
    EXPECT_FALSE(d.hasEvents());
    DeviceProperties p = d.properties(dev);
    EXPECT_EQ(p.name, "tpabsentdev");
    EXPECT_EQ(p.total_memory, 0u);
    expectError([&] { (void)d.createStream(dev); }, absl::StatusCode::kUnimplemented,
                {"createStream", "device type 'tpabsentdev' has no streams"});
    expectError([&] { (void)d.currentStream(dev); }, absl::StatusCode::kUnimplemented,
                {"device type 'tpabsentdev' has no streams"});
    expectError([&] { d.waitEvent(dev, nullptr, nullptr); }, absl::StatusCode::kUnimplemented,
                {"device type 'tpabsentdev' has no events"});
    expectError([&] { (void)d.createEvent(dev); }, absl::StatusCode::kUnimplemented,
                {"createEvent", "device type 'tpabsentdev' has no events"});
  }
  absl::Status u = plugins().unload("tp_absent");
  EXPECT_TRUE(u.ok()) << u;
}

TEST(DefaultDeviceApi, TestDeviceHasNoStreamsOrEvents) {
  testing::TestDevice& t = testing::TestDevice::install("devapitestdev");
  DeviceInterface& d = interfaceOf(t.type());
  EXPECT_FALSE(d.hasStreams());
  EXPECT_FALSE(d.hasEvents());
  EXPECT_EQ(d.properties(t.device()).name, "devapitestdev");
  EXPECT_EQ(d.properties(t.device()).total_memory, 0u);
  expectError([&] { (void)d.createStream(t.device()); }, absl::StatusCode::kUnimplemented,
              {"createStream", "device type 'devapitestdev' has no streams"});
  expectError([&] { d.setCurrentStream(t.device(), nullptr); }, absl::StatusCode::kUnimplemented,
              {"setCurrentStream", "'devapitestdev' has no streams"});
  expectError([&] { d.recordEvent(t.device(), nullptr, nullptr); }, absl::StatusCode::kUnimplemented,
              {"recordEvent", "device type 'devapitestdev' has no events"});
}

// DeviceInterface's default waitEventOnDevice: one device is waitEvent;
// across devices, without the capability, an error that says what to do.
TEST(DefaultDeviceApi, AnEventOrdersAnotherDevicesStreamOnlyWithTheCapability) {
  struct TwoDevices final : DeviceInterface {
    int deviceCount() const override { return 2; }
    Allocator& allocator() override { BP_THROW(kUnimplemented, "unused"); }
    void copyHostToDevice(void*, Device, const void*, size_t) override {}
    void copyDeviceToHost(void*, const void*, Device, size_t) override {}
    void copyDeviceToDevice(void*, Device, const void*, Device, size_t) override {}
    void memset(void*, Device, uint8_t, size_t) override {}
    void synchronize(Device) override {}
    bool hasEvents() const override { return true; }
    void waitEvent(Device, EventHandle, StreamHandle) override { ++waits; }
    int waits = 0;
  } d;
  const Device d0(DeviceType::CPU, 0), d1(DeviceType::CPU, 1);
  d.waitEventOnDevice(d0, nullptr, d0, nullptr);
  EXPECT_EQ(d.waits, 1);
  EXPECT_FALSE(d.capabilities().event_wait_device);
  expectError([&] { d.waitEventOnDevice(d1, nullptr, d0, nullptr); }, absl::StatusCode::kUnimplemented,
              {"waitEventOnDevice", "cannot order a stream of cpu on an event of cpu:1",
               "no event_wait_device capability", "Event::synchronize"});
}

TEST(DefaultDeviceApi, CpuPropertiesAreSane) {
  const Device cpu(DeviceType::CPU);
  DeviceInterface& d = interfaceOf(DeviceType::CPU);
  DeviceProperties p = d.properties(cpu);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_GE(p.multiprocessor_count, 1);
  EXPECT_FALSE(d.hasStreams());
  EXPECT_FALSE(d.hasEvents());
  expectError([&] { (void)d.createStream(cpu); }, absl::StatusCode::kUnimplemented,
              {"device type 'cpu' has no streams"});
  expectError([&] { (void)d.createEvent(cpu); }, absl::StatusCode::kUnimplemented, {"device type 'cpu' has no events"});
}

}  // namespace
}  // namespace backplane
