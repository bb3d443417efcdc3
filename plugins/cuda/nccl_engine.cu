// Note [NCCL engine]
// The CUDA plugin's kernels of the comm:: collectives (Note [Collective
// engines] in plugin_api.h) call NCCL, queued on the device's current stream
// like every other kernel of the plugin, so a collective is ordered after
// the kernels that produced its input and before those that read its
// output, without the host waiting for the GPU.
//
// - NCCL is opened with dlopen on the first collective on a CUDA tensor, not
//   linked: the plugin loads, and every other op runs, where NCCL is not
//   installed. BACKPLANE_NCCL_LIBRARY names the library file (e.g. pip's
//   nvidia-nccl-cu13); else libnccl.so.2 from the loader's path and then
//   from the CUDA toolkit the plugin was built with.
// - A call the engine cannot serve is declined (bp::decline), so the host
//   runs it through the CPU fallback: staged through host memory and the
//   CPU engine, counted in the profiler's host<->device column. That is the
//   path when NCCL is missing or older than 2.10 (no ncclAvg) on any rank of
//   the group, for reductions of 16-bit integers (NCCL has none), for a group
//   in which two ranks share a GPU (NCCL gives each rank its own GPU; before
//   2.30 it refuses two on one), and for a send or recv_ on a group no
//   collective has run on yet (making a communicator is the whole group's
//   business, which two peers cannot do alone). Every rank declines the same
//   calls: the group's facts (each rank's GPU, whether it has NCCL) are
//   gathered before anything is decided.
// - A group's communicator for a device is made on the group's first
//   collective there. In a group of two or more ranks its members first
//   gather those facts, then rank 0 broadcasts its ncclUniqueId with a status
//   word (so a rank 0 that cannot make one fails every rank at once), through
//   the CPU engine (the mpi plugin: comm::all_gather and comm::broadcast_ on
//   CPU tensors), as nccl-tests bootstrap through MPI. So a rank that never
//   arrives is the CPU engine's timeout, and a world of two or more needs the
//   CPU engine. A world of one makes its communicator alone. Not bounded: a
//   rank that dies or hangs between that exchange and ncclCommInitRank
//   leaves the others inside ncclCommInitRank (mpirun ends the job when a
//   rank dies).
// - Checked as the CPU engine checks (Note [Checked collectives] in
//   plugins/mpi/mpi_plugin.cc): before each collective the ranks gather
//   each rank's call (comm::all_gather of the signature on CPU tensors) and
//   all fail together, naming each rank's call, when they differ. The GPU
//   does not wait for this: only the host thread does, for one small CPU
//   collective. Point-to-point: the sender's header goes through the CPU
//   engine's comm::send with the user's tag, and the receiver answers accept
//   or refuse before the sender queues its ncclSend, so no send is left
//   unmatched on a stream. Failures inside these exchanges are raised naming
//   the user's op.
// - One call at a time per communicator from a process (a mutex around the
//   check and the NCCL call): the ranks' NCCL calls stay in one order, and
//   NCCL's communicators are not for concurrent callers. Not a hot path.
// - Communicators live until the process exits (destroying one waits for
//   its peers).
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bp_common/collectives.h"
#include "cuda/cuda_libraries.h"
#include "cuda/nccl_engine.h"
#include "gpu/runtime.h"

namespace bp_cuda {
namespace {

using bp::ScalarType;
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

constexpr int kMaxGroups = 4096;  // the host's limit (backplane/runtime/process_group.h)
constexpr int kMaxDevices = 16;
constexpr int kNcclAvgVersion = 21000;  // ncclAvg came with NCCL 2.10

// --- NCCL, opened at run time.

struct NcclApi {
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclGetLastError) getLastError = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  int version = 0;
  std::string unavailable;  // why NCCL cannot be used; empty when it can
};

NcclApi loadNccl() {
  NcclApi n;
  std::string opened;
  void* lib = openLibrary("NCCL", "BACKPLANE_NCCL_LIBRARY", "libnccl.so.2",
                          "install NCCL 2.10 or newer: the CUDA toolkit's libnccl, Debian's libnccl2, or pip's "
                          "nvidia-nccl-cu13 with BACKPLANE_NCCL_LIBRARY naming its libnccl.so.2",
                          &opened, &n.unavailable);
  if (lib == nullptr) return n;
  const bool ok = resolve(lib, "ncclGetVersion", n.getVersion) && resolve(lib, "ncclGetUniqueId", n.getUniqueId) &&
                  resolve(lib, "ncclCommInitRank", n.commInitRank) &&
                  resolve(lib, "ncclGetErrorString", n.getErrorString) && resolve(lib, "ncclAllReduce", n.allReduce) &&
                  resolve(lib, "ncclBroadcast", n.broadcast) && resolve(lib, "ncclAllGather", n.allGather) &&
                  resolve(lib, "ncclReduceScatter", n.reduceScatter) && resolve(lib, "ncclSend", n.send) &&
                  resolve(lib, "ncclRecv", n.recv) && resolve(lib, "ncclGroupStart", n.groupStart) &&
                  resolve(lib, "ncclGroupEnd", n.groupEnd);
  resolve(lib, "ncclGetLastError", n.getLastError);  // NCCL 2.13 and newer; optional
  if (!ok || n.getVersion(&n.version) != ncclSuccess) {
    n.unavailable = "the NCCL library " + opened + " lacks functions of NCCL 2.10; install NCCL 2.10 or newer";
    return n;
  }
  if (n.version < kNcclAvgVersion)
    n.unavailable = "NCCL " + std::to_string(n.version) + " is older than 2.10, which the engine needs (ncclAvg)";
  return n;
}

const NcclApi& nccl() {
  static const NcclApi api = loadNccl();
  return api;
}

// ncclDataType_t of a dtype a reduction takes; false for the 16-bit integers.
bool reductionType(ScalarType t, ncclDataType_t* out) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8: *out = ncclUint8; return true;
    case ScalarType::Int8: *out = ncclInt8; return true;
    case ScalarType::Int32: *out = ncclInt32; return true;
    case ScalarType::UInt32: *out = ncclUint32; return true;
    case ScalarType::Int64: *out = ncclInt64; return true;
    case ScalarType::UInt64: *out = ncclUint64; return true;
    case ScalarType::Float16: *out = ncclFloat16; return true;
    case ScalarType::BFloat16: *out = ncclBfloat16; return true;
    case ScalarType::Float32: *out = ncclFloat32; return true;
    case ScalarType::Float64: *out = ncclFloat64; return true;
    case ScalarType::Int16:
    case ScalarType::UInt16: return false;
  }
  return false;
}

ncclRedOp_t reductionOp(Reduction r) {
  switch (r) {
    case Reduction::Avg: return ncclAvg;
    case Reduction::Min: return ncclMin;
    case Reduction::Max: return ncclMax;  // of bool: or (the host's rule allows max and min only)
    case Reduction::Product: return ncclProd;
    default: return ncclSum;
  }
}

// --- Calls into the CPU engine (Note [NCCL engine]).

// Runs `call` (a comm:: operator on CPU tensors, served by the mpi plugin)
// for `what` of the user's `op`; a failure is raised naming the user's op,
// what the engine was doing, and, without a CPU engine, what to install.
template <class F>
auto throughCpuEngine(const char* op, const BP_GroupInfo& g, const char* what, F&& call) {
  try {
    return call();
  } catch (const bp::Error& e) {
    const bool no_engine = e.message().find("has no kernel") != std::string::npos;
    bp::fail(e.code(), std::string(op) + " on " + groupName(g) + ": the NCCL engine's " + what +
                           " through the CPU engine failed: " + e.message() +
                           (no_engine ? std::string("; the NCCL engine sets up and checks a group of two or more ranks "
                                                    "through the mpi plugin: build Backplane with Open MPI "
                                                    "(apt-get install libopenmpi-dev openmpi-bin) and load it")
                                      : std::string()));
  }
}

// Every rank's `words` int64s, gathered in group-rank order.
std::vector<int64_t> gatherWords(const char* op, const BP_GroupInfo& g, const char* what,
                                 const std::vector<int64_t>& words) {
  static const bp::Operator gather = bp::Operator::find("comm::all_gather.out");
  const auto n = static_cast<int64_t>(words.size());
  bp::Tensor mine = bp::Tensor::empty({n}, ScalarType::Int64, bp::Device::cpu());
  std::memcpy(mine.data_ptr(), words.data(), words.size() * sizeof(int64_t));
  bp::Tensor all = bp::Tensor::empty({n * g.size}, ScalarType::Int64, bp::Device::cpu());
  throughCpuEngine(op, g, what, [&] { return gather.call(mine, g.id, all); });
  const auto* p = static_cast<const int64_t*>(all.data_ptr());
  return std::vector<int64_t>(p, p + n * g.size);
}

// --- Communicators.

struct Comm {
  ncclComm_t comm = nullptr;
  std::string staged;  // non-empty: this group's calls are declined, for this reason
  // One collective at a time per communicator from this process: its
  // cross-rank check and its NCCL call keep their order across ranks, and
  // NCCL's communicators are not for concurrent callers.
  std::mutex mu;
};

class Engine {
 public:
  Engine() {
    for (auto& row : comms_)
      for (auto& c : row) c.store(nullptr, std::memory_order_relaxed);
  }

  // The communicator of group `g` on `device`, made on first use
  // (lock-free once made).
  Comm& comm(const BP_GroupInfo& g, int device, const char* op) {
    checkSlot(g, device, op);
    std::atomic<Comm*>& slot = comms_[g.id][device];
    if (Comm* c = slot.load(std::memory_order_acquire)) return *c;
    std::call_once(made_[g.id][device], [&] { slot.store(make(g, device, op), std::memory_order_release); });
    return *slot.load(std::memory_order_acquire);
  }

  // The communicator if a collective has made it, else nullptr (point-to-point
  // calls never make one: making is the whole group's business).
  Comm* existing(const BP_GroupInfo& g, int device, const char* op) {
    checkSlot(g, device, op);
    return comms_[g.id][device].load(std::memory_order_acquire);
  }

  static void check(ncclResult_t rc, const char* what, ncclComm_t comm) {
    if (rc == ncclSuccess) return;
    const NcclApi& n = nccl();
    const std::string detail = n.getLastError ? n.getLastError(comm) : "";
    bp::fail(BP_INTERNAL, std::string(what) + " failed: " + n.getErrorString(rc) +
                              (detail.empty() ? std::string() : " (" + detail + ")"));
  }

 private:
  static void checkSlot(const BP_GroupInfo& g, int device, const char* op) {
    BP_PLUGIN_CHECK(g.id >= 0 && g.id < kMaxGroups, op, ": group id ", g.id, " is outside [0, ", kMaxGroups, ")");
    BP_PLUGIN_CHECK(device >= 0 && device < kMaxDevices, op,
                    ": the NCCL engine serves cuda:0 to cuda:", kMaxDevices - 1, ", not cuda:", device);
  }

  // In a group of two or more, the ranks first gather what decides the path
  // (each rank's GPU and whether it has NCCL), so that every rank decides
  // the same; then rank 0 broadcasts NCCL's unique id with a status word, so
  // that a failure to make one fails every rank at once.
  static Comm* make(const BP_GroupInfo& g, int device, const char* op) {
    const NcclApi& n = nccl();
    auto c = std::make_unique<Comm>();
    ncclUniqueId id{};
    if (g.size > 1) {
      c->staged = stagingReason(g, device, op);
      if (!c->staged.empty()) return c.release();  // lives until exit (Note [NCCL engine])
      static const bp::Operator bcast = bp::Operator::find("comm::broadcast_");
      constexpr auto kIdBytes = static_cast<int64_t>(sizeof id);
      bp::Tensor msg = bp::Tensor::empty({kIdBytes + 1}, ScalarType::UInt8, bp::Device::cpu());
      auto* bytes = static_cast<unsigned char*>(msg.data_ptr());
      std::string failure;
      if (g.rank == 0) {
        const ncclResult_t rc = n.getUniqueId(&id);
        bytes[0] = rc == ncclSuccess ? 1 : 0;
        if (rc != ncclSuccess) failure = n.getErrorString(rc);
        std::memcpy(bytes + 1, &id, sizeof id);
      }
      throughCpuEngine(op, g, "exchange of NCCL's unique id", [&] { return bcast.call(msg, int64_t{0}, g.id); });
      if (bytes[0] != 1)
        bp::fail(BP_INTERNAL, std::string(op) + " on " + groupName(g) + ": rank 0 could not make NCCL's unique id" +
                                  (failure.empty() ? std::string() : ": " + failure));
      std::memcpy(&id, bytes + 1, sizeof id);
    } else {
      check(n.getUniqueId(&id), "ncclGetUniqueId", nullptr);
    }
    bp_gpu::DeviceGuard guard(device);
    check(n.commInitRank(&c->comm, g.size, id, g.rank), (std::string(op) + ": ncclCommInitRank").c_str(), nullptr);
    return c.release();  // lives until exit (Note [NCCL engine])
  }

  // Why the group's calls on this device are staged, or "": a rank without
  // NCCL, or two ranks on one GPU. Decided from every rank's facts, gathered
  // through the CPU engine, so every rank decides the same.
  static std::string stagingReason(const BP_GroupInfo& g, int device, const char* op) {
    cudaDeviceProp prop{};
    bp_gpu::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    std::vector<int64_t> mine(3, 0);  // the GPU's UUID (16 bytes), whether NCCL serves
    std::memcpy(mine.data(), &prop.uuid, sizeof prop.uuid);
    mine[2] = nccl().unavailable.empty() ? 1 : 0;
    const std::vector<int64_t> all = gatherWords(op, g, "exchange of the ranks' GPUs", mine);
    for (int i = 0; i < g.size; ++i)
      if (all[static_cast<size_t>(3 * i + 2)] != 1)
        return "rank " + std::to_string(i) + " of " + groupName(g) +
               " has no usable NCCL (it says why on its own calls); the group's collectives on CUDA tensors are "
               "staged through host memory and the CPU engine";
    for (int i = 0; i < g.size; ++i)
      for (int j = i + 1; j < g.size; ++j)
        if (all[static_cast<size_t>(3 * i)] == all[static_cast<size_t>(3 * j)] &&
            all[static_cast<size_t>(3 * i + 1)] == all[static_cast<size_t>(3 * j + 1)])
          return "ranks " + std::to_string(i) + " and " + std::to_string(j) + " of " + groupName(g) +
                 " share one GPU, and NCCL takes one GPU per rank; the group's collectives on CUDA tensors are "
                 "staged through host memory and the CPU engine";
    return {};
  }

  std::atomic<Comm*> comms_[kMaxGroups][kMaxDevices];
  std::once_flag made_[kMaxGroups][kMaxDevices];
};

Engine& engine() {
  static Engine* e = new Engine();  // outlives every kernel call
  return *e;
}

// --- A call: its group, communicator and stream, or a decline.

struct Call {
  // A collective: makes the group's communicator on its first call. A
  // point-to-point call (`p2p`) uses the communicator a collective made and
  // declines when there is none.
  Call(const bp::Tensor& t, int64_t group_id, const char* op, bool p2p = false)
      : name(op), group(bp::groupInfo(group_id)) {
    BP_PLUGIN_CHECK(group.rank >= 0, op, ": this process is not a member of ", groupName(group));
    const NcclApi& n = nccl();
    // A group of two or more decides together (Engine::stagingReason).
    if (group.size == 1 && !n.unavailable.empty()) bp::decline(n.unavailable);
    device = t.device().index;
    Comm* c = p2p ? engine().existing(group, device, op) : &engine().comm(group, device, op);
    if (c == nullptr)
      bp::decline(std::string(op) +
                  ": no collective has run on this group on this GPU yet, so the NCCL engine has no communicator "
                  "for it (making one is the whole group's business); staged through host memory and the CPU "
                  "engine");
    if (!c->staged.empty()) bp::decline(c->staged);
    comm_ = c;
    comm = c->comm;
    stream = bp_gpu::currentStream(device);
  }

  // Note [NCCL engine]: every rank's call, gathered through the CPU engine.
  void agree(const Signature& mine) const {
    if (group.size == 1) return;
    std::vector<int64_t> words(kSignatureWords);
    std::memcpy(words.data(), &mine, sizeof mine);
    const std::vector<int64_t> all = gatherWords(name, group, "check that the ranks agree", words);
    const std::string disagree = disagreement(reinterpret_cast<const Signature*>(all.data()), group);
    if (!disagree.empty())
      bp::fail(BP_INVALID_ARGUMENT, std::string(kindName(static_cast<Kind>(mine.kind))) + " on " + disagree);
  }

  std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(comm_->mu); }
  void check(ncclResult_t rc, const char* what) const { Engine::check(rc, what, comm); }

  const char* name;
  BP_GroupInfo group;
  int device = 0;
  Comm* comm_ = nullptr;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

ncclDataType_t reductionTypeOrDecline(ScalarType t, const char* op) {
  ncclDataType_t type;
  if (!reductionType(t, &type))
    bp::decline(std::string(op) + ": NCCL has no reductions of " + bp::name(t) +
                "; staged through host memory and the CPU engine");
  return type;
}

size_t bytes(const bp::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// --- Kernels (the host's rule has checked each rank's own arguments).

bp::Tensor allReduce(const bp::Tensor& self, std::string_view op, int64_t group) {
  const Reduction r = parseReduction(op);
  const char* name = kindName(Kind::AllReduce);
  const ncclDataType_t type = reductionTypeOrDecline(self.dtype(), name);
  const Call c(self, group, name);
  const auto lock = c.lock();
  c.agree(signatureOf(Kind::AllReduce, &self, r, -1));
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  c.check(nccl().allReduce(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), type, reductionOp(r),
                           c.comm, c.stream),
          "ncclAllReduce");
  copyBack(self, buf);
  return self;
}

// The data movements take any dtype, as bytes.
bp::Tensor broadcast(const bp::Tensor& self, int64_t src, int64_t group) {
  const Call c(self, group, kindName(Kind::Broadcast));
  const auto lock = c.lock();
  c.agree(signatureOf(Kind::Broadcast, &self, Reduction::None, src));
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  c.check(
      nccl().broadcast(buf.data_ptr(), buf.data_ptr(), bytes(buf), ncclUint8, static_cast<int>(src), c.comm, c.stream),
      "ncclBroadcast");
  copyBack(self, buf);
  return self;
}

bp::Tensor allGather(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  const Call c(self, group, kindName(Kind::AllGather));
  const auto lock = c.lock();
  c.agree(signatureOf(Kind::AllGather, &self, Reduction::None, -1));
  if (self.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  c.check(nccl().allGather(in.data_ptr(), buf.data_ptr(), bytes(in), ncclUint8, c.comm, c.stream), "ncclAllGather");
  copyBack(out, buf);
  return out;
}

bp::Tensor reduceScatter(const bp::Tensor& self, std::string_view op, int64_t group, const bp::Tensor& out) {
  const Reduction r = parseReduction(op);
  const char* name = kindName(Kind::ReduceScatter);
  const ncclDataType_t type = reductionTypeOrDecline(self.dtype(), name);
  const Call c(self, group, name);
  const auto lock = c.lock();
  c.agree(signatureOf(Kind::ReduceScatter, &self, r, -1));
  if (out.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  c.check(nccl().reduceScatter(in.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), type, reductionOp(r),
                               c.comm, c.stream),
          "ncclReduceScatter");
  copyBack(out, buf);
  return out;
}

bp::Tensor allToAll(const bp::Tensor& self, int64_t group, const bp::Tensor& out) {
  const Call c(self, group, kindName(Kind::AllToAll));
  const auto lock = c.lock();
  c.agree(signatureOf(Kind::AllToAll, &self, Reduction::None, -1));
  if (self.numel() == 0) return out;
  const bp::Tensor in = sendBuffer(self, out), buf = contiguousCopy(out);
  const size_t block = bytes(in) / static_cast<size_t>(c.group.size);
  const auto* from = static_cast<const char*>(in.data_ptr());
  auto* to = static_cast<char*>(buf.data_ptr());
  const NcclApi& n = nccl();
  c.check(n.groupStart(), "ncclGroupStart");
  ncclResult_t rc = ncclSuccess;
  for (int p = 0; p < c.group.size && rc == ncclSuccess; ++p) {
    rc = n.send(from + p * block, block, ncclUint8, p, c.comm, c.stream);
    if (rc == ncclSuccess) rc = n.recv(to + p * block, block, ncclUint8, p, c.comm, c.stream);
  }
  const ncclResult_t end = n.groupEnd();  // always closes the group
  c.check(rc, "ncclSend/ncclRecv");
  c.check(end, "ncclGroupEnd");
  copyBack(out, buf);
  return out;
}

// Point-to-point: the sender's header goes to the receiver through the CPU
// engine with the user's tag (matched, timed out and checked there); the
// receiver answers with one word, accept or refuse, the same way; only an
// accepted send is queued on NCCL. So a receiver that is not on the NCCL
// path (a CPU tensor, a rank that declined) or that receives into another
// shape never leaves an unmatched ncclSend waiting on the sender's stream:
// the sender fails, within the timeout, on the CPU engine.
bp::Tensor headerOf(const Signature& s) {
  bp::Tensor h = bp::Tensor::empty({kSignatureWords}, ScalarType::Int64, bp::Device::cpu());
  std::memcpy(h.data_ptr(), &s, sizeof s);
  return h;
}

void send(const bp::Tensor& self, int64_t dst, int64_t tag, int64_t group) {
  const char* name = kindName(Kind::Send);
  const Call c(self, group, name, /*p2p=*/true);
  static const bp::Operator send_cpu = bp::Operator::find("comm::send");
  static const bp::Operator recv_cpu = bp::Operator::find("comm::recv_");
  const bp::Tensor header = headerOf(signatureOf(Kind::Send, &self, Reduction::None, c.group.rank));
  throughCpuEngine(name, c.group, "header", [&] { send_cpu.call<void>(header, dst, tag, group); });
  bp::Tensor answer = bp::Tensor::empty({1}, ScalarType::Int64, bp::Device::cpu());
  throughCpuEngine(name, c.group, "wait for the receiver's answer",
                   [&] { return recv_cpu.call(answer, dst, tag, group); });
  if (*static_cast<const int64_t*>(answer.data_ptr()) != 1)
    bp::fail(BP_INVALID_ARGUMENT, std::string(name) + " on " + groupName(c.group) + ": rank " + std::to_string(dst) +
                                      " refused " + describe(signatureOf(Kind::Send, &self, Reduction::None, -1)) +
                                      " (its error names what it receives into)");
  if (self.numel() == 0) return;
  const bp::Tensor buf = contiguousCopy(self);
  const auto lock = c.lock();
  c.check(nccl().send(buf.data_ptr(), bytes(buf), ncclUint8, static_cast<int>(dst), c.comm, c.stream), "ncclSend");
}

bp::Tensor recv(const bp::Tensor& self, int64_t src, int64_t tag, int64_t group) {
  const char* name = "comm::recv_";
  const Call c(self, group, name, /*p2p=*/true);
  static const bp::Operator send_cpu = bp::Operator::find("comm::send");
  static const bp::Operator recv_cpu = bp::Operator::find("comm::recv_");
  bp::Tensor h = bp::Tensor::empty({kSignatureWords}, ScalarType::Int64, bp::Device::cpu());
  throughCpuEngine(name, c.group, "header", [&] { return recv_cpu.call(h, src, tag, group); });
  Signature header;
  std::memcpy(&header, h.data_ptr(), sizeof header);
  const Signature mine = signatureOf(Kind::Send, &self, Reduction::None, src);
  const bool accept = sameCall(header, mine);
  bp::Tensor answer = bp::Tensor::empty({1}, ScalarType::Int64, bp::Device::cpu());
  *static_cast<int64_t*>(answer.data_ptr()) = accept ? 1 : 0;
  throughCpuEngine(name, c.group, "answer to the sender", [&] { send_cpu.call<void>(answer, src, tag, group); });
  if (!accept)
    bp::fail(BP_INVALID_ARGUMENT, "comm::recv_ on " + groupName(c.group) + ": rank " + std::to_string(src) + " sent " +
                                      describe(header) + " but this rank receives into " + describe(mine) +
                                      "; receive into a tensor of the sent dtype and shape");
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  {
    const auto lock = c.lock();
    c.check(nccl().recv(buf.data_ptr(), bytes(buf), ncclUint8, static_cast<int>(src), c.comm, c.stream), "ncclRecv");
  }
  copyBack(self, buf);
  return self;
}

}  // namespace

void registerNcclCollectives(bp::Library& m, int32_t type) {
  m.impl("comm::all_reduce_", type, &allReduce);
  m.impl("comm::broadcast_", type, &broadcast);
  m.impl("comm::all_gather.out", type, &allGather);
  m.impl("comm::reduce_scatter.out", type, &reduceScatter);
  m.impl("comm::all_to_all.out", type, &allToAll);
  m.impl("comm::send", type, &send);
  m.impl("comm::recv_", type, &recv);
}

}  // namespace bp_cuda
