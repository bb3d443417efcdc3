// The comm:: operators (Note [Collectives are operators]): schemas, rules,
// the functional forms and how each differentiates. The engines that serve
// them are plugins (plugins/mpi for CPU tensors).
#include "backplane/runtime/collectives.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derivatives.h"
#include "backplane/ops/ops.h"

namespace backplane::comm {
namespace {

constexpr const char* kSchemas[] = {
    "comm::all_reduce_(Tensor(a!) self, str op=\"sum\", int group=0) -> Tensor(a!)",
    "comm::all_reduce(Tensor self, str op=\"sum\", int group=0) -> Tensor",
    "comm::broadcast_(Tensor(a!) self, int src, int group=0) -> Tensor(a!)",
    "comm::broadcast(Tensor self, int src, int group=0) -> Tensor",
    "comm::all_gather.out(Tensor self, int group=0, *, Tensor(a!) out) -> Tensor(a!)",
    "comm::all_gather(Tensor self, int group=0) -> Tensor",
    "comm::reduce_scatter.out(Tensor self, str op=\"sum\", int group=0, *, Tensor(a!) out) -> Tensor(a!)",
    "comm::reduce_scatter(Tensor self, str op=\"sum\", int group=0) -> Tensor",
    "comm::all_to_all.out(Tensor self, int group=0, *, Tensor(a!) out) -> Tensor(a!)",
    "comm::all_to_all(Tensor self, int group=0) -> Tensor",
    "comm::send(Tensor self, int dst, int tag=0, int group=0) -> ()",
    "comm::recv_(Tensor(a!) self, int src, int tag=0, int group=0) -> Tensor(a!)",
    "comm::barrier(int group=0) -> ()",
};

// How each differentiates (Note [Derivative declarations]). A reduction's
// gradient depends on the reduction (sum's is all_reduce of the gradient,
// max's is not), which a declaration cannot say, so the data collectives
// are not_implemented: backward through one names it. send, recv_ and
// barrier carry no gradient.
constexpr const char* kDerivatives[][2] = {
    {"comm::all_reduce_", "not_implemented"},
    {"comm::all_reduce", "not_implemented"},
    {"comm::broadcast_", "not_implemented"},
    {"comm::broadcast", "not_implemented"},
    {"comm::all_gather.out", "not_implemented"},
    {"comm::all_gather", "not_implemented"},
    {"comm::reduce_scatter.out", "not_implemented"},
    {"comm::reduce_scatter", "not_implemented"},
    {"comm::all_to_all.out", "not_implemented"},
    {"comm::all_to_all", "not_implemented"},
    {"comm::send", "non_differentiable"},
    {"comm::recv_", "non_differentiable"},
    {"comm::barrier", "non_differentiable"},
};

// The group `id` names, with this process a member; throws naming the op.
const GroupRecord& memberGroup(const char* op, int64_t id) {
  const GroupRecord* g = findGroupRecord(id);
  if (g == nullptr) {
    absl::StatusOr<Group> found = findGroup(id);  // the reason: a bad environment, or no such id
    throw Error(found.status().code(), strCat(op, ": ", found.status().message()));
  }
  if (g->rank < 0)
    throw Error(absl::StatusCode::kInvalidArgument,
                strCat(op, ": this process (world rank ", findGroupRecord(0)->rank, ") is not a member of ",
                       Group(*findGroup(id)).describe(), "; call the collective on its members only"));
  return *g;
}

void checkDefined(const char* op, const Tensor& t, const char* name) {
  BP_CHECK(t.defined(), op, ": argument '", name, "' is an undefined tensor; pass a tensor");
}

void checkPeer(const char* op, const GroupRecord& g, int64_t peer, const char* name, bool may_be_self) {
  const int64_t size = static_cast<int64_t>(g.world_ranks.size());
  BP_CHECK(peer >= 0 && peer < size, op, ": ", name, "=", peer, " is not a rank of ",
           Group(*findGroup(g.id)).describe(), ", which has ranks 0..", size - 1, " (", name,
           " is a rank of the group, not of the world)");
  BP_CHECK(may_be_self || peer != g.rank, op, ": ", name, "=", peer,
           " is this process's own rank; a rank cannot send to or receive from itself");
}

void checkTag(const char* op, int64_t tag) {
  BP_CHECK(tag >= 0 && tag <= kMaxTag, op, ": tag ", tag, " is outside [0, ", kMaxTag, "]");
}

ReduceOp checkReduction(const char* op, std::string_view name, ScalarType dtype) {
  absl::StatusOr<ReduceOp> r = parseReduceOp(name);
  if (!r.ok()) throw Error(r.status().code(), strCat(op, ": ", r.status().message()));
  BP_CHECK(*r != ReduceOp::Avg || isFloatingType(dtype), op, ": op='avg' averages floating tensors, but self is ",
           dtype, "; use 'sum' and divide, or convert to a floating dtype");
  BP_CHECK(dtype != ScalarType::Bool || *r == ReduceOp::Max || *r == ReduceOp::Min, op, ": a bool tensor reduces with ",
           "'max' (any rank true) or 'min' (every rank true), not '", name, "'");
  return *r;
}

// A shape, held inline: a rule runs on every call and allocates nothing.
using Sizes = absl::InlinedVector<int64_t, 8>;

// `out` of a gather-like form: self's dtype and device, `sizes` (an empty
// out is resized, as every out= form's).
void checkOut(const char* op, const Tensor& self, const Tensor& out, IntArrayRef sizes) {
  checkDefined(op, out, "out");
  BP_CHECK(out.device() == self.device(), op, ": out is on ", out.device(), " but self is on ", self.device(),
           "; pass an out on ", self.device());
  BP_CHECK(out.dtype() == self.dtype(), op, ": out is ", out.dtype(), " but self is ", self.dtype(),
           "; a collective does not convert: pass an out of dtype ", self.dtype());
  if (out.sizes() != sizes) {
    BP_CHECK(out.numel() == 0, op, ": out has shape ", out.sizes(), " but self of shape ", self.sizes(),
             " needs an out of shape ", sizes,
             " on this group; pass a tensor of that shape or an empty one (which is resized)");
    out.unsafeGetImpl()->resizeEmpty(sizes);
  }
}

IntArrayRef sizesRef(const Sizes& s) { return IntArrayRef(s.data(), s.size()); }

// The shape of self split into `n` equal blocks along dim 0 (one block).
Sizes blockShape(const char* op, const Tensor& self, int64_t n) {
  BP_CHECK(self.dim() >= 1, op, ": self is 0-d; it is split along dim 0 into one block per rank, so it needs a dim");
  BP_CHECK(self.size(0) % n == 0, op, ": self has ", self.size(0), " rows (dim 0 of shape ", self.sizes(),
           "), which do not split into ", n, " equal blocks, one per rank; pad dim 0 to a multiple of ", n);
  Sizes sizes(self.sizes().begin(), self.sizes().end());
  sizes[0] /= n;
  return sizes;
}

Sizes gatheredShape(const Tensor& self, int64_t n) {
  if (self.dim() == 0) return {n};
  Sizes sizes(self.sizes().begin(), self.sizes().end());
  sizes[0] *= n;
  return sizes;
}

int64_t sizeOf(const GroupRecord& g) { return static_cast<int64_t>(g.world_ranks.size()); }

// --- Rules (Note [Meta kernels]): each rank's own arguments. The in-place
// and functional forms of all_reduce and broadcast share theirs, and send
// and recv_ one, each instantiated with the op's name.

constexpr char kAllReduceInplace[] = "comm::all_reduce_";
constexpr char kAllReduce[] = "comm::all_reduce";
constexpr char kBroadcastInplace[] = "comm::broadcast_";
constexpr char kBroadcast[] = "comm::broadcast";
constexpr char kSend[] = "comm::send";
constexpr char kRecv[] = "comm::recv_";
constexpr char kDst[] = "dst";
constexpr char kSrc[] = "src";

template <const char* kOp>
void allReduceRule(const Tensor& self, std::string_view op, int64_t group) {
  memberGroup(kOp, group);
  checkDefined(kOp, self, "self");
  checkReduction(kOp, op, self.dtype());
}
template <const char* kOp>
void broadcastRule(const Tensor& self, int64_t src, int64_t group) {
  checkPeer(kOp, memberGroup(kOp, group), src, "src", true);
  checkDefined(kOp, self, "self");
}
void allGatherRule(const Tensor& self, int64_t group, const Tensor& out) {
  constexpr const char* kOp = "comm::all_gather.out";
  const GroupRecord& g = memberGroup(kOp, group);
  checkDefined(kOp, self, "self");
  checkOut(kOp, self, out, sizesRef(gatheredShape(self, sizeOf(g))));
}
void reduceScatterRule(const Tensor& self, std::string_view op, int64_t group, const Tensor& out) {
  constexpr const char* kOp = "comm::reduce_scatter.out";
  const GroupRecord& g = memberGroup(kOp, group);
  checkDefined(kOp, self, "self");
  checkReduction(kOp, op, self.dtype());
  checkOut(kOp, self, out, sizesRef(blockShape(kOp, self, sizeOf(g))));
}
void allToAllRule(const Tensor& self, int64_t group, const Tensor& out) {
  constexpr const char* kOp = "comm::all_to_all.out";
  const GroupRecord& g = memberGroup(kOp, group);
  checkDefined(kOp, self, "self");
  blockShape(kOp, self, sizeOf(g));
  checkOut(kOp, self, out, self.sizes());
}
// send's dst, recv_'s src.
template <const char* kOp, const char* kPeer>
void pointToPointRule(const Tensor& self, int64_t peer, int64_t tag, int64_t group) {
  checkTag(kOp, tag);
  checkPeer(kOp, memberGroup(kOp, group), peer, kPeer, false);
  checkDefined(kOp, self, "self");
}
void barrierRule(int64_t group) { memberGroup("comm::barrier", group); }

// --- The functional forms, over the forms an engine implements.

using AllReduceSig = Tensor(const Tensor&, std::string_view, int64_t);
using BroadcastSig = Tensor(const Tensor&, int64_t, int64_t);
using GatherSig = Tensor(const Tensor&, int64_t, const Tensor&);
using ReduceScatterSig = Tensor(const Tensor&, std::string_view, int64_t, const Tensor&);
using SendSig = void(const Tensor&, int64_t, int64_t, int64_t);
using BarrierSig = void(int64_t);

template <typename Sig>
TypedOperatorHandle<Sig> op(const char* name) {
  return Dispatcher::singleton().findOpOrThrow(name).typed<Sig>();
}

Tensor allReduceFunctional(const Tensor& self, std::string_view reduction, int64_t group) {
  Tensor out = self.clone();
  static const auto k = op<AllReduceSig>("comm::all_reduce_");
  k.callSkippingMeta(out, reduction, group);
  return out;
}
Tensor broadcastFunctional(const Tensor& self, int64_t src, int64_t group) {
  Tensor out = self.clone();
  static const auto k = op<BroadcastSig>("comm::broadcast_");
  k.callSkippingMeta(out, src, group);
  return out;
}
Tensor allGatherFunctional(const Tensor& self, int64_t group) {
  const GroupRecord& g = memberGroup("comm::all_gather", group);
  Tensor out = empty(sizesRef(gatheredShape(self, sizeOf(g))), {.dtype = self.dtype(), .device = self.device()});
  static const auto k = op<GatherSig>("comm::all_gather.out");
  k.callSkippingMeta(self, group, out);
  return out;
}
Tensor reduceScatterFunctional(const Tensor& self, std::string_view reduction, int64_t group) {
  constexpr const char* kOp = "comm::reduce_scatter";
  const GroupRecord& g = memberGroup(kOp, group);
  checkReduction(kOp, reduction, self.dtype());
  Tensor out = empty(sizesRef(blockShape(kOp, self, sizeOf(g))), {.dtype = self.dtype(), .device = self.device()});
  static const auto k = op<ReduceScatterSig>("comm::reduce_scatter.out");
  k.callSkippingMeta(self, reduction, group, out);
  return out;
}
Tensor allToAllFunctional(const Tensor& self, int64_t group) {
  constexpr const char* kOp = "comm::all_to_all";
  const GroupRecord& g = memberGroup(kOp, group);
  blockShape(kOp, self, sizeOf(g));
  Tensor out = empty(self.sizes(), {.dtype = self.dtype(), .device = self.device()});
  static const auto k = op<GatherSig>("comm::all_to_all.out");
  k.callSkippingMeta(self, group, out);
  return out;
}

constexpr const char* kNoEngine =
    "The collectives' engine for CPU tensors, which every device without its own reaches through the CPU fallback, "
    "is the mpi plugin (backplane_mpi.so), which is not loaded: it is built when Open MPI is found (apt-get install "
    "libopenmpi-dev openmpi-bin, then rebuild) and loads from the default plugin directory or "
    "BACKPLANE_PLUGIN_PATH (`backplane plugins` lists what loaded and why not).";

struct CollectiveRegistration {
  CollectiveRegistration() {
    using K = KernelFunction;
    Dispatcher& d = Dispatcher::singleton();
    constexpr const char* kWho = "collectives (backplane/runtime/collectives.h)";
    for (const char* schema : kSchemas) handles.push_back(valueOrThrow(d.registerDef(schema, kWho)));
    const std::pair<const char*, K> rules[] = {
        {kAllReduceInplace, K::makeFromFunction(BP_FN(allReduceRule<kAllReduceInplace>))},
        {kAllReduce, K::makeFromFunction(BP_FN(allReduceRule<kAllReduce>))},
        {kBroadcastInplace, K::makeFromFunction(BP_FN(broadcastRule<kBroadcastInplace>))},
        {kBroadcast, K::makeFromFunction(BP_FN(broadcastRule<kBroadcast>))},
        {"comm::all_gather.out", K::makeFromFunction(BP_FN(allGatherRule))},
        {"comm::reduce_scatter.out", K::makeFromFunction(BP_FN(reduceScatterRule))},
        {"comm::all_to_all.out", K::makeFromFunction(BP_FN(allToAllRule))},
        {kSend, K::makeFromFunction(BP_FN((pointToPointRule<kSend, kDst>)))},
        {kRecv, K::makeFromFunction(BP_FN((pointToPointRule<kRecv, kSrc>)))},
        {"comm::barrier", K::makeFromFunction(BP_FN(barrierRule))},
    };
    for (const auto& [name, rule] : rules)
      handles.push_back(valueOrThrow(d.registerMeta(name, rule, strCat(kWho, " (rule)"))));
    const std::pair<const char*, K> composites[] = {
        {"comm::all_reduce", K::makeFromFunction(BP_FN(allReduceFunctional))},
        {"comm::broadcast", K::makeFromFunction(BP_FN(broadcastFunctional))},
        {"comm::all_gather", K::makeFromFunction(BP_FN(allGatherFunctional))},
        {"comm::reduce_scatter", K::makeFromFunction(BP_FN(reduceScatterFunctional))},
        {"comm::all_to_all", K::makeFromFunction(BP_FN(allToAllFunctional))},
    };
    for (const auto& [name, kernel] : composites)
      handles.push_back(valueOrThrow(d.registerComposite(name, kernel, strCat(kWho, " (functional form)"))));
    for (const OperatorHandle& op : d.definedOperators())
      if (op.operatorName().ns == "comm") op.entry().setMissingKernelHint(kNoEngine);
    for (const auto& [name, declaration] : kDerivatives)
      derivatives.push_back(valueOrThrow(declareDerivative(name, std::nullopt, declaration, kWho)));
  }
  std::vector<RegistrationHandle> handles;
  std::vector<DerivativeRegistration> derivatives;
};

}  // namespace

namespace detail {
// The registration lives as long as the process, reachable from here (so a
// leak checker does not count it): unregistering at exit would race the
// dispatcher's own teardown.
const void* g_collective_registration = new CollectiveRegistration();
}  // namespace detail

// --- The C++ functions (each op's handle is looked up once).

const Tensor& allReduce_(const Tensor& self, ReduceOp reduction, const Group& group) {
  static const auto k = op<AllReduceSig>("comm::all_reduce_");
  k.call(self, reduceOpName(reduction), group.id());
  return self;
}
Tensor allReduce(const Tensor& self, ReduceOp reduction, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, std::string_view, int64_t)>("comm::all_reduce");
  return k.call(self, reduceOpName(reduction), group.id());
}
const Tensor& broadcast_(const Tensor& self, int src, const Group& group) {
  static const auto k = op<BroadcastSig>("comm::broadcast_");
  k.call(self, src, group.id());
  return self;
}
Tensor broadcast(const Tensor& self, int src, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, int64_t, int64_t)>("comm::broadcast");
  return k.call(self, src, group.id());
}
Tensor allGather(const Tensor& self, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, int64_t)>("comm::all_gather");
  return k.call(self, group.id());
}
const Tensor& allGatherOut(const Tensor& self, const Tensor& out, const Group& group) {
  static const auto k = op<GatherSig>("comm::all_gather.out");
  k.call(self, group.id(), out);
  return out;
}
Tensor reduceScatter(const Tensor& self, ReduceOp reduction, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, std::string_view, int64_t)>("comm::reduce_scatter");
  return k.call(self, reduceOpName(reduction), group.id());
}
const Tensor& reduceScatterOut(const Tensor& self, const Tensor& out, ReduceOp reduction, const Group& group) {
  static const auto k = op<ReduceScatterSig>("comm::reduce_scatter.out");
  k.call(self, reduceOpName(reduction), group.id(), out);
  return out;
}
Tensor allToAll(const Tensor& self, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, int64_t)>("comm::all_to_all");
  return k.call(self, group.id());
}
const Tensor& allToAllOut(const Tensor& self, const Tensor& out, const Group& group) {
  static const auto k = op<GatherSig>("comm::all_to_all.out");
  k.call(self, group.id(), out);
  return out;
}
void send(const Tensor& self, int dst, int tag, const Group& group) {
  static const auto k = op<SendSig>("comm::send");
  k.call(self, dst, tag, group.id());
}
const Tensor& recv_(const Tensor& self, int src, int tag, const Group& group) {
  static const auto k = op<Tensor(const Tensor&, int64_t, int64_t, int64_t)>("comm::recv_");
  k.call(self, src, tag, group.id());
  return self;
}
void barrier(const Group& group) {
  static const auto k = op<BarrierSig>("comm::barrier");
  k.call(group.id());
}

}  // namespace backplane::comm
