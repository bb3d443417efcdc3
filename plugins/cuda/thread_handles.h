#pragma once
// Note [Per-thread library handles]
// cuBLAS and cuDNN handles are not safe to use from two host threads at
// once, and creating one is slow. Each host thread keeps its own handle per
// device, found with no lock (a product or a convolution is on the launch
// path) and bound to the call's stream when that changed, as PyTorch does;
// when a thread exits its handles go to a process-wide pool that the next
// thread meeting the device takes from before creating one. Handles live
// for the process: destroying them at exit could run after the CUDA runtime
// has shut down.
#include <map>
#include <mutex>
#include <vector>

#include "gpu/gpu_port.h"

namespace bp_gpu {

// Traits: `Handle`, `static Handle create()` (throws on failure) and
// `static void bind(Handle, gpuStream_t)` (throws on failure).
template <class Traits>
class ThreadHandles {
 public:
  using Handle = typename Traits::Handle;

  // This thread's handle for `device` (the current device), bound to `stream`.
  static Handle forThread(int device, gpuStream_t stream) {
    static thread_local ThreadHandles handles;
    return handles.get(device, stream);
  }

  ~ThreadHandles() {
    for (const Entry& e : entries_) pool().give(e.device, e.handle);
  }

 private:
  struct Entry {
    int device;
    gpuStream_t stream;  // the stream the handle is bound to
    Handle handle;
  };

  // Handles no thread holds: taken only when a thread meets a device for
  // the first time, or given back when one exits.
  class Pool {
   public:
    bool take(int device, Handle* h) {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<Handle>& free = free_[device];
      if (free.empty()) return false;
      *h = free.back();
      free.pop_back();
      return true;
    }
    void give(int device, Handle h) {
      std::lock_guard<std::mutex> lock(mu_);
      free_[device].push_back(h);
    }

   private:
    std::mutex mu_;
    std::map<int, std::vector<Handle>> free_;  // guarded by mu_
  };
  static Pool& pool() {
    static Pool* p = new Pool();  // never destroyed: see the Note
    return *p;
  }

  Handle get(int device, gpuStream_t stream) {
    for (Entry& e : entries_) {
      if (e.device != device) continue;
      if (e.stream != stream) {
        Traits::bind(e.handle, stream);
        e.stream = stream;
      }
      return e.handle;
    }
    Handle h{};
    if (!pool().take(device, &h)) h = Traits::create();  // slow: once per device and thread
    entries_.push_back(Entry{device, nullptr, h});       // kept (not leaked) even if binding it fails
    Traits::bind(h, stream);
    entries_.back().stream = stream;
    return h;
  }

  std::vector<Entry> entries_;
};

}  // namespace bp_gpu
