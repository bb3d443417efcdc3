#pragma once
// Storage: reference-counted bytes on one device, from that device's
// allocator. Tensors are views onto a Storage; several tensors (views) may
// share one.

#include <cstddef>
#include <utility>

#include "backplane/core/allocator.h"
#include "backplane/core/intrusive_ptr.h"

namespace backplane {

class StorageImpl final : public IntrusiveTarget {
 public:
  StorageImpl(DataPtr data, size_t nbytes) : data_(std::move(data)), nbytes_(nbytes) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }

 private:
  DataPtr data_;
  size_t nbytes_;
};

class Storage {
 public:
  Storage() = default;
  explicit Storage(IntrusivePtr<StorageImpl> impl) : impl_(std::move(impl)) {}
  // Allocates `nbytes` on `device` through its device type's allocator.
  static Storage allocate(size_t nbytes, Device device);

  bool defined() const { return static_cast<bool>(impl_); }
  void* data() const { return impl_->data(); }
  size_t nbytes() const { return impl_->nbytes(); }
  Device device() const { return impl_->device(); }
  // Number of tensors and other handles sharing these bytes.
  uint32_t useCount() const { return impl_ ? impl_->useCount() : 0; }
  bool isAliasOf(const Storage& o) const { return impl_ == o.impl_; }
  StorageImpl* unsafeGetImpl() const { return impl_.get(); }

 private:
  IntrusivePtr<StorageImpl> impl_;
};

}  // namespace backplane
