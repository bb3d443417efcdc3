#pragma once
// Process groups: which processes a collective (comm::all_reduce_, ...,
// backplane/runtime/collectives.h) runs across.
//
// Note [Process groups]
// The world is every process of the job. Its rank and size come from the
// launcher, read once, on first use (Note [The world's launcher]); with no
// launcher the world is this process alone (rank 0 of 1), and every
// collective works on it. A sub-group is made by every rank of the world
// calling newGroup() with the same world ranks, in the same order of calls
// (as MPI_Comm_create and torch.distributed.new_group): ids are handed out
// in call order, so the nth newGroup() of every rank names the same group.
// A rank outside the group gets a Group it is not a member of (rank -1), and
// a collective on it fails naming the group's members.
// A collective names its group by id: the `int group` argument of every
// comm:: operator (0 is the world), which is what crosses the plugin ABI
// (BP_HostApi.group_info, ABI 1.10) to the engine serving the tensors'
// device: Open MPI for CPU tensors (plugins/mpi), a vendor's library for its
// own. Groups live as long as the process (the registry is global state, as
// the dispatcher is: a group is a property of the process, as MPI's are).
//
// Note [Collective timeouts]
// A collective waits for the other ranks at most the group's timeout
// (BACKPLANE_COMM_TIMEOUT, seconds, default 300; or the timeout given to
// newGroup), then fails with kDeadlineExceeded naming the op, the group and
// the rank, instead of hanging. A rank that died or never arrived leaves
// the group unusable: later collectives on it fail at once, and the process
// should end (under mpirun, the others are then ended too).
//
// Note [The world's launcher]
// In order: Open MPI's mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE),
// a PMI launcher such as MPICH's or Slurm's srun (PMI_RANK, PMI_SIZE), then
// BACKPLANE_RANK and BACKPLANE_WORLD_SIZE. Where a launcher's variables and
// BACKPLANE_RANK / BACKPLANE_WORLD_SIZE are both set they must agree; a rank
// outside [0, size), a size below 1, or only one of a pair set is an error
// naming the variables.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace backplane::comm {

// The reductions of all_reduce and reduce_scatter ("sum", "avg", "min",
// "max", "product" in schemas). avg is for floating dtypes.
enum class ReduceOp : uint8_t { Sum, Avg, Min, Max, Product };
const char* reduceOpName(ReduceOp op);
// The ReduceOp named `name`, or an error listing the names.
absl::StatusOr<ReduceOp> parseReduceOp(std::string_view name);

struct GroupOptions {
  // Seconds a collective waits for the other ranks (Note [Collective
  // timeouts]); 0: BACKPLANE_COMM_TIMEOUT, else 300.
  double timeout_seconds = 0;
};

// A process group: a cheap handle (its id); copies name the same group.
class Group {
 public:
  // The world group (id 0).
  Group() = default;

  int64_t id() const { return id_; }
  // This process's rank in the group, -1 if it is not a member.
  int rank() const;
  int size() const;
  bool isMember() const { return rank() >= 0; }
  // The world rank of each group rank.
  const std::vector<int>& worldRanks() const;
  double timeoutSeconds() const;
  // "group 1 (world ranks [0, 2])", "the world (2 ranks)": for messages.
  std::string describe() const;

  friend bool operator==(const Group& a, const Group& b) { return a.id_ == b.id_; }

 private:
  friend absl::StatusOr<Group> findGroup(int64_t id);
  friend absl::StatusOr<Group> newGroup(absl::Span<const int> world_ranks, GroupOptions options);
  explicit Group(int64_t id) : id_(id) {}
  int64_t id_ = 0;
};

// The world (Note [The world's launcher]). Throws backplane::Error naming the
// environment variables when the launcher's are inconsistent.
Group world();
// A sub-group of the given world ranks (distinct, each in [0, world size),
// in group-rank order); every world rank must call it, in the same order of
// calls (Note [Process groups]).
absl::StatusOr<Group> newGroup(absl::Span<const int> world_ranks, GroupOptions options = {});
// The group with id `id`, or kNotFound naming the ids that exist.
absl::StatusOr<Group> findGroup(int64_t id);

// A member's view of one group, as the engines read it (the plugin ABI's
// BP_GroupInfo is made from it). The pointer lives as long as the process.
struct GroupRecord {
  int64_t id;
  int rank;  // -1: not a member
  std::vector<int> world_ranks;
  double timeout_seconds;
};
const GroupRecord* findGroupRecord(int64_t id);

}  // namespace backplane::comm
