// Fuzz target fuzz_dlpack_import: backplane::fromDLPack (backplane/runtime/dlpack.h)
// with a DLManagedTensor whose every field comes from the input: dtype
// (code, bits, lanes), device (type, id), ndim, shape, strides (or NULL),
// byte_offset, the data pointer (into a real buffer, NULL, or a wild
// address) and the deleter (or NULL). The buffer is exactly as large as the
// elements the fields describe (or one byte short), so ASan catches any read
// outside them. What it checks, against a model written here from Note
// [DLPack mapping]:
// - Fields the model accepts import; fields it refuses throw
//   backplane::Error naming fromDLPack (never a crash or another
//   exception).
// - The deleter runs exactly once: never while a tensor or view of the
//   import lives, once when the last dies, and never on error (the caller
//   then still owns the DLManagedTensor and deletes it).
// - A successful import has the model's dtype, sizes, strides, first
//   element and storage size; each of its elements, read through the
//   tensor (readElementsToHost: the host's strided read, or the device
//   copy of its span), equals the element at the address the fields give.
// - toDLPack of the import gives back the same fields.
// The device kDLExtDev is a device type of this target ("fuzzdlpk", two
// devices, memory the host may not dereference), so the import of device
// memory and the device copy path take part too.
#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/dlpack.h"
#include "field_reader.h"

namespace {

using namespace backplane;
using fuzz::FieldReader;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_dlpack_import: %s\n", what.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, what) \
  do {                         \
    if (!(cond)) fail(what);   \
  } while (0)

// A device type of this target whose memory is host memory that the host
// may not dereference (as a GPU's): kDLExtDev, two devices.
class ExtDevice final : public DeviceInterface, public Allocator {
 public:
  int deviceCount() const override { return 2; }
  int32_t dlpackDeviceType() const override { return kDLExtDev; }
  Allocator& allocator() override { return *this; }
  DataPtr allocate(size_t nbytes, Device device) override {
    void* p = std::malloc(nbytes == 0 ? 1 : nbytes);
    if (p == nullptr) BP_THROW(kResourceExhausted, "fuzzdlpk: out of memory");
    return DataPtr(p, p, &release, device);
  }
  void copyHostToDevice(void* dst, Device, const void* src, size_t n) override { copy(dst, src, n); }
  void copyDeviceToHost(void* dst, const void* src, Device, size_t n) override { copy(dst, src, n); }
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override { copy(dst, src, n); }
  void memset(void* dst, Device, uint8_t value, size_t n) override {
    if (n != 0) std::memset(dst, value, n);
  }
  void synchronize(Device) override {}

 private:
  static void release(void* ctx, void*) { std::free(ctx); }
  static void copy(void* dst, const void* src, size_t n) {
    if (n != 0) std::memcpy(dst, src, n);
  }
};

DeviceType extDeviceType() {
  static const DeviceType type = [] {
    static ExtDevice device;
    absl::StatusOr<DeviceType> t = DeviceTypeRegistry::global().registerType("fuzzdlpk");
    FUZZ_CHECK(t.ok() && DeviceTypeRegistry::global().setInterface(*t, &device).ok(),
               "cannot register the device type fuzzdlpk");
    return *t;
  }();
  return type;
}

// The producer's side: the DLManagedTensor and how often its deleter ran.
struct Producer {
  DLManagedTensor managed{};
  int deleted = 0;
};
void countDelete(DLManagedTensor* m) { ++static_cast<Producer*>(m->manager_ctx)->deleted; }

// Note [DLPack mapping]: the element types import accepts.
std::optional<ScalarType> modelDtype(DLDataType d) {
  if (d.lanes != 1) return std::nullopt;
  struct Entry {
    uint8_t code, bits;
    ScalarType type;
  };
  static constexpr Entry kTable[] = {
      {kDLInt, 8, ScalarType::Int8},         {kDLInt, 16, ScalarType::Int16},     {kDLInt, 32, ScalarType::Int32},
      {kDLInt, 64, ScalarType::Int64},       {kDLUInt, 8, ScalarType::UInt8},     {kDLUInt, 16, ScalarType::UInt16},
      {kDLUInt, 32, ScalarType::UInt32},     {kDLUInt, 64, ScalarType::UInt64},   {kDLFloat, 16, ScalarType::Float16},
      {kDLFloat, 32, ScalarType::Float32},   {kDLFloat, 64, ScalarType::Float64}, {kDLBfloat, 16, ScalarType::BFloat16},
      {kDLBoolTypeCode, 8, ScalarType::Bool}};
  for (const Entry& e : kTable)
    if (e.code == d.code && e.bits == d.bits) return e.type;
  return std::nullopt;
}

using i128 = __int128;
constexpr i128 kInt64Max = INT64_MAX;

// A field value: mostly small (what real producers send), sometimes raw.
int64_t sizeField(FieldReader& in) {
  const uint8_t m = in.take<uint8_t>();
  return m < 224 ? m % 6 : in.take<int64_t>();
}
int64_t strideField(FieldReader& in) {
  const uint8_t m = in.take<uint8_t>();
  return m < 224 ? static_cast<int64_t>(m % 12) - 2 : in.take<int64_t>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const DeviceType ext = extDeviceType();
  FieldReader in(data, size);

  // ---------------------------------------------------------------- fields
  const uint8_t flags = in.take<uint8_t>();
  const bool has_strides = flags & 1, no_deleter = flags & 2, shape_null = flags & 4, short_buffer = flags & 8;
  const int data_mode = (flags >> 4) & 3;  // 0, 3: the buffer; 1: NULL; 2: a wild address
  const bool raw_lanes = flags & 64, raw_device_id = flags & 128;

  DLDataType dtype;
  const uint8_t t = in.take<uint8_t>();
  static constexpr uint8_t kBits[] = {8, 16, 32, 64, 8, 16, 1, 128};
  dtype.code = t & 7;
  dtype.bits = (t >> 3) & 1 ? in.take<uint8_t>() : kBits[(t >> 4) & 7];
  dtype.lanes = raw_lanes ? in.take<uint16_t>() : 1;

  DLDevice device;
  const uint8_t dv = in.take<uint8_t>();
  int32_t device_type = 0;
  switch (dv & 3) {
    case 0: device_type = kDLCPU; break;
    case 1: device_type = kDLExtDev; break;
    case 2: device_type = kDLCUDA; break;
    default: device_type = in.take<int32_t>(); break;
  }
  std::memcpy(&device.device_type, &device_type, sizeof device_type);  // may be no enumerator
  device.device_id = raw_device_id ? in.take<int32_t>() : static_cast<int32_t>((dv >> 2) & 3) - 1;

  const uint8_t nd = in.take<uint8_t>();
  const int32_t ndim = nd < 240 ? nd % 9 : in.take<int32_t>();
  // Exactly ndim entries (ASan catches a read past them); a few when ndim
  // is out of range.
  const size_t entries = ndim >= 0 && ndim <= kMaxDLPackDims ? static_cast<size_t>(ndim) : 4;
  std::vector<int64_t> shape(entries), strides(entries);
  for (size_t i = 0; i < entries; ++i) shape[i] = sizeField(in);
  for (size_t i = 0; i < entries; ++i) strides[i] = strideField(in);
  const uint8_t bo = in.take<uint8_t>();
  const uint64_t byte_offset = bo < 224 ? bo % 40 : in.take<uint64_t>();
  const size_t data_shift = in.take<uint8_t>() % 16;
  const uintptr_t wild = in.take<uintptr_t>();

  // ------------------------------------------------------------- the model
  const std::optional<ScalarType> want_dtype = modelDtype(dtype);
  const int64_t itemsize = want_dtype ? static_cast<int64_t>(elementSize(*want_dtype)) : 1;
  bool refused = !want_dtype;
  std::optional<Device> want_device;
  if (device_type == kDLCPU && device.device_id == 0) want_device = Device(DeviceType::CPU, 0);
  if (device_type == kDLExtDev && device.device_id >= 0 && device.device_id < 2)
    want_device = Device(ext, static_cast<DeviceIndex>(device.device_id));
  refused = refused || !want_device || ndim < 0 || ndim > kMaxDLPackDims || (ndim > 0 && shape_null);
  std::vector<int64_t> want_strides;
  i128 numel = 1, span = 0;  // elements; span 0 when numel is 0
  if (!refused) {
    // Products saturate just past int64 (no i128 overflow).
    auto times = [](i128 a, i128 b) { return std::min<i128>(a * b, kInt64Max + 1); };
    bool any_zero = false;
    i128 product_nonzero = 1, product_max1 = 1;
    for (int i = 0; i < ndim; ++i) {
      refused = refused || shape[i] < 0;
      any_zero = any_zero || shape[i] == 0;
      if (shape[i] > 0) product_nonzero = times(product_nonzero, shape[i]);
      product_max1 = times(product_max1, shape[i] > 1 ? shape[i] : 1);
    }
    // Note [Empty shapes do not overflow]: a size 0 makes numel 0 whatever
    // the other sizes; contiguous strides (strides NULL) must fit int64.
    numel = any_zero ? 0 : product_nonzero;
    refused = refused || numel > kInt64Max || (!has_strides && product_max1 > kInt64Max);
    if (!refused) {
      want_strides.resize(static_cast<size_t>(ndim));
      if (has_strides) {
        for (int i = 0; i < ndim; ++i) {
          want_strides[i] = shape[i] <= 1 && strides[i] < 0 ? 0 : strides[i];
          refused = refused || want_strides[i] < 0;
        }
      } else {
        int64_t s = 1;
        for (int i = ndim; i-- > 0;) {
          want_strides[i] = s;
          s = static_cast<int64_t>(times(s, shape[i] > 1 ? shape[i] : 1));  // fits: product_max1 does
        }
      }
    }
    if (!refused && numel > 0) {
      span = 1;
      for (int i = 0; i < ndim; ++i)
        span = std::min<i128>(span + static_cast<i128>(shape[i] - 1) * want_strides[i], kInt64Max + 1);
      refused = span * itemsize > kInt64Max;
    }
  }

  // --------------------------------------------------------- the producer
  const i128 span_bytes = span * itemsize;
  // The buffer holds exactly the bytes from data to the end of the last
  // element (one fewer when short_buffer: then the producer lies, and the
  // target must not read the elements itself).
  const i128 need = static_cast<i128>(data_shift) + byte_offset + span_bytes;
  const bool fits = !refused && need <= (1 << 20);
  const size_t buffer_size = fits ? static_cast<size_t>(need) - (short_buffer && need > 0 ? 1 : 0) : 64;
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[buffer_size == 0 ? 1 : buffer_size]);
  // bool elements must be 0 or 1 (DLPack's and C++'s bool).
  const bool is_bool = want_dtype == ScalarType::Bool;
  for (size_t i = 0; i < buffer_size; ++i) buffer[i] = static_cast<uint8_t>((i * 131 + 7) & (is_bool ? 1 : 0xFF));
  void* data_ptr = buffer.get() + (data_shift < buffer_size ? data_shift : 0);
  if (data_mode == 1) data_ptr = nullptr;
  if (data_mode == 2) data_ptr = reinterpret_cast<void*>(wild);

  const uintptr_t data_addr = reinterpret_cast<uintptr_t>(data_ptr);
  uintptr_t first = 0;
  const bool first_wraps = __builtin_add_overflow(data_addr, byte_offset, &first);
  refused = refused || first_wraps;
  if (!refused && span > 0) {
    refused = data_ptr == nullptr || first % static_cast<uintptr_t>(itemsize) != 0 ||
              static_cast<i128>(first) + span_bytes - 1 > static_cast<i128>(UINTPTR_MAX);
  }
  // The elements are inside the buffer: only then may this target read them.
  const bool readable = fits && !short_buffer && data_mode != 1 && data_mode != 2 && span > 0;

  Producer producer;
  DLManagedTensor& m = producer.managed;
  m.manager_ctx = &producer;
  m.deleter = no_deleter ? nullptr : &countDelete;
  m.dl_tensor.data = data_ptr;
  m.dl_tensor.device = device;
  m.dl_tensor.ndim = ndim;
  m.dl_tensor.dtype = dtype;
  m.dl_tensor.shape = shape_null ? nullptr : shape.data();
  m.dl_tensor.strides = has_strides ? strides.data() : nullptr;
  m.dl_tensor.byte_offset = byte_offset;

  // ------------------------------------------------------------ the import
  std::optional<Tensor> imported;
  try {
    imported = fromDLPack(&m);
  } catch (const Error& e) {
    FUZZ_CHECK(e.message().rfind("fromDLPack: ", 0) == 0, "an import error does not start with 'fromDLPack: '");
    FUZZ_CHECK(refused, "fromDLPack refused fields that Note [DLPack mapping] accepts: " + e.message());
    FUZZ_CHECK(producer.deleted == 0, "the deleter ran although the import failed (the caller still owns m)");
    if (m.deleter) m.deleter(&m);
    FUZZ_CHECK(producer.deleted == (no_deleter ? 0 : 1), "the deleter count is wrong after the caller's delete");
    return 0;
  }
  FUZZ_CHECK(!refused, "fromDLPack accepted fields that Note [DLPack mapping] refuses");
  FUZZ_CHECK(producer.deleted == 0, "the deleter ran while the imported tensor lives");
  {
    std::optional<Tensor> view;
    {
      const Tensor& t = *imported;
      {
        FUZZ_CHECK(t.dtype() == *want_dtype, "the imported dtype is not the model's");
        FUZZ_CHECK(t.device() == *want_device, "the imported device is not the model's");
        FUZZ_CHECK(t.dim() == ndim, "the imported ndim is wrong");
        for (int i = 0; i < ndim; ++i) {
          FUZZ_CHECK(t.sizes()[i] == shape[i], "an imported size is wrong");
          FUZZ_CHECK(t.sizes()[i] == 0 || t.strides()[i] == want_strides[i], "an imported stride is wrong");
        }
        FUZZ_CHECK(static_cast<i128>(t.storage().nbytes()) == span_bytes, "the imported storage size is not the span");
        FUZZ_CHECK(span == 0 || reinterpret_cast<uintptr_t>(t.data_ptr()) == first,
                   "the imported first element is not data + byte_offset");
      }
      if (readable && t.numel() <= 65536) {
        // Each element as the fields place it, row-major...
        const size_t n = static_cast<size_t>(t.numel()), item = static_cast<size_t>(itemsize);
        std::vector<uint8_t> expected(n * item), got(n * item);
        std::vector<int64_t> index(static_cast<size_t>(ndim), 0);
        for (size_t e = 0; e < n; ++e) {
          i128 offset = 0;
          for (int i = 0; i < ndim; ++i) offset += static_cast<i128>(index[i]) * want_strides[i];
          const uint8_t* at = reinterpret_cast<const uint8_t*>(first) + static_cast<size_t>(offset) * item;
          FUZZ_CHECK(at >= buffer.get() && at + item <= buffer.get() + buffer_size,
                     "the model reads outside the buffer");
          std::memcpy(&expected[e * item], at, item);
          for (int i = ndim; i-- > 0;) {
            if (++index[i] < shape[i]) break;
            index[i] = 0;
          }
        }
        // ... equals each element as the tensor reads it (toVector of the
        // tensor's own element type copies the bytes).
        visitScalarType(t.dtype(), [&]<typename S>() {
          if constexpr (std::is_same_v<S, bool>) {
            const std::vector<bool> values = t.toVector<bool>();
            for (size_t e = 0; e < n; ++e) got[e] = values[e] ? 1 : 0;
          } else {
            const std::vector<S> values = t.toVector<S>();
            std::memcpy(got.data(), values.data(), n * item);
          }
        });
        FUZZ_CHECK(expected == got, "the imported tensor's elements differ from the producer's");
      }
      // Export gives back the same elements.
      DLManagedTensor* back = toDLPack(t);
      FUZZ_CHECK(back->dl_tensor.ndim == ndim && back->dl_tensor.byte_offset == 0 &&
                     back->dl_tensor.data == t.data_ptr() && back->dl_tensor.dtype.code == dtype.code &&
                     back->dl_tensor.dtype.bits == dtype.bits,
                 "toDLPack of an import differs from it");
      for (int i = 0; i < ndim; ++i)
        FUZZ_CHECK(back->dl_tensor.shape[i] == shape[i] && back->dl_tensor.strides[i] == t.strides()[i],
                   "toDLPack of an import has other sizes or strides");
      view = t.dim() > 0 && t.size(0) > 0 ? Tensor(t.narrow(0, 0, 1)) : t;
      imported.reset();
      FUZZ_CHECK(producer.deleted == 0, "the deleter ran while a view of the import lives");
      back->deleter(back);  // the export held the storage too
    }
    FUZZ_CHECK(producer.deleted == 0, "the deleter ran while a view of the import lives");
  }
  FUZZ_CHECK(producer.deleted == (no_deleter ? 0 : 1), "the deleter did not run exactly once after the last view died");
  return 0;
}
