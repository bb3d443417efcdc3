// The mpi plugin: Open MPI as the collective engine for CPU tensors. It
// registers the comm:: operators' kernels on the cpu device type (Note
// [Collective engines] in plugin_api.h), so a CPU tensor's all_reduce_ runs
// here, and any device without its own engine reaches it through the CPU
// fallback. Built like a vendor's plugin: the SDK and libmpi only.
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
// also what barrier is. Point-to-point sends a header before the data, and
// recv_ checks it. A group of one rank never starts MPI.
//
// Note [MPI in a plugin]
// The host opens plugins with local symbol binding, so libmpi, loaded as
// this plugin's dependency, is local too; Open MPI's own components (opened
// by MPI_Init) need its symbols global. The plugin re-opens libmpi with
// RTLD_GLOBAL (RTLD_NOLOAD: the copy already loaded) before MPI_Init, as
// mpi4py does. MPI starts on the first collective of a group of two or more
// ranks (MPI_Init_thread, MPI_THREAD_MULTIPLE; an application that started
// MPI itself keeps it, and finalizes it) and is finalized when the plugin
// unloads or the process exits (plugins stay loaded until exit, and mpirun
// counts a process that started MPI and exits without MPI_Finalize as
// failed), unless a collective timed out: MPI_Finalize would wait for the
// missing rank.
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

namespace {

using bp::ScalarType;

constexpr int32_t kCpu = 0;

// --- What a collective is (Note [Checked collectives]).

enum class Kind : int64_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, AllToAll, Barrier, Send };
const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "comm::all_reduce_";
    case Kind::Broadcast: return "comm::broadcast_";
    case Kind::AllGather: return "comm::all_gather.out";
    case Kind::ReduceScatter: return "comm::reduce_scatter.out";
    case Kind::AllToAll: return "comm::all_to_all.out";
    case Kind::Barrier: return "comm::barrier";
    case Kind::Send: return "comm::send";
  }
  return "comm::?";
}

enum class Reduction : int64_t { None = 0, Sum, Avg, Min, Max, Product };
Reduction parseReduction(std::string_view s) {
  if (s == "sum") return Reduction::Sum;
  if (s == "avg") return Reduction::Avg;
  if (s == "min") return Reduction::Min;
  if (s == "max") return Reduction::Max;
  if (s == "product") return Reduction::Product;
  bp::fail(BP_INVALID_ARGUMENT, "unknown reduction '" + std::string(s) + "'");
}
const char* reductionName(Reduction r) {
  switch (r) {
    case Reduction::None: return "";
    case Reduction::Sum: return "sum";
    case Reduction::Avg: return "avg";
    case Reduction::Min: return "min";
    case Reduction::Max: return "max";
    case Reduction::Product: return "product";
  }
  return "?";
}

constexpr int kSignatureDims = 6;
// Fixed-size, so that one MPI_Iallgather of int64s carries every rank's.
struct Signature {
  int64_t kind = 0;
  int64_t dtype = -1;
  int64_t reduction = 0;
  int64_t root = -1;
  int64_t ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kSignatureDims] = {};  // the first dims; a longer shape's tail is in numel
};
constexpr int kSignatureWords = sizeof(Signature) / sizeof(int64_t);
static_assert(sizeof(Signature) == kSignatureWords * sizeof(int64_t));

Signature signatureOf(Kind kind, const bp::Tensor* t, Reduction r, int64_t root) {
  Signature s;
  s.kind = static_cast<int64_t>(kind);
  s.reduction = static_cast<int64_t>(r);
  s.root = root;
  if (t != nullptr) {
    s.dtype = static_cast<int64_t>(t->dtype());
    s.ndim = t->dim();
    s.numel = t->numel();
    for (int64_t d = 0; d < t->dim() && d < kSignatureDims; ++d) s.sizes[d] = t->size(d);
  }
  return s;
}

std::string describe(const Signature& s) {
  std::string out = kindName(static_cast<Kind>(s.kind));
  if (s.dtype >= 0) {
    out += std::string(" on ") + bp::name(static_cast<ScalarType>(s.dtype)) + " [";
    for (int64_t d = 0; d < s.ndim; ++d) {
      if (d) out += ", ";
      out += d < kSignatureDims ? std::to_string(s.sizes[d]) : std::string("...");
      if (d >= kSignatureDims) break;
    }
    out += "]";
    if (s.ndim > kSignatureDims) out += " (" + std::to_string(s.numel) + " elements)";
  }
  if (s.reduction) out += std::string(", op='") + reductionName(static_cast<Reduction>(s.reduction)) + "'";
  if (s.root >= 0) out += ", src=" + std::to_string(s.root);
  return out;
}

bool sameCall(const Signature& a, const Signature& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

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

// MPI_Init waits for every rank of the job to start MPI too, with no
// timeout of its own: a rank that never reaches its first collective would
// hang the others there. So the init is watched: past the world's timeout
// the process says why on stderr and exits with status 124, which makes
// mpirun end the job (Note [Collective timeouts] in the host's
// backplane/runtime/process_group.h). An exception cannot be raised from
// inside MPI_Init.
class InitWatchdog {
 public:
  explicit InitWatchdog(const BP_GroupInfo& world)
      : thread_([this, world] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_for(lock, std::chrono::duration<double>(world.timeout_seconds), [this] { return done_; }))
            return;
          std::fprintf(stderr,
                       "backplane mpi plugin: rank %d of %d: MPI_Init waited %.1f s for the other ranks to start MPI "
                       "(their first collective; BACKPLANE_COMM_TIMEOUT): a rank has died, hangs, or never calls a "
                       "collective. Exiting with status 124 so that the job ends.\n",
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

class Engine;
Engine& engine();

class Engine {
 public:
  // MPI, started once (Note [MPI in a plugin]); throws what stopped it.
  void start() {
    std::call_once(start_once_, [this] { startMpi(); });
    if (!start_error_.empty()) bp::fail(BP_FAILED_PRECONDITION, start_error_);
  }

  // The communicator of group `g`, made on its first collective (under mu_:
  // MPI_Comm_create_group is collective over the group's members, so a
  // program makes each group's first collective from one thread at a time).
  MPI_Comm comm(const BP_GroupInfo& g) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = comms_.find(g.id);
    if (it != comms_.end()) return it->second;
    MPI_Comm c = MPI_COMM_NULL;
    if (g.id == 0) {
      check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup of the world");
    } else {
      MPI_Group world_group = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
      check(MPI_Comm_group(world_, &world_group), "MPI_Comm_group");
      check(MPI_Group_incl(world_group, g.size, g.world_ranks, &sub), "MPI_Group_incl");
      const int rc = MPI_Comm_create_group(world_, sub, static_cast<int>(g.id % 32768), &c);
      MPI_Group_free(&sub);
      MPI_Group_free(&world_group);
      check(rc, "MPI_Comm_create_group");
    }
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    comms_.emplace(g.id, c);
    return c;
  }

  // Waits for `req` at most the group's timeout; then marks the group broken
  // and throws kDeadlineExceeded naming the call.
  void wait(MPI_Request& req, const BP_GroupInfo& g, const char* op, const char* waiting_for) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(g.timeout_seconds);
    for (int spins = 0;; ++spins) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (spins < 256) continue;  // a peer that is a few microseconds behind
      if (std::chrono::steady_clock::now() > deadline) {
        markBroken(g.id);
        bp::fail(BP_DEADLINE_EXCEEDED,
                 std::string(op) + " on " + groupName(g) + ": rank " + std::to_string(g.rank) + " waited " +
                     seconds(g.timeout_seconds) + " for " + waiting_for +
                     " (the group's timeout: BACKPLANE_COMM_TIMEOUT or newGroup's): a rank has died, hangs, or "
                     "never called this collective. The group cannot be used again; end the process");
      }
      // Give the core to a rank sharing it (oversubscribed runs).
      if (spins < 4096) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void requireUsable(const BP_GroupInfo& g, const char* op) {
    if (broken_any_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.count(g.id))
        bp::fail(BP_FAILED_PRECONDITION, std::string(op) + " on " + groupName(g) +
                                             ": an earlier collective on this group timed out, so its ranks no "
                                             "longer agree on what comes next; end the process");
    }
  }

  // Note [Checked collectives]: every rank's signature, after which every
  // rank is present; throws on every rank when they differ.
  void agree(MPI_Comm c, const BP_GroupInfo& g, const Signature& mine) {
    // Up to 16 ranks on the stack: a collective allocates nothing of its own.
    Signature small[16];
    std::vector<Signature> large(g.size > 16 ? static_cast<size_t>(g.size) : 0);
    Signature* all = g.size > 16 ? large.data() : small;
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&mine, kSignatureWords, MPI_INT64_T, all, kSignatureWords, MPI_INT64_T, c, &req),
          "MPI_Iallgather");
    wait(req, g, kindName(static_cast<Kind>(mine.kind)), "the other ranks to arrive");
    bool same = true;
    for (int r = 1; r < g.size; ++r) same = same && sameCall(all[r], all[0]);
    if (same) return;
    std::string calls;
    for (int r = 0; r < g.size; ++r) calls += "\n  rank " + std::to_string(r) + ": " + describe(all[r]);
    bp::fail(BP_INVALID_ARGUMENT, std::string(kindName(static_cast<Kind>(mine.kind))) + " on " + groupName(g) +
                                      ": the ranks called different collectives; every rank must call the same "
                                      "one with the same dtype and shape:" +
                                      calls);
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

  // Finalizes MPI if this plugin started it; once (unload or exit).
  void shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_by_us_ || finalized_) return;
    finalized_ = true;
    if (!broken_.empty()) return;  // MPI_Finalize would wait for the rank that never came
    for (auto& [id, c] : comms_) MPI_Comm_free(&c);
    comms_.clear();
    for (MPI_Op& op : half_ops_) MPI_Op_free(&op);
    for (MPI_Op& op : bfloat_ops_) MPI_Op_free(&op);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  static std::string groupName(const BP_GroupInfo& g) {
    if (g.id == 0) return "the world (" + std::to_string(g.size) + " ranks)";
    std::string s = "group " + std::to_string(g.id) + " (world ranks [";
    for (int i = 0; i < g.size; ++i) s += (i ? ", " : "") + std::to_string(g.world_ranks[i]);
    return s + "])";
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
    int size = 0, rank = 0;
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
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
    comms_.emplace(0, world_);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 0>, 1, &half_ops_[0]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 1>, 1, &half_ops_[1]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 2>, 1, &half_ops_[2]);
    MPI_Op_create(&halfReduce<halfToFloat, floatToHalf, 3>, 1, &half_ops_[3]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 0>, 1, &bfloat_ops_[0]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 1>, 1, &bfloat_ops_[1]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 2>, 1, &bfloat_ops_[2]);
    MPI_Op_create(&halfReduce<bfloatToFloat, floatToBfloat, 3>, 1, &bfloat_ops_[3]);
  }

  void markBroken(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    broken_[id] = true;
    broken_any_.store(true, std::memory_order_release);
  }

  std::once_flag start_once_;
  std::string start_error_;
  bool started_by_us_ = false;
  bool finalized_ = false;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Op half_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op bfloat_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  std::mutex mu_;                      // comms_, broken_
  std::map<int64_t, MPI_Comm> comms_;  // group id -> communicator
  std::map<int64_t, bool> broken_;     // groups whose collective timed out
  std::atomic<bool> broken_any_{false};
};

Engine& engine() {
  static Engine* e = new Engine();  // outlives every kernel call; shutdown() finalizes MPI
  return *e;
}

// --- Kernels' helpers.

// A contiguous CPU tensor with t's values (t itself when it is one).
bp::Tensor contiguousCopy(const bp::Tensor& t) {
  if (t.is_contiguous()) return t;
  static const bp::Operator copy = bp::Operator::find("copy_");
  bp::Tensor c = bp::Tensor::empty(t.sizes(), t.dtype(), t.device());
  copy.call(c, t, false);
  return c;
}
// Writes `from` back into non-contiguous `to` (after contiguousCopy).
void copyBack(const bp::Tensor& to, const bp::Tensor& from) {
  if (to.get() == from.get()) return;
  static const bp::Operator copy = bp::Operator::find("copy_");
  copy.call(to, from, false);
}

int count(const bp::Tensor& t, const char* op) {
  BP_PLUGIN_CHECK(t.numel() <= INT32_MAX, op, ": ", t.numel(),
                  " elements are more than one MPI call moves (2^31 - 1); ", "split the tensor");
  return static_cast<int>(t.numel());
}

bool overlaps(const bp::Tensor& a, const bp::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  const size_t an = static_cast<size_t>(a.numel()) * a.element_size(),
               bn = static_cast<size_t>(b.numel()) * b.element_size();
  return an && bn && a0 < b0 + bn && b0 < a0 + an;
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

// The call's group, checked usable, and MPI started when it has 2+ ranks.
struct Call {
  BP_GroupInfo group;
  MPI_Comm comm = MPI_COMM_NULL;
};
Call begin(int64_t group, const char* op) {
  Call c;
  c.group = bp::groupInfo(group);
  BP_PLUGIN_CHECK(c.group.rank >= 0, op, ": this process is not a member of ", Engine::groupName(c.group));
  if (c.group.size == 1) return c;
  Engine& e = engine();
  e.start();
  e.requireUsable(c.group, op);
  c.comm = e.comm(c.group);
  return c;
}

// --- Kernels (the host's rule has checked each rank's own arguments).

bp::Tensor allReduce(const bp::Tensor& self, std::string_view op, int64_t group) {
  const Reduction r = parseReduction(op);
  Call c = begin(group, kindName(Kind::AllReduce));
  if (c.group.size == 1) return self;  // every reduction of one value is that value
  Engine& e = engine();
  e.agree(c.comm, c.group, signatureOf(Kind::AllReduce, &self, r, -1));
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Allreduce(MPI_IN_PLACE, buf.data_ptr(), count(buf, "comm::all_reduce_"), mpiType(buf.dtype()),
                      e.reduceOp(r, buf.dtype()), c.comm),
        "MPI_Allreduce");
  if (r == Reduction::Avg) divideBy(buf, c.group.size);
  copyBack(self, buf);
  return self;
}

bp::Tensor broadcast(const bp::Tensor& self, int64_t src, int64_t group) {
  Call c = begin(group, kindName(Kind::Broadcast));
  if (c.group.size == 1) return self;
  engine().agree(c.comm, c.group, signatureOf(Kind::Broadcast, &self, Reduction::None, src));
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Bcast(buf.data_ptr(), count(buf, "comm::broadcast_"), mpiType(buf.dtype()), static_cast<int>(src), c.comm),
        "MPI_Bcast");
  copyBack(self, buf);
  return self;
}

// self's values in a contiguous tensor that does not overlap `out`.
bp::Tensor sendBuffer(const bp::Tensor& self, const bp::Tensor& out) {
  if (self.is_contiguous() && !overlaps(self, out)) return self;
  static const bp::Operator copy = bp::Operator::find("copy_");
  bp::Tensor c = bp::Tensor::empty(self.sizes(), self.dtype(), self.device());
  copy.call(c, self, false);
  return c;
}

bp::Tensor allGather(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  Call c = begin(group, kindName(Kind::AllGather));
  if (c.group.size == 1) {
    copyBack(out, self);  // copy_ broadcasts a 0-d self into out's [1]
    return out;
  }
  engine().agree(c.comm, c.group, signatureOf(Kind::AllGather, &self, Reduction::None, -1));
  if (self.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  const int n = count(in, "comm::all_gather.out");
  check(MPI_Allgather(in.data_ptr(), n, mpiType(in.dtype()), buf.data_ptr(), n, mpiType(in.dtype()), c.comm),
        "MPI_Allgather");
  copyBack(out, buf);
  return out;
}

bp::Tensor reduceScatter(const bp::Tensor& self, std::string_view op, int64_t group, const bp::Tensor& out) {
  const Reduction r = parseReduction(op);
  Call c = begin(group, kindName(Kind::ReduceScatter));
  if (c.group.size == 1) {
    copyBack(out, self);
    return out;
  }
  Engine& e = engine();
  e.agree(c.comm, c.group, signatureOf(Kind::ReduceScatter, &self, r, -1));
  if (self.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  check(MPI_Reduce_scatter_block(in.data_ptr(), buf.data_ptr(), count(buf, "comm::reduce_scatter.out"),
                                 mpiType(in.dtype()), e.reduceOp(r, in.dtype()), c.comm),
        "MPI_Reduce_scatter_block");
  if (r == Reduction::Avg) divideBy(buf, c.group.size);
  copyBack(out, buf);
  return out;
}

bp::Tensor allToAll(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  Call c = begin(group, kindName(Kind::AllToAll));
  if (c.group.size == 1) {
    copyBack(out, self);
    return out;
  }
  engine().agree(c.comm, c.group, signatureOf(Kind::AllToAll, &self, Reduction::None, -1));
  if (self.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  const int block = count(in, "comm::all_to_all.out") / c.group.size;
  check(MPI_Alltoall(in.data_ptr(), block, mpiType(in.dtype()), buf.data_ptr(), block, mpiType(in.dtype()), c.comm),
        "MPI_Alltoall");
  copyBack(out, buf);
  return out;
}

// Point-to-point: a header (the sender's signature) then the data, both
// with the user's tag; the engine's tags above kMaxTag are not used.
void send(const bp::Tensor& self, int64_t dst, int64_t tag, int64_t group) {
  Call c = begin(group, kindName(Kind::Send));
  Engine& e = engine();
  const Signature header = signatureOf(Kind::Send, &self, Reduction::None, c.group.rank);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Isend(&header, kSignatureWords, MPI_INT64_T, static_cast<int>(dst), static_cast<int>(tag), c.comm, &req),
        "MPI_Isend");
  e.wait(req, c.group, "comm::send", "the receiver to take the header");
  if (self.numel() == 0) return;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Isend(buf.data_ptr(), count(buf, "comm::send"), mpiType(buf.dtype()), static_cast<int>(dst),
                  static_cast<int>(tag), c.comm, &req),
        "MPI_Isend");
  e.wait(req, c.group, "comm::send", "the receiver to take the data");
}

bp::Tensor recv(const bp::Tensor& self, int64_t src, int64_t tag, int64_t group) {
  Call c = begin(group, "comm::recv_");
  Engine& e = engine();
  Signature header;
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Irecv(&header, kSignatureWords, MPI_INT64_T, static_cast<int>(src), static_cast<int>(tag), c.comm, &req),
        "MPI_Irecv");
  e.wait(req, c.group, "comm::recv_", "the sender");
  const Signature mine = signatureOf(Kind::Send, &self, Reduction::None, src);
  if (!sameCall(header, mine)) {
    // Take the data so the channel stays in step, then refuse.
    if (header.numel > 0 && header.dtype >= 0) {
      std::vector<char> sink(static_cast<size_t>(header.numel) *
                             bp::elementSize(static_cast<ScalarType>(header.dtype)));
      check(MPI_Recv(sink.data(), static_cast<int>(header.numel), mpiType(static_cast<ScalarType>(header.dtype)),
                     static_cast<int>(src), static_cast<int>(tag), c.comm, MPI_STATUS_IGNORE),
            "MPI_Recv");
    }
    bp::fail(BP_INVALID_ARGUMENT, "comm::recv_ on " + Engine::groupName(c.group) + ": rank " + std::to_string(src) +
                                      " sent " + describe(header) + " but this rank receives into " + describe(mine) +
                                      "; receive into a tensor of the sent dtype and shape");
  }
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  check(MPI_Irecv(buf.data_ptr(), count(buf, "comm::recv_"), mpiType(buf.dtype()), static_cast<int>(src),
                  static_cast<int>(tag), c.comm, &req),
        "MPI_Irecv");
  e.wait(req, c.group, "comm::recv_", "the sender's data");
  copyBack(self, buf);
  return self;
}

void barrier(int64_t group) {
  Call c = begin(group, kindName(Kind::Barrier));
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
}

void shutdown() { engine().shutdown(); }

}  // namespace

BACKPLANE_PLUGIN("mpi", "0.1.0", init)
BACKPLANE_PLUGIN_SHUTDOWN(shutdown)
