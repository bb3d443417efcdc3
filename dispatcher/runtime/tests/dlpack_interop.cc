// dlpack_interop: a test-only shared library through which
// dlpack_interop_test.py (ctypes) drives backplane/runtime/dlpack.h from Python.
// Tensors cross as opaque `Tensor*` handles the caller frees with
// dlpi_free; functions that can fail return NULL (or -1) and leave the
// message for dlpi_last_error. Row-major element i of a handle is the
// element at multi-index unravel(i, sizes), wherever its strides put it.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "backplane/runtime/dlpack.h"

namespace {

thread_local std::string g_last_error;

backplane::Tensor& tensorOf(void* handle) { return *static_cast<backplane::Tensor*>(handle); }

// The host address of row-major element `index` of a CPU tensor.
char* elementAddress(const backplane::Tensor& t, int64_t index) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += index % t.size(d) * t.stride(d);
    index /= t.size(d);
  }
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.itemsize());
}

template <typename T>
constexpr bool kIs16BitFloat = std::is_same_v<T, backplane::Half> || std::is_same_v<T, backplane::BFloat16>;

template <typename T>
double toDouble(T value) {
  if constexpr (kIs16BitFloat<T>)
    return static_cast<float>(value);
  else
    return static_cast<double>(value);
}
template <typename T>
T fromDouble(double value) {
  if constexpr (kIs16BitFloat<T>)
    return T(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

// Runs `fn`, turning an Error into `failed` and g_last_error.
template <typename Fn, typename R>
R guarded(Fn&& fn, R failed) {
  try {
    return fn();
  } catch (const backplane::Error& e) {
    g_last_error = e.message();
    return failed;
  }
}

}  // namespace

extern "C" {

// The message of the last failed call on this thread.
const char* dlpi_last_error() { return g_last_error.c_str(); }

// A CPU tensor of `dtype` ("float32", "int64", ...) and `sizes` holding 0, 1, 2, ... in row-major order.
void* dlpi_arange(const char* dtype, const int64_t* sizes, int ndim) {
  return guarded(
      [&]() -> void* {
        const backplane::ScalarType type = backplane::valueOrThrow(backplane::parseScalarType(dtype));
        backplane::Tensor t = backplane::emptyTensor(backplane::IntArrayRef(sizes, static_cast<size_t>(ndim)), type);
        for (int64_t i = 0; i < t.numel(); ++i) {
          backplane::visitScalarType(type, [&]<typename T>() {
            const T value = fromDouble<T>(static_cast<double>(i));
            std::memcpy(elementAddress(t, i), &value, sizeof(T));
          });
        }
        return new backplane::Tensor(std::move(t));
      },
      static_cast<void*>(nullptr));
}

// t transposed (dims 0 and 1) / sliced along `dim` as t[start:end:step]: views, no copy.
void* dlpi_transpose(void* t) {
  return guarded([&] { return static_cast<void*>(new backplane::Tensor(tensorOf(t).transpose(0, 1))); },
                 static_cast<void*>(nullptr));
}
void* dlpi_slice(void* t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return guarded([&] { return static_cast<void*>(new backplane::Tensor(tensorOf(t).slice(dim, start, end, step))); },
                 static_cast<void*>(nullptr));
}

void dlpi_free(void* t) { delete static_cast<backplane::Tensor*>(t); }

DLManagedTensor* dlpi_to_dlpack(void* t) {
  return guarded([&] { return backplane::toDLPack(tensorOf(t)); }, static_cast<DLManagedTensor*>(nullptr));
}

// Writes the DLDevice of t into type and id (for __dlpack_device__); -1 on error.
int dlpi_dlpack_device(void* t, int32_t* type, int32_t* id) {
  return guarded(
      [&] {
        const DLDevice d = backplane::toDLDevice(tensorOf(t).device());
        *type = d.device_type;
        *id = d.device_id;
        return 0;
      },
      -1);
}

// Takes `m` (on success only, as fromDLPack does).
void* dlpi_from_dlpack(DLManagedTensor* m) {
  return guarded([&] { return static_cast<void*>(new backplane::Tensor(backplane::fromDLPack(m))); },
                 static_cast<void*>(nullptr));
}

// Metadata: the address of the first element, the dtype's name, dims, sizes and strides (in elements).
uintptr_t dlpi_data_ptr(void* t) { return reinterpret_cast<uintptr_t>(tensorOf(t).data_ptr()); }
const char* dlpi_dtype(void* t) { return backplane::scalarTypeName(tensorOf(t).dtype()).data(); }
int64_t dlpi_dim(void* t) { return tensorOf(t).dim(); }
int64_t dlpi_size(void* t, int64_t d) { return tensorOf(t).size(d); }
int64_t dlpi_stride(void* t, int64_t d) { return tensorOf(t).stride(d); }

// Row-major element `index` as a double / set from a double, read and written
// in place through the tensor's own strides.
double dlpi_get(void* t, int64_t index) {
  const backplane::Tensor& x = tensorOf(t);
  return backplane::visitScalarType(x.dtype(), [&]<typename T>() {
    T value;
    std::memcpy(&value, elementAddress(x, index), sizeof(T));
    return toDouble(value);
  });
}
void dlpi_set(void* t, int64_t index, double value) {
  const backplane::Tensor& x = tensorOf(t);
  backplane::visitScalarType(x.dtype(), [&]<typename T>() {
    const T v = fromDouble<T>(value);
    std::memcpy(elementAddress(x, index), &v, sizeof(T));
  });
}

// How many handles share t's storage (the export of a tensor holds one).
uint32_t dlpi_storage_use_count(void* t) { return tensorOf(t).storage().useCount(); }

}  // extern "C"
