#pragma once
// IntrusivePtr<T>: a shared pointer whose count lives in the object (one
// allocation per object, one pointer per handle). T derives from
// IntrusiveTarget. Used for TensorImpl and StorageImpl, which are shared
// across threads, so the count is atomic.

#include <atomic>
#include <cstdint>
#include <utility>

namespace backplane {

class IntrusiveTarget {
 public:
  IntrusiveTarget() = default;
  IntrusiveTarget(const IntrusiveTarget&) = delete;
  IntrusiveTarget& operator=(const IntrusiveTarget&) = delete;
  uint32_t useCount() const { return refcount_.load(std::memory_order_relaxed); }

 protected:
  virtual ~IntrusiveTarget() = default;

 private:
  template <typename T>
  friend class IntrusivePtr;
  mutable std::atomic<uint32_t> refcount_{0};
};

template <typename T>
class IntrusivePtr {
 public:
  IntrusivePtr() = default;
  // Takes shared ownership of `p` (which may be freshly allocated).
  explicit IntrusivePtr(T* p) : p_(p) { incref(); }
  template <typename... Args>
  static IntrusivePtr make(Args&&... args) {
    IntrusivePtr r;
    r.p_ = new T(std::forward<Args>(args)...);
    // No other thread can see the new object yet: a plain store, not an
    // atomic increment.
    r.p_->refcount_.store(1, std::memory_order_relaxed);
    return r;
  }
  // Owns `fresh`, an object just made by a new-expression that no other
  // handle refers to (what make() does, for objects built another way).
  static IntrusivePtr adoptFresh(T* fresh) {
    IntrusivePtr r;
    r.p_ = fresh;
    r.p_->refcount_.store(1, std::memory_order_relaxed);
    return r;
  }
  IntrusivePtr(const IntrusivePtr& o) : p_(o.p_) { incref(); }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  IntrusivePtr& operator=(const IntrusivePtr& o) {
    IntrusivePtr(o).swap(*this);
    return *this;
  }
  IntrusivePtr& operator=(IntrusivePtr&& o) noexcept {
    IntrusivePtr(std::move(o)).swap(*this);
    return *this;
  }
  ~IntrusivePtr() { decref(); }

  // Adopts a reference previously given up by release(): no count change.
  static IntrusivePtr reclaim(T* p) {
    IntrusivePtr r;
    r.p_ = p;
    return r;
  }
  // A handle to `p` if it is still alive (its count above zero), else an
  // empty one. For a holder that p's destructor tells before it frees p (a
  // weak reference without a control block): the holder must serialize this
  // call with that notice, so p's memory is valid here.
  static IntrusivePtr tryLock(T* p) {
    IntrusivePtr r;
    if (p == nullptr) return r;
    uint32_t n = p->refcount_.load(std::memory_order_relaxed);
    while (n != 0)
      if (p->refcount_.compare_exchange_weak(n, n + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        r.p_ = p;
        break;
      }
    return r;
  }
  // Gives up ownership without decrementing: the caller now holds that
  // reference and must hand it back through reclaim(). Used across the
  // plugin ABI, where tensors travel as raw pointers.
  T* release() { return std::exchange(p_, nullptr); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  void swap(IntrusivePtr& o) noexcept { std::swap(p_, o.p_); }
  void reset() { IntrusivePtr().swap(*this); }
  friend bool operator==(const IntrusivePtr& a, const IntrusivePtr& b) { return a.p_ == b.p_; }

 private:
  void incref() {
    if (p_) p_->refcount_.fetch_add(1, std::memory_order_relaxed);
  }
  void decref() {
    // acq_rel: the thread that drops the last reference must see every write
    // made through the other references before it destroys the object.
    // (Skipping the decrement when the count is 1 was measured: it saves
    // nothing on a small op and costs 5 ns on every shared handle.)
    if (p_ && p_->refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete p_;
  }
  T* p_ = nullptr;
};

}  // namespace backplane
