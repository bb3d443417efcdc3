// The host SIMT simulator: runs kernels written for CUDA on the launching
// host thread, one block after another, each thread of a block a fiber.
//
// Note [SIMT on fibers]
// A block's threads must be able to wait for each other (__syncthreads), so
// each runs on its own stack: a fiber. The scheduler, on the
// host thread that launched, runs every ready fiber of the block in turn
// until it finishes or reaches a barrier; when no fiber is ready, either
// all have finished (the block is done) or all that still live wait at one
// barrier (it is released and the round starts again). Anything else is a
// divergent barrier, a real bug on a GPU (it hangs or corrupts shared
// memory there), and is reported as a bp::Error naming the kernel, the
// block, a thread that waits and one that exited or waits elsewhere.
//
// Fibers are persistent: a thread slot's fiber loops over "run the kernel
// body, report finished, wait for the next thread", so starting a simulated
// thread costs two context switches and no setup. Slots and their stacks
// (mmap'd, so untouched pages cost nothing) belong to the host thread and
// are reused by every launch it makes. Only execution order is simulated:
// no warps, no timing, and because nothing runs concurrently an atomic is a
// plain read-modify-write. Under AddressSanitizer every switch is announced
// (__sanitizer_start/finish_switch_fiber) so that ASan follows the stacks;
// under ThreadSanitizer every fiber is a TSan fiber (__tsan_create_fiber)
// and every switch is announced (__tsan_switch_to_fiber), or TSan would keep
// one shadow call stack for the host thread across all of them, and report
// nonsense or crash.
//
// On x86-64 a switch is a dozen instructions (switchStacks below): ucontext's
// swapcontext makes a signal-mask system call per switch, and under ASan
// clears the shadow of the whole target stack, which made barrier-heavy
// kernels 20x slower. Other platforms use ucontext.
#include "simt.h"

#include "sim_faults.h"

#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backplane/plugin.hpp"
#include "sim_guard.h"

#if defined(BP_GPU_SIM_ASAN)  // simt.h
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(BP_GPU_SIM_TSAN)  // simt.h
#include <sanitizer/tsan_interface.h>
#endif

namespace bp_gpu::sim {

thread_local constinit const ThreadContext* t_current_thread = nullptr;

namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};
constexpr size_t kSharedMemPerBlock = 48 * 1024;  // what CUDA grants without an opt-in
// Kernels keep little on the stack; ASan's redzones need more.
#if defined(BP_GPU_SIM_ASAN)
constexpr size_t kFiberStackBytes = 512 * 1024;
#else
constexpr size_t kFiberStackBytes = 128 * 1024;
#endif

#if defined(__x86_64__)
// switchStacks(&from, to): pushes the callee-saved registers (and the SSE
// and x87 control words, also callee-saved in the SysV ABI) on the current
// stack, stores the stack pointer in *from, loads `to` and pops the same
// from there, returning into whatever saved it (or into a fresh fiber's
// entry function, see ExecutionContext::start).
extern "C" void bp_gpusim_switch_stacks(void** from, void* to);
asm(R"(
  .text
  .p2align 4
  .globl bp_gpusim_switch_stacks
  .hidden bp_gpusim_switch_stacks
  .type bp_gpusim_switch_stacks, @function
bp_gpusim_switch_stacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw (%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size bp_gpusim_switch_stacks, .-bp_gpusim_switch_stacks
)");

// A suspended execution: the stack pointer switchStacks saved.
struct ExecutionContext {
  void* sp = nullptr;

  // Makes the context start `entry` (which must never return) on `stack`.
  void start(void* stack, size_t size, void (*entry)()) {
    // The frame switchStacks pops: control words (2 slots), six registers,
    // the return address, and one slot of padding above it so that the
    // return address sits at a multiple of 16 and `entry` starts with the
    // stack aligned as after a call.
    auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t{15});
    uint64_t* frame = top - 12;
    frame[0] = 0x037f;                         // x87 control word: the default
    frame[1] = 0x1f80;                         // MXCSR: the default
    for (int i = 2; i < 8; ++i) frame[i] = 0;  // r15 r14 r13 r12 rbx rbp
    frame[8] = reinterpret_cast<uint64_t>(entry);
    frame[9] = frame[10] = frame[11] = 0;
    sp = frame;
  }
  void switchTo(ExecutionContext& to) { bp_gpusim_switch_stacks(&sp, to.sp); }
};
#else
struct ExecutionContext {
  ucontext_t context;

  void start(void* stack, size_t size, void (*entry)()) {
    getcontext(&context);
    context.uc_stack.ss_sp = stack;
    context.uc_stack.ss_size = size;
    context.uc_link = nullptr;  // entry never returns
    makecontext(&context, entry, 0);
  }
  void switchTo(ExecutionContext& to) { swapcontext(&context, &to.context); }
};
#endif

// One thread slot of a block.
struct Fiber {
  enum class State { Ready, AtBarrier, Finished };

  ExecutionContext context;
  void* stack = nullptr;  // kFiberStackBytes, mmap'd
  bool started = false;   // its context runs fiberMain (false: it must be started afresh)
  ThreadContext thread;
  State state = State::Finished;
  // The barrier it waits at (valid in AtBarrier).
  const char* barrier_function = nullptr;
  const char* barrier_file = nullptr;
  int barrier_line = 0;
#if defined(BP_GPU_SIM_ASAN)
  void* fake_stack = nullptr;
#endif
#if defined(BP_GPU_SIM_TSAN)
  void* tsan_fiber = nullptr;  // its TSan context: made with the fiber, remade when it is abandoned
#endif

  Fiber() {
    stack = mmap(nullptr, kFiberStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) throw std::bad_alloc();
#if defined(BP_GPU_SIM_TSAN)
    tsan_fiber = __tsan_create_fiber(0);
#endif
  }
  ~Fiber() {
#if defined(BP_GPU_SIM_TSAN)
    __tsan_destroy_fiber(tsan_fiber);
#endif
#if defined(BP_GPU_SIM_ASAN)
    // A suspended fiber's frames leave their redzones poisoned, and munmap
    // does not clear shadow memory: whatever is mapped here next (the
    // sanitizer's own buffers among them) would read as a stack overflow.
    __asan_unpoison_memory_region(stack, kFiberStackBytes);
#endif
    munmap(stack, kFiberStackBytes);
  }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
};

// The simulator's state on one host thread.
struct Scheduler {
  std::vector<std::unique_ptr<Fiber>> fibers;  // grows to the largest block launched here
  ExecutionContext host_context;
  Fiber* running = nullptr;
  void (*run)(const void*) = nullptr;
  const void* bound = nullptr;
  std::exception_ptr kernel_exception;  // thrown by a kernel body; ends the launch
  // The block's threads after its first run on the host thread's stack
  // (Note [Blocks without barriers]); the kernel's signature for the
  // divergence error of a barrier reached then.
  bool direct = false;
  std::string_view signature;
#if defined(BP_GPU_SIM_TSAN)
  void* host_tsan_fiber = nullptr;  // the host thread's TSan context, while a fiber runs
#endif
#if defined(BP_GPU_SIM_ASAN)
  void* host_fake_stack = nullptr;
  const void* host_stack_bottom = nullptr;
  size_t host_stack_size = 0;
#endif
};

thread_local Scheduler t_scheduler;

// Announce a switch to ASan: from the host stack to a fiber's and back.
void enterFiber(Scheduler& s, Fiber& f) {
#if defined(BP_GPU_SIM_ASAN)
  __sanitizer_start_switch_fiber(&s.host_fake_stack, f.stack, kFiberStackBytes);
#endif
  s.running = &f;
  t_current_thread = &f.thread;
#if defined(BP_GPU_SIM_TSAN)
  s.host_tsan_fiber = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f.tsan_fiber, 0);
#endif
  s.host_context.switchTo(f.context);
#if defined(BP_GPU_SIM_ASAN)
  __sanitizer_finish_switch_fiber(s.host_fake_stack, nullptr, nullptr);
#endif
  s.running = nullptr;
  t_current_thread = nullptr;
}

void leaveFiber(Scheduler& s, Fiber& f) {
#if defined(BP_GPU_SIM_ASAN)
  __sanitizer_start_switch_fiber(&f.fake_stack, s.host_stack_bottom, s.host_stack_size);
#endif
#if defined(BP_GPU_SIM_TSAN)
  __tsan_switch_to_fiber(s.host_tsan_fiber, 0);
#endif
  f.context.switchTo(s.host_context);
#if defined(BP_GPU_SIM_ASAN)
  __sanitizer_finish_switch_fiber(f.fake_stack, &s.host_stack_bottom, &s.host_stack_size);
#endif
}

// The body of every fiber: run one simulated thread per resume, forever.
void fiberMain() {
  Scheduler& s = t_scheduler;
#if defined(BP_GPU_SIM_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &s.host_stack_bottom, &s.host_stack_size);
#endif
  for (;;) {
    Fiber& f = *s.running;
    try {
      s.run(s.bound);
    } catch (...) {
      s.kernel_exception = std::current_exception();
    }
    f.state = Fiber::State::Finished;
    leaveFiber(s, f);
  }
}

void startFiber(Fiber& f) {
  if (f.started) return;
  f.context.start(f.stack, kFiberStackBytes, &fiberMain);
  f.started = true;
}

// After a launch ended with fibers suspended inside the kernel: drop their
// frames (they will never be resumed) and start them afresh next time.
void abandonFibers(Scheduler& s, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    Fiber& f = *s.fibers[i];
    if (f.state == Fiber::State::Finished) continue;
    f.started = false;
    f.state = Fiber::State::Finished;
#if defined(BP_GPU_SIM_ASAN)
    __asan_unpoison_memory_region(f.stack, kFiberStackBytes);
    f.fake_stack = nullptr;
#endif
#if defined(BP_GPU_SIM_TSAN)
    // Its TSan context still holds the abandoned frames: start a new one.
    __tsan_destroy_fiber(f.tsan_fiber);
    f.tsan_fiber = __tsan_create_fiber(0);
#endif
  }
}

std::string str(uint3 v) { return bp::detail::concat("(", v.x, ",", v.y, ",", v.z, ")"); }
std::string str(dim3 v) { return bp::detail::concat("(", v.x, ",", v.y, ",", v.z, ")"); }
std::string site(const Fiber& f) {
  return bp::detail::concat("__syncthreads() at ", f.barrier_file, ":", f.barrier_line, " in ", f.barrier_function);
}

[[noreturn]] void divergent(std::string_view signature, const Fiber& waiting, const Fiber& other) {
  const std::string what =
      other.state == Fiber::State::Finished ? std::string("exited without reaching it") : "waits at " + site(other);
  bp::fail(BP_INTERNAL, bp::detail::concat("gpusim: divergent barrier in kernel ", signature, ", block ",
                                           str(waiting.thread.block_idx), ": thread ", str(waiting.thread.thread_idx),
                                           " waits at ", site(waiting), " but thread ", str(other.thread.thread_idx),
                                           " ", what, "; every thread of a block must reach every __syncthreads()"));
}

void checkConfiguration(dim3 grid, dim3 block, size_t dynamic_shmem, std::string_view signature) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads > kMaxThreadsPerBlock) {
    bp::fail(BP_INVALID_ARGUMENT,
             bp::detail::concat("gpusim: kernel ", signature, " launched with block ", str(block), " = ", threads,
                                " threads; a block has at most ", kMaxThreadsPerBlock, " threads"));
  }
  const unsigned g[3] = {grid.x, grid.y, grid.z};
  const unsigned b[3] = {block.x, block.y, block.z};
  for (int i = 0; i < 3; ++i) {
    if (g[i] > kMaxGridDim[i] || b[i] > kMaxBlockDim[i]) {
      bp::fail(BP_INVALID_ARGUMENT,
               bp::detail::concat("gpusim: kernel ", signature, " launched with grid ", str(grid), " and block ",
                                  str(block), ": a dimension exceeds its limit (grid ",
                                  str(dim3(kMaxGridDim[0], kMaxGridDim[1], kMaxGridDim[2])), ", block ",
                                  str(dim3(1024, 1024, 64)), ")"));
    }
  }
  if (dynamic_shmem > kSharedMemPerBlock) {
    bp::fail(BP_INVALID_ARGUMENT,
             bp::detail::concat("gpusim: kernel ", signature, " launched with ", dynamic_shmem,
                                " bytes of dynamic shared memory; a block has ", kSharedMemPerBlock));
  }
}

// Note [Blocks without barriers]
// Most kernels (every elementwise loop) never reach a barrier, yet each of
// their threads cost two fiber switches, and under ASan four announcements
// of them. So a block's thread 0 runs first, on its fiber; when it finishes
// without reaching a barrier, no thread of the block may reach one (it
// would be a divergent barrier: thread 0 exited without reaching it), and
// threads 1.. run to completion one after another on the host thread's own
// stack, the order the fiber rounds would have run them in. A thread that
// does reach a barrier then gets the divergence error the fiber scheduler
// gives, naming thread 0 as the one that exited.
void runDirect(Scheduler& s, size_t n) {
  struct Reset {
    Scheduler& s;
    ~Reset() {
      s.direct = false;
      s.running = nullptr;
      t_current_thread = nullptr;
    }
  } reset{s};
  s.direct = true;
  for (size_t i = 1; i < n; ++i) {
    Fiber& f = *s.fibers[i];
    s.running = &f;
    t_current_thread = &f.thread;
    s.run(s.bound);
    f.state = Fiber::State::Finished;
  }
}

// Runs one block on fibers [0, n) (Note [SIMT on fibers]).
void runBlock(Scheduler& s, size_t n, std::string_view signature) {
  s.signature = signature;
  enterFiber(s, *s.fibers[0]);
  if (s.kernel_exception) std::rethrow_exception(std::exchange(s.kernel_exception, nullptr));
  if (s.fibers[0]->state == Fiber::State::Finished) {
    runDirect(s, n);
    return;
  }
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      Fiber& f = *s.fibers[i];
      if (f.state != Fiber::State::Ready) continue;
      enterFiber(s, f);
      if (s.kernel_exception) std::rethrow_exception(std::exchange(s.kernel_exception, nullptr));
    }
    const Fiber* waiting = nullptr;
    const Fiber* finished = nullptr;
    for (size_t i = 0; i < n; ++i) {
      const Fiber& f = *s.fibers[i];
      if (f.state == Fiber::State::Finished) {
        if (finished == nullptr) finished = &f;
      } else if (waiting == nullptr) {
        waiting = &f;
      } else if (f.barrier_file != waiting->barrier_file || f.barrier_line != waiting->barrier_line) {
        divergent(signature, *waiting, f);
      }
    }
    if (waiting == nullptr) return;
    if (finished != nullptr) divergent(signature, *waiting, *finished);
    for (size_t i = 0; i < n; ++i) s.fibers[i]->state = Fiber::State::Ready;
  }
}

}  // namespace

void syncThreads(const char* function, const char* file, int line) {
  Scheduler& s = t_scheduler;
  if (s.running == nullptr) {
    bp::fail(BP_INTERNAL, bp::detail::concat("gpusim: __syncthreads() called outside a kernel, in ", function));
  }
  Fiber& f = *s.running;
  f.state = Fiber::State::AtBarrier;
  f.barrier_function = function;
  f.barrier_file = file;
  f.barrier_line = line;
  if (s.direct) divergent(s.signature, f, *s.fibers[0]);  // Note [Blocks without barriers]
  leaveFiber(s, f);
}

namespace {
void runGrid(void (*run)(const void*), const void* bound, dim3 grid, dim3 block, size_t dynamic_shmem,
             std::string_view signature) {
  Scheduler& s = t_scheduler;
  if (s.running != nullptr) bp::fail(BP_INTERNAL, "gpusim: a kernel launched another kernel");
  const size_t n = size_t{block.x} * block.y * block.z;
  while (s.fibers.size() < n) s.fibers.push_back(std::make_unique<Fiber>());
  // Dynamic shared memory: exactly the bytes asked for, so ASan reports a
  // kernel that reads past them.
  // (operator new[] aligns to 16 bytes on the platforms we build for.)
  std::unique_ptr<unsigned char[]> shared(dynamic_shmem ? new unsigned char[dynamic_shmem] : nullptr);
  s.run = run;
  s.bound = bound;
  try {
    for (unsigned bz = 0; bz < grid.z; ++bz) {
      for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          size_t i = 0;
          for (unsigned tz = 0; tz < block.z; ++tz) {
            for (unsigned ty = 0; ty < block.y; ++ty) {
              for (unsigned tx = 0; tx < block.x; ++tx, ++i) {
                Fiber& f = *s.fibers[i];
                startFiber(f);
                f.thread = ThreadContext{uint3{tx, ty, tz}, uint3{bx, by, bz}, block, grid, shared.get()};
                f.state = Fiber::State::Ready;
              }
            }
          }
          runBlock(s, n, signature);
        }
      }
    }
  } catch (...) {
    abandonFibers(s, n);
    throw;
  }
  if (boundsChecking()) checkGuardsAfterKernel(signature);  // Note [Guard bytes in the simulator]
}

}  // namespace

void launchKernel(void (*run)(const void*), const void* bound, std::shared_ptr<const void> (*copy)(const void*),
                  dim3 grid, dim3 block, size_t dynamic_shmem, gpuStream_t stream, std::string_view signature) {
  checkConfiguration(grid, block, dynamic_shmem, signature);
  if (injectFault(FaultPoint::kLaunch))
    bp::fail(BP_INTERNAL, bp::detail::concat("gpusim: launch of kernel ", signature,
                                             " failed: fault injected by the test (gpusim::inject_fault)"));
  if (!deferred(stream) && !capturing(stream)) {
    runGrid(run, bound, grid, block, dynamic_shmem, signature);
    return;
  }
  // The signature views a function's static name: it outlives the queue.
  std::shared_ptr<const void> kept = copy(bound);
  enqueue(stream, [run, kept, grid, block, dynamic_shmem, signature] {
    runGrid(run, kept.get(), grid, block, dynamic_shmem, signature);
  });
}

}  // namespace bp_gpu::sim
