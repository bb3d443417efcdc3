// Note [ABI rules] in plugin_api.h, one test per rule, each driving test
// plugins from tests/plugins/abi/ written against plugin_api.h only:
//
//   1. an older minor (1.0) plugin loads into this (1.2) host   tp_abi_v1_0
//   2. a slot added in 1.1 is used only after checking struct_size  tp_abi_v1_1
//   3. a receiver accepts a LARGER struct                       tp_abi_larger
//   4. it defaults the fields a SMALLER struct lacks            tp_abi_smaller
//   5. it rejects struct_size 0 and > BP_MAX_STRUCT_SIZE        tp_abi_bsz_*
//   6. NULL optional slots are never called                     tp_abi_null_slots
//   7. NULL required slots make the load fail                   tp_abi_req_*
//   8. init sees the host table of this header                  tp_abi_v1_1, tp_abi_v1_0
//   9. struct_size is the end of the last field; padding, fields past
//      struct_size and fields it cuts are never read; 1.2's sizeof-based
//      sizes are still accepted                                 tp_abi_pad_* (plain C)
//  10. BP_KernelDesc.dtypes (1.5): a 1.4-sized descriptor serves every
//      dtype; unknown dtype bits and a fallback declaring dtypes are
//      refused                                                  tp_abi_dtypes_* (plain C)
//  11. BP_DECLINED (1.7): an impl's decline goes where the call would go
//      without it (here the device's fallback); a fallback cannot decline;
//      to a 1.6 plugin the code is an error                    tp_abi_decline_* (plain C)
//  12. BP_KernelDesc.flags (1.13): unknown bits and misplaced flags are
//      refused; a 1.12 plugin's field is ignored                tp_abi_flags_* (plain C)
//  13. BP_KernelDesc.typed_fn (1.14): called with C arguments where the host
//      has a typed call for the signature, fn elsewhere; its errors,
//      declines and returns follow fn's rules; a 1.13 plugin's field is
//      ignored; one without cpp_signature, or a fallback's, is refused
//                                                               tp_abi_typed_* (plain C)
// (A plugin of a newer minor or another major is refused: plugin_loader_test.cc.)
//
// The test plugins' device memory lives at non-canonical addresses (see
// abi_plugin.hpp), so a host that dereferenced it would crash; memory past a
// struct_size holds 0xFF bytes or trap functions, so a host that read it
// would crash or fail loudly. Plugin and device type names are unique to this
// file; each test unloads what it loaded (TearDown catches what a failing
// test left behind).
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/plugin/detail/kernel_adapter.hpp"
#include "backplane/plugin_api.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"
#include "host_api_1_0.h"
#include "typed_calls.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using testing::errorOf;
using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;

// Tables are append-only: ABI 1.0's host table is a prefix of today's.
static_assert(sizeof(BP_HostApi_1_0) == offsetof(BP_HostApi, device_type_name),
              "1.1 appended exactly one slot to BP_HostApi");
#define BP_SAME_OFFSET(field)                                                   \
  static_assert(offsetof(BP_HostApi_1_0, field) == offsetof(BP_HostApi, field), \
                "BP_HostApi." #field " moved since ABI 1.0")
BP_SAME_OFFSET(abi_major);
BP_SAME_OFFSET(abi_minor);
BP_SAME_OFFSET(error_new);
BP_SAME_OFFSET(error_free);
BP_SAME_OFFSET(error_code);
BP_SAME_OFFSET(error_message);
BP_SAME_OFFSET(log);
BP_SAME_OFFSET(register_device_type);
BP_SAME_OFFSET(def);
BP_SAME_OFFSET(impl);
BP_SAME_OFFSET(fallback);
BP_SAME_OFFSET(device_type_find);
BP_SAME_OFFSET(tensor_info);
BP_SAME_OFFSET(tensor_retain);
BP_SAME_OFFSET(tensor_release);
BP_SAME_OFFSET(tensor_empty);
BP_SAME_OFFSET(tensor_view);
BP_SAME_OFFSET(op_find);
BP_SAME_OFFSET(op_name);
BP_SAME_OFFSET(op_call);
BP_SAME_OFFSET(op_redispatch);
#undef BP_SAME_OFFSET

// The plugins' counters, as abi_plugin.hpp numbers them: ns::info(kCounterBase + c).
constexpr int64_t kCounterBase = 100;
enum Counter : int64_t { kAllocate, kDeallocate, kH2D, kD2H, kD2D, kMemset, kSynchronize, kTrap };

const char* const kAbiPlugins[] = {"tp_abi_v1_0",
                                   "tp_abi_v1_1",
                                   "tp_abi_larger",
                                   "tp_abi_smaller",
                                   "tp_abi_null_slots",
                                   "tp_abi_bsz_dev_0",
                                   "tp_abi_bsz_dev_huge",
                                   "tp_abi_bsz_impl_0",
                                   "tp_abi_bsz_impl_huge",
                                   "tp_abi_bsz_fb_0",
                                   "tp_abi_bsz_fb_huge",
                                   "tp_abi_req_name",
                                   "tp_abi_req_device_count",
                                   "tp_abi_req_allocate",
                                   "tp_abi_req_deallocate",
                                   "tp_abi_req_copy_host_to_device",
                                   "tp_abi_req_copy_device_to_host",
                                   "tp_abi_req_fn",
                                   "tp_abi_req_graph_replay",
                                   "tp_abi_pad_field_end",
                                   "tp_abi_pad_sizeof_1_2",
                                   "tp_abi_pad_cut_optional",
                                   "tp_abi_pad_cut_required",
                                   "tp_abi_dtypes_v1_4",
                                   "tp_abi_dtypes_unknown_bit",
                                   "tp_abi_dtypes_fallback",
                                   "tp_abi_flags_unknown_bit",
                                   "tp_abi_flags_fallback",
                                   "tp_abi_flags_cpu",
                                   "tp_abi_flags_v1_12",
                                   "tp_abi_decline_v1_7",
                                   "tp_abi_decline_v1_6",
                                   "tp_abi_typed_v1_14",
                                   "tp_abi_typed_v1_13",
                                   "tp_abi_typed_no_sig",
                                   "tp_abi_typed_fallback",
                                   "tp_abi_typed_meta",
                                   "tp_abi_typed_reference"};

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }

bool isLoaded(std::string_view name) {
  for (const PluginStatus& p : plugins().plugins())
    if (p.loaded && p.name == name) return true;
  return false;
}

bool opDefined(std::string_view name) {
  std::optional<OperatorHandle> op = Dispatcher::singleton().findOp(name);
  return op && op->hasSchema();
}

bool deviceTypeRegistered(std::string_view name) { return DeviceTypeRegistry::global().find(name).has_value(); }

// ns::info(which) of a loaded test plugin.
int64_t info(std::string_view ns, int64_t which) {
  return Dispatcher::singleton().findOpOrThrow(strCat(ns, "::info")).typed<int64_t(int64_t)>().call(which);
}
int64_t counter(std::string_view ns, Counter c) { return info(ns, kCounterBase + c); }

Tensor twice(std::string_view ns, const Tensor& t) {
  return Dispatcher::singleton().findOpOrThrow(strCat(ns, "::twice")).typed<Tensor(const Tensor&)>().call(t);
}

// The device type `name` of a loaded plugin's status.
std::optional<PluginDeviceStatus> deviceStatus(const PluginStatus& s, std::string_view name) {
  for (const PluginDeviceStatus& d : s.devices)
    if (d.type_name == name) return d;
  return std::nullopt;
}

DeviceInterface& interfaceOf(DeviceType type) { return DeviceTypeRegistry::global().interfaceOrThrow(type); }

// A device address `bytes` further on (integer arithmetic: device addresses
// are opaque to the host).
void* byteOffset(void* p, size_t bytes) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + bytes); }

// Bytes of a uint8 tensor on any device.
std::vector<uint8_t> bytesOf(const Tensor& t) { return t.toVector<uint8_t>(); }

class AbiRulesTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : kAbiPlugins) {
      if (isLoaded(name)) {
        absl::Status s = plugins().unload(name);
        EXPECT_TRUE(s.ok()) << "left loaded by the test and cannot be unloaded: " << s;
      }
    }
    absl::Status inv = Dispatcher::singleton().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }

  static void unload(std::string_view name) {
    absl::Status s = plugins().unload(name);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_FALSE(isLoaded(name));
  }

  // Tensors on `device` (a plugin's arena device, 2 devices) work: creation,
  // read-back, clone, copies within and across the type's devices, and a
  // strided copy.
  static void expectDeviceMemoryWorks(DeviceType type) {
    const Device d0(type, 0), d1(type, 1);
    Tensor x = tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, d0);
    EXPECT_EQ(x.device(), d0);
    EXPECT_EQ(x.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    Tensor c = x.clone();
    EXPECT_EQ(c.device(), d0);
    EXPECT_NE(c.data_ptr(), x.data_ptr());
    EXPECT_EQ(c.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    Tensor y = emptyTensor({2, 3}, ScalarType::Float32, d1);
    copyElements(y, x);  // device 0 -> device 1 of the same type
    EXPECT_EQ(y.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    Tensor t = emptyTensor({3, 2}, ScalarType::Float32, d1);
    copyElements(t, x.transpose(0, 1));  // strided source
    EXPECT_EQ(t.toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  }
};

// ------------------------------------------ 1. an older minor loads and works

TEST_F(AbiRulesTest, PluginBuiltForOlderMinorLoadsAndWorks) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_v1_0"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->loaded);
  EXPECT_EQ(s->name, "tp_abi_v1_0");
  EXPECT_EQ(s->abi_major, 1u);
  EXPECT_EQ(s->abi_minor, 0u) << "the status shows the minor the plugin was built for";
  EXPECT_EQ(s->kernels, 3u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abiv10dev");
  ASSERT_TRUE(dev.has_value());
  EXPECT_EQ(dev->device_count, 2);

  // What it saw: a table at least as large as the 1.0 one it knows.
  EXPECT_EQ(info("abi_v1_0", 3), static_cast<int64_t>(sizeof(BP_HostApi_1_0)));
  EXPECT_GE(info("abi_v1_0", 0), info("abi_v1_0", 3));
  EXPECT_EQ(info("abi_v1_0", 0), static_cast<int64_t>(sizeof(BP_HostApi))) << "the host hands out its own table";
  EXPECT_EQ(info("abi_v1_0", 1), BP_ABI_MAJOR);
  EXPECT_EQ(info("abi_v1_0", 2), BP_ABI_MINOR) << "the table carries the host's minor, not the plugin's";
  EXPECT_EQ(info("abi_v1_0", 4), static_cast<int64_t>(dev->type));

  // Its kernels run, on cpu and on its device; its device holds tensors.
  EXPECT_EQ(twice("abi_v1_0", floats({1, -2.5f, 3})).toVector<float>(), (std::vector<float>{2, -5, 6}));
  {
    Tensor r = twice("abi_v1_0", floats({4, 5}, Device(dev->type, 1)));
    EXPECT_EQ(r.device(), Device(dev->type, 1));
    EXPECT_EQ(r.toVector<float>(), (std::vector<float>{8, 10}));
    expectDeviceMemoryWorks(dev->type);
  }
  unload("tp_abi_v1_0");
  EXPECT_FALSE(opDefined("abi_v1_0::twice"));
  EXPECT_FALSE(deviceTypeRegistered("abiv10dev"));
}

// ------------------------- 2. a 1.1 slot is used only when the table has it

TEST_F(AbiRulesTest, SlotAddedInNewerMinorIsUsedOnlyAfterCheckingStructSize) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_v1_1"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, static_cast<uint32_t>(BP_ABI_MINOR));
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abiv11dev");
  ASSERT_TRUE(dev.has_value());
  const int64_t own = static_cast<int64_t>(dev->type);
  EXPECT_EQ(info("abi_v1_1", 3), own);

  auto nameIs = Dispatcher::singleton()
                    .findOpOrThrow("abi_v1_1::type_name_is")
                    .typed<int64_t(int64_t, std::string_view, int64_t)>();
  constexpr int64_t kMatches = 1, kDiffers = 0, kNull = -1, kNoSlot = -2;
  // This host's table has the slot: the plugin uses it.
  EXPECT_EQ(info("abi_v1_1", 4), kMatches) << "during init, for the type it had just registered";
  EXPECT_EQ(nameIs.call(0, "cpu", 0), kMatches);
  EXPECT_EQ(nameIs.call(own, "abiv11dev", 0), kMatches);
  EXPECT_EQ(nameIs.call(own, "cpu", 0), kDiffers);
  EXPECT_EQ(nameIs.call(1, "cuda", 0), kMatches) << "a built-in name waiting for its plugin";
  EXPECT_EQ(nameIs.call(kMaxDeviceTypes, "", 0), kNull) << "no type has this number";
  EXPECT_EQ(nameIs.call(-1, "", 0), kNull);

  // Handed a table that ends before the slot (as a 1.0 host's does), or
  // that ends inside it, the plugin does without it and calls nothing past
  // the table's end (that slot holds a trap).
  const int64_t trapped = counter("abi_v1_1", kTrap);
  const int64_t end_1_0 = static_cast<int64_t>(offsetof(BP_HostApi, device_type_name));
  EXPECT_EQ(nameIs.call(0, "cpu", end_1_0), kNoSlot);
  EXPECT_EQ(nameIs.call(0, "cpu", end_1_0 + static_cast<int64_t>(sizeof(void*)) - 1), kNoSlot);
  EXPECT_EQ(counter("abi_v1_1", kTrap), trapped) << "the plugin called a slot past the table's struct_size";
  // Control: a table of today's size does include the slot (here the trap).
  EXPECT_EQ(nameIs.call(0, "cpu", static_cast<int64_t>(sizeof(BP_HostApi))), kDiffers);
  EXPECT_EQ(counter("abi_v1_1", kTrap), trapped + 1);

  unload("tp_abi_v1_1");
  EXPECT_FALSE(deviceTypeRegistered("abiv11dev"));
}

// --------------------------------------- 3. larger structs are accepted

TEST_F(AbiRulesTest, LargerStructsAreAcceptedAndTheirExtraFieldsIgnored) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_larger"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kernels, 4u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abilargedev");
  std::optional<PluginDeviceStatus> max_dev = deviceStatus(*s, "abilargemaxdev");
  ASSERT_TRUE(dev.has_value());
  ASSERT_TRUE(max_dev.has_value());
  EXPECT_EQ(dev->device_count, 2);
  EXPECT_EQ(max_dev->device_count, 2);
  EXPECT_EQ(info("abi_larger", 0), static_cast<int64_t>(dev->type));
  EXPECT_EQ(info("abi_larger", 1), static_cast<int64_t>(max_dev->type));

  EXPECT_EQ(twice("abi_larger", floats({1, 2})).toVector<float>(), (std::vector<float>{2, 4}));
  for (DeviceType type : {dev->type, max_dev->type}) {
    SCOPED_TRACE(DeviceTypeRegistry::global().name(type));
    Tensor r = twice("abi_larger", floats({3, -4}, Device(type, 1)));
    EXPECT_EQ(r.device(), Device(type, 1));
    EXPECT_EQ(r.toVector<float>(), (std::vector<float>{6, -8}));
    expectDeviceMemoryWorks(type);
  }
  // Every slot was read at its offset: the optional ones are the plugin's.
  const int64_t d2d = counter("abi_larger", kD2D), ms = counter("abi_larger", kMemset),
                sync = counter("abi_larger", kSynchronize);
  {
    Tensor x = tensorFromVector<uint8_t>({1, 2, 3, 4}, {4}, Device(dev->type, 0));
    EXPECT_EQ(bytesOf(x.clone()), (std::vector<uint8_t>{1, 2, 3, 4}));
    interfaceOf(dev->type).memset(x.data_ptr(), x.device(), 0x5A, 4);
    EXPECT_EQ(bytesOf(x), std::vector<uint8_t>(4, 0x5A));
    interfaceOf(dev->type).synchronize(x.device());
  }
  EXPECT_EQ(counter("abi_larger", kD2D), d2d + 1);
  EXPECT_EQ(counter("abi_larger", kMemset), ms + 1);
  EXPECT_EQ(counter("abi_larger", kSynchronize), sync + 1);

  unload("tp_abi_larger");
  EXPECT_FALSE(deviceTypeRegistered("abilargedev"));
  EXPECT_FALSE(deviceTypeRegistered("abilargemaxdev"));
}

// ------------------------- 4. fields past a smaller struct_size are defaulted

TEST_F(AbiRulesTest, SmallerStructsHaveTheFieldsTheyLackDefaulted) {
  // Had the host read BP_KernelDesc.cpp_signature past struct_size, the
  // load would crash (a garbage pointer) or fail (a wrong signature).
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_smaller"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kernels, 4u);
  std::optional<PluginDeviceStatus> small = deviceStatus(*s, "abismalldev");
  std::optional<PluginDeviceStatus> old = deviceStatus(*s, "abismallolddev");
  ASSERT_TRUE(small.has_value());
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(small->device_count, 2);
  EXPECT_EQ(old->device_count, 2);
  // info fails unless its ctx, past its BP_KernelDesc's struct_size, is NULL.
  EXPECT_EQ(info("abi_smaller", 0), static_cast<int64_t>(small->type));
  EXPECT_EQ(info("abi_smaller", 1), static_cast<int64_t>(old->type));

  EXPECT_EQ(twice("abi_smaller", floats({1, 2})).toVector<float>(), (std::vector<float>{2, 4}));
  for (DeviceType type : {small->type, old->type}) {
    SCOPED_TRACE(DeviceTypeRegistry::global().name(type));
    Tensor r = twice("abi_smaller", floats({3, -4}, Device(type, 0)));
    EXPECT_EQ(r.toVector<float>(), (std::vector<float>{6, -8}));
    expectDeviceMemoryWorks(type);
  }

  // abismalldev's struct ends before stream_create: the slots before it are used.
  const int64_t d2d = counter("abi_smaller", kD2D), ms = counter("abi_smaller", kMemset),
                sync = counter("abi_smaller", kSynchronize);
  {
    Tensor x = tensorFromVector<uint8_t>({1, 2, 3}, {3}, Device(small->type, 1));
    EXPECT_EQ(bytesOf(x.clone()), (std::vector<uint8_t>{1, 2, 3}));
    interfaceOf(small->type).memset(x.data_ptr(), x.device(), 0x11, 3);
    EXPECT_EQ(bytesOf(x), std::vector<uint8_t>(3, 0x11));
    interfaceOf(small->type).synchronize(x.device());
  }
  EXPECT_EQ(counter("abi_smaller", kD2D), d2d + 1);
  EXPECT_EQ(counter("abi_smaller", kMemset), ms + 1);
  EXPECT_EQ(counter("abi_smaller", kSynchronize), sync + 1);

  // abismallolddev's ends before copy_device_to_device: that slot, memset
  // and synchronize are NULL to the host, which falls back.
  {
    Tensor x = tensorFromVector<uint8_t>({7, 8, 9}, {3}, Device(old->type, 0));
    EXPECT_EQ(bytesOf(x.clone()), (std::vector<uint8_t>{7, 8, 9}));
    interfaceOf(old->type).memset(x.data_ptr(), x.device(), 0x22, 3);
    EXPECT_EQ(bytesOf(x), std::vector<uint8_t>(3, 0x22));
    interfaceOf(old->type).synchronize(x.device());
  }
  EXPECT_EQ(counter("abi_smaller", kTrap), 0) << "the host called a slot past BP_DeviceTypeDesc.struct_size";

  unload("tp_abi_smaller");
  EXPECT_FALSE(deviceTypeRegistered("abismalldev"));
  EXPECT_FALSE(deviceTypeRegistered("abismallolddev"));
}

// --------------------------------- 5. struct_size 0 and too large are refused

TEST_F(AbiRulesTest, ZeroAndAbsurdStructSizesAreRejectedAndTheLoadRolledBack) {
  struct Case {
    const char* plugin;
    const char* dev;
    std::string message;
  };
  const std::string huge = std::to_string(BP_MAX_STRUCT_SIZE + 1u);
  const std::vector<Case> cases = {
      {"tp_abi_bsz_dev_0", "abibszdev0dev", "BP_DeviceTypeDesc has an invalid struct_size 0"},
      {"tp_abi_bsz_dev_huge", "abibszdevhugedev", "BP_DeviceTypeDesc has an invalid struct_size " + huge},
      {"tp_abi_bsz_impl_0", "abibszimpl0dev", "BP_KernelDesc has an invalid struct_size 0"},
      {"tp_abi_bsz_impl_huge", "abibszimplhugedev", "BP_KernelDesc has an invalid struct_size " + huge},
      {"tp_abi_bsz_fb_0", "abibszfb0dev", "BP_KernelDesc has an invalid struct_size 0"},
      {"tp_abi_bsz_fb_huge", "abibszfbhugedev", "BP_KernelDesc has an invalid struct_size " + huge},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.plugin);
    for (int attempt = 0; attempt < 2; ++attempt) {  // the second finds nothing left over
      absl::StatusOr<PluginStatus> s = plugins().load(pluginFile(c.plugin));
      ASSERT_FALSE(s.ok()) << c.plugin << " loaded, but must not";
      EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
      const std::string m(s.status().message());
      EXPECT_THAT(m, HasSubstr(strCat("plugin '", c.plugin, "'")));
      EXPECT_THAT(m, HasSubstr("init failed: " + c.message));
      EXPECT_THAT(m, HasSubstr("broken or foreign header"));
      PluginStatus listed = plugins().plugins().back();
      EXPECT_EQ(listed.name, c.plugin);
      EXPECT_FALSE(listed.loaded);
      EXPECT_EQ(listed.error, m);
      EXPECT_TRUE(listed.devices.empty());
      // Everything its init registered before is undone.
      EXPECT_FALSE(isLoaded(c.plugin));
      EXPECT_FALSE(opDefined(strCat(c.plugin, "::probe")));
      EXPECT_FALSE(deviceTypeRegistered(c.dev));
      EXPECT_FALSE(deviceTypeRegistered(strCat(c.dev, "_bad")));
      absl::Status inv = Dispatcher::singleton().checkInvariants();
      EXPECT_TRUE(inv.ok()) << inv;
    }
  }
}

// ---------------------------------------- 6. NULL optional slots: fallbacks

TEST_F(AbiRulesTest, NullOptionalSlotsAreNeverCalled) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_null_slots"));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abinulldev");
  ASSERT_TRUE(dev.has_value());
  EXPECT_EQ(dev->device_count, 2);
  EXPECT_TRUE(dev->unavailable_reason.empty());
  const DeviceType type = dev->type;
  EXPECT_EQ(info("abi_null_slots", 0), static_cast<int64_t>(type));
  DeviceInterface& iface = interfaceOf(type);
  EXPECT_FALSE(iface.isHostAccessible());

  {
    expectDeviceMemoryWorks(type);
    // Device-to-device copies go through a host buffer: one download, one upload.
    Tensor x = tensorFromVector<float>({1, 2, 3}, {3}, Device(type, 0));
    const int64_t d2h = counter("abi_null_slots", kD2H), h2d = counter("abi_null_slots", kH2D);
    Tensor c = x.clone();
    EXPECT_EQ(counter("abi_null_slots", kD2H), d2h + 1);
    EXPECT_EQ(counter("abi_null_slots", kH2D), h2d + 1);
    EXPECT_EQ(c.toVector<float>(), (std::vector<float>{1, 2, 3}));
    Tensor y = emptyTensor({3}, ScalarType::Float32, Device(type, 1));
    copyElements(y, x);
    EXPECT_EQ(y.toVector<float>(), (std::vector<float>{1, 2, 3}));
    // memset uploads a filled buffer; synchronize has nothing to wait for.
    Tensor b = tensorFromVector<uint8_t>({1, 2, 3, 4, 5}, {5}, Device(type, 1));
    iface.memset(byteOffset(b.data_ptr(), 1), b.device(), 0xEE, 3);
    EXPECT_EQ(bytesOf(b), (std::vector<uint8_t>{1, 0xEE, 0xEE, 0xEE, 5}));
    iface.memset(b.data_ptr(), b.device(), 0, 0);
    iface.synchronize(Device(type, 0));
    iface.synchronize(Device(type, 1));
    EXPECT_EQ(twice("abi_null_slots", x).toVector<float>(), (std::vector<float>{2, 4, 6}));
  }

  // With no devices, unavailable_reason (NULL) is not asked for.
  auto setCount = Dispatcher::singleton().findOpOrThrow("abi_null_slots::set_device_count").typed<int64_t(int64_t)>();
  EXPECT_EQ(setCount.call(0), 2);
  EXPECT_EQ(iface.deviceCount(), 0);
  EXPECT_EQ(iface.unavailableReason(), "");
  for (const PluginStatus& p : plugins().plugins()) {
    if (p.loaded && p.name == "tp_abi_null_slots") {
      ASSERT_EQ(p.devices.size(), 1u);
      EXPECT_EQ(p.devices[0].device_count, 0);
      EXPECT_EQ(p.devices[0].unavailable_reason, "");
    }
  }
  expectError([&] { (void)emptyTensor({2}, ScalarType::Float32, Device(type, 0)); },
              {"cannot allocate on abinulldev:0"});
  EXPECT_EQ(setCount.call(2), 0);

  unload("tp_abi_null_slots");
  EXPECT_FALSE(deviceTypeRegistered("abinulldev"));
}

// --------------------------------------- 7. NULL required slots are refused

TEST_F(AbiRulesTest, MissingRequiredSlotsMakeTheLoadFail) {
  const std::string required =
      "(name, device_count, allocate, deallocate, copy_host_to_device and copy_device_to_host are required)";
  struct Case {
    std::string field;
    std::string message;
  };
  // The message names the missing field, then lists every required one.
  std::vector<Case> cases = {{"name", "BP_DeviceTypeDesc lacks required field(s) name " + required}};
  for (const char* f : {"device_count", "allocate", "deallocate", "copy_host_to_device", "copy_device_to_host"})
    cases.push_back({f, strCat("BP_DeviceTypeDesc 'abireq_", f, "' lacks required field(s) ", f, " ", required)});
  cases.push_back({"fn", "plugin 'tp_abi_req_fn': BP_KernelDesc.fn is NULL"});
  cases.push_back({"event_create_timed",
                   "BP_DeviceTypeDesc 'abireq_event_create_timed' sets event_create_timed "
                   "without event_elapsed_ms; event timing (ABI 1.12) needs both, or neither"});
  cases.push_back({"event_elapsed_ms",
                   "BP_DeviceTypeDesc 'abireq_event_elapsed_ms' sets event_elapsed_ms "
                   "without event_create_timed; event timing (ABI 1.12) needs both, or neither"});
  cases.push_back({"graph_replay",
                   "BP_DeviceTypeDesc 'abireq_graph_replay' sets graph_replay but not graph_capture_begin, "
                   "graph_capture_end, graph_destroy; graphs (ABI 1.13) need all four"});

  for (const Case& c : cases) {
    const std::string plugin = "tp_abi_req_" + c.field, dev = "abireq_" + c.field;
    SCOPED_TRACE(plugin);
    absl::StatusOr<PluginStatus> s = plugins().load(pluginFile(plugin));
    ASSERT_FALSE(s.ok()) << plugin << " loaded, but must not";
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
    const std::string m(s.status().message());
    EXPECT_THAT(m, HasSubstr(strCat("plugin '", plugin, "' (")));
    EXPECT_THAT(m, HasSubstr("init failed: "));
    EXPECT_THAT(m, HasSubstr(c.message));
    EXPECT_FALSE(isLoaded(plugin));
    EXPECT_FALSE(opDefined(plugin + "::probe"));
    EXPECT_FALSE(deviceTypeRegistered(dev));
  }
  absl::Status inv = Dispatcher::singleton().checkInvariants();
  EXPECT_TRUE(inv.ok()) << inv;
}

// ---------------------------------- 8. the host table matches this header

TEST_F(AbiRulesTest, InitSeesTheHostTableOfThisHeader) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_v1_1"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(info("abi_v1_1", 0), static_cast<int64_t>(sizeof(BP_HostApi)));
  EXPECT_EQ(info("abi_v1_1", 1), BP_ABI_MAJOR);
  EXPECT_EQ(info("abi_v1_1", 2), BP_ABI_MINOR);
  unload("tp_abi_v1_1");
  // Across a reload, too.
  s = plugins().load(pluginFile("tp_abi_v1_1"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(info("abi_v1_1", 0), static_cast<int64_t>(sizeof(BP_HostApi)));
  EXPECT_EQ(info("abi_v1_1", 2), BP_ABI_MINOR);
  unload("tp_abi_v1_1");
}

// ------------------- 9. struct sizes end at the last field; padding is never read

// The padding-hostile plugins (tp_abi_padding.c) fill every struct, padding
// included, with 0xA5 before assigning its fields; their op
// ns::info(Tensor self, int which) reports what tensor_info wrote into a
// 0xA5-filled buffer and what the host called.
enum PadInfo : int64_t {
  kPadStructSize,
  kPadBytesChangedPastStructSize,
  kPadDim,
  kPadNumel,
  kPadDtype,
  kPadDeviceType,
  kPadIsContiguous,
  kPadEventQueries,
  kPadTrapCalls,
  kPadCutBufferStructSize,
  kPadCutBufferBytesChangedPastStructSize
};
int64_t padInfo(std::string_view ns, const Tensor& t, PadInfo which) {
  return Dispatcher::singleton()
      .findOpOrThrow(strCat(ns, "::info"))
      .typed<int64_t(const Tensor&, int64_t)>()
      .call(t, which);
}

// What tensor_info wrote for tensors on cpu and on the plugin's device: every
// field right, struct_size the end of the last field whatever buffer size the
// plugin sent, and not a byte of the buffer past it touched.
void expectTensorInfoIsRight(std::string_view ns, DeviceType dev) {
  Tensor x = tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  for (const Tensor& t :
       {x, x.transpose(0, 1), Tensor(tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, Device(dev, 0)))}) {
    SCOPED_TRACE(strCat(t.device().str(), t.is_contiguous() ? " contiguous" : " strided"));
    EXPECT_EQ(padInfo(ns, t, kPadStructSize), static_cast<int64_t>(BP_TensorInfo_STRUCT_SIZE));
    EXPECT_EQ(padInfo(ns, t, kPadBytesChangedPastStructSize), 0) << "the host wrote the buffer's tail padding";
    EXPECT_EQ(padInfo(ns, t, kPadDim), 2);
    EXPECT_EQ(padInfo(ns, t, kPadNumel), 6);
    EXPECT_EQ(padInfo(ns, t, kPadDtype), BP_FLOAT32);
    EXPECT_EQ(padInfo(ns, t, kPadDeviceType), static_cast<int64_t>(t.device().type));
    EXPECT_EQ(padInfo(ns, t, kPadIsContiguous), t.is_contiguous() ? 1 : 0);
    // A buffer whose struct_size ends inside `device`: the host writes the
    // fields before it, says so, and leaves `device` alone.
    EXPECT_EQ(padInfo(ns, t, kPadCutBufferStructSize), static_cast<int64_t>(BP_STRUCT_SIZE(BP_TensorInfo, dtype)));
    EXPECT_EQ(padInfo(ns, t, kPadCutBufferBytesChangedPastStructSize), 0);
  }
}

// The plugin's device holds host memory: tensors round-trip, and the
// properties it wrote over a garbage-filled buffer read back right.
void expectPaddingDeviceWorks(DeviceType type) {
  DeviceInterface& iface = interfaceOf(type);
  EXPECT_TRUE(iface.isHostAccessible()) << "host_accessible, followed by 0xA5 padding, was misread";
  Tensor t = tensorFromVector<float>({1.5f, -2, 3}, {3}, Device(type, 0));
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{1.5f, -2, 3}));
  EXPECT_EQ(t.clone().toVector<float>(), (std::vector<float>{1.5f, -2, 3}));
  const DeviceProperties p = iface.properties(Device(type, 0));
  EXPECT_EQ(p.name, "padding-hostile device");
  EXPECT_EQ(p.total_memory, 12345u);
  EXPECT_EQ(p.compute_major, 7);
  EXPECT_EQ(p.compute_minor, 5);
  EXPECT_EQ(p.multiprocessor_count, 3);
}

TEST_F(AbiRulesTest, PaddingHostileCPluginWithFieldEndSizesHasEveryFieldReadRight) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_pad_field_end"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, static_cast<uint32_t>(BP_ABI_MINOR)) << "BP_PluginInfo has padding after abi_minor";
  EXPECT_EQ(s->version, "0.0.1");
  EXPECT_EQ(s->kernels, 2u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abipaddev");
  ASSERT_TRUE(dev.has_value());
  EXPECT_EQ(dev->device_count, 1);
  DeviceInterface& iface = interfaceOf(dev->type);
  EXPECT_EQ(iface.dlpackDeviceType(), 1) << "dlpack_device_type (kDLCPU), followed by 0xA5 padding, was misread";
  ASSERT_TRUE(iface.hasEvents());
  {
    // event_query, the last field, is inside struct_size: the host uses it.
    const Device d(dev->type, 0);
    DeviceInterface::EventHandle e = iface.createEvent(d);
    EXPECT_TRUE(iface.queryEvent(d, e));
    iface.destroyEvent(d, e);
    EXPECT_EQ(padInfo("tp_abi_pad_field_end", floats({1}), kPadEventQueries), 1);
  }
  EXPECT_FALSE(iface.capabilities().event_wait_device) << "event_wait_device (1.8) is NULL";
  EXPECT_FALSE(iface.capabilities().event_timing) << "event_create_timed and event_elapsed_ms (1.12) are NULL";
  expectPaddingDeviceWorks(dev->type);
  expectTensorInfoIsRight("tp_abi_pad_field_end", dev->type);
  EXPECT_EQ(padInfo("tp_abi_pad_field_end", floats({1}), kPadTrapCalls), 0);
  unload("tp_abi_pad_field_end");
  EXPECT_FALSE(deviceTypeRegistered("abipaddev"));
}

TEST_F(AbiRulesTest, PluginOfAbi12SendingSizeofStructSizesIsStillAccepted) {
  // Its BP_DeviceTypeDesc.struct_size is 1.2's sizeof: dlpack_device_type and
  // 4 bytes of 0xA5 padding. event_query (past it) holds a trap.
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_pad_sizeof_1_2"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, 2u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abipaddev");
  ASSERT_TRUE(dev.has_value());
  EXPECT_EQ(dev->device_count, 1);
  DeviceInterface& iface = interfaceOf(dev->type);
  EXPECT_EQ(iface.dlpackDeviceType(), 1);
  ASSERT_TRUE(iface.hasEvents());
  {
    const Device d(dev->type, 0);
    DeviceInterface::EventHandle e = iface.createEvent(d);
    expectError([&] { (void)iface.queryEvent(d, e); }, {"queryEvent", "abipaddev", "event_query"});
    iface.destroyEvent(d, e);
  }
  EXPECT_FALSE(iface.capabilities().event_wait_device) << "event_wait_device lies past struct_size, in 0xA5 garbage";
  EXPECT_FALSE(iface.capabilities().event_timing) << "event timing lies past struct_size, in 0xA5 garbage";
  expectPaddingDeviceWorks(dev->type);
  // Its tensor_info buffer's struct_size is sizeof(BP_TensorInfo), tail
  // padding included: the host writes the fields, not the padding.
  expectTensorInfoIsRight("tp_abi_pad_sizeof_1_2", dev->type);
  EXPECT_EQ(padInfo("tp_abi_pad_sizeof_1_2", floats({1}), kPadEventQueries), 0);
  EXPECT_EQ(padInfo("tp_abi_pad_sizeof_1_2", floats({1}), kPadTrapCalls), 0)
      << "the host called event_query past BP_DeviceTypeDesc.struct_size";
  unload("tp_abi_pad_sizeof_1_2");
  EXPECT_FALSE(deviceTypeRegistered("abipaddev"));
}

TEST_F(AbiRulesTest, FieldsThatStructSizeCutsReadAsZero) {
  // BP_DeviceTypeDesc.struct_size ends 2 bytes into dlpack_device_type
  // (0xA5A5A5A5), BP_KernelDesc's 4 bytes into cpp_signature (a pointer of
  // 0xA5 bytes): had the host read the covered bytes of either, the device
  // would claim DLPack type 0xA5A5 or the load would crash.
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_pad_cut_optional"));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abipaddev");
  ASSERT_TRUE(dev.has_value());
  DeviceInterface& iface = interfaceOf(dev->type);
  EXPECT_EQ(iface.dlpackDeviceType(), 0);
  ASSERT_TRUE(iface.hasEvents());
  {
    const Device d(dev->type, 0);
    DeviceInterface::EventHandle e = iface.createEvent(d);
    expectError([&] { (void)iface.queryEvent(d, e); }, {"queryEvent", "abipaddev", "event_query"});
    iface.destroyEvent(d, e);
  }
  expectPaddingDeviceWorks(dev->type);
  expectTensorInfoIsRight("tp_abi_pad_cut_optional", dev->type);
  EXPECT_EQ(padInfo("tp_abi_pad_cut_optional", floats({1}), kPadTrapCalls), 0);
  unload("tp_abi_pad_cut_optional");
  EXPECT_FALSE(deviceTypeRegistered("abipaddev"));
}

TEST_F(AbiRulesTest, StructSizeCuttingARequiredFieldIsRefused) {
  // BP_DeviceTypeDesc.struct_size ends 4 bytes into copy_device_to_host: the
  // slot is missing, not half a pointer.
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_pad_cut_required"));
  ASSERT_FALSE(s.ok()) << "loaded, but must not";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  const std::string m(s.status().message());
  EXPECT_THAT(m, HasSubstr("init failed: "));
  EXPECT_THAT(m, HasSubstr("BP_DeviceTypeDesc 'abipaddev' lacks required field(s) copy_device_to_host "));
  EXPECT_FALSE(isLoaded("tp_abi_pad_cut_required"));
  EXPECT_FALSE(opDefined("tp_abi_pad_cut_required::info"));
  EXPECT_FALSE(deviceTypeRegistered("abipaddev"));
}

// -------------------------------------------- 10. BP_KernelDesc.dtypes (1.5)

static_assert(offsetof(BP_KernelDesc, dtypes) == BP_STRUCT_SIZE(BP_KernelDesc, cpp_signature),
              "1.5 appended dtypes right after cpp_signature, where 1.4's struct ended (no padding)");
static_assert(offsetof(BP_KernelDesc, flags) == BP_STRUCT_SIZE(BP_KernelDesc, dtypes),
              "1.13 appended flags right after dtypes, where 1.12's struct ended (no padding)");
static_assert(offsetof(BP_KernelDesc, typed_fn) == BP_STRUCT_SIZE(BP_KernelDesc, flags),
              "1.14 appended typed_fn right after flags, where 1.13's struct ended (no padding)");
static_assert(BP_KernelDesc_STRUCT_SIZE == BP_STRUCT_SIZE(BP_KernelDesc, typed_fn), "typed_fn is the last field");
static_assert(BP_ABI_MINOR >= 5, "BP_KernelDesc.dtypes is ABI 1.5");

TEST_F(AbiRulesTest, KernelDescOfAbi14ServesEveryDtypeOfItsAbi) {
  // Its struct_size ends before dtypes, and the bytes where dtypes lies hold
  // garbage: the host reads "every dtype of ABI 1.4" (Note [Dtypes of older
  // plugins]).
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_dtypes_v1_4"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, 4u);
  OperatorHandle echo = Dispatcher::singleton().findOpOrThrow("tp_abi_dtypes_v1_4::echo");
  std::optional<DtypeSet> declared = echo.declaredDtypes(DispatchKey::CPU);
  ASSERT_TRUE(declared.has_value());
  EXPECT_EQ(declared->str(), "bool, uint8, int8, int32, int64, float16, bfloat16, float32, float64");
  auto call = echo.typed<Tensor(const Tensor&)>();
  for (ScalarType t : {ScalarType::Float32, ScalarType::Int64, ScalarType::Bool, ScalarType::BFloat16})
    EXPECT_EQ(call.call(Tensor(emptyTensor({2}, t))).dtype(), t);
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 0), 4) << "every dtype of ABI 1.4 reached the kernel";
  unload("tp_abi_dtypes_v1_4");
}

TEST_F(AbiRulesTest, PluginOfAbi14IsNeverHandedADtypeAddedLater) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_dtypes_v1_4"));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abidtfbdev");
  ASSERT_TRUE(dev.has_value());
  const Device d(dev->type, 0);
  Dispatcher& disp = Dispatcher::singleton();
  auto echo = disp.findOpOrThrow("tp_abi_dtypes_v1_4::echo").typed<Tensor(const Tensor&)>();
  auto other = disp.findOpOrThrow("tp_abi_dtypes_v1_4::other").typed<Tensor(const Tensor&)>();
  auto make = disp.findOpOrThrow("tp_abi_dtypes_v1_4::make").typed<Tensor(ScalarType)>();
  // A signature the host calls unboxed (typed_calls.h), with a dtype
  // argument: the older plugin's kernel is called boxed, so that the
  // argument is checked.
  auto make_like = disp.findOpOrThrow("tp_abi_dtypes_v1_4::make_like")
                       .typed<Tensor(const Tensor&, std::optional<ScalarType>, std::optional<Device>)>();
  const ScalarType kLater[] = {ScalarType::Int16, ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64};

  // What it knows still reaches it: the cpu and device kernels, the fallback,
  // and a dtype argument.
  EXPECT_EQ(echo.call(tensorFromVector<int32_t>({1, 2}, {2})).toVector<int32_t>(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(echo.call(tensorFromVector<float>({3, 4}, {2}, d)).toVector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(other.call(tensorFromVector<int8_t>({5}, {1}, d)).toVector<int8_t>(), (std::vector<int8_t>{5}));
  EXPECT_EQ(make.call(ScalarType::Float64).dtype(), ScalarType::Float64);
  const Tensor host_floats = tensorFromVector<float>({1}, {1});
  EXPECT_EQ(make_like.call(host_floats, ScalarType::Int8, std::nullopt).dtype(), ScalarType::Int8);
  EXPECT_EQ(make_like.call(host_floats, std::nullopt, std::nullopt).dtype(), ScalarType::Float32);
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 0), 2);
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 1), 3);
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 2), 1);

  for (ScalarType t : kLater) {
    SCOPED_TRACE(scalarTypeName(t));
    const std::string name(scalarTypeName(t));
    // A cpu tensor of a later dtype: its kernel declines it, and nothing else
    // serves the op.
    try {
      echo.call(emptyTensor({2}, t));
      ADD_FAILURE() << "the 1.4 kernel was handed " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
      EXPECT_THAT(e.what(), HasSubstr(strCat("refuses ", name)));
      EXPECT_THAT(e.what(), HasSubstr("built against plugin ABI 1.4, which has no int16, uint16, uint32 or uint64"));
    }
    // On its device the declined call goes to the plugin's own fallback,
    // which must not see the dtype either.
    for (auto* op : {&echo, &other}) {
      try {
        op->call(emptyTensor({2}, t, d));
        ADD_FAILURE() << "the 1.4 fallback was handed " << name;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(e.what(), HasSubstr(strCat("cannot be handed a tensor of dtype ", name)));
        EXPECT_THAT(e.what(), HasSubstr("plugin 'tp_abi_dtypes_v1_4' was built for plugin ABI 1.4"));
        EXPECT_THAT(e.what(), HasSubstr("Rebuild the plugin for ABI 1.5 or later"));
      }
    }
    // A dtype argument of a later dtype, to a kernel of either signature.
    for (const auto& call : std::vector<std::function<Tensor()>>{
             [&] { return make.call(t); }, [&] { return make_like.call(host_floats, t, std::nullopt); }}) {
      try {
        call();
        ADD_FAILURE() << "the 1.4 kernel was handed the dtype " << name;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(e.what(), HasSubstr(strCat("cannot be handed the dtype argument ", name)));
        EXPECT_THAT(e.what(), HasSubstr("built for plugin ABI 1.4"));
      }
    }
  }
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 0), 2) << "no later dtype reached echo";
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 1), 3) << "no later dtype reached make or make_like";
  EXPECT_EQ(info("tp_abi_dtypes_v1_4", 2), 1) << "no later dtype reached the fallback";
  unload("tp_abi_dtypes_v1_4");
}

TEST_F(AbiRulesTest, DeclinedCallGoesWhereItWouldWithoutTheKernelAndAFallbackCannotDecline) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_decline_v1_7"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, static_cast<uint32_t>(BP_ABI_MINOR));
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abidtfbdev");
  ASSERT_TRUE(dev.has_value());
  const Device d(dev->type, 0);
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tp_abi_decline_v1_7::pick");
  auto pick = op.typed<Tensor(const Tensor&)>();
  const DispatchKey key = backendKey(d.type);
  EXPECT_EQ(pick.call(tensorFromVector<float>({1, 2}, {2}, d)).toVector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(info("tp_abi_decline_v1_7", 0), 1);
  // Odd: declined; without the device kernel the call goes to the device's
  // fallback (not the CPU fallback, which a backend fallback precedes).
  EXPECT_EQ(pick.call(tensorFromVector<float>({1, 2, 3}, {3}, d)).toVector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(info("tp_abi_decline_v1_7", 0), 1);
  EXPECT_EQ(info("tp_abi_decline_v1_7", 2), 1) << "the fallback served the declined call";
  EXPECT_EQ(info("tp_abi_decline_v1_7", 1), 0) << "the cpu kernel did not run";
  EXPECT_EQ(op.declinedCalls(key), 1u);
  // 5: the kernel declines, and the fallback it goes to may not.
  try {
    pick.call(tensorFromVector<float>({1, 2, 3, 4, 5}, {5}, d));
    ADD_FAILURE() << "a fallback's BP_DECLINED was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(e.what(), HasSubstr("fallback kernel of plugin 'tp_abi_decline_v1_7'"));
    EXPECT_THAT(e.what(), HasSubstr("returned BP_DECLINED (the fallback declines 5 elements), which only impl kernels "
                                    "may"));
  }
  EXPECT_EQ(op.declinedCalls(key), 2u);
  unload("tp_abi_decline_v1_7");
}

TEST_F(AbiRulesTest, ToAPluginOfAbi16TheDeclinedCodeIsAnError) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_decline_v1_6"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, 6u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abidtfbdev");
  ASSERT_TRUE(dev.has_value());
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tp_abi_decline_v1_6::pick");
  try {
    op.typed<Tensor(const Tensor&)>().call(tensorFromVector<float>({1, 2, 3}, {3}, Device(dev->type, 0)));
    ADD_FAILURE() << "a 1.6 plugin's code 64 was taken as a decline";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnknown);
    EXPECT_THAT(e.what(), HasSubstr("failed: odd sizes are not served here"));
  }
  EXPECT_EQ(info("tp_abi_decline_v1_6", 2), 0) << "nothing else ran the call";
  EXPECT_EQ(op.declinedCalls(backendKey(dev->type)), 0u);
  unload("tp_abi_decline_v1_6");
}

// Expects plugin `name` not to load, its init failing with a message that
// names it and contains every part, and nothing of it left registered.
void expectRefusedAtInit(const char* name, const std::vector<std::string>& parts) {
  SCOPED_TRACE(name);
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile(name));
  ASSERT_FALSE(s.ok()) << "loaded, but must not";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  const std::string m(s.status().message());
  EXPECT_THAT(m, HasSubstr(strCat("plugin '", name, "'")));
  EXPECT_THAT(m, HasSubstr("init failed: "));
  for (const std::string& part : parts) EXPECT_THAT(m, HasSubstr(part));
  EXPECT_FALSE(isLoaded(name));
}

TEST_F(AbiRulesTest, UnknownDtypeBitsAndFallbacksDeclaringDtypesAreRefused) {
  expectRefusedAtInit("tp_abi_dtypes_unknown_bit",
                      {"impl(tp_abi_dtypes_unknown_bit::echo): BP_KernelDesc.dtypes: ", "dtype number(s) 40",
                       "which this host does not know", "declare only BP_ScalarType values, or 0 for every dtype"});
  EXPECT_FALSE(opDefined("tp_abi_dtypes_unknown_bit::echo"));
  expectRefusedAtInit(
      "tp_abi_dtypes_fallback",
      {"a fallback serves every operator and dtype, but its BP_KernelDesc.dtypes is 128", "set it to 0"});
  EXPECT_FALSE(opDefined("tp_abi_dtypes_fallback::echo"));
  EXPECT_FALSE(deviceTypeRegistered("abidtfbdev"));
}

// -------------------------------------------- 12. BP_KernelDesc.flags (1.13)

TEST_F(AbiRulesTest, KernelFlagsTheHostDoesNotTakeAreRefusedByName) {
  expectRefusedAtInit("tp_abi_flags_unknown_bit",
                      {"impl(tp_abi_flags_unknown_bit::echo): unknown BP_KernelDesc.flags bits 512",
                       "BP_KERNEL_CPU_SCALARS is the only flag"});
  expectRefusedAtInit("tp_abi_flags_fallback",
                      {"a fallback for every operator takes no BP_KernelDesc.flags", "set them to 0"});
  expectRefusedAtInit("tp_abi_flags_cpu",
                      {"cannot register the CPU kernel for tp_abi_flags_cpu::echo as taking CPU scalars",
                       "only a native kernel at a device's backend key may"});
  EXPECT_FALSE(deviceTypeRegistered("abidtfbdev"));
}

TEST_F(AbiRulesTest, KernelFlagsOfAPluginOfAbi112AreIgnored) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_flags_v1_12"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, 12u);
  std::optional<PluginDeviceStatus> dev = deviceStatus(*s, "abidtfbdev");
  ASSERT_TRUE(dev.has_value());
  const OperatorHandle echo = Dispatcher::singleton().findOpOrThrow("tp_abi_flags_v1_12::echo");
  EXPECT_EQ(echo.kernelKind(backendKey(dev->type)), KernelKind::Native);
  EXPECT_FALSE(echo.takesCpuScalars(backendKey(dev->type))) << "garbage in a 1.12 plugin's flags was read";
  unload("tp_abi_flags_v1_12");
}

// ------------------------------------------ 13. BP_KernelDesc.typed_fn (1.14)

// The host calls a typed entry as plugin_detail::TypedFn<Ret, Args...>; the
// SDK generates each as bp::detail::TypedEntry<...>::fn. For every
// signature the host has a typed call for, the two C types are one.
template <typename T>
struct SdkType;  // the SDK's parameter or return type for the host's C++ type T
template <>
struct SdkType<const Tensor&> {
  using type = const bp::Tensor&;
};
template <>
struct SdkType<Tensor> {
  using type = bp::Tensor;
};
template <>
struct SdkType<const Scalar&> {
  using type = const bp::Scalar&;
};
template <>
struct SdkType<IntArrayRef> {
  using type = bp::IntList;
};
template <>
struct SdkType<TensorList> {
  using type = const std::vector<bp::Tensor>&;
};
template <>
struct SdkType<const std::optional<Tensor>&> {
  using type = const std::optional<bp::Tensor>&;
};
template <>
struct SdkType<const std::optional<Scalar>&> {
  using type = const std::optional<bp::Scalar>&;
};
template <>
struct SdkType<ScalarType> {
  using type = bp::ScalarType;
};
template <>
struct SdkType<Device> {
  using type = bp::Device;
};
template <>
struct SdkType<std::string_view> {
  using type = std::string_view;
};
template <>
struct SdkType<void> {
  using type = void;
};
template <typename T>
struct SdkType<std::optional<T>> {
  using type = std::optional<typename SdkType<T>::type>;
};
template <>
struct SdkType<int64_t> {
  using type = int64_t;
};
template <>
struct SdkType<double> {
  using type = double;
};
template <>
struct SdkType<bool> {
  using type = bool;
};
template <typename... Ts>
struct SdkType<std::tuple<Ts...>> {
  using type = std::tuple<typename SdkType<Ts>::type...>;
};
struct NoRun {};
// The SDK's entries are noexcept; the host calls them through the same type
// without it (a function pointer conversion, which keeps the call defined).
template <typename F>
struct WithoutNoexcept {
  using type = F;
};
template <typename R, typename... A>
struct WithoutNoexcept<R (*)(A...) noexcept> {
  using type = R (*)(A...);
};
template <typename Sig>
struct SdkTypedFn;
template <typename Ret, typename... Args>
struct SdkTypedFn<Ret(Args...)> {
  using R = typename SdkType<Ret>::type;
  using Params = typename bp::detail::TypedParams<false, bp::detail::Decay<typename SdkType<Args>::type>...>::type;
  using Entry = bp::detail::TypedEntry<NoRun, Params, typename bp::detail::TypedReturn<R>::Outs>;
  using type = typename WithoutNoexcept<decltype(&Entry::fn)>::type;
};
template <typename Sig>
struct HostTypedFn;
template <typename Ret, typename... Args>
struct HostTypedFn<Ret(Args...)> {
  using type = plugin_detail::TypedFn<Ret, Args...>;
};
template <typename... Sigs>
constexpr bool hostAndSdkAgree(plugin_detail::SignatureList<Sigs...>) {
  return (std::is_same_v<typename HostTypedFn<Sigs>::type, typename SdkTypedFn<Sigs>::type> && ...);
}
static_assert(hostAndSdkAgree(plugin_detail::FastSignatures{}),
              "the C type the host calls a typed entry as differs from the one the SDK generates");

// Every op the host defines (bp::, the standard table, and comm::, the
// collectives) has its plugin kernels called typed: its canonical signature
// is in typed_calls.h's list, but for the ops with an argument of the two
// kinds that list leaves out (and says why), which are exactly these.
template <typename... Sigs>
std::vector<std::string> fastSignatureStrings(plugin_detail::SignatureList<Sigs...>) {
  return {plugin_detail::SignatureOf<Sigs>::string()...};
}
TEST_F(AbiRulesTest, EveryOpTheHostDefinesHasATypedPluginCall) {
  const std::vector<std::string> listed = fastSignatureStrings(plugin_detail::FastSignatures{});
  const std::set<std::string> fast(listed.begin(), listed.end());
  EXPECT_EQ(fast.size(), listed.size()) << "a signature is listed twice in typed_calls.h";
  std::set<std::string> boxed;
  size_t standard = 0, comm = 0;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    const std::string name = op.operatorName().qualifiedName();
    const bool is_standard = name.starts_with(strCat(kStandardNamespace, "::")), is_comm = name.starts_with("comm::");
    if (!is_standard && !is_comm) continue;
    (is_standard ? standard : comm) += 1;
    const std::string sig = cppSignatureForSchema(op.schema());
    if (sig.find("bool[]") != std::string::npos || sig.find("Tensor?[]") != std::string::npos) {
      boxed.insert(name);
      continue;
    }
    EXPECT_TRUE(fast.contains(sig)) << name << ": its plugin kernels are called boxed; add " << sig
                                    << " to FastSignatures in typed_calls.h";
  }
  EXPECT_EQ(standard, standardOperators().size());
  EXPECT_GE(comm, 13u);
  EXPECT_EQ(boxed,
            (std::set<std::string>{"bp::batch_norm_backward", "bp::batch_norm_backward.out", "bp::conv2d_backward",
                                   "bp::conv2d_backward.out", "bp::index.Tensor", "bp::index.Tensor_out",
                                   "bp::index_put", "bp::index_put_", "bp::index_put.out"}))
      << "an op the host defines takes a bool[] or Tensor?[] argument: its plugin kernels are called boxed "
         "(typed_calls.h says why); add it here if that is meant";
}

// Loads tp_abi_typed_v1_14 and returns its operator `name`.
constexpr const char* kTyped = "tp_abi_typed_v1_14";
OperatorHandle typedOp(const char* name) { return Dispatcher::singleton().findOpOrThrow(strCat(kTyped, "::", name)); }
void loadTyped() {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile(kTyped));
  ASSERT_TRUE(s.ok()) << s.status();
  // Its 31 kernels: 23 with a typed entry the host calls (the impls, the
  // composite and the impl_when_defined kernel); info and the seven echoes'
  // twins (<name>_fn) without one.
  EXPECT_EQ(s->kernels, 31u);
  EXPECT_EQ(s->typed_kernels, 23u);
}

TEST_F(AbiRulesTest, TypedEntryTakesUnboxedCallsAndFnTheBoxedOnes) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  const Tensor x = floats({1, 2});
  // int64_t(const Tensor&) has a typed call: typed_fn takes it.
  OperatorHandle which = typedOp("which");
  EXPECT_EQ(which.typed<int64_t(const Tensor&)>().call(x), 2);
  EXPECT_EQ(info(kTyped, 0), 1);
  EXPECT_EQ(info(kTyped, 1), 0);
  // A boxed call goes through fn.
  Stack stack{IValue(x)};
  which.callBoxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toInt(), 1);
  EXPECT_EQ(info(kTyped, 1), 1);
  unload(kTyped);
}

// callAsTyped (Note [Typed calls in conformance]): a stack's call that
// reaches the plugin kernel as an application's typed call does.
TEST_F(AbiRulesTest, CallAsTypedReachesTheTypedEntryWhereCallBoxedReachesFn) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  OperatorHandle which = typedOp("which");
  Stack stack{IValue(floats({1, 2}))};
  ASSERT_TRUE(callAsTyped(which, stack));
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toInt(), 2) << "typed_fn answered";
  EXPECT_EQ(info(kTyped, 0), 1);
  EXPECT_EQ(info(kTyped, 1), 0);
  // The same stack called boxed: fn answers.
  Stack boxed{IValue(floats({1, 2}))};
  which.callBoxed(boxed);
  ASSERT_EQ(boxed.size(), 1u);
  EXPECT_EQ(boxed[0].toInt(), 1) << "fn answered";
  unload(kTyped);
}

// Each returns what its call got.
Tensor typedCallProbe(const Tensor&, int64_t n) { return floats({static_cast<float>(n)}); }
Tensor untypedCallProbe(const Tensor& self, ArrayRef<double>) { return self; }
Tensor listProbe(TensorList list, int64_t n) {
  std::vector<float> got{static_cast<float>(n)};
  for (const Tensor& t : list) got.push_back(t.toVector<float>().at(0));
  return floats(got);
}
Tensor sizesProbe(const Tensor&, IntArrayRef sizes) {
  std::vector<float> got;
  for (int64_t d : sizes) got.push_back(static_cast<float>(d));
  return floats(got);
}
std::tuple<Tensor, Tensor> pairProbe(const Tensor& self, int64_t n, bool flip) {
  Tensor n_t = floats({static_cast<float>(n)});
  return flip ? std::tuple<Tensor, Tensor>(n_t, self) : std::tuple<Tensor, Tensor>(self, n_t);
}
Tensor throwingProbe(const Tensor&, double) { BP_THROW(kInvalidArgument, "throwingProbe: refused"); }

// The probes above, each the CPU kernel of an op of its own.
struct CallAsTypedProbes {
  CallAsTypedProbes() : lib("abi_calls_as_typed") {
    add("probe(Tensor self, int n=3) -> Tensor", "probe", BP_FN(typedCallProbe));
    add("untyped(Tensor self, float[] weights) -> Tensor", "untyped", BP_FN(untypedCallProbe));
    add("list(Tensor[] tensors, int n) -> Tensor", "list", BP_FN(listProbe));
    add("sizes(Tensor self, int[] sizes) -> Tensor", "sizes", BP_FN(sizesProbe));
    add("pair(Tensor self, int n, bool flip) -> (Tensor, Tensor)", "pair", BP_FN(pairProbe));
    add("throwing(Tensor self, float x) -> Tensor", "throwing", BP_FN(throwingProbe));
  }
  template <typename Kernel>
  void add(const char* schema, const char* name, Kernel kernel) {
    throwIfError(lib.def(schema));
    throwIfError(lib.impl(name, DispatchKey::CPU, std::move(kernel)));
  }
  static OperatorHandle op(const char* name) {
    return Dispatcher::singleton().findOpOrThrow(std::string("abi_calls_as_typed::") + name);
  }
  Library lib;
};

TEST_F(AbiRulesTest, CallAsTypedPassesListsSizesAndPairs) {
  CallAsTypedProbes probes;
  auto op = &CallAsTypedProbes::op;
  // A tensor list (moved out of the stack for the call) and an int list (viewed in it).
  Stack list{IValue(std::vector<TensorBase>{floats({5}), floats({6})}), IValue(int64_t{2})};
  ASSERT_TRUE(callAsTyped(op("list"), list));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(Tensor(list[0].toTensor()).toVector<float>(), (std::vector<float>{2, 5, 6}));
  Stack sizes{IValue(floats({1})), IValue(std::vector<int64_t>{3, 4, 7})};
  ASSERT_TRUE(callAsTyped(op("sizes"), sizes));
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(Tensor(sizes[0].toTensor()).toVector<float>(), (std::vector<float>{3, 4, 7}));
  // Two returns, in order.
  Stack pair{IValue(floats({9})), IValue(int64_t{4}), IValue(true)};
  ASSERT_TRUE(callAsTyped(op("pair"), pair));
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(Tensor(pair[0].toTensor()).toVector<float>(), (std::vector<float>{4}));
  EXPECT_EQ(Tensor(pair[1].toTensor()).toVector<float>(), (std::vector<float>{9}));
  // The kernel's error reaches the caller.
  Stack throwing{IValue(floats({1})), IValue(0.5)};
  expectError([&] { callAsTyped(op("throwing"), throwing); }, {"throwingProbe: refused"});
}

TEST_F(AbiRulesTest, CallAsTypedCompletesAndChecksTheStackAsCallBoxed) {
  CallAsTypedProbes probes;
  const OperatorHandle probe = CallAsTypedProbes::op("probe");
  // A default left off is filled in, as by callBoxed.
  Stack stack{IValue(floats({1, 2}))};
  ASSERT_TRUE(callAsTyped(probe, stack));
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(Tensor(stack[0].toTensor()).toVector<float>(), (std::vector<float>{3}));
  // An argument of the wrong type is refused, naming it.
  Stack bad{IValue(floats({1})), IValue(std::string("three"))};
  expectError([&] { callAsTyped(probe, bad); }, {"abi_calls_as_typed::probe", "argument 'n' (position 1) must be int"});
  // A signature with no typed plugin call: false, the stack untouched.
  const OperatorHandle untyped = CallAsTypedProbes::op("untyped");
  Stack kept{IValue(floats({1})), IValue(std::vector<double>{0.5})};
  EXPECT_FALSE(callAsTyped(untyped, kept));
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1].toDoubleList(), std::vector<double>{0.5});
}

TEST_F(AbiRulesTest, TypedEntryGetsEachArgumentAsItsCType) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  const Tensor x = floats({1, 2});
  // Each echo fails with the arguments its typed_fn got: the op and its
  // keys, tensors (NULL for an undefined one), int, bool and float as C
  // values, a Scalar, an int[] and a Tensor[] as BP_Values.
  auto echo_ib = typedOp("echo_ib").typed<Tensor(const Tensor&, int64_t, bool)>();
  EXPECT_THAT(errorOf([&] { echo_ib.call(x, -3, true); }),
              HasSubstr(strCat("typed: ", kTyped, "::echo_ib self=defined n=-3 b=1 keys=set")));
  EXPECT_THAT(errorOf([&] { echo_ib.call(x, 7, false); }), HasSubstr("n=7 b=0"));
  auto echo_s = typedOp("echo_s").typed<Tensor(const Tensor&, const Scalar&)>();
  EXPECT_THAT(errorOf([&] { echo_s.call(x, Scalar(int64_t{5})); }), HasSubstr("typed: self=defined s=int 5"));
  EXPECT_THAT(errorOf([&] { echo_s.call(x, Scalar(2.5)); }), HasSubstr("typed: self=defined s=float 2.5"));
  EXPECT_THAT(errorOf([&] { echo_s.call(x, Scalar(true)); }), HasSubstr("typed: self=defined s=bool 1"));
  const std::vector<int64_t> dims = {4, 5};
  EXPECT_THAT(errorOf([&] { typedOp("echo_l").typed<Tensor(const Tensor&, IntArrayRef)>().call(x, dims); }),
              HasSubstr("typed: self=defined dims=[4 5]"));
  const std::vector<Tensor> two = {x, x};
  EXPECT_THAT(errorOf([&] { typedOp("echo_tl").typed<Tensor(TensorList, int64_t)>().call(two, 1); }),
              HasSubstr("typed: 2 tensors dim=1"));
  EXPECT_THAT(errorOf([&] { typedOp("echo_tt").typed<Tensor(const Tensor&, const Tensor&)>().call(x, Tensor()); }),
              HasSubstr("typed: a=defined b=undefined"));
  // The error keeps the plugin's code and names the kernel.
  expectError([&] { typedOp("echo_d").typed<Tensor(const Tensor&, double)>().call(x, 0.25); },
              absl::StatusCode::kInvalidArgument,
              {"typed: self=defined f=0.25", strCat("kernel of plugin '", kTyped, "' for ", kTyped, "::echo_d")});
  EXPECT_EQ(info(kTyped, 0), 9) << "every call above went through typed_fn";
  EXPECT_EQ(info(kTyped, 1), 0);
  unload(kTyped);
}

// What an echo of tp_abi_typed wrote after its "typed:" or "boxed:": the
// values its entry got.
std::string echoedValues(const std::string& message, const char* way) {
  const size_t at = message.find(way);
  if (at == std::string::npos) return strCat("<no '", way, "' in: ", message, ">");
  const size_t end = message.find('\n', at);
  return message.substr(at + std::strlen(way),
                        end == std::string::npos ? std::string::npos : end - at - std::strlen(way));
}

// The optional arguments of standard ops' signatures (int[]?, Scalar?,
// ScalarType?, Device?, str?, int?, Tensor?, float?, bool?), present and
// None: typed_fn gets each as the BP_Value fn gets (a None as a NONE value,
// a Tensor? as NULL), and the values are the caller's; so does fn, both
// from a boxed call and from a typed call of a kernel without typed_fn
// (each echo's twin <name>_fn).
TEST_F(AbiRulesTest, TypedEntryGetsOptionalArgumentsAsFnDoes) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  const Tensor x = floats({1, 2}), out = floats({0, 0});
  // `call(op)` calls op typed; `stack` holds the same arguments for a boxed
  // call. Each of the three ways must hand the kernel `values`.
  auto threeWays = [&](const char* name, const auto& call, Stack stack, const std::string& values) {
    SCOPED_TRACE(name);
    const OperatorHandle op = typedOp(name), twin = typedOp(strCat(name, "_fn").c_str());
    EXPECT_EQ(echoedValues(errorOf([&] { call(op); }), "typed:"), values) << "typed call, typed_fn";
    EXPECT_EQ(echoedValues(errorOf([&] { call(twin); }), "boxed:"), values) << "typed call, fn";
    EXPECT_EQ(echoedValues(errorOf([&] { op.callBoxed(stack); }), "boxed:"), values) << "boxed call, fn";
  };
  const std::vector<int64_t> dims = {1, 0};
  using ListsSig = Tensor(const Tensor&, std::optional<IntArrayRef>, const std::optional<Scalar>&, bool, const Tensor&);
  threeWays(
      "echo_lists",
      [&](const OperatorHandle& op) { op.typed<ListsSig>().call(x, IntArrayRef(dims), Scalar(2.5), true, out); },
      {IValue(x), IValue(dims), IValue(Scalar(2.5)), IValue(true), IValue(out)},
      " tensor ints [1 0] float 2.5 bool 1 tensor");
  threeWays(
      "echo_lists",
      [&](const OperatorHandle& op) { op.typed<ListsSig>().call(x, std::nullopt, std::nullopt, false, out); },
      {IValue(x), IValue(), IValue(), IValue(false), IValue(out)}, " tensor none none bool 0 tensor");
  using TypesSig = Tensor(const Tensor&, std::optional<ScalarType>, std::optional<Device>);
  const Device cpu0{DeviceType::CPU, 0};
  threeWays(
      "echo_types", [&](const OperatorHandle& op) { op.typed<TypesSig>().call(x, ScalarType::Float64, cpu0); },
      {IValue(x), IValue(ScalarType::Float64), IValue(cpu0)},
      strCat(" tensor dtype ", static_cast<int>(ScalarType::Float64), " device ", static_cast<int>(DeviceType::CPU),
             ":0"));
  threeWays(
      "echo_types", [&](const OperatorHandle& op) { op.typed<TypesSig>().call(x, std::nullopt, std::nullopt); },
      {IValue(x), IValue(), IValue()}, " tensor none none");
  using ModeSig = Tensor(const Tensor&, const Tensor&, std::optional<std::string_view>, const Tensor&);
  threeWays(
      "echo_mode", [&](const OperatorHandle& op) { op.typed<ModeSig>().call(x, x, "floor", out); },
      {IValue(x), IValue(x), IValue(std::string("floor")), IValue(out)}, " tensor tensor str 'floor' tensor");
  threeWays(
      "echo_mode", [&](const OperatorHandle& op) { op.typed<ModeSig>().call(x, x, std::nullopt, out); },
      {IValue(x), IValue(x), IValue(), IValue(out)}, " tensor tensor none tensor");
  using DimSig = Tensor(const Tensor&, std::optional<int64_t>, bool);
  threeWays(
      "echo_dim", [&](const OperatorHandle& op) { op.typed<DimSig>().call(x, -1, true); },
      {IValue(x), IValue(int64_t{-1}), IValue(true)}, " tensor int -1 bool 1");
  threeWays(
      "echo_dim", [&](const OperatorHandle& op) { op.typed<DimSig>().call(x, std::nullopt, false); },
      {IValue(x), IValue(), IValue(false)}, " tensor none bool 0");
  using BiasSig = Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&);
  threeWays(
      "echo_bias", [&](const OperatorHandle& op) { op.typed<BiasSig>().call(x, x, x); },
      {IValue(x), IValue(x), IValue(x)}, " tensor tensor tensor");
  threeWays(
      "echo_bias", [&](const OperatorHandle& op) { op.typed<BiasSig>().call(x, x, std::nullopt); },
      {IValue(x), IValue(x), IValue()}, " tensor tensor none");
  using NanSig = Tensor(const Tensor&, std::optional<double>, std::optional<double>, std::optional<double>);
  threeWays(
      "echo_nan", [&](const OperatorHandle& op) { op.typed<NanSig>().call(x, 0.5, std::nullopt, -4.0); },
      {IValue(x), IValue(0.5), IValue(), IValue(-4.0)}, " tensor float 0.5 none float -4");
  using SortSig = std::tuple<Tensor, Tensor>(const Tensor&, std::optional<bool>, int64_t, bool);
  threeWays(
      "echo_sort", [&](const OperatorHandle& op) { op.typed<SortSig>().call(x, true, -1, false); },
      {IValue(x), IValue(true), IValue(int64_t{-1}), IValue(false)}, " tensor bool 1 int -1 bool 0");
  threeWays(
      "echo_sort", [&](const OperatorHandle& op) { op.typed<SortSig>().call(x, std::nullopt, 0, true); },
      {IValue(x), IValue(), IValue(int64_t{0}), IValue(true)}, " tensor none int 0 bool 1");
  EXPECT_EQ(info(kTyped, 0), 13) << "each typed call of an echo went through typed_fn";
  EXPECT_EQ(info(kTyped, 1), 26) << "each typed call of a twin and each boxed call went through fn";
  unload(kTyped);
}

TEST_F(AbiRulesTest, TypedEntryReturnsErrorsAndDeclinesFollowFnsRules) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  const Tensor x = floats({1, 2});
  // Two tensor returns, each a new reference the host adopts.
  const uint32_t refs = x.use_count();
  {
    auto [a, b] = typedOp("pair").typed<std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool)>().call(x, 1, true);
    EXPECT_EQ(a.unsafeGetImpl(), x.unsafeGetImpl());
    EXPECT_EQ(b.unsafeGetImpl(), x.unsafeGetImpl());
    EXPECT_EQ(x.use_count(), refs + 2);
  }
  EXPECT_EQ(x.use_count(), refs) << "a return's reference leaked";
  // A failing kernel's stored return is released, not leaked.
  expectError([&] { typedOp("store_then_fail").typed<Tensor(const Tensor&)>().call(x); }, absl::StatusCode::kDataLoss,
              {"typed: failed after storing a return"});
  EXPECT_EQ(x.use_count(), refs) << "the failed kernel's stored return leaked";
  // One of two returns stored before a failure: released too.
  expectError(
      [&] {
        typedOp("pair_half_fail").typed<std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool)>().call(x, 1, 1);
      },
      absl::StatusCode::kDataLoss, {"typed: failed after storing one of two returns"});
  EXPECT_EQ(x.use_count(), refs) << "the failed kernel's first return leaked";
  // A missing return is refused, naming the kernel and the return.
  expectError([&] { typedOp("no_return").typed<Tensor(const Tensor&)>().call(x); },
              {strCat("kernel of plugin '", kTyped, "' for ", kTyped, "::no_return did not set return 0")});
  // A bool return of 7 is true, as a BOOL of 7 is through fn.
  EXPECT_TRUE(typedOp("bool_seven").typed<bool(const Tensor&)>().call(x));
  // A typed decline goes where the call would go without the kernel: the
  // kernel registered before it.
  OperatorHandle pick = typedOp("pick");
  const int64_t typed_before = info(kTyped, 0);
  EXPECT_EQ(pick.typed<Tensor(const Tensor&)>().call(x).unsafeGetImpl(), x.unsafeGetImpl());
  EXPECT_EQ(info(kTyped, 0), typed_before + 2) << "the declining kernel and the one before it, both typed";
  EXPECT_EQ(pick.declinedCalls(DispatchKey::CPU), 1u);
  EXPECT_EQ(x.use_count(), refs);
  unload(kTyped);
}

TEST_F(AbiRulesTest, TypedEntryServesCompositesAndKernelsRegisteredBeforeTheirDefinition) {
  ASSERT_NO_FATAL_FAILURE(loadTyped());
  const Tensor x = floats({1});
  EXPECT_EQ(typedOp("composite_which").typed<int64_t(const Tensor&)>().call(x), 2);
  EXPECT_EQ(typedOp("later").typed<int64_t(const Tensor&)>().call(x), 2);
  EXPECT_EQ(info(kTyped, 0), 2);
  EXPECT_EQ(info(kTyped, 1), 0);
  unload(kTyped);
}

TEST_F(AbiRulesTest, TypedEntryOfAPluginOfAbi113IsIgnored) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_abi_typed_v1_13"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->abi_minor, 13u);
  EXPECT_EQ(s->kernels, 2u);
  EXPECT_EQ(s->typed_kernels, 0u) << "which's typed_fn is not read";
  OperatorHandle which = Dispatcher::singleton().findOpOrThrow("tp_abi_typed_v1_13::which");
  // Its typed_fn aborts: a host that read a 1.13 plugin's field would die here.
  EXPECT_EQ(which.typed<int64_t(const Tensor&)>().call(floats({1})), 1);
  EXPECT_EQ(info("tp_abi_typed_v1_13", 1), 1);
  unload("tp_abi_typed_v1_13");
}

TEST_F(AbiRulesTest, TypedEntryWithoutSignatureOrWhereFnAloneIsCalledIsRefused) {
  expectRefusedAtInit("tp_abi_typed_no_sig",
                      {"impl(tp_abi_typed_no_sig::which) gives BP_KernelDesc.typed_fn without cpp_signature",
                       "the typed entry's C type follows from the signature"});
  expectRefusedAtInit("tp_abi_typed_fallback",
                      {"a fallback is always called through BP_KernelDesc.fn, so its typed_fn must be NULL"});
  expectRefusedAtInit("tp_abi_typed_meta", {"meta(tp_abi_typed_meta::pick) is always called through BP_KernelDesc.fn, "
                                            "so its typed_fn must be NULL"});
  EXPECT_FALSE(opDefined("tp_abi_typed_meta::pick"));
  expectRefusedAtInit("tp_abi_typed_reference",
                      {"the conformance reference of tp_abi_typed_reference::pick is always called through "
                       "BP_KernelDesc.fn, so its typed_fn must be NULL"});
  EXPECT_FALSE(deviceTypeRegistered("abidtfbdev"));
}

}  // namespace
}  // namespace backplane
