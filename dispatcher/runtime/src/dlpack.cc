#include "backplane/runtime/dlpack.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "backplane/core/checked_math.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/intrusive_ptr.h"
#include "backplane/core/storage.h"

namespace backplane {
namespace {

// ------------------------------------------------------------ descriptions

// "kDLCUDA (2)"; the names are DLPack 0.6's, later numbers print bare.
std::string describeDLDeviceType(int32_t type) {
  static constexpr std::pair<int32_t, const char*> kNames[] = {
      {kDLCPU, "kDLCPU"},
      {kDLCUDA, "kDLCUDA"},
      {kDLCUDAHost, "kDLCUDAHost"},
      {kDLOpenCL, "kDLOpenCL"},
      {kDLVulkan, "kDLVulkan"},
      {kDLMetal, "kDLMetal"},
      {kDLVPI, "kDLVPI"},
      {kDLROCM, "kDLROCM"},
      {kDLROCMHost, "kDLROCMHost"},
      {kDLExtDev, "kDLExtDev"},
      {kDLCUDAManaged, "kDLCUDAManaged"},
  };
  for (const auto& [value, name] : kNames) {
    if (value == type) return strCat(name, " (", type, ")");
  }
  return strCat("DLPack device type ", type);
}

// "{code 0 (kDLInt), bits 16, lanes 1}"
std::string describeDLDataType(DLDataType d) {
  static constexpr const char* kCodes[] = {"kDLInt",    "kDLUInt",    "kDLFloat", "kDLOpaqueHandle",
                                           "kDLBfloat", "kDLComplex", "kDLBool"};
  const std::string code = d.code < std::size(kCodes) ? strCat(" (", kCodes[d.code], ")") : "";
  return strCat("{code ", int{d.code}, code, ", bits ", int{d.bits}, ", lanes ", d.lanes, "}");
}

// ---------------------------------------------------------------- mappings
// The internal forms take `who`, the start of each error message, so that
// fromDLPack's errors name the field they come from.

ScalarType scalarTypeOf(DLDataType d, const char* who) {
  BP_CHECK(d.lanes == 1, who, " ", describeDLDataType(d), " has ", d.lanes,
           " lanes; Backplane has no vector element types (lanes must be 1)");
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto s = static_cast<ScalarType>(i);
    const DLDataType candidate = toDLDataType(s);
    if (candidate.code == d.code && candidate.bits == d.bits) return s;
  }
  std::string supported;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto s = static_cast<ScalarType>(i);
    supported += strCat(i == 0 ? "" : ", ", scalarTypeName(s), " ", describeDLDataType(toDLDataType(s)));
  }
  BP_THROW(kInvalidArgument, who, " ", describeDLDataType(d), " has no Backplane dtype; supported: ", supported);
}

static_assert(sizeof(DLDeviceType) == sizeof(int32_t), "DLDevice::device_type is a 32-bit field in DLPack");

DLDevice dlDeviceOf(Device device, const char* who) {
  const Device d = device.resolved();
  if (d.isCpu()) return DLDevice{kDLCPU, 0};
  const int32_t type = DeviceTypeRegistry::global().interfaceOrThrow(d.type).dlpackDeviceType();
  BP_CHECK(type != 0, who, " the memory of ", d.str(), " is not addressable outside Backplane (device type '",
           deviceTypeName(d.type), "' declares no DLPack device type); copy the tensor to the CPU first (t.cpu())");
  // Written bytewise: a plugin may declare a type newer than this header
  // lists, and converting such a value to the enum is undefined behaviour.
  DLDevice out{kDLCPU, d.index};
  std::memcpy(&out.device_type, &type, sizeof type);
  return out;
}

// See Note [DLPack mapping] for which device type wins.
Device deviceOf(DLDevice dl, const char* who) {
  // A producer may send a device type this header does not know; reading it
  // as the enum would be undefined behaviour, so its bytes are read as int.
  int32_t wanted;
  std::memcpy(&wanted, &dl.device_type, sizeof wanted);
  const DeviceTypeRegistry& registry = DeviceTypeRegistry::global();
  DeviceInterface* iface = nullptr;
  DeviceType type = DeviceType::CPU;
  if (wanted == kDLCPU) {
    iface = &registry.interfaceOrThrow(DeviceType::CPU);
  } else {
    for (int i = 1; i < kMaxDeviceTypes && iface == nullptr; ++i) {
      DeviceInterface* candidate = registry.interface(static_cast<DeviceType>(i));
      if (candidate != nullptr && candidate->dlpackDeviceType() == wanted) {
        iface = candidate;
        type = static_cast<DeviceType>(i);
      }
    }
  }
  BP_CHECK(iface != nullptr, who, " is ", describeDLDeviceType(wanted),
           ", which no loaded plugin provides (none declares it as its DLPack device type); load the plugin for that "
           "device, or copy the tensor to the CPU in the producer first");
  const int count = iface->deviceCount();
  BP_CHECK(dl.device_id >= 0 && dl.device_id < count, who, " ", describeDLDeviceType(wanted), " device_id ",
           dl.device_id, " is out of range: device type '", deviceTypeName(type), "' has ", count, " device(s)");
  return Device(type, static_cast<DeviceIndex>(dl.device_id));
}

// ------------------------------------------------------------------ export

// What an exported DLManagedTensor's manager_ctx points to: the managed
// tensor itself, the storage it keeps alive, and the shape and strides its
// DLTensor points into. It holds the Storage, not the Tensor, because an
// empty tensor may be given new storage in place (TensorImpl::resizeEmpty).
struct ExportedTensor {
  DLManagedTensor managed;
  Storage storage;
  DimVector shape;
  DimVector strides;
};

void deleteExported(DLManagedTensor* self) { delete static_cast<ExportedTensor*>(self->manager_ctx); }

// ------------------------------------------------------------------ import

// Note [Imported storage owns the DLManagedTensor]
// The storage of an imported tensor is a DataPtr whose context is an
// ImportedTensor; its deleter runs m->deleter once the last view dies. The
// DataPtr exists before the tensor does, and destroying it is the only way
// to free the context, so `owns` stays false until the tensor is complete:
// if building it throws, the DataPtr's deleter frees the context and leaves
// m to the caller, as fromDLPack promises.
struct ImportedTensor {
  DLManagedTensor* managed;
  bool owns = false;
};

void releaseImported(void* ctx, void* /*ptr*/) {
  std::unique_ptr<ImportedTensor> imported(static_cast<ImportedTensor*>(ctx));
  DLManagedTensor* m = imported->managed;
  if (imported->owns && m->deleter != nullptr) m->deleter(m);
}

// Row-major strides for `sizes` (a size of 0 counts as 1, as in PyTorch).
DimVector contiguousStrides(const DimVector& sizes) {
  DimVector strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride = checkedMul(stride, std::max<int64_t>(sizes[i], 1), "the contiguous strides");
  }
  return strides;
}

}  // namespace

DLDataType toDLDataType(ScalarType dtype) {
  const auto bits = static_cast<uint8_t>(elementSize(dtype) * 8);
  switch (dtype) {
    case ScalarType::Bool: return DLDataType{kDLBoolTypeCode, bits, 1};
    case ScalarType::UInt8:
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64: return DLDataType{kDLUInt, bits, 1};
    case ScalarType::Int8:
    case ScalarType::Int16:
    case ScalarType::Int32:
    case ScalarType::Int64: return DLDataType{kDLInt, bits, 1};
    case ScalarType::Float16:
    case ScalarType::Float32:
    case ScalarType::Float64: return DLDataType{kDLFloat, bits, 1};
    case ScalarType::BFloat16: return DLDataType{kDLBfloat, bits, 1};
  }
  detail::invalidScalarType("toDLDataType", static_cast<int>(dtype));
}

ScalarType fromDLDataType(DLDataType dtype) { return scalarTypeOf(dtype, "fromDLDataType:"); }

DLDevice toDLDevice(Device device) { return dlDeviceOf(device, "toDLDevice:"); }

Device fromDLDevice(DLDevice device) { return deviceOf(device, "fromDLDevice: device"); }

DLManagedTensor* toDLPack(const Tensor& t) {
  BP_CHECK(t.defined(), "toDLPack: the tensor is undefined");
  const DLDevice device = dlDeviceOf(t.device(), "toDLPack:");
  auto exported = std::make_unique<ExportedTensor>();
  exported->storage = t.storage();
  exported->shape.assign(t.sizes().begin(), t.sizes().end());
  exported->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = t.data_ptr();  // the storage offset goes here, byte_offset stays 0: Note [DLPack mapping]
  dl.device = device;
  dl.ndim = static_cast<int>(t.dim());
  dl.dtype = toDLDataType(t.dtype());
  dl.shape = exported->shape.data();
  dl.strides = exported->strides.data();
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = &deleteExported;
  return &exported.release()->managed;
}

Tensor fromDLPack(DLManagedTensor* m) {
  BP_CHECK(m != nullptr, "fromDLPack: the DLManagedTensor is NULL");
  const DLTensor& dl = m->dl_tensor;
  const ScalarType dtype = scalarTypeOf(dl.dtype, "fromDLPack: dl_tensor.dtype");
  const auto itemsize = static_cast<int64_t>(elementSize(dtype));
  const Device device = deviceOf(dl.device, "fromDLPack: dl_tensor.device");
  BP_CHECK(dl.ndim >= 0 && dl.ndim <= kMaxDLPackDims, "fromDLPack: dl_tensor.ndim is ", dl.ndim, "; it must be in 0..",
           kMaxDLPackDims);
  BP_CHECK(dl.ndim == 0 || dl.shape != nullptr, "fromDLPack: dl_tensor.shape is NULL but ndim is ", dl.ndim);

  DimVector sizes(dl.shape, dl.shape + dl.ndim);
  for (int i = 0; i < dl.ndim; ++i) {
    BP_CHECK(sizes[i] >= 0, "fromDLPack: dl_tensor.shape[", i, "] is ", sizes[i], "; sizes must be >= 0");
  }
  DimVector strides;
  int64_t span_bytes = 0;
  try {
    if (dl.strides == nullptr) {  // DLPack: compact and row-major
      strides = contiguousStrides(sizes);
    } else {
      strides.assign(dl.strides, dl.strides + dl.ndim);
      for (int i = 0; i < dl.ndim; ++i) {
        if (sizes[i] <= 1 && strides[i] < 0) strides[i] = 0;  // moves nothing: Note [DLPack mapping]
        BP_CHECK(strides[i] >= 0, "fromDLPack: dl_tensor.strides[", i, "] is ", strides[i], " for a dim of size ",
                 sizes[i],
                 "; Backplane tensors need strides >= 0, so make the array contiguous in the producer "
                 "first (numpy.ascontiguousarray, torch.Tensor.contiguous)");
      }
    }
    checkedNumel(sizes);
    span_bytes = checkedStorageBytes(sizes, strides, 0, itemsize);
  } catch (const Error& e) {
    if (e.code() != absl::StatusCode::kOutOfRange) throw;
    BP_THROW(kInvalidArgument, "fromDLPack: dl_tensor.shape ", IntArrayRef(sizes), " and strides ",
             IntArrayRef(strides), " of ", scalarTypeName(dtype), " are corrupt: ", e.message());
  }

  // The first element; device addresses only take part in integer arithmetic.
  uintptr_t first = 0;
  BP_CHECK(!__builtin_add_overflow(reinterpret_cast<uintptr_t>(dl.data), dl.byte_offset, &first),
           "fromDLPack: dl_tensor.data ", dl.data, " + byte_offset ", dl.byte_offset, " wraps the address space");
  if (span_bytes > 0) {
    BP_CHECK(dl.data != nullptr, "fromDLPack: dl_tensor.data is NULL but the tensor has elements (shape ",
             IntArrayRef(sizes), ")");
    BP_CHECK(first % static_cast<uintptr_t>(itemsize) == 0, "fromDLPack: the first element (dl_tensor.data ", dl.data,
             " + byte_offset ", dl.byte_offset, ") is not aligned to the ", itemsize, "-byte size of ",
             scalarTypeName(dtype), "; Backplane needs elements aligned to their size");
    BP_CHECK(first <= std::numeric_limits<uintptr_t>::max() - static_cast<uintptr_t>(span_bytes - 1),
             "fromDLPack: dl_tensor.shape ", IntArrayRef(sizes), " and strides ", IntArrayRef(strides),
             " from the first element at ", reinterpret_cast<void*>(first), " wrap the address space");
  }

  // Note [Imported storage owns the DLManagedTensor]: nothing between `new`
  // and the DataPtr's construction can throw.
  auto* imported = new ImportedTensor{m};
  Storage storage(IntrusivePtr<StorageImpl>::make(
      DataPtr(reinterpret_cast<void*>(first), imported, &releaseImported, device), static_cast<size_t>(span_bytes)));
  Tensor t(IntrusivePtr<TensorImpl>::make(std::move(storage), 0, sizes, strides, dtype));
  imported->owns = true;
  return t;
}

}  // namespace backplane
