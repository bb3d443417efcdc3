// Device strings, the process-wide DeviceTypeRegistry, and allocation errors
// for devices that are missing or out of range.
//
// The registry is global and has kMaxDynamicDeviceTypes slots for the whole
// process, so every test here uses its own "regtest_*" name and unregisters
// it again at the end (a name gets its slot back when registered again, so
// --gtest_repeat does not use up slots).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/storage.h"
#include "backplane/core/tensor_base.h"
#include "backplane/testing/errors.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

testing::TestDevice& testDevice() { return testing::TestDevice::install("testdev", 2); }

DeviceTypeRegistry& registry() { return DeviceTypeRegistry::global(); }

// Releases a type registered by a test (its interface must be removed first).
void unregister(DeviceType t) { ASSERT_TRUE(registry().unregisterType(t).ok()); }

// A device interface that is never called; only its identity matters.
class StubInterface final : public DeviceInterface, private Allocator {
 public:
  int deviceCount() const override { return 1; }
  Allocator& allocator() override { return *this; }
  void copyHostToDevice(void*, Device, const void*, size_t) override {}
  void copyDeviceToHost(void*, const void*, Device, size_t) override {}
  void copyDeviceToDevice(void*, Device, const void*, Device, size_t) override {}
  void memset(void*, Device, uint8_t, size_t) override {}
  void synchronize(Device) override {}

 private:
  DataPtr allocate(size_t, Device device) override { return DataPtr(nullptr, nullptr, nullptr, device); }
};

// ------------------------------------------------------------ Device values

TEST(DeviceTest, ConstructorResolvesOnlyCpuDefaultIndex) {
  EXPECT_EQ(Device(DeviceType::CPU).index, 0);
  EXPECT_EQ(Device(DeviceType::CPU, -1).index, 0);
  EXPECT_EQ(Device(DeviceType::CUDA).index, -1);
  EXPECT_EQ(Device(DeviceType::CUDA).resolved(), Device(DeviceType::CUDA, 0));
  EXPECT_EQ(Device(DeviceType::HIP, 3).resolved(), Device(DeviceType::HIP, 3));
  EXPECT_TRUE(Device(DeviceType::CPU).isCpu());
  EXPECT_FALSE(Device(DeviceType::CUDA, 0).isCpu());
  EXPECT_FALSE(Device(DeviceType::CUDA, 0) == Device(DeviceType::CUDA, 1));
  EXPECT_FALSE(Device(DeviceType::CUDA, 0) == Device(DeviceType::HIP, 0));
}

TEST(DeviceTest, StrFormatsTypeAndIndex) {
  EXPECT_EQ(Device(DeviceType::CPU).str(), "cpu");
  EXPECT_EQ(Device(DeviceType::CUDA, 1).str(), "cuda:1");
  EXPECT_EQ(Device(DeviceType::CUDA).str(), "cuda");  // index -1: the default device
  EXPECT_EQ(Device(DeviceType::HIP, 0).str(), "hip:0");
  std::ostringstream os;
  os << Device(DeviceType::CUDA, 2) << " " << DeviceType::HIP;
  EXPECT_EQ(os.str(), "cuda:2 hip");
}

TEST(DeviceTest, TypeNames) {
  EXPECT_EQ(deviceTypeName(DeviceType::CPU), "cpu");
  EXPECT_EQ(deviceTypeName(DeviceType::CUDA), "cuda");
  EXPECT_EQ(deviceTypeName(DeviceType::HIP), "hip");
  EXPECT_EQ(deviceTypeName(static_cast<DeviceType>(100)), "<unregistered:100>");
  EXPECT_EQ(deviceTypeName(testDevice().type()), "testdev");
}

// ------------------------------------------------------------ Device::parse

TEST(DeviceParseTest, BuiltinTypes) {
  auto cpu = Device::parse("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, Device(DeviceType::CPU, 0));

  auto cuda = Device::parse("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->type, DeviceType::CUDA);
  EXPECT_EQ(cuda->index, -1);

  auto cuda1 = Device::parse("cuda:1");
  ASSERT_TRUE(cuda1.ok()) << cuda1.status();
  EXPECT_EQ(*cuda1, Device(DeviceType::CUDA, 1));

  auto hip0 = Device::parse("hip:0");
  ASSERT_TRUE(hip0.ok()) << hip0.status();
  EXPECT_EQ(*hip0, Device(DeviceType::HIP, 0));

  auto max_index = Device::parse("cuda:32767");
  ASSERT_TRUE(max_index.ok()) << max_index.status();
  EXPECT_EQ(max_index->index, 32767);
}

TEST(DeviceParseTest, RegisteredType) {
  testing::TestDevice& dev = testDevice();
  auto d = Device::parse("testdev:1");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, dev.device(1));
  EXPECT_EQ(d->str(), "testdev:1");

  auto default_index = Device::parse("testdev");
  ASSERT_TRUE(default_index.ok()) << default_index.status();
  EXPECT_EQ(*default_index, Device(dev.type(), -1));
}

TEST(DeviceParseTest, StrRoundTrips) {
  testDevice();
  for (const char* text : {"cpu", "cuda", "cuda:1", "hip:0", "hip", "testdev:1", "testdev"}) {
    auto d = Device::parse(text);
    ASSERT_TRUE(d.ok()) << text << ": " << d.status();
    EXPECT_EQ(d->str(), text);
    EXPECT_EQ(Device::fromString(d->str()), *d) << text;
  }
  // cpu:0 is the cpu; it prints without the index.
  EXPECT_EQ(Device::fromString("cpu:0").str(), "cpu");
}

TEST(DeviceParseTest, BadIndexIsRejected) {
  for (const char* text :
       {"cuda:x", "cuda:", "cuda:-1", "cuda:99999", "cuda:32768", "cuda:1x", "cuda:+1", "cuda: 1", "cuda:1:2"}) {
    auto d = Device::parse(text);
    ASSERT_FALSE(d.ok()) << text << " parsed as " << d->str();
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(std::string("invalid device string '") + text + "'"));
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("from 0 to 32767"));
  }
}

TEST(DeviceParseTest, UnknownTypeListsKnownTypes) {
  testDevice();
  auto d = Device::parse("nope:0");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(d.status().message());
  EXPECT_THAT(msg, HasSubstr("unknown device type 'nope'"));
  EXPECT_THAT(msg, HasSubstr("known types: cpu, cuda, hip"));
  EXPECT_THAT(msg, HasSubstr("testdev"));

  // Names are case-sensitive.
  EXPECT_FALSE(Device::parse("CPU").ok());
  EXPECT_FALSE(Device::parse(":0").ok());
}

TEST(DeviceParseTest, EmptyStringIsRejected) {
  auto d = Device::parse("");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("known types: cpu"));
}

TEST(DeviceParseTest, FromStringThrowsError) {
  try {
    Device::fromString("cuda:-1");
    FAIL() << "expected backplane::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("invalid device string 'cuda:-1'"));
  }
}

// --------------------------------------------------------- DeviceTypeRegistry

TEST(DeviceTypeRegistryTest, ActiveNamesListBuiltinsFirst) {
  testDevice();
  std::vector<std::string> names = registry().activeNames();
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "cpu");
  EXPECT_EQ(names[1], "cuda");
  EXPECT_EQ(names[2], "hip");
  EXPECT_THAT(names, Contains("testdev"));
  EXPECT_EQ(registry().find("cuda"), DeviceType::CUDA);
  EXPECT_EQ(registry().find("testdev"), testDevice().type());
  EXPECT_EQ(registry().find("missing"), std::nullopt);
  EXPECT_TRUE(registry().isActive(DeviceType::CPU));
  EXPECT_NE(registry().interface(DeviceType::CPU), nullptr);
  EXPECT_TRUE(registry().interface(DeviceType::CPU)->isHostAccessible());
}

TEST(DeviceTypeRegistryTest, RejectsInvalidNames) {
  for (std::string bad : {std::string("Upper"), std::string("toyAccel"), std::string("1accel"), std::string("_accel"),
                          std::string("has-dash"), std::string("has space"), std::string(""), std::string(32, 'a')}) {
    auto t = registry().registerType(bad);
    ASSERT_FALSE(t.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("invalid device type name '" + bad + "'"));
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("1 to 31 lowercase letters"));
  }
}

TEST(DeviceTypeRegistryTest, LongestValidNameAndDuplicate) {
  const std::string name = "regtest_dup_" + std::string(31 - 12, 'x');  // exactly 31 characters
  ASSERT_EQ(name.size(), 31u);
  auto t = registry().registerType(name);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(static_cast<int>(*t), kNumBuiltinDeviceTypes);
  EXPECT_LT(static_cast<int>(*t), kMaxDeviceTypes);
  EXPECT_EQ(registry().name(*t), name);
  EXPECT_EQ(registry().find(name), *t);
  EXPECT_TRUE(registry().isActive(*t));

  auto again = registry().registerType(name);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("device type '" + name + "' is already registered"));
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("exactly one owner"));

  unregister(*t);
}

TEST(DeviceTypeRegistryTest, BuiltinNamesAreRejected) {
  for (const char* builtin : {"cpu", "cuda", "hip"}) {
    auto t = registry().registerType(builtin);
    ASSERT_FALSE(t.ok()) << builtin;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("built in"));
  }
  // Built-in types cannot be unregistered either.
  EXPECT_FALSE(registry().unregisterType(DeviceType::CUDA).ok());
  EXPECT_TRUE(registry().isActive(DeviceType::CUDA));
}

TEST(DeviceTypeRegistryTest, ReRegisteringANameReturnsTheSameType) {
  auto first = registry().registerType("regtest_reuse");
  ASSERT_TRUE(first.ok()) << first.status();
  unregister(*first);
  EXPECT_FALSE(registry().isActive(*first));
  EXPECT_EQ(registry().find("regtest_reuse"), std::nullopt);
  EXPECT_FALSE(Device::parse("regtest_reuse:0").ok());
  EXPECT_EQ(registry().name(*first), "regtest_reuse");  // still named while released
  // Unregistering twice is an error.
  EXPECT_EQ(registry().unregisterType(*first).code(), absl::StatusCode::kInvalidArgument);

  // Another name does not take the released slot...
  auto other = registry().registerType("regtest_other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, *first);

  // ...and the original name gets its number back.
  auto second = registry().registerType("regtest_reuse");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(registry().find("regtest_reuse"), *first);
  auto parsed = Device::parse("regtest_reuse:3");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Device(*first, 3));

  unregister(*second);
  unregister(*other);
}

TEST(DeviceTypeRegistryTest, SetInterfaceTwiceIsRejected) {
  static StubInterface a, b;
  auto t = registry().registerType("regtest_iface");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(registry().setInterface(*t, &a).ok());
  EXPECT_EQ(registry().interface(*t), &a);
  EXPECT_EQ(&registry().interfaceOrThrow(*t), &a);

  absl::Status twice = registry().setInterface(*t, &b);
  EXPECT_EQ(twice.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("device type 'regtest_iface' already has a device interface"));
  EXPECT_EQ(registry().interface(*t), &a);  // the first one stays

  // A type with an interface cannot be unregistered.
  absl::Status busy = registry().unregisterType(*t);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(busy.message()), HasSubstr("still has an interface"));

  // Removing it, then installing another, works.
  ASSERT_TRUE(registry().setInterface(*t, nullptr).ok());
  EXPECT_EQ(registry().interface(*t), nullptr);
  ASSERT_TRUE(registry().setInterface(*t, &b).ok());
  EXPECT_EQ(registry().interface(*t), &b);
  ASSERT_TRUE(registry().setInterface(*t, nullptr).ok());
  unregister(*t);

  // Inactive types and the cpu cannot get an interface.
  EXPECT_FALSE(registry().setInterface(*t, &a).ok());
  EXPECT_FALSE(registry().setInterface(DeviceType::CPU, &a).ok());
  EXPECT_TRUE(registry().interface(DeviceType::CPU)->isHostAccessible());
}

TEST(DeviceTypeRegistryTest, InterfaceOrThrowNamesTypeAndPlugin) {
  auto t = registry().registerType("regtest_noiface");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(registry().interface(*t), nullptr);
  try {
    registry().interfaceOrThrow(*t);
    ADD_FAILURE() << "expected backplane::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("no device interface for device type 'regtest_noiface'"));
    EXPECT_THAT(e.message(), HasSubstr("load the plugin"));
  }
  // Tensors cannot be created there either.
  EXPECT_THAT(testing::errorOf([&] { emptyTensor({2}, ScalarType::Float32, Device(*t, 0)); }),
              HasSubstr("'regtest_noiface'"));
  unregister(*t);
}

// ------------------------------------------------------------ allocation

TEST(StorageAllocateTest, DeviceTypeWithoutInterface) {
  ASSERT_EQ(registry().interface(DeviceType::CUDA), nullptr)
      << "this test assumes no cuda plugin is loaded in core_tests";
  try {
    Storage::allocate(16, Device::fromString("cuda:0"));
    ADD_FAILURE() << "expected backplane::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("device type 'cuda'"));
    EXPECT_THAT(e.message(), HasSubstr("load the plugin"));
  }
  EXPECT_THAT(testing::errorOf([] {
                emptyTensor({2, 3}, ScalarType::Float32, Device(DeviceType::HIP));
              }),
              HasSubstr("device type 'hip'"));
}

TEST(StorageAllocateTest, IndexOutOfRangeNamesDeviceCount) {
  testing::TestDevice& dev = testDevice();
  const size_t live = dev.liveAllocations();
  try {
    Storage::allocate(16, dev.device(5));
    ADD_FAILURE() << "expected backplane::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("cannot allocate on testdev:5"));
    EXPECT_THAT(e.message(), HasSubstr("only 2 testdev devices are present"));
    EXPECT_THAT(e.message(), HasSubstr("testdev:0..testdev:1"));
  }
  EXPECT_THAT(testing::errorOf([&] { emptyTensor({4}, ScalarType::Int32, dev.device(2)); }),
              HasSubstr("only 2 testdev devices"));
  EXPECT_EQ(dev.liveAllocations(), live);
}

TEST(StorageAllocateTest, AllocatesOnResolvedDevice) {
  testing::TestDevice& dev = testDevice();
  const size_t live = dev.liveAllocations();
  {
    Storage s = Storage::allocate(24, Device(dev.type()));  // index -1 -> 0
    EXPECT_EQ(s.device(), dev.device(0));
    EXPECT_EQ(s.nbytes(), 24u);
    EXPECT_EQ(s.useCount(), 1u);
    EXPECT_EQ(dev.liveAllocations(), live + 1);

    Storage s1 = Storage::allocate(8, dev.device(1));
    EXPECT_EQ(s1.device(), dev.device(1));
    EXPECT_FALSE(s1.isAliasOf(s));
    Storage copy = s1;
    EXPECT_TRUE(copy.isAliasOf(s1));
    EXPECT_EQ(s1.useCount(), 2u);
  }
  EXPECT_EQ(dev.liveAllocations(), live);

  Storage cpu = Storage::allocate(10, Device(DeviceType::CPU));
  EXPECT_EQ(cpu.device(), Device(DeviceType::CPU));
  EXPECT_NE(cpu.data(), nullptr);
  // Small host buffers are aligned for every element type (16 bytes); from
  // 257 bytes on, to a cache line (64 bytes) for vector loads and oneDNN.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cpu.data()) % 16, 0u);
  for (size_t n : {257u, 4096u, 1u << 20}) {
    Storage big = Storage::allocate(n, Device(DeviceType::CPU));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % 64, 0u) << n << " bytes";
  }
}

// Note [Small CPU storages]: up to 256 bytes the bytes share the storage's
// own heap block. Each size is usable to its last byte, aligned for every
// element type, and lives as long as any view of it.
TEST(StorageAllocateTest, SmallCpuStoragesAreWholeAlignedAndOutliveTheirTensor) {
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 255u, 256u, 257u}) {
    Storage s = Storage::allocate(n, Device(DeviceType::CPU));
    ASSERT_NE(s.data(), nullptr) << n;
    EXPECT_EQ(s.nbytes(), n);
    EXPECT_EQ(s.device(), Device(DeviceType::CPU, 0));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % 16, 0u) << n << " bytes";
    auto* bytes = static_cast<unsigned char*>(s.data());
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);  // ASan: in bounds
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7 + 1)) << n;
  }
  // Two small storages never overlap.
  Storage a = Storage::allocate(32, Device(DeviceType::CPU));
  Storage b = Storage::allocate(32, Device(DeviceType::CPU));
  auto pa = reinterpret_cast<uintptr_t>(a.data()), pb = reinterpret_cast<uintptr_t>(b.data());
  EXPECT_TRUE(pa + 32 <= pb || pb + 32 <= pa);

  // A view keeps the bytes alive after the tensor that made them is gone.
  TensorBase view;
  {
    TensorBase t = tensorFromVector<float>({1.5f, 2.5f, 3.5f, 4.5f}, {4});
    view = t.slice(0, 1, 3);
  }
  EXPECT_EQ(view.storage().useCount(), 1u);
  EXPECT_EQ(static_cast<const float*>(view.data_ptr())[0], 2.5f);
  EXPECT_EQ(static_cast<const float*>(view.data_ptr())[1], 3.5f);

  // The cpu device type has one device whatever the size.
  EXPECT_THROW(Storage::allocate(8, Device(DeviceType::CPU, 1)), Error);
}

}  // namespace
}  // namespace backplane
