#include "backplane/core/tensor_base.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "backplane/core/checked_math.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/transfers.h"

namespace backplane {
namespace {

DimVector contiguousStrides(IntArrayRef sizes) {
  DimVector strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s = checkedMul(s, std::max<int64_t>(sizes[i], 1), "contiguous stride");
  }
  return strides;
}

bool computeIsContiguous(IntArrayRef sizes, IntArrayRef strides, int64_t numel) {
  if (numel == 0) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t wrapDim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 and -1
  // kOutOfRange: Python's IndexError, as PyTorch raises for a dim out of range.
  if (dim < -n || dim >= n)
    BP_THROW(kOutOfRange, op, ": dimension ", dim, " is out of range for a ", ndim, "-d tensor (expected a dim in [",
             -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

// Element offset of the last element relative to the first (0 if empty).
int64_t lastElementOffset(IntArrayRef sizes, IntArrayRef strides) {
  int64_t last = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    last += (sizes[i] - 1) * strides[i];
  }
  return last;
}

void* offsetAddress(void* base, int64_t bytes) {
  // Integer arithmetic: device addresses are opaque and may not point into
  // host memory (Note [The host never dereferences device memory]).
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes));
}

template <size_t N>
void copyItems(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, N);
}

// Copies a strided block between two host buffers. Strides in elements.
void hostStridedCopy(char* dst, IntArrayRef dst_strides, const char* src, IntArrayRef src_strides, IntArrayRef sizes,
                     size_t itemsize) {
  const int64_t numel = checkedNumel(sizes);
  if (numel == 0) return;
  const size_t nd = sizes.size();
  if (nd == 0) {
    std::memcpy(dst, src, itemsize);
    return;
  }
  const int64_t inner = sizes[nd - 1];
  // The stride of a size-1 dimension moves nothing and may be any value
  // (a DLPack producer's, as_strided's): it is never scaled, which could
  // overflow (found by fuzz_dlpack_import).
  const int64_t ds = inner > 1 ? dst_strides[nd - 1] * static_cast<int64_t>(itemsize) : 0;
  const int64_t ss = inner > 1 ? src_strides[nd - 1] * static_cast<int64_t>(itemsize) : 0;
  const int64_t item = static_cast<int64_t>(itemsize);
  const bool contiguous_rows = inner > 1 && ds == item && ss == item;
  const size_t row_bytes = static_cast<size_t>(inner) * itemsize;
  DimVector index(nd, 0);
  for (int64_t done = 0; done < numel; done += inner) {
    int64_t doff = 0, soff = 0;
    for (size_t d = 0; d + 1 < nd; ++d) {
      doff += index[d] * dst_strides[d];
      soff += index[d] * src_strides[d];
    }
    char* dp = dst + doff * static_cast<int64_t>(itemsize);
    const char* sp = src + soff * static_cast<int64_t>(itemsize);
    if (contiguous_rows) {  // one move per row (a permuted view's rows, as attention's heads); views may overlap
      std::memmove(dp, sp, row_bytes);
    } else {
      switch (itemsize) {
        case 1: copyItems<1>(dp, ds, sp, ss, inner); break;
        case 2: copyItems<2>(dp, ds, sp, ss, inner); break;
        case 4: copyItems<4>(dp, ds, sp, ss, inner); break;
        default: copyItems<8>(dp, ds, sp, ss, inner); break;
      }
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

bool hostAccessible(Device d) { return DeviceTypeRegistry::global().interfaceOrThrow(d.type).isHostAccessible(); }

}  // namespace

// Copies n bytes between any two devices through their interfaces.
void copyBytesBetweenDevices(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  auto& reg = DeviceTypeRegistry::global();
  DeviceInterface& di = reg.interfaceOrThrow(dst_device.type);
  DeviceInterface& si = reg.interfaceOrThrow(src_device.type);
  // Note [Counting host<->device transfers]: a copy between the CPU and a
  // device counts once; between two device types (through the host) twice.
  if (dst_device.type != src_device.type) {
    const bool via_host = dst_device.type != DeviceType::CPU && src_device.type != DeviceType::CPU;
    TransferCount& count = detail::tls_host_device_transfers;
    count.bytes += via_host ? 2 * n : n;
    count.copies += via_host ? 2 : 1;
  }
  if (si.isHostAccessible() && di.isHostAccessible()) {
    std::memmove(dst, src, n);
  } else if (si.isHostAccessible()) {
    di.copyHostToDevice(dst, dst_device, src, n);
  } else if (di.isHostAccessible()) {
    si.copyDeviceToHost(dst, src, src_device, n);
  } else if (dst_device.type == src_device.type) {
    si.copyDeviceToDevice(dst, dst_device, src, src_device, n);
  } else {
    // Two different device types: through the host.
    std::vector<unsigned char> buf(n);
    si.copyDeviceToHost(buf.data(), src, src_device, n);
    di.copyHostToDevice(dst, dst_device, buf.data(), n);
  }
}

// ------------------------------------------------------------ TensorImpl

void checkTensorRank(size_t ndim) {
  if (ndim > static_cast<size_t>(kMaxTensorDims)) [[unlikely]]
    BP_THROW(kInvalidArgument, "a tensor has at most ", kMaxTensorDims, " dimensions; got ", ndim,
             " (Backplane's rank limit, as PyTorch's; merge dimensions with reshape or flatten)");
}

namespace {
// Sizes or strides for a TensorImpl, after the rank check: the check runs
// before a single element of `dims` is read (Note [Rank limit]).
DimVector rankCheckedDims(IntArrayRef dims) {
  checkTensorRank(dims.size());
  return DimVector(dims.begin(), dims.end());
}
}  // namespace

TensorImpl::TensorImpl(Storage storage, int64_t storage_offset, IntArrayRef sizes, IntArrayRef strides,
                       ScalarType dtype)
    : storage_(std::move(storage)),
      storage_offset_(storage_offset),
      sizes_(rankCheckedDims(sizes)),
      strides_(rankCheckedDims(strides)),
      dtype_(dtype) {
  BP_CHECK(storage_.defined(), "a tensor needs a storage");
  numel_ = checkedNumel(sizes);
  int64_t needed = checkedStorageBytes(sizes, strides, storage_offset, static_cast<int64_t>(elementSize(dtype)));
  BP_CHECK(needed <= static_cast<int64_t>(storage_.nbytes()), "layout sizes ", sizes, " strides ", strides, " offset ",
           storage_offset, " of ", scalarTypeName(dtype), " needs ", needed, " bytes of storage, but the storage has ",
           storage_.nbytes());
  device_ = storage_.device();
  is_contiguous_ = computeIsContiguous(sizes, strides, numel_);
}

TensorImpl::TensorImpl(Storage storage, IntArrayRef sizes, IntArrayRef contiguous_strides, ScalarType dtype,
                       FreshContiguous fresh)
    : storage_(std::move(storage)),
      storage_offset_(0),
      sizes_(rankCheckedDims(sizes)),
      strides_(rankCheckedDims(contiguous_strides)),
      numel_(fresh.numel),
      dtype_(dtype),
      device_(storage_.device()),
      is_contiguous_(true) {}

// ------------------------------------------------------------ TensorBase

void TensorBase::throwUndefined() {
  BP_THROW(kFailedPrecondition,
           "this tensor is undefined (it was default-constructed or is an "
           "absent optional); check defined() before using it");
}

namespace {
// For indexing sizes/strides: a 0-d tensor has no dimension to name.
int64_t indexDim(int64_t d, int64_t ndim, const char* op) {
  BP_CHECK(ndim > 0, op, "(", d, "): the tensor is 0-d and has no dimensions");
  return wrapDim(d, ndim, op);
}
}  // namespace

int64_t TensorBase::size(int64_t d) const { return sizes()[indexDim(d, dim(), "size")]; }
int64_t TensorBase::stride(int64_t d) const { return strides()[indexDim(d, dim(), "stride")]; }

void* TensorBase::data_ptr() const {
  return offsetAddress(storage().data(), storage_offset() * static_cast<int64_t>(itemsize()));
}

std::string TensorBase::str() const {
  if (!defined()) return "Tensor[undefined]";
  std::ostringstream os;
  os << "Tensor" << sizes() << " " << scalarTypeName(dtype()) << " " << device();
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const TensorBase& t) { return os << t.str(); }

void TensorBase::readElementsToHost(void* dst) const {
  if (numel() == 0) return;
  DimVector dense = contiguousStrides(sizes());
  if (hostAccessible(device())) {
    hostStridedCopy(static_cast<char*>(dst), dense, static_cast<const char*>(data_ptr()), strides(), sizes(),
                    itemsize());
  } else if (is_contiguous()) {
    copyBytesBetweenDevices(dst, Device(DeviceType::CPU), data_ptr(), device(), nbytes());
  } else {
    TensorBase host = stageSpan(*this, Device(DeviceType::CPU));
    hostStridedCopy(static_cast<char*>(dst), dense, static_cast<const char*>(host.data_ptr()), host.strides(), sizes(),
                    itemsize());
  }
}

TensorBase TensorBase::makeView(IntArrayRef new_sizes, IntArrayRef new_strides, std::optional<int64_t> offset) const {
  return TensorBase(
      IntrusivePtr<TensorImpl>::make(storage(), offset.value_or(storage_offset()), new_sizes, new_strides, dtype()));
}

TensorBase TensorBase::as_strided(IntArrayRef new_sizes, IntArrayRef new_strides, std::optional<int64_t> offset) const {
  TensorBase v = makeView(new_sizes, new_strides, offset);  // checks the rank before anything reads the lists
  return finishView(std::move(v), "as_strided", [&] {
    return ViewReplay([sz = DimVector(new_sizes.begin(), new_sizes.end()),
                       st = DimVector(new_strides.begin(), new_strides.end()),
                       delta = offset.value_or(storage_offset()) - storage_offset()](const TensorBase& b) {
      return b.as_strided(sz, st, b.storage_offset() + delta);  // the same geometry relative to b's offset
    });
  });
}

namespace {

// Resolves a single -1 in `shape` so the product equals numel.
DimVector inferSize(IntArrayRef shape, int64_t numel, const char* op) {
  DimVector out(shape.begin(), shape.end());
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      BP_CHECK(!infer, op, ": only one dimension can be -1 in shape ", shape);
      infer = i;
    } else {
      BP_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in shape ", shape);
      known = checkedMul(known, shape[i], "shape");
    }
  }
  if (infer) {
    BP_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for a tensor of ", numel,
             " elements");
    out[*infer] = numel / known;
  } else {
    BP_CHECK(known == numel, op, ": shape ", shape, " is invalid for a tensor of ", numel, " elements");
  }
  return out;
}

// Strides that make `new_sizes` a view of (sizes, strides), if any exist.
std::optional<DimVector> computeViewStrides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes,
                                            int64_t numel) {
  if (numel == 0 || sizes.empty()) return contiguousStrides(new_sizes);
  DimVector new_strides(new_sizes.size(), 0);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= sizes[tensor_d];
    // A chunk ends where the next-outer dim is not laid out right after it.
    if (tensor_d == 0 || (sizes[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

TensorBase TensorBase::view(IntArrayRef shape) const {
  DimVector new_sizes = inferSize(shape, numel(), "view");
  auto new_strides = computeViewStrides(sizes(), strides(), new_sizes, numel());
  BP_CHECK(new_strides.has_value(), "view: shape ", shape, " is not compatible with sizes ", sizes(), " and strides ",
           strides(),
           " (the tensor's memory cannot be viewed with that shape); use reshape(), which copies "
           "when it must");
  return finishView(makeView(new_sizes, *new_strides), "view",
                    [&] { return ViewReplay([new_sizes](const TensorBase& b) { return b.view(new_sizes); }); });
}

std::optional<TensorBase> TensorBase::tryView(IntArrayRef shape, const char* op) const {
  DimVector new_sizes = inferSize(shape, numel(), op);
  if (auto new_strides = computeViewStrides(sizes(), strides(), new_sizes, numel()))
    return finishView(makeView(new_sizes, *new_strides), "view",
                      [&] { return ViewReplay([new_sizes](const TensorBase& b) { return b.view(new_sizes); }); });
  return std::nullopt;
}

TensorBase TensorBase::transpose(int64_t d0, int64_t d1) const {
  int64_t n = dim();
  d0 = wrapDim(d0, n, "transpose");
  d1 = wrapDim(d1, n, "transpose");
  if (n == 0)
    return finishView(makeView(sizes(), strides()), "transpose",
                      [&] { return ViewReplay([](const TensorBase& b) { return b.transpose(0, 0); }); });
  DimVector sz(sizes().begin(), sizes().end()), st(strides().begin(), strides().end());
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return finishView(makeView(sz, st), "transpose",
                    [&] { return ViewReplay([d0, d1](const TensorBase& b) { return b.transpose(d0, d1); }); });
}

TensorBase TensorBase::t() const {
  BP_CHECK(dim() <= 2, "t() expects a tensor with <= 2 dims, but this one has ", dim(), "; use transpose(dim0, dim1)");
  return dim() < 2 ? finishView(makeView(sizes(), strides()), "t",
                                [&] { return ViewReplay([](const TensorBase& b) { return b.t(); }); })
                   : transpose(0, 1);
}

TensorBase TensorBase::permute(IntArrayRef dims) const {
  int64_t n = dim();
  BP_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: got ", dims.size(), " dims ", dims, " for a ", n,
           "-d tensor; give each dim exactly once");
  DimVector sz(n), st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrapDim(dims[i], n, "permute");
    BP_CHECK(!seen[d], "permute: dim ", d, " appears twice in ", dims);
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  return finishView(makeView(sz, st), "permute", [&] {
    return ViewReplay([order = DimVector(dims.begin(), dims.end())](const TensorBase& b) { return b.permute(order); });
  });
}

TensorBase TensorBase::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  BP_CHECK(dim() > 0, "slice() cannot be applied to a 0-d tensor");
  d = wrapDim(d, dim(), "slice");
  BP_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t len = sizes()[d];
  auto clampIndex = [len](int64_t i) {
    if (i < 0) i += len;
    return std::clamp<int64_t>(i, 0, len);
  };
  int64_t s = clampIndex(start.value_or(0));
  int64_t e = clampIndex(end.value_or(len));
  int64_t count = e > s ? (e - s + step - 1) / step : 0;
  DimVector sz(sizes().begin(), sizes().end()), st(strides().begin(), strides().end());
  int64_t offset = storage_offset() + (count > 0 ? s * st[d] : 0);
  sz[d] = count;
  st[d] *= step;
  return finishView(makeView(sz, st, offset), "slice", [&] {
    return ViewReplay([d, s, e, step](const TensorBase& b) { return b.slice(d, s, e, step); });
  });
}

TensorBase TensorBase::narrow(int64_t d, int64_t start, int64_t length) const {
  BP_CHECK(dim() > 0, "narrow() cannot be applied to a 0-d tensor");
  d = wrapDim(d, dim(), "narrow");
  int64_t len = sizes()[d];
  if (start < 0) start += len;
  BP_CHECK(start >= 0 && length >= 0 && start <= len - length, "narrow: start ", start, " + length ", length,
           " exceeds dimension ", d, " of size ", len);
  return slice(d, start, start + length);
}

TensorBase TensorBase::select(int64_t d, int64_t index) const {
  BP_CHECK(dim() > 0, "select() cannot be applied to a 0-d tensor");
  d = wrapDim(d, dim(), "select");
  int64_t len = sizes()[d];
  BP_CHECK(index >= -len && index < len, "select: index ", index, " is out of range for dimension ", d, " of size ",
           len);
  if (index < 0) index += len;
  DimVector sz(sizes().begin(), sizes().end()), st(strides().begin(), strides().end());
  int64_t offset = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return finishView(makeView(sz, st, offset), "select",
                    [&] { return ViewReplay([d, index](const TensorBase& b) { return b.select(d, index); }); });
}

TensorBase TensorBase::expand(IntArrayRef shape) const {
  int64_t n = dim(), m = static_cast<int64_t>(shape.size());
  BP_CHECK(m >= n, "expand: the target shape ", shape, " has fewer dims than the tensor's sizes ", sizes());
  DimVector sz(m), st(m);
  for (int64_t i = m - 1; i >= 0; --i) {
    int64_t src = i - (m - n);
    int64_t want = shape[i];
    if (src < 0) {
      BP_CHECK(want >= 0, "expand: size -1 is not allowed for new leading dimension ", i, " in ", shape);
      sz[i] = want;
      st[i] = 0;
      continue;
    }
    int64_t have = sizes()[src];
    if (want == -1) want = have;
    if (have == want) {
      sz[i] = have;
      st[i] = strides()[src];
    } else {
      BP_CHECK(have == 1, "expand: the expanded size ", want, " must match the existing size ", have,
               " at non-singleton dimension ", i, "; target sizes ", shape, ", tensor sizes ", sizes());
      BP_CHECK(want >= 0, "expand: invalid size ", want, " in ", shape);
      sz[i] = want;
      st[i] = 0;
    }
  }
  return finishView(makeView(sz, st), "expand", [&] {
    return ViewReplay(
        [target = DimVector(shape.begin(), shape.end())](const TensorBase& b) { return b.expand(target); });
  });
}

TensorBase TensorBase::squeeze() const {
  DimVector sz, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  return finishView(makeView(sz, st), "squeeze",
                    [&] { return ViewReplay([](const TensorBase& b) { return b.squeeze(); }); });
}

TensorBase TensorBase::squeeze(int64_t d) const {
  d = wrapDim(d, dim(), "squeeze");
  if (dim() == 0)
    return finishView(makeView(sizes(), strides()), "squeeze",
                      [&] { return ViewReplay([d](const TensorBase& b) { return b.squeeze(d); }); });
  if (sizes()[d] != 1)
    return finishView(makeView(sizes(), strides()), "squeeze",
                      [&] { return ViewReplay([d](const TensorBase& b) { return b.squeeze(d); }); });
  DimVector sz(sizes().begin(), sizes().end()), st(strides().begin(), strides().end());
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return finishView(makeView(sz, st), "squeeze",
                    [&] { return ViewReplay([d](const TensorBase& b) { return b.squeeze(d); }); });
}

TensorBase TensorBase::unsqueeze(int64_t d) const {
  d = wrapDim(d, dim() + 1, "unsqueeze");
  DimVector sz(sizes().begin(), sizes().end()), st(strides().begin(), strides().end());
  int64_t stride = d < dim() ? sz[d] * st[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return finishView(makeView(sz, st), "unsqueeze",
                    [&] { return ViewReplay([d](const TensorBase& b) { return b.unsqueeze(d); }); });
}

DimVector TensorBase::flattenedSizes(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return DimVector{1};
  start_dim = wrapDim(start_dim, dim(), "flatten");
  end_dim = wrapDim(end_dim, dim(), "flatten");
  BP_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  DimVector shape;
  for (int64_t i = 0; i < start_dim; ++i) shape.push_back(sizes()[i]);
  int64_t merged = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) merged *= sizes()[i];
  shape.push_back(merged);
  for (int64_t i = end_dim + 1; i < dim(); ++i) shape.push_back(sizes()[i]);
  return shape;
}

// -------------------------------------------------------------- creation

TensorBase emptyTensor(IntArrayRef sizes, ScalarType dtype, Device device) {
  checkTensorRank(sizes.size());
  int64_t numel = checkedNumel(sizes);
  int64_t nbytes = checkedMul(numel, static_cast<int64_t>(elementSize(dtype)), "tensor byte size");
  Storage storage = Storage::allocate(static_cast<size_t>(nbytes), device);
  DimVector strides = contiguousStrides(sizes);
  return TensorBase(
      IntrusivePtr<TensorImpl>::make(std::move(storage), sizes, strides, dtype, TensorImpl::FreshContiguous{numel}));
}

void TensorImpl::resizeEmpty(IntArrayRef sizes) {
  BP_CHECK(numel_ == 0, "cannot resize a tensor with ", numel_, " elements; only an empty tensor is resized");
  TensorBase fresh = emptyTensor(sizes, dtype_, device_);
  const TensorImpl& f = *fresh.unsafeGetImpl();
  storage_ = f.storage_;
  storage_offset_ = 0;
  sizes_ = f.sizes_;
  strides_ = f.strides_;
  numel_ = f.numel_;
  is_contiguous_ = true;
}

TensorBase emptyStridedTensor(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype, Device device) {
  checkTensorRank(sizes.size());
  checkTensorRank(strides.size());
  int64_t nbytes = checkedStorageBytes(sizes, strides, 0, static_cast<int64_t>(elementSize(dtype)));
  Storage storage = Storage::allocate(static_cast<size_t>(nbytes), device);
  return TensorBase(IntrusivePtr<TensorImpl>::make(std::move(storage), 0, sizes, strides, dtype));
}

namespace detail {
void fillFromHost(const TensorBase& dst, const void* src, size_t nbytes) {
  BP_INTERNAL_ASSERT(dst.is_contiguous() && dst.nbytes() == nbytes, "fillFromHost: ", nbytes, " bytes for the ",
                     dst.nbytes(), "-byte tensor ", dst.str());
  copyBytesBetweenDevices(dst.data_ptr(), dst.device(), src, Device(DeviceType::CPU), nbytes);
}
}  // namespace detail

// ------------------------------------------------------- data movement

size_t spanBytes(const TensorBase& t) {
  if (t.numel() == 0) return 0;
  return static_cast<size_t>(lastElementOffset(t.sizes(), t.strides()) + 1) * t.itemsize();
}

TensorBase stageSpan(const TensorBase& t, Device device) {
  size_t n = spanBytes(t);
  Storage storage = Storage::allocate(n, device);
  copyBytesBetweenDevices(storage.data(), storage.device(), t.data_ptr(), t.device(), n);
  return TensorBase(IntrusivePtr<TensorImpl>::make(std::move(storage), 0, t.sizes(), t.strides(), t.dtype()));
}

void writeSpanBack(const TensorBase& original, const TensorBase& staged) {
  BP_CHECK(original.sizes() == staged.sizes() && original.strides() == staged.strides() &&
               original.dtype() == staged.dtype(),
           "writeSpanBack: ", staged.str(), " was not staged from ", original.str());
  copyBytesBetweenDevices(original.data_ptr(), original.device(), staged.data_ptr(), staged.device(),
                          spanBytes(original));
}

void copyElements(const TensorBase& dst, const TensorBase& src) {
  BP_CHECK(dst.dtype() == src.dtype(), "copyElements: dtype mismatch: destination is ", scalarTypeName(dst.dtype()),
           ", source is ", scalarTypeName(src.dtype()), "; convert with the copy_ or to operator");
  BP_CHECK(dst.sizes() == src.sizes(), "copyElements: shape mismatch: destination ", dst.sizes(), ", source ",
           src.sizes());
  if (dst.numel() == 0) return;
  if (dst.is_contiguous() && src.is_contiguous()) {
    copyBytesBetweenDevices(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), dst.nbytes());
    return;
  }
  bool dst_host = hostAccessible(dst.device()), src_host = hostAccessible(src.device());
  if (dst_host && src_host) {
    hostStridedCopy(static_cast<char*>(dst.data_ptr()), dst.strides(), static_cast<const char*>(src.data_ptr()),
                    src.strides(), dst.sizes(), dst.itemsize());
    return;
  }
  // At least one side is a device the host cannot read: on host copies of
  // the spans (Note [Span staging]).
  Device cpu(DeviceType::CPU);
  TensorBase s = src_host ? src : stageSpan(src, cpu);
  TensorBase d = dst_host ? dst : stageSpan(dst, cpu);
  hostStridedCopy(static_cast<char*>(d.data_ptr()), d.strides(), static_cast<const char*>(s.data_ptr()), s.strides(),
                  d.sizes(), d.itemsize());
  if (!dst_host) writeSpanBack(dst, d);
}

}  // namespace backplane
