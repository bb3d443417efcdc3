// Process groups (backplane/runtime/process_group.h): the world from the
// launcher's environment, sub-groups, and the errors for a bad environment.
// The world is read once per process, so each case runs in a child process
// (a death test in the threadsafe style, which starts the program afresh)
// with the environment it sets; the child prints what it saw and exits 0.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backplane/core/error.h"
#include "backplane/runtime/process_group.h"

namespace backplane {
namespace {

namespace comm = backplane::comm;

// Runs `fn` in a child with `env` set (and every launcher variable not in
// it unset); the child's stderr must match `expected`.
template <typename Fn>
void inChild(std::vector<std::pair<const char*, const char*>> env, Fn fn, const std::string& expected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "BACKPLANE_RANK",
                              "BACKPLANE_WORLD_SIZE", "BACKPLANE_COMM_TIMEOUT"})
          unsetenv(v);
        for (const auto& [k, v] : env) setenv(k, v, 1);
        try {
          fn();
        } catch (const Error& e) {
          std::fprintf(stderr, "error: %s\n", e.what());
        }
        std::fflush(stderr);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), expected);
}

TEST(ProcessGroups, WithoutALauncherTheWorldIsThisProcess) {
  inChild(
      {},
      [] {
        const comm::Group w = comm::world();
        std::fprintf(stderr, "rank %d of %d, %s, timeout %.0f\n", w.rank(), w.size(), w.describe().c_str(),
                     w.timeoutSeconds());
      },
      "rank 0 of 1, the world \\(1 rank\\), timeout 300");
}

TEST(ProcessGroups, TheLaunchersVariablesGiveRankAndSize) {
  inChild(
      {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"BACKPLANE_COMM_TIMEOUT", "7.5"}},
      [] {
        std::fprintf(stderr, "rank %d of %d, timeout %.1f\n", comm::world().rank(), comm::world().size(),
                     comm::world().timeoutSeconds());
      },
      "rank 2 of 3, timeout 7.5");
  inChild(
      {{"BACKPLANE_RANK", "1"}, {"BACKPLANE_WORLD_SIZE", "4"}},
      [] { std::fprintf(stderr, "rank %d of %d\n", comm::world().rank(), comm::world().size()); }, "rank 1 of 4");
  // Two launchers that agree are fine.
  inChild(
      {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"BACKPLANE_RANK", "0"}, {"BACKPLANE_WORLD_SIZE", "2"}},
      [] { std::fprintf(stderr, "rank %d of %d\n", comm::world().rank(), comm::world().size()); }, "rank 0 of 2");
}

TEST(ProcessGroups, ABadEnvironmentIsNamed) {
  inChild(
      {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, [] { comm::world(); },
      "error: the process group of this job: OMPI_COMM_WORLD_RANK=3 and OMPI_COMM_WORLD_SIZE=2 do not make a "
      "rank in a world");
  inChild(
      {{"BACKPLANE_RANK", "1"}}, [] { comm::world(); }, "BACKPLANE_RANK is set but BACKPLANE_WORLD_SIZE is not");
  inChild(
      {{"BACKPLANE_RANK", "one"}, {"BACKPLANE_WORLD_SIZE", "2"}}, [] { comm::world(); },
      "BACKPLANE_RANK='one' is not an integer");
  inChild(
      {{"OMPI_COMM_WORLD_RANK", "0"},
       {"OMPI_COMM_WORLD_SIZE", "2"},
       {"BACKPLANE_RANK", "1"},
       {"BACKPLANE_WORLD_SIZE", "2"}},
      [] { comm::world(); }, "OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=2 disagree with BACKPLANE_RANK=1");
  inChild(
      {{"BACKPLANE_COMM_TIMEOUT", "-1"}}, [] { comm::world(); },
      "BACKPLANE_COMM_TIMEOUT='-1' is not a positive number of seconds");
  // newGroup and findGroup say the same, rather than making a group.
  inChild(
      {{"BACKPLANE_RANK", "5"}, {"BACKPLANE_WORLD_SIZE", "2"}},
      [] { std::fprintf(stderr, "newGroup: %s\n", comm::newGroup({0}).status().ToString().c_str()); },
      "newGroup: INVALID_ARGUMENT: BACKPLANE_RANK=5");
}

TEST(ProcessGroups, SubGroupsAreNumberedInCallOrderWithOrWithoutThisRank) {
  inChild(
      {{"BACKPLANE_RANK", "1"}, {"BACKPLANE_WORLD_SIZE", "4"}},
      [] {
        const comm::Group a = valueOrThrow(comm::newGroup({3, 1}, {.timeout_seconds = 2}));
        const comm::Group b = valueOrThrow(comm::newGroup({0, 2}));
        std::fprintf(stderr, "a: id %lld rank %d size %d timeout %.0f %s; b: id %lld rank %d member %d %s\n",
                     static_cast<long long>(a.id()), a.rank(), a.size(), a.timeoutSeconds(), a.describe().c_str(),
                     static_cast<long long>(b.id()), b.rank(), b.isMember(), b.describe().c_str());
        std::fprintf(stderr, "found %d\n", valueOrThrow(comm::findGroup(2)) == b);
      },
      "a: id 1 rank 1 size 2 timeout 2 group 1 \\(world ranks \\[3, 1\\]\\); b: id 2 rank -1 member 0 group 2 "
      "\\(world ranks \\[0, 2\\]\\)\nfound 1");
}

TEST(ProcessGroups, BadSubGroupsAreRefusedSayingWhy) {
  inChild(
      {{"BACKPLANE_RANK", "0"}, {"BACKPLANE_WORLD_SIZE", "3"}},
      [] {
        for (const std::vector<int>& ranks : std::vector<std::vector<int>>{{}, {0, 3}, {1, 1}, {-1}})
          std::fprintf(stderr, "%s\n", comm::newGroup(ranks).status().ToString().c_str());
        std::fprintf(stderr, "%s\n", comm::findGroup(9).status().ToString().c_str());
      },
      "a group needs at least one rank\n.*world rank 3 does not exist; the world has 3 ranks \\(0\\.\\.2\\)\n"
      ".*world rank 1 is listed twice\n.*world rank -1 does not exist.*\nNOT_FOUND: there is no process group 9");
}

TEST(ProcessGroups, ReductionsByName) {
  for (comm::ReduceOp op :
       {comm::ReduceOp::Sum, comm::ReduceOp::Avg, comm::ReduceOp::Min, comm::ReduceOp::Max, comm::ReduceOp::Product})
    EXPECT_EQ(*comm::parseReduceOp(comm::reduceOpName(op)), op);
  EXPECT_THAT(comm::parseReduceOp("mean").status().message(),
              ::testing::HasSubstr("unknown reduction 'mean'; pass one of 'sum', 'avg', 'min', 'max', 'product'"));
}

}  // namespace
}  // namespace backplane
