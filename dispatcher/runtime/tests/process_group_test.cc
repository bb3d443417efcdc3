// Process groups (backplane/runtime/process_group.h): the world from the
// launcher's environment, sub-groups, and the errors for a bad environment;
// the world's key-value store (backplane/runtime/store.h) between two
// processes, from C++ and from a plugin through the ABI.
// The world is read once per process, so each case runs in a child process
// (a death test in the threadsafe style, which starts the program afresh)
// with the environment it sets; the child prints what it saw and exits 0.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/process_group.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/store.h"

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
        for (const char* v :
             {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "BACKPLANE_RANK",
              "BACKPLANE_WORLD_SIZE", "BACKPLANE_COMM_TIMEOUT", "BACKPLANE_MASTER_ADDR", "BACKPLANE_MASTER_PORT"})
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

// A TCP port free on this host now (bound to port 0, read, released).
std::string freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return std::to_string(ntohs(a.sin_port));
}

TEST(WorldStore, AWorldOfOneKeepsItInTheProcess) {
  inChild(
      {},
      [] {
        comm::Store& s = comm::worldStore();
        s.set("a", std::string("x\0y", 3));
        const size_t bytes = s.get("a", 1).size();
        const long long first = s.add("n", 2), second = s.add("n", 3);
        std::fprintf(stderr, "a: %zu bytes; add %lld %lld\n", bytes, first, second);
        try {
          s.set("", "x");
        } catch (const Error& e) {
          std::fprintf(stderr, "empty key: %s\n", e.what());
        }
        s.get("never", 0.2);
      },
      "a: 3 bytes; add 2 5\nempty key: the store holds keys of 1 to 4096 bytes.*\nerror: the store's key 'never' was "
      "not set within 0.2 s");
}

// Two processes with no launcher (BACKPLANE_RANK, BACKPLANE_WORLD_SIZE and
// the rendezvous BACKPLANE_MASTER_PORT): each sets a key and reads the
// other's, counts itself in, then exchanges bytes through a plugin
// (tests/plugins/tp_store.cc, bp::storeSet / bp::storeGet over ABI 1.11).
TEST(WorldStore, TwoProcessesMeetThroughRankZeroFromCppAndFromAPlugin) {
  const std::string port = freePort();
  inChild(
      {{"BACKPLANE_WORLD_SIZE", "2"}, {"BACKPLANE_MASTER_PORT", port.c_str()}, {"BACKPLANE_COMM_TIMEOUT", "30"}},
      [] {
        const pid_t child = fork();
        setenv("BACKPLANE_RANK", child == 0 ? "1" : "0", 1);
        const int rank = comm::world().rank();
        comm::Store& s = comm::worldStore();
        s.set(strCat("from", rank), strCat("hello from ", rank));
        const std::string other = s.get(strCat("from", 1 - rank), 30);
        const long long arrived = s.add("arrived", 1);
        // A get waiting for its key holds up no other call of this process:
        // the set it waits for comes from this process's main thread.
        std::string own;
        std::thread waiter([&] { own = s.get(strCat("own", rank), 30); });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        s.set(strCat("own", rank), "mine");
        waiter.join();
        Runtime rt(RuntimeOptions{
            .plugin_paths = {BACKPLANE_CPU_PLUGIN_PATH, strCat(BACKPLANE_TEST_PLUGIN_DIR, "/tp_store.so")},
            .load_default_plugins = false});
        const Tensor mine = full({2}, rank + 1, {.dtype = ScalarType::UInt8});
        const Tensor all = Dispatcher::singleton()
                               .findOpOrThrow("tpstore::exchange")
                               .typed<Tensor(const Tensor&, int64_t)>()
                               .call(mine, 0);
        const std::vector<uint8_t> bytes = all.toVector<uint8_t>();
        const bool ok = bytes == std::vector<uint8_t>{1, 1, 2, 2} && own == "mine";
        if (child == 0) std::_Exit(other == "hello from 0" && ok ? 0 : 1);
        int status = 0;
        waitpid(child, &status, 0);
        std::fprintf(stderr, "rank 0 got '%s', arrived %lld, exchange %s; rank 1 exited %d\n", other.c_str(), arrived,
                     ok ? "1 1 2 2" : "wrong", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      },
      "rank 0 got 'hello from 1', arrived [12], exchange 1 1 2 2; rank 1 exited 0");
}

TEST(WorldStore, ErrorsAreBoundedAndSayWhatToSet) {
  const std::string port = freePort();
  inChild(
      {{"BACKPLANE_RANK", "1"}, {"BACKPLANE_WORLD_SIZE", "2"}}, [] { comm::worldStore(); },
      "error: the world's store .* needs BACKPLANE_MASTER_PORT in a world of 2 ranks");
  inChild(
      {{"BACKPLANE_RANK", "0"}, {"BACKPLANE_WORLD_SIZE", "2"}, {"BACKPLANE_MASTER_PORT", "http"}},
      [] { comm::worldStore(); }, "error: BACKPLANE_MASTER_PORT='http' is not a TCP port");
  // Rank 1 of a world whose rank 0 never comes.
  inChild(
      {{"BACKPLANE_RANK", "1"},
       {"BACKPLANE_WORLD_SIZE", "2"},
       {"BACKPLANE_MASTER_PORT", port.c_str()},
       {"BACKPLANE_COMM_TIMEOUT", "0.5"}},
      [] { comm::worldStore().set("k", "v"); },
      "error: the world's store at 127.0.0.1:[0-9]+ did not answer within 0.5 s .*is rank 0 alive");
  // Rank 0 waiting for a key no rank sets.
  inChild(
      {{"BACKPLANE_RANK", "0"},
       {"BACKPLANE_WORLD_SIZE", "2"},
       {"BACKPLANE_MASTER_PORT", port.c_str()},
       {"BACKPLANE_COMM_TIMEOUT", "0.5"}},
      [] { comm::worldStore().get("never", 0.5); },
      "error: the store's key 'never' was not set within 0.5 s \\(the world's store at 127.0.0.1:[0-9]+\\): the rank "
      "that sets it has died");
}

}  // namespace
}  // namespace backplane
