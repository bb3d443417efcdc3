// DLPack export and import (backplane/runtime/dlpack.h): zero-copy round trips on
// the CPU for every dtype and layout, who deletes what and when, foreign
// tensors, each bad input's message, and device tensors: on the in-tree
// test device told to declare a DLPack type, on one that declares none, and
// through a plugin (tests/api/dlpack_test_plugin.cc) that declares one.
// NumPy interop is dlpack_interop_test.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/runtime/dlpack.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

// A device type this DLPack header does not list, set bytewise (converting
// 77 to the enum would itself be undefined behaviour).
void setDeviceType(DLDevice& device, int32_t type) { std::memcpy(&device.device_type, &type, sizeof type); }

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using testing::expectError;

std::vector<int64_t> shapeOf(const DLTensor& dl) { return std::vector<int64_t>(dl.shape, dl.shape + dl.ndim); }
std::vector<int64_t> stridesOf(const DLTensor& dl) { return std::vector<int64_t>(dl.strides, dl.strides + dl.ndim); }

// Exports `t` and imports the result again.
Tensor roundTrip(const Tensor& t) { return fromDLPack(toDLPack(t)); }

// A tensor of dtype `dtype` holding 0, 1, 2, ... (0/1 alternating for bool).
Tensor counting(ScalarType dtype, IntArrayRef sizes, Device device = Device(DeviceType::CPU)) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return visitScalarType(dtype, [&]<typename T>() {
    std::vector<T> values;
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        values.push_back(i % 2 == 1);
      else
        values.push_back(static_cast<T>(static_cast<float>(i)));
    }
    return tensorFromVector<T>(values, sizes, device);
  });
}

// A DLManagedTensor as another framework makes one: its own buffer, shape
// and strides, with manager_ctx pointing at the owner, and a deleter that
// counts its calls in *deletions.
struct ForeignTensor {
  DLManagedTensor managed{};
  std::vector<float> values;
  std::vector<int64_t> shape, strides;
  int* deletions = nullptr;

  static void destroy(DLManagedTensor* self) {
    auto* owner = static_cast<ForeignTensor*>(self->manager_ctx);
    ++*owner->deletions;
    delete owner;
  }
};

// strides empty means strides = NULL (row-major).
ForeignTensor* makeForeign(std::vector<float> values, std::vector<int64_t> shape, std::vector<int64_t> strides,
                           int* deletions) {
  auto* f = new ForeignTensor;
  f->values = std::move(values);
  f->shape = std::move(shape);
  f->strides = std::move(strides);
  f->deletions = deletions;
  DLTensor& dl = f->managed.dl_tensor;
  dl.data = f->values.data();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int>(f->shape.size());
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = f->shape.data();
  dl.strides = f->strides.empty() ? nullptr : f->strides.data();
  dl.byte_offset = 0;
  f->managed.manager_ctx = f;
  f->managed.deleter = &ForeignTensor::destroy;
  return f;
}

// ------------------------------------------------------------- mappings

TEST(DLPackTest, DtypesMapBothWays) {
  struct Case {
    ScalarType dtype;
    uint8_t code, bits;
  };
  const Case cases[] = {
      {ScalarType::Bool, kDLBoolTypeCode, 8}, {ScalarType::UInt8, kDLUInt, 8},     {ScalarType::Int8, kDLInt, 8},
      {ScalarType::Int32, kDLInt, 32},        {ScalarType::Int64, kDLInt, 64},     {ScalarType::Float16, kDLFloat, 16},
      {ScalarType::BFloat16, kDLBfloat, 16},  {ScalarType::Float32, kDLFloat, 32}, {ScalarType::Float64, kDLFloat, 64},
      {ScalarType::Int16, kDLInt, 16},        {ScalarType::UInt16, kDLUInt, 16},   {ScalarType::UInt32, kDLUInt, 32},
      {ScalarType::UInt64, kDLUInt, 64},
  };
  static_assert(std::size(cases) == kNumScalarTypes);
  for (const Case& c : cases) {
    SCOPED_TRACE(scalarTypeName(c.dtype));
    DLDataType d = toDLDataType(c.dtype);
    EXPECT_EQ(d.code, c.code);
    EXPECT_EQ(d.bits, c.bits);
    EXPECT_EQ(d.lanes, 1);
    EXPECT_EQ(fromDLDataType(d), c.dtype);
  }
}

TEST(DLPackTest, CpuIsKDLCPU) {
  DLDevice d = toDLDevice(Device(DeviceType::CPU));
  EXPECT_EQ(d.device_type, kDLCPU);
  EXPECT_EQ(d.device_id, 0);
  EXPECT_EQ(fromDLDevice(DLDevice{kDLCPU, 0}), Device(DeviceType::CPU, 0));
}

// ------------------------------------------------------------ CPU export

TEST(DLPackTest, ExportDescribesTheTensorWithoutCopying) {
  Tensor t = counting(ScalarType::Float32, {2, 3});
  DLManagedTensor* m = toDLPack(t);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, t.data_ptr());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_THAT(shapeOf(dl), ElementsAre(2, 3));
  EXPECT_THAT(stridesOf(dl), ElementsAre(3, 1));
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  // Memory is shared: a write through the DLTensor shows in the tensor.
  static_cast<float*>(dl.data)[4] = 42.0f;
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{0, 1, 2, 3, 42, 5}));
  m->deleter(m);
}

TEST(DLPackTest, ExportKeepsTheStorageAliveUntilItsDeleterRuns) {
  Tensor t = counting(ScalarType::Int64, {300});  // above the inline size: its own allocation
  const Storage storage = t.storage();
  const uint32_t before = storage.useCount();
  DLManagedTensor* m = toDLPack(t);
  EXPECT_EQ(storage.useCount(), before + 1);
  t = Tensor();
  EXPECT_EQ(static_cast<const int64_t*>(m->dl_tensor.data)[299], 299) << "the export outlives the tensor";
  m->deleter(m);
  EXPECT_EQ(storage.useCount(), before - 1);
}

TEST(DLPackTest, EveryDtypeRoundTripsWithoutACopy) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto dtype = static_cast<ScalarType>(i);
    SCOPED_TRACE(scalarTypeName(dtype));
    Tensor t = counting(dtype, {2, 3});
    Tensor u = roundTrip(t);
    EXPECT_EQ(u.dtype(), dtype);
    EXPECT_EQ(u.device(), t.device());
    EXPECT_THAT(u.sizes(), ElementsAre(2, 3));
    EXPECT_THAT(u.strides(), ElementsAre(3, 1));
    EXPECT_EQ(u.data_ptr(), t.data_ptr());
    EXPECT_EQ(u.toVector<double>(), t.toVector<double>());
  }
}

TEST(DLPackTest, StridedViewsRoundTripAsViews) {
  Tensor base = counting(ScalarType::Float32, {4, 6});
  struct Case {
    const char* name;
    Tensor view;
  };
  const Case cases[] = {
      {"transpose", base.t()},
      {"slice with offset and step", base.slice(1, 1, 6, 2)},
      {"select", base.select(0, 2)},
      {"expand (stride 0)", base.select(1, 0).unsqueeze(1).expand({4, 3})},
      {"permute of a narrowed view", base.narrow(0, 1, 2).view({2, 2, 3}).permute({2, 0, 1})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    DLManagedTensor* m = toDLPack(c.view);
    EXPECT_EQ(m->dl_tensor.data, c.view.data_ptr()) << "the storage offset goes into data";
    EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
    EXPECT_THAT(shapeOf(m->dl_tensor), ElementsAreArray(c.view.sizes()));
    EXPECT_THAT(stridesOf(m->dl_tensor), ElementsAreArray(c.view.strides()));
    Tensor u = fromDLPack(m);
    EXPECT_THAT(u.sizes(), ElementsAreArray(c.view.sizes()));
    EXPECT_THAT(u.strides(), ElementsAreArray(c.view.strides()));
    EXPECT_EQ(u.data_ptr(), c.view.data_ptr());
    EXPECT_EQ(u.toVector<float>(), c.view.toVector<float>());
  }
}

TEST(DLPackTest, ZeroDimAndEmptyTensorsRoundTrip) {
  Tensor scalar = tensorFromVector<double>({2.5}, {});
  DLManagedTensor* m = toDLPack(scalar);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  Tensor s = fromDLPack(m);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(s.data_ptr(), scalar.data_ptr());

  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(sizes));
    Tensor empty = emptyTensor(sizes, ScalarType::Int32);
    Tensor e = roundTrip(empty);
    EXPECT_EQ(e.numel(), 0);
    EXPECT_THAT(e.sizes(), ElementsAreArray(sizes));
    EXPECT_EQ(e.dtype(), ScalarType::Int32);
  }
}

TEST(DLPackTest, ExportOfAnUndefinedTensorFails) {
  expectError([] { toDLPack(Tensor()); }, absl::StatusCode::kInvalidArgument, {"toDLPack: the tensor is undefined"});
}

// ---------------------------------------------------- import and ownership

TEST(DLPackTest, ImportedForeignTensorSharesMemoryAndDeletesItOnceAfterTheLastView) {
  int deletions = 0;
  ForeignTensor* f = makeForeign({1, 2, 3, 4, 5, 6}, {2, 3}, {3, 1}, &deletions);
  Tensor t = fromDLPack(&f->managed);
  EXPECT_EQ(t.data_ptr(), f->values.data());
  EXPECT_EQ(t.dtype(), ScalarType::Float32);
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  f->values[5] = -6;  // written by the producer, seen by Backplane
  EXPECT_EQ(t.select(1, 2).toVector<float>(), (std::vector<float>{3, -6}));

  Tensor column = t.select(1, 1);
  Tensor copy_of_handle = t;
  t = Tensor();
  copy_of_handle = Tensor();
  EXPECT_EQ(deletions, 0) << "a view is still alive";
  EXPECT_EQ(column.toVector<float>(), (std::vector<float>{2, 5}));
  column = Tensor();
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, ImportReadsNullStridesAsContiguousAndHonoursByteOffset) {
  int deletions = 0;
  ForeignTensor* f = makeForeign({0, 1, 2, 3, 4, 5, 6, 7}, {2, 3}, {}, &deletions);
  f->managed.dl_tensor.byte_offset = 2 * sizeof(float);
  {
    Tensor t = fromDLPack(&f->managed);
    EXPECT_THAT(t.strides(), ElementsAre(3, 1));
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.data_ptr(), f->values.data() + 2);
    EXPECT_EQ(t.toVector<float>(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  }
  EXPECT_EQ(deletions, 1);
}

TEST(DLPackTest, ForeignInt16AndUnsignedDataImportWithTheirValues) {
  // NumPy's and ONNX's int16, uint16, uint32 and uint64 arrays enter as
  // themselves, sharing memory; the bits stay the values.
  std::vector<int16_t> i16 = {-32768, -1, 0, 32767};
  std::vector<uint16_t> u16 = {0, 1, 40000, 65535};
  std::vector<uint32_t> u32 = {0, 7, 3000000000u, 4294967295u};
  std::vector<uint64_t> u64 = {0, 9, uint64_t{1} << 63, ~uint64_t{0}};
  int64_t shape[] = {4};
  // The tensors keep a pointer to their DLManagedTensor until they release
  // it (DLPack's contract): these outlive the tensors declared below.
  std::array<DLManagedTensor, 4> managed{};
  size_t next = 0;
  auto import = [&](void* data, DLDataType dtype) {
    DLManagedTensor& m = managed.at(next++);
    m.dl_tensor.data = data;
    m.dl_tensor.device = DLDevice{kDLCPU, 0};
    m.dl_tensor.ndim = 1;
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = nullptr;
    m.deleter = nullptr;  // the buffers outlive the tensors
    return fromDLPack(&m);
  };
  Tensor a = import(i16.data(), {kDLInt, 16, 1});
  EXPECT_EQ(a.dtype(), ScalarType::Int16);
  EXPECT_EQ(a.data_ptr(), i16.data());
  EXPECT_EQ(a.toVector<int16_t>(), i16);
  Tensor b = import(u16.data(), {kDLUInt, 16, 1});
  EXPECT_EQ(b.dtype(), ScalarType::UInt16);
  EXPECT_EQ(b.toVector<uint16_t>(), u16);
  Tensor c = import(u32.data(), {kDLUInt, 32, 1});
  EXPECT_EQ(c.dtype(), ScalarType::UInt32);
  EXPECT_EQ(c.toVector<uint32_t>(), u32);
  Tensor d = import(u64.data(), {kDLUInt, 64, 1});
  EXPECT_EQ(d.dtype(), ScalarType::UInt64);
  EXPECT_EQ(d.toVector<uint64_t>(), u64);
  // And back out: the same descriptor.
  DLManagedTensor* out = toDLPack(d);
  EXPECT_EQ(out->dl_tensor.dtype.code, kDLUInt);
  EXPECT_EQ(out->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(out->dl_tensor.data, u64.data());
  out->deleter(out);
}

TEST(DLPackTest, ImportAcceptsANullDeleterAndAnyStrideOnASizeOneDim) {
  std::vector<float> values = {1, 2, 3};
  int64_t shape[] = {1, 3};
  int64_t strides[] = {-7, 1};  // the -7 moves nothing: dim 0 has one element
  DLManagedTensor m{};
  m.dl_tensor = DLTensor{values.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
  Tensor t = fromDLPack(&m);  // no deleter: the producer keeps the memory alive itself
  EXPECT_EQ(t.toVector<float>(), values);
  EXPECT_THAT(t.strides(), ElementsAre(0, 1));
}

TEST(DLPackTest, DLPackBoolAndOldUInt8BoolImportAsTheyAre) {
  std::vector<uint8_t> bytes = {1, 0, 1};
  int64_t shape[] = {3};
  DLManagedTensor m{};
  m.dl_tensor = DLTensor{bytes.data(), {kDLCPU, 0}, 1, {kDLBoolTypeCode, 8, 1}, shape, nullptr, 0};
  Tensor b = fromDLPack(&m);
  EXPECT_EQ(b.dtype(), ScalarType::Bool);
  EXPECT_EQ(b.toVector<bool>(), (std::vector<bool>{true, false, true}));
  m.dl_tensor.dtype = DLDataType{kDLUInt, 8, 1};  // how producers without kDLBool send bool
  EXPECT_EQ(fromDLPack(&m).dtype(), ScalarType::UInt8);
}

// Each bad field is refused with a message naming it, and the caller keeps
// the DLManagedTensor: fromDLPack has not called its deleter.
TEST(DLPackTest, BadImportsNameTheFieldAndLeaveOwnershipWithTheCaller) {
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  expectError([] { fromDLPack(nullptr); }, kBad, {"fromDLPack: the DLManagedTensor is NULL"});

  struct Case {
    const char* name;
    std::function<void(ForeignTensor&)> corrupt;
    std::vector<std::string> parts;
  };
  const uintptr_t near_end = std::numeric_limits<uintptr_t>::max() - 15;  // aligned, 16 bytes before the end
  const Case cases[] = {
      {"int128",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.dtype = {kDLInt, 128, 1};
       },
       {"fromDLPack: dl_tensor.dtype {code 0 (kDLInt), bits 128, lanes 1} has no Backplane dtype; supported: ",
        "bool {code 6 (kDLBool), bits 8, lanes 1}", "float32 {code 2 (kDLFloat), bits 32, lanes 1}",
        "int16 {code 0 (kDLInt), bits 16, lanes 1}", "uint64 {code 1 (kDLUInt), bits 64, lanes 1}"}},
      {"complex64",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
       },
       {"dl_tensor.dtype {code 5 (kDLComplex), bits 64, lanes 1} has no Backplane dtype"}},
      {"unknown code",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.dtype = {99, 32, 1};
       },
       {"dl_tensor.dtype {code 99, bits 32, lanes 1} has no Backplane dtype"}},
      {"lanes",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.dtype = {kDLFloat, 32, 4};
       },
       {"dl_tensor.dtype {code 2 (kDLFloat), bits 32, lanes 4} has 4 lanes", "lanes must be 1"}},
      {"no plugin for the device",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.device = {kDLCUDA, 0};
       },
       {"fromDLPack: dl_tensor.device is kDLCUDA (2), which no loaded plugin provides",
        "load the plugin for that device, or copy the tensor to the CPU in the producer first"}},
      {"unknown device type",
       [](ForeignTensor& f) { setDeviceType(f.managed.dl_tensor.device, 77); },
       {"dl_tensor.device is DLPack device type 77, which no loaded plugin provides"}},
      {"device index",
       [](ForeignTensor& f) {
         f.managed.dl_tensor.device = {kDLCPU, 1};
       },
       {"dl_tensor.device kDLCPU (1) device_id 1 is out of range: device type 'cpu' has 1 device(s)"}},
      {"negative ndim",
       [](ForeignTensor& f) { f.managed.dl_tensor.ndim = -1; },
       {"fromDLPack: dl_tensor.ndim is -1; it must be in 0..64"}},
      {"huge ndim", [](ForeignTensor& f) { f.managed.dl_tensor.ndim = 65; }, {"dl_tensor.ndim is 65"}},
      {"NULL shape",
       [](ForeignTensor& f) { f.managed.dl_tensor.shape = nullptr; },
       {"fromDLPack: dl_tensor.shape is NULL but ndim is 2"}},
      {"negative size",
       [](ForeignTensor& f) { f.shape[1] = -3; },
       {"fromDLPack: dl_tensor.shape[1] is -3; sizes must be >= 0"}},
      {"negative stride",
       [](ForeignTensor& f) { f.strides[0] = -3; },
       {"fromDLPack: dl_tensor.strides[0] is -3 for a dim of size 2; Backplane tensors need strides >= 0",
        "numpy.ascontiguousarray"}},
      {"strides past int64",
       [](ForeignTensor& f) { f.strides[0] = std::numeric_limits<int64_t>::max() / 2; },
       {"fromDLPack: dl_tensor.shape [2, 3] and strides [4611686018427387903, 1] of float32 are corrupt"}},
      {"sizes past int64",
       [](ForeignTensor& f) {
         f.shape[0] = f.shape[1] = int64_t{1} << 40;
         f.strides[0] = f.strides[1] = 0;  // a span of one element: only the count overflows
       },
       {"are corrupt", "overflows int64"}},
      {"NULL data",
       [](ForeignTensor& f) { f.managed.dl_tensor.data = nullptr; },
       {"fromDLPack: dl_tensor.data is NULL but the tensor has elements (shape [2, 3])"}},
      {"misaligned",
       [](ForeignTensor& f) { f.managed.dl_tensor.byte_offset = 2; },
       {"fromDLPack: the first element (dl_tensor.data ",
        " + byte_offset 2) is not aligned to the 4-byte size of "
        "float32"}},
      {"wraps the address space",
       [&](ForeignTensor& f) { f.managed.dl_tensor.data = reinterpret_cast<void*>(near_end); },
       {"fromDLPack: dl_tensor.shape [2, 3] and strides [3, 1] from the first element at ", "wrap the address space"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    int deletions = 0;
    ForeignTensor* f = makeForeign({1, 2, 3, 4, 5, 6}, {2, 3}, {3, 1}, &deletions);
    c.corrupt(*f);
    try {
      fromDLPack(&f->managed);
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kBad) << e.message();
      for (const std::string& p : c.parts) EXPECT_THAT(e.message(), HasSubstr(p));
    }
    EXPECT_EQ(deletions, 0) << "fromDLPack deleted a tensor it refused";
    f->managed.deleter(&f->managed);  // still ours to delete
    EXPECT_EQ(deletions, 1);
  }
}

// --------------------------------------------------------- device tensors

TEST(DLPackTest, DeviceWithANativeDLPackTypeExportsAndImportsItsAddresses) {
  testing::TestDevice& dev = testing::TestDevice::install("dlpacktd", 2);
  dev.setDLPackDeviceType(kDLOpenCL);
  Tensor t = counting(ScalarType::Float32, {2, 3}, dev.device(1)).t();
  DLDevice d = toDLDevice(dev.device(1));
  EXPECT_EQ(d.device_type, kDLOpenCL);
  EXPECT_EQ(d.device_id, 1);

  DLManagedTensor* m = toDLPack(t);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLOpenCL);
  EXPECT_EQ(m->dl_tensor.device.device_id, 1);
  EXPECT_EQ(m->dl_tensor.data, t.data_ptr()) << "the device address itself, offset included";
  const size_t live = dev.liveAllocations();
  const uint64_t to_host = dev.bytesToHost(), from_host = dev.bytesFromHost(), d2d = dev.bytesDeviceToDevice();
  Tensor u = fromDLPack(m);
  EXPECT_EQ(dev.bytesToHost(), to_host);
  EXPECT_EQ(dev.bytesFromHost(), from_host);
  EXPECT_EQ(dev.bytesDeviceToDevice(), d2d) << "import copies nothing";
  EXPECT_EQ(u.device(), dev.device(1));
  EXPECT_EQ(u.data_ptr(), t.data_ptr());
  EXPECT_THAT(u.strides(), ElementsAre(1, 3));
  EXPECT_EQ(u.toVector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));

  t = Tensor();
  EXPECT_EQ(dev.liveAllocations(), live) << "the imported tensor keeps the device memory alive";
  u = Tensor();
  EXPECT_EQ(dev.liveAllocations(), live - 1);

  expectError(
      [] {
        fromDLDevice(DLDevice{kDLOpenCL, 2});
      },
      absl::StatusCode::kInvalidArgument,
      {"fromDLDevice: device kDLOpenCL (4) device_id 2 is out of range: device type 'dlpacktd' has 2 "
       "device(s)"});
}

TEST(DLPackTest, DeviceWithoutANativeDLPackTypeRefusesExport) {
  testing::TestDevice& dev = testing::TestDevice::install("testdev", 2);
  Tensor t = counting(ScalarType::Float32, {4}, dev.device(0));
  const std::string why =
      "the memory of testdev:0 is not addressable outside Backplane (device type 'testdev' declares no DLPack device "
      "type); copy the tensor to the CPU first (t.cpu())";
  expectError([&] { toDLPack(t); }, absl::StatusCode::kInvalidArgument, {"toDLPack: " + why});
  expectError([&] { toDLDevice(t.device()); }, absl::StatusCode::kInvalidArgument, {"toDLDevice: " + why});
}

// Through the plugin ABI: BP_DeviceTypeDesc.dlpack_device_type (ABI 1.2).
class DLPackPluginTest : public ::testing::Test {
 protected:
  static std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }
  void SetUp() override {
    absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("dlpack_test_plugin"));
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->devices.size(), 2u);
    dev_ = s->devices[0].type;
    old_dev_ = s->devices[1].type;
  }
  void TearDown() override {
    absl::Status u = plugins().unload("dlpack_test_plugin");
    EXPECT_TRUE(u.ok()) << u;
  }
  DeviceType dev_{}, old_dev_{};
};

TEST_F(DLPackPluginTest, APluginDeclaresItsDLPackDeviceType) {
  EXPECT_EQ(DeviceTypeRegistry::global().interfaceOrThrow(dev_).dlpackDeviceType(), kDLExtDev);
  Tensor t = counting(ScalarType::Int32, {3}, Device(dev_, 1));
  DLManagedTensor* m = toDLPack(t);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLExtDev);
  EXPECT_EQ(m->dl_tensor.device.device_id, 1);
  EXPECT_EQ(m->dl_tensor.data, t.data_ptr());
  Tensor u = fromDLPack(m);
  EXPECT_EQ(u.device(), Device(dev_, 1));
  EXPECT_EQ(u.data_ptr(), t.data_ptr());
  EXPECT_EQ(u.toVector<int32_t>(), (std::vector<int32_t>{0, 1, 2}));
  expectError(
      [] {
        fromDLDevice(DLDevice{kDLExtDev, 2});
      },
      absl::StatusCode::kInvalidArgument, {"device_id 2 is out of range: device type 'dlpkdev' has 2 device(s)"});
}

TEST_F(DLPackPluginTest, APluginBuiltBeforeABI12DeclaresNone) {
  // dlpkolddev's struct_size ends before dlpack_device_type: its bytes there must not be read.
  EXPECT_EQ(DeviceTypeRegistry::global().interfaceOrThrow(old_dev_).dlpackDeviceType(), 0);
  Tensor t = counting(ScalarType::Float32, {2}, Device(old_dev_, 0));
  expectError([&] { toDLPack(t); }, absl::StatusCode::kInvalidArgument,
              {"toDLPack: the memory of dlpkolddev:0 is not addressable outside Backplane"});
}

TEST(DLPackPluginLoadTest, ANegativeDLPackDeviceTypeFailsTheLoad) {
  absl::StatusOr<PluginStatus> s = plugins().load(strCat(BACKPLANE_TEST_PLUGIN_DIR, "/dlpack_test_plugin_negative.so"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("BP_DeviceTypeDesc 'dlpkdev' has dlpack_device_type -1, which is no DLDeviceType"));
  EXPECT_FALSE(DeviceTypeRegistry::global().find("dlpkdev").has_value());
}

}  // namespace
}  // namespace backplane
