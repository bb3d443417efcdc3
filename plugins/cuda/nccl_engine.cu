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
//   path when NCCL is missing or older than 2.10 (no ncclAvg), for
//   reductions of 16-bit integers (NCCL has none), and for a group in which
//   two ranks share a GPU (NCCL gives each rank its own GPU; before 2.30 it
//   refuses two on one). Every rank declines the same calls, since each
//   reason is the same on every rank (the last is decided from every rank's
//   GPU).
// - A group's communicator for a device is made on the group's first
//   collective there. In a group of two or more ranks its members first
//   exchange their GPUs' UUIDs, then rank 0's ncclUniqueId, through the CPU
//   engine (the mpi plugin: comm::all_gather and comm::broadcast_ on CPU
//   tensors), as nccl-tests bootstrap through MPI; so a rank that never
//   arrives is the CPU engine's timeout, and a world of two or more needs
//   the CPU engine. A world of one makes its communicator alone.
// - Checked as the CPU engine checks (Note [Checked collectives] in
//   plugins/mpi/mpi_plugin.cc): before each collective the ranks gather
//   each rank's call (comm::all_gather of the signature on CPU tensors) and
//   all fail together, naming each rank's call, when they differ. The GPU
//   does not wait for this: only the host thread does, for one small CPU
//   collective. Point-to-point sends their header through the CPU engine's
//   comm::send, with the user's tag.
// - Communicators live until the process exits (destroying one waits for
//   its peers).
#include <dlfcn.h>
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bp_common/collectives.h"
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

template <class F>
bool resolve(void* lib, const char* name, F& slot) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  return slot != nullptr;
}

NcclApi loadNccl() {
  NcclApi n;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("BACKPLANE_NCCL_LIBRARY"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    candidates.emplace_back("libnccl.so.2");
#ifdef BP_CUDA_TOOLKIT_LIBDIR
    candidates.emplace_back(BP_CUDA_TOOLKIT_LIBDIR "/libnccl.so.2");
#endif
  }
  void* lib = nullptr;
  std::string tried;
  for (const std::string& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* why = dlerror();
    tried += "\n  " + c + ": " + (why ? why : "not found");
  }
  if (lib == nullptr) {
    n.unavailable =
        "NCCL could not be opened (install NCCL 2.10 or newer: the CUDA toolkit's libnccl, Debian's "
        "libnccl2, or pip's nvidia-nccl-cu13 with BACKPLANE_NCCL_LIBRARY naming its libnccl.so.2):" +
        tried;
    return n;
  }
  const bool ok = resolve(lib, "ncclGetVersion", n.getVersion) && resolve(lib, "ncclGetUniqueId", n.getUniqueId) &&
                  resolve(lib, "ncclCommInitRank", n.commInitRank) &&
                  resolve(lib, "ncclGetErrorString", n.getErrorString) &&
                  resolve(lib, "ncclGetLastError", n.getLastError) && resolve(lib, "ncclAllReduce", n.allReduce) &&
                  resolve(lib, "ncclBroadcast", n.broadcast) && resolve(lib, "ncclAllGather", n.allGather) &&
                  resolve(lib, "ncclReduceScatter", n.reduceScatter) && resolve(lib, "ncclSend", n.send) &&
                  resolve(lib, "ncclRecv", n.recv) && resolve(lib, "ncclGroupStart", n.groupStart) &&
                  resolve(lib, "ncclGroupEnd", n.groupEnd);
  if (!ok || n.getVersion(&n.version) != ncclSuccess) {
    n.unavailable =
        "the NCCL library opened lacks functions of NCCL 2.10 (" + candidates.front() + "); install NCCL 2.10 or newer";
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

// --- Communicators.

struct Comm {
  ncclComm_t comm = nullptr;
  std::string staged;  // non-empty: this group's calls are declined, for this reason
};

class Engine {
 public:
  Engine() {
    for (auto& row : comms_)
      for (auto& c : row) c.store(nullptr, std::memory_order_relaxed);
  }

  // The communicator of group `g` on `device`, made on first use
  // (lock-free once made).
  const Comm& comm(const BP_GroupInfo& g, int device, const char* op) {
    BP_PLUGIN_CHECK(g.id >= 0 && g.id < kMaxGroups, op, ": group id ", g.id, " is outside [0, ", kMaxGroups, ")");
    BP_PLUGIN_CHECK(device >= 0 && device < kMaxDevices, op,
                    ": the NCCL engine serves cuda:0 to cuda:", kMaxDevices - 1, ", not cuda:", device);
    std::atomic<Comm*>& slot = comms_[g.id][device];
    if (Comm* c = slot.load(std::memory_order_acquire)) return *c;
    std::call_once(made_[g.id][device], [&] { slot.store(make(g, device, op), std::memory_order_release); });
    return *slot.load(std::memory_order_acquire);
  }

 private:
  static Comm* make(const BP_GroupInfo& g, int device, const char* op) {
    const NcclApi& n = nccl();
    auto* c = new Comm();  // lives until exit (Note [NCCL engine])
    ncclUniqueId id{};
    if (g.size > 1) {
      c->staged = sharedGpu(g, device);
      if (!c->staged.empty()) return c;
      static const bp::Operator bcast = bp::Operator::find("comm::broadcast_");
      bp::Tensor id_bytes = bp::Tensor::empty({static_cast<int64_t>(sizeof id)}, ScalarType::UInt8, bp::Device::cpu());
      if (g.rank == 0) {
        check(n.getUniqueId(&id), "ncclGetUniqueId", nullptr);
        std::memcpy(id_bytes.data_ptr(), &id, sizeof id);
      }
      bcast.call(id_bytes, int64_t{0}, g.id);
      std::memcpy(&id, id_bytes.data_ptr(), sizeof id);
    } else {
      check(n.getUniqueId(&id), "ncclGetUniqueId", nullptr);
    }
    bp_gpu::DeviceGuard guard(device);
    check(n.commInitRank(&c->comm, g.size, id, g.rank), (std::string(op) + ": ncclCommInitRank").c_str(), nullptr);
    return c;
  }

  // Why the group's calls on this device are staged (two of its ranks on
  // one GPU), or "". The ranks gather every rank's GPU UUID through the CPU
  // engine, so every rank decides the same.
  static std::string sharedGpu(const BP_GroupInfo& g, int device) {
    constexpr int64_t kUuid = sizeof(cudaUUID_t);
    cudaDeviceProp prop{};
    bp_gpu::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    static const bp::Operator gather = bp::Operator::find("comm::all_gather.out");
    bp::Tensor mine = bp::Tensor::empty({kUuid}, ScalarType::UInt8, bp::Device::cpu());
    std::memcpy(mine.data_ptr(), &prop.uuid, kUuid);
    bp::Tensor all = bp::Tensor::empty({kUuid * g.size}, ScalarType::UInt8, bp::Device::cpu());
    gather.call(mine, g.id, all);
    const auto* u = static_cast<const unsigned char*>(all.data_ptr());
    for (int i = 0; i < g.size; ++i)
      for (int j = i + 1; j < g.size; ++j)
        if (std::memcmp(u + i * kUuid, u + j * kUuid, kUuid) == 0)
          return "ranks " + std::to_string(i) + " and " + std::to_string(j) + " of " + groupName(g) +
                 " share one GPU, and NCCL takes one GPU per rank; the group's collectives on CUDA tensors are "
                 "staged through host memory and the CPU engine";
    return {};
  }

 public:
  static void check(ncclResult_t rc, const char* what, ncclComm_t comm) {
    if (rc == ncclSuccess) return;
    const NcclApi& n = nccl();
    std::string detail = n.getLastError ? n.getLastError(comm) : "";
    bp::fail(BP_INTERNAL, std::string(what) + " failed: " + n.getErrorString(rc) +
                              (detail.empty() ? std::string() : " (" + detail + ")"));
  }

 private:
  std::atomic<Comm*> comms_[kMaxGroups][kMaxDevices];
  std::once_flag made_[kMaxGroups][kMaxDevices];
};

Engine& engine() {
  static Engine* e = new Engine();  // outlives every kernel call
  return *e;
}

// --- A call: its group, communicator and stream, or a decline.

struct Call {
  Call(const bp::Tensor& t, int64_t group_id, const char* op) : group(bp::groupInfo(group_id)) {
    BP_PLUGIN_CHECK(group.rank >= 0, op, ": this process is not a member of ", groupName(group));
    const NcclApi& n = nccl();
    if (!n.unavailable.empty()) bp::decline(n.unavailable);
    device = t.device().index;
    const Comm& c = engine().comm(group, device, op);
    if (!c.staged.empty()) bp::decline(c.staged);
    comm = c.comm;
    stream = bp_gpu::currentStream(device);
  }

  // Note [NCCL engine]: every rank's call, gathered through the CPU engine.
  void agree(const Signature& mine) const {
    if (group.size == 1) return;
    static const bp::Operator gather = bp::Operator::find("comm::all_gather.out");
    bp::Tensor s = bp::Tensor::empty({kSignatureWords}, ScalarType::Int64, bp::Device::cpu());
    std::memcpy(s.data_ptr(), &mine, sizeof mine);
    bp::Tensor all = bp::Tensor::empty({int64_t{kSignatureWords} * group.size}, ScalarType::Int64, bp::Device::cpu());
    gather.call(s, group.id, all);
    const std::string disagree = disagreement(static_cast<const Signature*>(all.data_ptr()), group);
    if (!disagree.empty())
      bp::fail(BP_INVALID_ARGUMENT, std::string(kindName(static_cast<Kind>(mine.kind))) + " on " + disagree);
  }

  void check(ncclResult_t rc, const char* what) const { Engine::check(rc, what, comm); }

  BP_GroupInfo group;
  int device = 0;
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

// Point-to-point: the header goes through the CPU engine with the user's
// tag (matched, timed out and checked there), then the data through NCCL.
bp::Tensor headerOf(const Signature& s) {
  bp::Tensor h = bp::Tensor::empty({kSignatureWords}, ScalarType::Int64, bp::Device::cpu());
  std::memcpy(h.data_ptr(), &s, sizeof s);
  return h;
}

void send(const bp::Tensor& self, int64_t dst, int64_t tag, int64_t group) {
  const Call c(self, group, kindName(Kind::Send));
  static const bp::Operator send_header = bp::Operator::find("comm::send");
  send_header.call<void>(headerOf(signatureOf(Kind::Send, &self, Reduction::None, c.group.rank)), dst, tag, group);
  if (self.numel() == 0) return;
  const bp::Tensor buf = contiguousCopy(self);
  c.check(nccl().send(buf.data_ptr(), bytes(buf), ncclUint8, static_cast<int>(dst), c.comm, c.stream), "ncclSend");
}

bp::Tensor recv(const bp::Tensor& self, int64_t src, int64_t tag, int64_t group) {
  const Call c(self, group, "comm::recv_");
  static const bp::Operator recv_header = bp::Operator::find("comm::recv_");
  bp::Tensor h = bp::Tensor::empty({kSignatureWords}, ScalarType::Int64, bp::Device::cpu());
  recv_header.call(h, src, tag, group);
  Signature header;
  std::memcpy(&header, h.data_ptr(), sizeof header);
  const Signature mine = signatureOf(Kind::Send, &self, Reduction::None, src);
  if (!sameCall(header, mine)) {
    // Take the data so that the sender's stream does not wait for ever, then refuse.
    if (header.numel > 0 && header.dtype >= 0 && header.dtype <= BP_UINT64) {
      const bp::Tensor sink = bp::Tensor::empty({header.numel}, static_cast<ScalarType>(header.dtype), self.device());
      c.check(nccl().recv(sink.data_ptr(), bytes(sink), ncclUint8, static_cast<int>(src), c.comm, c.stream),
              "ncclRecv");
    }
    bp::fail(BP_INVALID_ARGUMENT, "comm::recv_ on " + groupName(c.group) + ": rank " + std::to_string(src) + " sent " +
                                      describe(header) + " but this rank receives into " + describe(mine) +
                                      "; receive into a tensor of the sent dtype and shape");
  }
  if (self.numel() == 0) return self;
  const bp::Tensor buf = contiguousCopy(self);
  c.check(nccl().recv(buf.data_ptr(), bytes(buf), ncclUint8, static_cast<int>(src), c.comm, c.stream), "ncclRecv");
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
