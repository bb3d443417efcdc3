// The mpi plugin: Open MPI as the collective engine for CPU tensors. It
// registers the comm:: operators' kernels on the cpu device type (Note
// [Collective engines] in plugin_api.h), so a CPU tensor's all_reduce_ runs
// here, and any device without its own engine reaches it through the CPU
// fallback. Built like a vendor's plugin: the SDK, libmpi and the first-party
// helpers the collective engines share (bp_common/collectives.h).
//
// Note [Checked collectives]
// Before each collective the ranks exchange what they are about to do (the
// op, dtype, shape, reduction, root) with a small non-blocking allgather,
// waited for at most the group's timeout. So (a) a rank that never arrives
// is found within the timeout (Note [Collective timeouts] in the host's
// backplane/runtime/process_group.h), on every rank that did, as
// kDeadlineExceeded naming the op and the group; (b) ranks that disagree
// (shapes, dtypes, different collectives) fail together with
// kInvalidArgument naming each rank's call, and the group stays usable;
// (c) once the exchange completes every rank is present and agrees, so the
// data moves with MPI's blocking collectives (Open MPI's tuned algorithms,
// faster than its non-blocking ones). A rank that dies during the data
// phase ends the job: mpirun ends every rank when one dies. The exchange is
// also what barrier is. A group's communicator is made on its first
// collective, after its members meet within the timeout. Point-to-point
// sends a header synchronously (a receiver that never comes is a timeout)
// before the data, and recv_ checks it. Buffers MPI may still use after a
// timeout are abandoned, never freed. A group of one rank never calls MPI.
//
// Note [MPI in a plugin]
// The host opens plugins with local symbol binding, so libmpi, loaded as
// this plugin's dependency, is local too; Open MPI's own components (opened
// by MPI_Init) need its symbols global. The plugin re-opens libmpi with
// RTLD_GLOBAL (RTLD_NOLOAD: the copy already loaded) before MPI_Init, as
// mpi4py does. Under a launcher with two or more ranks MPI starts when the
// plugin loads (MPI_Init_thread, MPI_THREAD_MULTIPLE), since MPI_Init waits
// for every rank of the job and a first collective on a sub-group would not
// bring the others; an application that started MPI itself keeps it (and
// finalizes it). A world of one never starts MPI. The plugin finalizes MPI
// when it unloads or the process exits (plugins stay loaded until exit, and
// mpirun counts a process that started MPI and exits without MPI_Finalize
// as failed), unless a call timed out (MPI_Finalize would wait for the
// missing rank) or another thread is still inside a call.
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backplane/float16_conversions.h"
#include "backplane/plugin.hpp"
#include "bp_common/collectives.h"

namespace {

using bp::ScalarType;

constexpr int32_t kCpu = 0;

using bp_common::comm::contiguousCopy;
using bp_common::comm::copyBack;
using bp_common::comm::describe;
using bp_common::comm::disagreement;
using bp_common::comm::groupName;
using bp_common::comm::Kind;
using bp_common::comm::kindName;
using bp_common::comm::kSignatureWords;
using bp_common::comm::parseReduction;
using bp_common::comm::Reduction;
using bp_common::comm::sameCall;
using bp_common::comm::sendBuffer;
using bp_common::comm::Signature;
using bp_common::comm::signatureOf;

// --- MPI types.

MPI_Datatype mpiType(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return MPI_C_BOOL;
    case ScalarType::UInt8: return MPI_UINT8_T;
    case ScalarType::Int8: return MPI_INT8_T;
    case ScalarType::Int16: return MPI_INT16_T;
    case ScalarType::Int32: return MPI_INT32_T;
    case ScalarType::Int64: return MPI_INT64_T;
    case ScalarType::UInt16: return MPI_UINT16_T;
    case ScalarType::UInt32: return MPI_UINT32_T;
    case ScalarType::UInt64: return MPI_UINT64_T;
    case ScalarType::Float32: return MPI_FLOAT;
    case ScalarType::Float64: return MPI_DOUBLE;
    case ScalarType::Float16:
    case ScalarType::BFloat16: return MPI_UINT16_T;  // moved as bits; reduced by the ops below
  }
  bp::fail(BP_INVALID_ARGUMENT, std::string("the mpi engine has no MPI type for dtype ") + bp::name(t));
}

// Reductions of 16-bit floats, which MPI does not have: through float, as
// PyTorch's CPU kernels compute them.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), int Op>
void halfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    float r;
    if constexpr (Op == 0)
      r = x + y;
    else if constexpr (Op == 1)
      r = x * y;
    else if constexpr (Op == 2)
      r = (x < y || x != x) ? x : y;  // NaN propagates, as torch.minimum
    else
      r = (x > y || x != x) ? x : y;
    b[i] = FromFloat(r);
  }
}
float halfToFloat(uint16_t h) { return bp::floatFromHalfBits(h); }
uint16_t floatToHalf(float f) { return bp::halfBitsFromFloat(f); }
float bfloatToFloat(uint16_t h) { return bp::floatFromBFloat16Bits(h); }
uint16_t floatToBfloat(float f) { return bp::bfloat16BitsFromFloat(f); }

// --- The engine.

constexpr int kMaxGroups = 4096;  // the host's limit (backplane/runtime/process_group.h)
// Tags the engine keeps for itself on MPI_COMM_WORLD, above every user tag
// (comm::kMaxTag, 32767): a group's rendezvous and its communicator's making.
constexpr int kRendezvousTag = 1 << 20;
constexpr int kCreateTag = kRendezvousTag + kMaxGroups;

// How long past a deadline is; a timeout large enough to mean "forever" is
// clamped so that no clock arithmetic overflows.
std::chrono::steady_clock::time_point deadlineAfter(double seconds) {
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(std::min(seconds, 1e7)));
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

[[noreturn]] void mpiFailed(const char* what, int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  bp::fail(BP_INTERNAL, std::string(what) + " failed: " + text);
}
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) mpiFailed(what, rc);
}

// Polls `n` requests until all complete (true) or the deadline passes
// (false: they are still pending, and so are the buffers they use).
bool waitAll(int n, MPI_Request* reqs, std::chrono::steady_clock::time_point deadline) {
  for (int spins = 0;; ++spins) {
    int done = 0;
    check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) return true;
    if (spins < 256) continue;  // a peer that is a few microseconds behind
    if (std::chrono::steady_clock::now() > deadline) return false;
    // Give the core to a rank sharing it (oversubscribed runs).
    if (spins < 4096) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// MPI_Init waits for every rank of the job to start MPI too, with no
// timeout of its own. So the init is watched: past the world's timeout the
// process says why on stderr and exits with status 124, which makes mpirun
// end the job (Note [Collective timeouts] in the host's
// backplane/runtime/process_group.h). An exception cannot be raised from
// inside MPI_Init.
class InitWatchdog {
 public:
  explicit InitWatchdog(const BP_GroupInfo& world)
      : thread_([this, world] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_until(lock, deadlineAfter(world.timeout_seconds), [this] { return done_; })) return;
          std::fprintf(stderr,
                       "backplane mpi plugin: rank %d of %d: MPI_Init waited %.1f s for the other ranks to start MPI "
                       "(when they load their plugins; BACKPLANE_COMM_TIMEOUT): a rank has died, hangs, or never "
                       "loads its plugins. Exiting with status 124 so that the job ends.\n",
                       world.world_rank, world.world_size, world.timeout_seconds);
          std::fflush(stderr);
          std::_Exit(124);
        }) {}
  ~InitWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

class Engine;
Engine& engine();

class Engine {
 public:
  Engine() {
    for (auto& c : comms_) c.store(MPI_COMM_NULL, std::memory_order_relaxed);
  }

  // MPI, started once (Note [MPI in a plugin]); throws what stopped it.
  void start() {
    std::call_once(start_once_, [this] { startMpi(); });
    if (!start_error_.empty()) bp::fail(BP_FAILED_PRECONDITION, start_error_);
  }

  // The communicator of group `g`, made on the group's first collective,
  // after a rendezvous of its members within the timeout. Lock-free once
  // made; only the callers of a group being made wait for it.
  MPI_Comm comm(const BP_GroupInfo& g, const char* op) {
    BP_PLUGIN_CHECK(g.id >= 0 && g.id < kMaxGroups, op, ": group id ", g.id, " is outside [0, ", kMaxGroups, ")");
    MPI_Comm c = comms_[g.id].load(std::memory_order_acquire);
    if (c != MPI_COMM_NULL) return c;
    std::call_once(made_[g.id], [&] { makeComm(g, op); });  // a throw leaves it unmade (and the group broken)
    return comms_[g.id].load(std::memory_order_acquire);
  }

  [[noreturn]] void timedOut(const BP_GroupInfo& g, const char* op, const char* waiting_for) {
    broken_[g.id].store(true, std::memory_order_release);
    bp::fail(BP_DEADLINE_EXCEEDED,
             std::string(op) + " on " + groupName(g) + ": rank " + std::to_string(g.rank) + " waited " +
                 seconds(g.timeout_seconds) + " for " + waiting_for +
                 " (the group's timeout: BACKPLANE_COMM_TIMEOUT or newGroup's): a rank has died, hangs, or never "
                 "made this call. The group cannot be used again; end the process");
  }

  void requireUsable(const BP_GroupInfo& g, const char* op) {
    if (g.id >= 0 && g.id < kMaxGroups && broken_[g.id].load(std::memory_order_acquire))
      bp::fail(BP_FAILED_PRECONDITION, std::string(op) + " on " + groupName(g) +
                                           ": an earlier call on this group timed out, so its ranks no longer "
                                           "agree on what comes next; end the process");
  }

  // Note [Checked collectives]: every rank's signature, after which every
  // rank is present; throws on every rank when they differ. The buffers
  // are this thread's and reused, so a collective allocates nothing; on a
  // timeout MPI may still write them, so they are abandoned, not freed.
  void agree(MPI_Comm c, const BP_GroupInfo& g, const Signature& mine) {
    thread_local std::vector<Signature> all;
    all.resize(static_cast<size_t>(g.size) + 1);
    all[0] = mine;
    MPI_Request req = MPI_REQUEST_NULL;
    check(
        MPI_Iallgather(all.data(), kSignatureWords, MPI_INT64_T, all.data() + 1, kSignatureWords, MPI_INT64_T, c, &req),
        "MPI_Iallgather");
    if (!waitAll(1, &req, deadlineAfter(g.timeout_seconds))) {
      new std::vector<Signature>(std::move(all));  // its storage stays MPI's: abandoned, never freed
      timedOut(g, kindName(static_cast<Kind>(mine.kind)), "the other ranks to arrive");
    }
    const std::string disagree = disagreement(all.data() + 1, g);
    if (!disagree.empty())
      bp::fail(BP_INVALID_ARGUMENT, std::string(kindName(static_cast<Kind>(mine.kind))) + " on " + disagree);
  }

  MPI_Op reduceOp(Reduction r, ScalarType t) const {
    if (t == ScalarType::Bool) return r == Reduction::Max ? MPI_LOR : MPI_LAND;
    const int index = r == Reduction::Product ? 1 : r == Reduction::Min ? 2 : r == Reduction::Max ? 3 : 0;
    if (t == ScalarType::Float16) return half_ops_[index];
    if (t == ScalarType::BFloat16) return bfloat_ops_[index];
    switch (r) {
      case Reduction::Product: return MPI_PROD;
      case Reduction::Min: return MPI_MIN;
      case Reduction::Max: return MPI_MAX;
      default: return MPI_SUM;
    }
  }

  // Kernels in flight: MPI is finalized only when none is (another thread
  // may still be inside a call when the process exits).
  std::atomic<int>& inFlight() { return in_flight_; }

  // Finalizes MPI if this plugin started it; once (unload or exit).
  void shutdown() {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    if (!started_by_us_ || finalized_) return;
    finalized_ = true;
    for (const auto& b : broken_)
      if (b.load()) return;              // MPI_Finalize would wait for the rank that never came
    if (in_flight_.load() != 0) return;  // a thread is still inside MPI
    for (auto& slot : comms_) {
      MPI_Comm c = slot.exchange(MPI_COMM_NULL);
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    }
    for (MPI_Op& op : half_ops_) MPI_Op_free(&op);
    for (MPI_Op& op : bfloat_ops_) MPI_Op_free(&op);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

 private:
  void startMpi() {
    // Note [MPI in a plugin].
    for (const char* lib : {"libmpi.so.40", "libmpi.so"})
      if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) break;
    const BP_GroupInfo world = bp::groupInfo(0);
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      InitWatchdog watchdog(world);
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        start_error_ = "MPI_Init_thread failed; run the program under mpirun (Open MPI: apt-get install openmpi-bin)";
        return;
      }
      started_by_us_ = true;
      std::atexit([] { engine().shutdown(); });
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
      start_error_ = "the MPI library gives thread level " + std::to_string(provided) +
                     ", below MPI_THREAD_MULTIPLE, which collectives from several threads need; start MPI with "
                     "MPI_Init_thread(MPI_THREAD_MULTIPLE) or use an MPI built with thread support";
      return;
    }
    int size = 0, rank = 0, flag = 0;
    int* tag_ub = nullptr;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size != world.world_size || rank != world.world_rank) {
      start_error_ = "MPI's world is rank " + std::to_string(rank) + " of " + std::to_string(size) +
                     " but the launcher's environment says rank " + std::to_string(world.world_rank) + " of " +
                     std::to_string(world.world_size) +
                     " (BACKPLANE_RANK / BACKPLANE_WORLD_SIZE?); the CPU engine is MPI, so start the processes "
                     "with mpirun";
      return;
    }
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (!flag || *tag_ub < kCreateTag + kMaxGroups) {
      start_error_ = "this MPI's largest tag (MPI_TAG_UB) is below " + std::to_string(kCreateTag + kMaxGroups) +
                     ", the tags the engine keeps for itself; use Open MPI";
      return;
    }
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 0>, 1, &half_ops_[0]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 1>, 1, &half_ops_[1]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 2>, 1, &half_ops_[2]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 3>, 1, &half_ops_[3]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 0>, 1, &bfloat_ops_[0]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 1>, 1, &bfloat_ops_[1]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 2>, 1, &bfloat_ops_[2]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 3>, 1, &bfloat_ops_[3]);
  }

  // The members meet before the (blocking, untimed) communicator is made:
  // each sends a token to the group's first member and waits for its
  // answer, on MPI_COMM_WORLD with the group's own tag, within the timeout.
  void rendezvous(const BP_GroupInfo& g, const char* op) {
    const int tag = kRendezvousTag + static_cast<int>(g.id);
    const int leader = g.world_ranks[0];
    // Heap buffers: on a timeout MPI still holds them, and they are abandoned.
    auto* tokens = new std::vector<int>(static_cast<size_t>(g.size), 1);
    auto* reqs = new std::vector<MPI_Request>(static_cast<size_t>(2 * g.size), MPI_REQUEST_NULL);
    int n = 0;
    bool met = true;
    if (g.rank == 0) {
      for (int i = 1; i < g.size; ++i)
        check(MPI_Irecv(&(*tokens)[i], 1, MPI_INT, g.world_ranks[i], tag, MPI_COMM_WORLD, &(*reqs)[n++]), "MPI_Irecv");
      met = waitAll(n, reqs->data(), deadlineAfter(g.timeout_seconds));
      n = 0;
      for (int i = 1; met && i < g.size; ++i)
        check(MPI_Isend(&(*tokens)[0], 1, MPI_INT, g.world_ranks[i], tag, MPI_COMM_WORLD, &(*reqs)[n++]), "MPI_Isend");
    } else {
      check(MPI_Isend(&(*tokens)[0], 1, MPI_INT, leader, tag, MPI_COMM_WORLD, &(*reqs)[n++]), "MPI_Isend");
      check(MPI_Irecv(&(*tokens)[1], 1, MPI_INT, leader, tag, MPI_COMM_WORLD, &(*reqs)[n++]), "MPI_Irecv");
    }
    if (met) met = waitAll(n, reqs->data(), deadlineAfter(g.timeout_seconds));
    if (!met) timedOut(g, op, "the group's other members to make its first call");
    delete tokens;
    delete reqs;
  }

  void makeComm(const BP_GroupInfo& g, const char* op) {
    rendezvous(g, op);
    MPI_Comm c = MPI_COMM_NULL;
    if (g.id == 0) {
      check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup of the world");
    } else {
      MPI_Group world_group = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
      check(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
      check(MPI_Group_incl(world_group, g.size, g.world_ranks, &sub), "MPI_Group_incl");
      const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, kCreateTag + static_cast<int>(g.id), &c);
      MPI_Group_free(&sub);
      MPI_Group_free(&world_group);
      check(rc, "MPI_Comm_create_group");
    }
    // Errors come back as codes on the engine's own communicators only (the
    // application's MPI_COMM_WORLD keeps its handler).
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    comms_[g.id].store(c, std::memory_order_release);
  }

  std::once_flag start_once_;
  std::string start_error_;
  bool started_by_us_ = false;
  MPI_Op half_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op bfloat_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  std::atomic<MPI_Comm> comms_[kMaxGroups];  // group id -> communicator, MPI_COMM_NULL until made
  std::once_flag made_[kMaxGroups];
  std::atomic<bool> broken_[kMaxGroups] = {};  // a call on the group timed out
  std::atomic<int> in_flight_{0};
  std::mutex shutdown_mu_;
  bool finalized_ = false;
};

Engine& engine() {
  static Engine* e = new Engine();  // outlives every kernel call; shutdown() finalizes MPI
  return *e;
}

// --- Kernels' helpers.

int count(const bp::Tensor& t, const char* op) {
  BP_PLUGIN_CHECK(t.numel() <= INT32_MAX, op, ": ", t.numel(),
                  " elements are more than one MPI call moves (2^31 - 1); split the tensor");
  return static_cast<int>(t.numel());
}

// avg: the sum divided by the group's size, in the tensor's dtype.
void divideBy(const bp::Tensor& t, int n) {
  const int64_t len = t.numel();
  switch (t.dtype()) {
    case ScalarType::Float32: {
      auto* p = static_cast<float*>(t.data_ptr());
      for (int64_t i = 0; i < len; ++i) p[i] /= static_cast<float>(n);
      break;
    }
    case ScalarType::Float64: {
      auto* p = static_cast<double*>(t.data_ptr());
      for (int64_t i = 0; i < len; ++i) p[i] /= n;
      break;
    }
    case ScalarType::Float16: {
      auto* p = static_cast<uint16_t*>(t.data_ptr());
      for (int64_t i = 0; i < len; ++i) p[i] = bp::halfBitsFromFloat(bp::floatFromHalfBits(p[i]) / n);
      break;
    }
    case ScalarType::BFloat16: {
      auto* p = static_cast<uint16_t*>(t.data_ptr());
      for (int64_t i = 0; i < len; ++i) p[i] = bp::bfloat16BitsFromFloat(bp::floatFromBFloat16Bits(p[i]) / n);
      break;
    }
    default: bp::fail(BP_INVALID_ARGUMENT, "comm: op='avg' needs a floating tensor");
  }
}

// The call's group, checked usable, and its communicator when it has 2+
// ranks; counts the kernel in flight while it lives.
struct Call {
  explicit Call(int64_t id, const char* op) : group(bp::groupInfo(id)) {
    BP_PLUGIN_CHECK(group.rank >= 0, op, ": this process is not a member of ", groupName(group));
    if (group.size == 1) return;
    Engine& e = engine();
    e.start();
    e.inFlight().fetch_add(1);
    in_flight.counted = true;  // a member: undone even when the rest of this constructor throws
    e.requireUsable(group, op);
    comm = e.comm(group, op);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  struct InFlight {
    bool counted = false;
    ~InFlight() {
      if (counted) engine().inFlight().fetch_sub(1);
    }
  } in_flight;
  BP_GroupInfo group;
  MPI_Comm comm = MPI_COMM_NULL;
};

// --- Kernels (the host's rule has checked each rank's own arguments).

bp::Tensor allReduce(const bp::Tensor& self, std::string_view op, int64_t group) {
  const Reduction r = parseReduction(op);
  Call c(group, kindName(Kind::AllReduce));
  if (c.group.size == 1) return self;  // every reduction of one value is that value
  Engine& e = engine();
  const int n = count(self, kindName(Kind::AllReduce));
  e.agree(c.comm, c.group, signatureOf(Kind::AllReduce, &self, r, -1));
  if (n == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Allreduce(MPI_IN_PLACE, buf.data_ptr(), n, mpiType(buf.dtype()), e.reduceOp(r, buf.dtype()), c.comm),
        "MPI_Allreduce");
  if (r == Reduction::Avg) divideBy(buf, c.group.size);
  copyBack(self, buf);
  return self;
}

bp::Tensor broadcast(const bp::Tensor& self, int64_t src, int64_t group) {
  Call c(group, kindName(Kind::Broadcast));
  if (c.group.size == 1) return self;
  const int n = count(self, kindName(Kind::Broadcast));
  engine().agree(c.comm, c.group, signatureOf(Kind::Broadcast, &self, Reduction::None, src));
  if (n == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Bcast(buf.data_ptr(), n, mpiType(buf.dtype()), static_cast<int>(src), c.comm), "MPI_Bcast");
  copyBack(self, buf);
  return self;
}

bp::Tensor allGather(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  Call c(group, kindName(Kind::AllGather));
  if (c.group.size == 1) {
    copyBack(out, self);  // copy_ broadcasts a 0-d self into out's [1]
    return out;
  }
  count(out, kindName(Kind::AllGather));
  const int n = count(self, kindName(Kind::AllGather));
  engine().agree(c.comm, c.group, signatureOf(Kind::AllGather, &self, Reduction::None, -1));
  if (n == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  check(MPI_Allgather(in.data_ptr(), n, mpiType(in.dtype()), buf.data_ptr(), n, mpiType(in.dtype()), c.comm),
        "MPI_Allgather");
  copyBack(out, buf);
  return out;
}

bp::Tensor reduceScatter(const bp::Tensor& self, std::string_view op, int64_t group, const bp::Tensor& out) {
  const Reduction r = parseReduction(op);
  Call c(group, kindName(Kind::ReduceScatter));
  if (c.group.size == 1) {
    copyBack(out, self);
    return out;
  }
  Engine& e = engine();
  count(self, kindName(Kind::ReduceScatter));
  const int n = count(out, kindName(Kind::ReduceScatter));
  e.agree(c.comm, c.group, signatureOf(Kind::ReduceScatter, &self, r, -1));
  if (n == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  check(MPI_Reduce_scatter_block(in.data_ptr(), buf.data_ptr(), n, mpiType(in.dtype()), e.reduceOp(r, in.dtype()),
                                 c.comm),
        "MPI_Reduce_scatter_block");
  if (r == Reduction::Avg) divideBy(buf, c.group.size);
  copyBack(out, buf);
  return out;
}

bp::Tensor allToAll(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  Call c(group, kindName(Kind::AllToAll));
  if (c.group.size == 1) {
    copyBack(out, self);
    return out;
  }
  const int n = count(self, kindName(Kind::AllToAll));
  engine().agree(c.comm, c.group, signatureOf(Kind::AllToAll, &self, Reduction::None, -1));
  if (n == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  const int block = n / c.group.size;
  check(MPI_Alltoall(in.data_ptr(), block, mpiType(in.dtype()), buf.data_ptr(), block, mpiType(in.dtype()), c.comm),
        "MPI_Alltoall");
  copyBack(out, buf);
  return out;
}

// Point-to-point: a header (the sender's signature), sent synchronously so
// that a receiver that never comes is a timeout, then the data, both with
// the user's tag. A send and its recv_ on one (peer, tag) pair come from one
// thread at a time on each side: two threads interleaving headers and data
// on the same pair could pair one's header with the other's data.
void send(const bp::Tensor& self, int64_t dst, int64_t tag, int64_t group) {
  Call c(group, kindName(Kind::Send));
  Engine& e = engine();
  const int n = count(self, kindName(Kind::Send));  // before anything is sent
  // Heap and refcounted: on a timeout MPI still holds them, and they are abandoned.
  auto* header = new Signature(signatureOf(Kind::Send, &self, Reduction::None, c.group.rank));
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Issend(header, kSignatureWords, MPI_INT64_T, static_cast<int>(dst), static_cast<int>(tag), c.comm, &req),
        "MPI_Issend");
  if (!waitAll(1, &req, deadlineAfter(c.group.timeout_seconds)))
    e.timedOut(c.group, "comm::send", "the receiver to take the header");
  delete header;
  if (n == 0) return;
  auto* buf = new bp::Tensor(contiguousCopy(self));
  check(
      MPI_Isend(buf->data_ptr(), n, mpiType(buf->dtype()), static_cast<int>(dst), static_cast<int>(tag), c.comm, &req),
      "MPI_Isend");
  if (!waitAll(1, &req, deadlineAfter(c.group.timeout_seconds)))
    e.timedOut(c.group, "comm::send", "the receiver to take the data");
  delete buf;
}

// Waits for receive `req` into a buffer that the caller frees afterwards: on
// a timeout the receive is cancelled (a receive can be) before the throw.
void waitReceive(MPI_Request& req, const Call& c, const char* waiting_for) {
  if (waitAll(1, &req, deadlineAfter(c.group.timeout_seconds))) return;
  MPI_Cancel(&req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  engine().timedOut(c.group, "comm::recv_", waiting_for);
}

bp::Tensor recv(const bp::Tensor& self, int64_t src, int64_t tag, int64_t group) {
  Call c(group, "comm::recv_");
  const int n = count(self, "comm::recv_");
  Signature header;
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Irecv(&header, kSignatureWords, MPI_INT64_T, static_cast<int>(src), static_cast<int>(tag), c.comm, &req),
        "MPI_Irecv");
  waitReceive(req, c, "the sender");
  const Signature mine = signatureOf(Kind::Send, &self, Reduction::None, src);
  if (!sameCall(header, mine)) {
    // Take the data so the channel stays in step, then refuse.
    if (header.numel > 0 && header.numel <= INT32_MAX && header.dtype >= 0 && header.dtype <= BP_UINT64) {
      std::vector<char> sink(static_cast<size_t>(header.numel) *
                             bp::elementSize(static_cast<ScalarType>(header.dtype)));
      check(MPI_Irecv(sink.data(), static_cast<int>(header.numel), mpiType(static_cast<ScalarType>(header.dtype)),
                      static_cast<int>(src), static_cast<int>(tag), c.comm, &req),
            "MPI_Irecv");
      waitReceive(req, c, "the sender's data");
    }
    bp::fail(BP_INVALID_ARGUMENT, "comm::recv_ on " + groupName(c.group) + ": rank " + std::to_string(src) + " sent " +
                                      describe(header) + " but this rank receives into " + describe(mine) +
                                      "; receive into a tensor of the sent dtype and shape");
  }
  if (n == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Irecv(buf.data_ptr(), n, mpiType(buf.dtype()), static_cast<int>(src), static_cast<int>(tag), c.comm, &req),
        "MPI_Irecv");
  waitReceive(req, c, "the sender's data");
  copyBack(self, buf);
  return self;
}

void barrier(int64_t group) {
  Call c(group, kindName(Kind::Barrier));
  if (c.group.size == 1) return;
  engine().agree(c.comm, c.group, signatureOf(Kind::Barrier, nullptr, Reduction::None, -1));
}

void init(bp::Library& m) {
  m.impl("comm::all_reduce_", kCpu, &allReduce);
  m.impl("comm::broadcast_", kCpu, &broadcast);
  m.impl("comm::all_gather.out", kCpu, &allGather);
  m.impl("comm::reduce_scatter.out", kCpu, &reduceScatter);
  m.impl("comm::all_to_all.out", kCpu, &allToAll);
  m.impl("comm::send", kCpu, &send);
  m.impl("comm::recv_", kCpu, &recv);
  m.impl("comm::barrier", kCpu, &barrier);
  // Note [MPI in a plugin]: under a launcher with peers, MPI starts here,
  // when every rank loads its plugins, rather than on a first collective
  // that ranks outside its group would never make.
  try {
    if (bp::groupInfo(0).world_size > 1) engine().start();
  } catch (const bp::Error& e) {
    // The plugin loads anyway: every collective then fails with this reason.
    m.log(BP_LOG_WARNING, "MPI did not start, so collectives on CPU tensors will fail: " + e.message());
  }
}

void shutdown() { engine().shutdown(); }

}  // namespace

BACKPLANE_PLUGIN("mpi", "0.1.0", init)
BACKPLANE_PLUGIN_SHUTDOWN(shutdown)
