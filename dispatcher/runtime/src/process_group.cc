#include "backplane/runtime/process_group.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/runtime/store.h"

namespace backplane::comm {
namespace {

constexpr double kDefaultTimeoutSeconds = 300;
// Groups are never removed, so records live in a fixed table read without a
// lock (a collective's rule looks its group up on every call).
constexpr size_t kMaxGroups = 4096;

struct Registry {
  std::array<std::atomic<const GroupRecord*>, kMaxGroups> records{};
  std::atomic<size_t> count{0};
  absl::Mutex create_mu;  // serializes newGroup (ids in call order)
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: records outlive every caller
  return *r;
}

// The integer in environment variable `name`, nullopt when unset; an error
// naming it when it is not an integer.
absl::StatusOr<std::optional<long>> envInteger(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::optional<long>();
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0)
    return absl::InvalidArgumentError(strCat("environment variable ", name, "='", v, "' is not an integer"));
  return std::optional<long>(n);
}

struct Launcher {
  const char* rank_var;
  const char* size_var;
};
constexpr Launcher kLaunchers[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"BACKPLANE_RANK", "BACKPLANE_WORLD_SIZE"},
};

absl::StatusOr<double> timeoutFromEnv() {
  const char* v = std::getenv("BACKPLANE_COMM_TIMEOUT");
  if (v == nullptr || *v == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (*end != '\0' || !(t > 0) || !std::isfinite(t))
    return absl::InvalidArgumentError(strCat("BACKPLANE_COMM_TIMEOUT='", v,
                                             "' is not a positive number of seconds; unset it for the default (",
                                             kDefaultTimeoutSeconds, " s)"));
  return t;
}

// The world's rank and size from the launcher (Note [The world's launcher]).
absl::StatusOr<GroupRecord> worldFromEnvironment() {
  std::optional<std::pair<long, long>> found;
  const Launcher* found_by = nullptr;
  for (const Launcher& l : kLaunchers) {
    absl::StatusOr<std::optional<long>> rank = envInteger(l.rank_var);
    if (!rank.ok()) return rank.status();
    absl::StatusOr<std::optional<long>> size = envInteger(l.size_var);
    if (!size.ok()) return size.status();
    if (rank->has_value() != size->has_value())
      return absl::InvalidArgumentError(strCat(rank->has_value() ? l.rank_var : l.size_var, " is set but ",
                                               rank->has_value() ? l.size_var : l.rank_var,
                                               " is not: a launcher sets both (the rank and the world size)"));
    if (!rank->has_value()) continue;
    if (**size > std::numeric_limits<int32_t>::max())
      return absl::InvalidArgumentError(
          strCat(l.size_var, "=", **size, " is more ranks than a world holds (2^31 - 1)"));
    if (**size < 1 || **rank < 0 || **rank >= **size)
      return absl::InvalidArgumentError(strCat(l.rank_var, "=", **rank, " and ", l.size_var, "=", **size,
                                               " do not make a rank in a world: the rank must be in [0, size)"));
    if (found && (found->first != **rank || found->second != **size))
      return absl::InvalidArgumentError(strCat(found_by->rank_var, "=", found->first, ", ", found_by->size_var, "=",
                                               found->second, " disagree with ", l.rank_var, "=", **rank, ", ",
                                               l.size_var, "=", **size, ": unset one pair"));
    if (!found) {
      found = std::make_pair(**rank, **size);
      found_by = &l;
    }
  }
  absl::StatusOr<double> timeout = timeoutFromEnv();
  if (!timeout.ok()) return timeout.status();
  GroupRecord world{0, 0, {0}, *timeout};
  if (found) {
    world.rank = static_cast<int>(found->first);
    world.world_ranks.resize(static_cast<size_t>(found->second));
    for (size_t i = 0; i < world.world_ranks.size(); ++i) world.world_ranks[i] = static_cast<int>(i);
  }
  return world;
}

// The world's record, made on first use; an error in the environment is
// kept and returned to every caller.
const absl::StatusOr<const GroupRecord*>& worldRecord() {
  static const absl::StatusOr<const GroupRecord*> world = []() -> absl::StatusOr<const GroupRecord*> {
    absl::StatusOr<GroupRecord> w = worldFromEnvironment();
    if (!w.ok()) return w.status();
    const GroupRecord* record = new GroupRecord(*std::move(w));  // lives as long as the process
    Registry& r = registry();
    r.records[0].store(record, std::memory_order_release);
    r.count.store(1, std::memory_order_release);
    // Note [The world's store]: rank 0 serves it from now on.
    detail::serveWorldStoreIfRankZero(record->rank, static_cast<int>(record->world_ranks.size()));
    return record;
  }();
  return world;
}

const GroupRecord& worldOrThrow() {
  const absl::StatusOr<const GroupRecord*>& w = worldRecord();
  if (!w.ok())
    throw Error(w.status().code(), strCat("the process group of this job: ", w.status().message(),
                                          " (Note [The world's launcher] in backplane/runtime/process_group.h)"));
  return **w;
}

const GroupRecord& recordOf(int64_t id) {
  const GroupRecord* r = findGroupRecord(id);
  BP_INTERNAL_ASSERT(r != nullptr, "group ", id, " has a handle but no record");
  return *r;
}

}  // namespace

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Product: return "product";
  }
  return "?";
}

absl::StatusOr<ReduceOp> parseReduceOp(std::string_view name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product})
    if (name == reduceOpName(op)) return op;
  return absl::InvalidArgumentError(
      strCat("unknown reduction '", name, "'; pass one of 'sum', 'avg', 'min', 'max', 'product'"));
}

int Group::rank() const { return recordOf(id_).rank; }
int Group::size() const { return static_cast<int>(recordOf(id_).world_ranks.size()); }
const std::vector<int>& Group::worldRanks() const { return recordOf(id_).world_ranks; }
double Group::timeoutSeconds() const { return recordOf(id_).timeout_seconds; }

std::string Group::describe() const {
  const GroupRecord& r = recordOf(id_);
  if (id_ == 0) return strCat("the world (", r.world_ranks.size(), r.world_ranks.size() == 1 ? " rank)" : " ranks)");
  std::string ranks;
  for (size_t i = 0; i < r.world_ranks.size(); ++i) ranks += strCat(i ? ", " : "", r.world_ranks[i]);
  return strCat("group ", id_, " (world ranks [", ranks, "])");
}

Group world() {
  worldOrThrow();
  return Group();
}

absl::StatusOr<Group> newGroup(absl::Span<const int> world_ranks, GroupOptions options) {
  const absl::StatusOr<const GroupRecord*>& w = worldRecord();
  if (!w.ok()) return w.status();
  const GroupRecord& world = **w;
  const int world_size = static_cast<int>(world.world_ranks.size());
  if (world_ranks.empty()) return absl::InvalidArgumentError("newGroup: a group needs at least one rank");
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    if (world_ranks[i] < 0 || world_ranks[i] >= world_size)
      return absl::InvalidArgumentError(
          strCat("newGroup: world rank ", world_ranks[i], " does not exist; the world has ", world_size,
                 world_size == 1 ? " rank (0)" : " ranks (0..", world_size == 1 ? "" : strCat(world_size - 1, ")")));
    for (size_t j = 0; j < i; ++j)
      if (world_ranks[j] == world_ranks[i])
        return absl::InvalidArgumentError(strCat("newGroup: world rank ", world_ranks[i], " is listed twice"));
  }
  if (options.timeout_seconds < 0 || !std::isfinite(options.timeout_seconds))
    return absl::InvalidArgumentError(
        strCat("newGroup: timeout_seconds=", options.timeout_seconds, " is not a number of seconds >= 0"));
  Registry& r = registry();
  absl::MutexLock lock(&r.create_mu);
  const size_t id = r.count.load(std::memory_order_acquire);
  if (id >= kMaxGroups)
    return absl::ResourceExhaustedError(strCat("newGroup: a process holds at most ", kMaxGroups,
                                               " groups and they are never freed; make groups once and reuse them"));
  auto* record = new GroupRecord{static_cast<int64_t>(id),
                                 -1,
                                 {world_ranks.begin(), world_ranks.end()},
                                 options.timeout_seconds > 0 ? options.timeout_seconds : world.timeout_seconds};
  const auto me = std::find(world_ranks.begin(), world_ranks.end(), world.rank);
  if (me != world_ranks.end()) record->rank = static_cast<int>(me - world_ranks.begin());
  r.records[id].store(record, std::memory_order_release);
  r.count.store(id + 1, std::memory_order_release);
  return Group(static_cast<int64_t>(id));
}

absl::StatusOr<Group> findGroup(int64_t id) {
  const absl::StatusOr<const GroupRecord*>& w = worldRecord();
  if (!w.ok()) return w.status();
  if (findGroupRecord(id) == nullptr) {
    const size_t n = registry().count.load(std::memory_order_acquire);
    return absl::NotFoundError(strCat("there is no process group ", id, "; the groups are 0 (the world)",
                                      n > 1 ? strCat(" to ", n - 1, ", made by newGroup") : std::string(),
                                      "; make a sub-group with backplane::comm::newGroup"));
  }
  return Group(id);
}

const GroupRecord* findGroupRecord(int64_t id) {
  if (!worldRecord().ok()) return nullptr;
  Registry& r = registry();
  if (id < 0 || static_cast<size_t>(id) >= r.count.load(std::memory_order_acquire)) return nullptr;
  return r.records[static_cast<size_t>(id)].load(std::memory_order_acquire);
}

}  // namespace backplane::comm
