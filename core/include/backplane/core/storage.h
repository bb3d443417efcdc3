#pragma once
// Storage: reference-counted bytes on one device, from that device's
// allocator. Tensors are views onto a Storage; several tensors (views) may
// share one.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backplane/core/allocator.h"
#include "backplane/core/intrusive_ptr.h"

namespace backplane {

// Note [Small CPU storages]
// A CPU storage of at most kInlineStorageBytes keeps its bytes in the same
// heap block as its StorageImpl: one malloc and one free instead of two.
// For a tensor of a few elements the allocator calls are most of an op's
// cost. The bytes follow the object at a 16-byte boundary, which is the
// alignment the CPU allocator gives small buffers anyway (64 from 257
// bytes up). Larger or non-CPU storages hold memory from their device's
// allocator. The block is made by a placement new-expression that asks for
// the extra bytes and is freed by the class's operator delete, so the
// ordinary `delete` in IntrusivePtr releases both at once.
class StorageImpl final : public IntrusiveTarget {
 public:
  static constexpr size_t kInlineStorageBytes = 256;

  StorageImpl(DataPtr data, size_t nbytes) : data_(std::move(data)), nbytes_(nbytes) {}
  // A CPU storage of 1..kInlineStorageBytes bytes (uninitialised) living in
  // this object's own allocation.
  static IntrusivePtr<StorageImpl> makeSmallCpu(size_t nbytes);

  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }

  // How many times an operator has written these bytes (Note [Autograd in
  // the core]). Shared by every tensor over the storage, views included.
  // A relaxed load and store, not a locked increment (which cost ~8 ns on
  // every out= call): two threads writing one tensor at once race on its
  // bytes anyway, and then at worst the count moves by one instead of two,
  // which a saved tensor's check still sees.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bumpVersion() { version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  struct TrailingBytes {
    size_t n;
  };
  static void* operator new(size_t size);
  static void* operator new(size_t size, TrailingBytes extra);
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, TrailingBytes) noexcept;  // if the constructor throws

 private:
  struct InlineTag {};
  StorageImpl(InlineTag, size_t nbytes);
  static size_t inlineOffset();

  DataPtr data_;
  size_t nbytes_;
  std::atomic<uint64_t> version_{0};
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
