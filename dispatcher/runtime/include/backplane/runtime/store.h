#pragma once
// The world's key-value store: what ranks exchange before a collective
// library can carry their data.
//
// Note [The world's store]
// A collective library needs its ranks to agree on something before it can
// move a byte: NCCL a unique id that rank 0 makes, another library an
// address or a token. As torch.distributed's TCPStore and the key-value
// store PJRT's client creation takes, world rank 0 serves a store over TCP
// and every rank, rank 0 included, is its client; plugins reach it through
// BP_HostApi.store_set / store_get (ABI 1.11; bp::storeSet / bp::storeGet),
// keyed per process group.
// - Where: BACKPLANE_MASTER_ADDR (rank 0's host name or address; default
//   127.0.0.1, so one machine needs only the port) and
//   BACKPLANE_MASTER_PORT, which a world of two or more ranks must set
//   (`mpirun -x BACKPLANE_MASTER_ADDR=node1 -x BACKPLANE_MASTER_PORT=29500`).
//   A world of one keeps its store in the process.
// - When: rank 0 serves from the first time its world is read (any process
//   group call, a plugin reading a group, the mpi plugin loading) with
//   BACKPLANE_MASTER_PORT set, or else from its first use of the store, until
//   it exits; a rank that starts earlier retries its connection until its
//   timeout. A rank 0 that never reads its world, or exits, leaves the
//   others to time out, naming the address.
// - Bounded: every call waits at most the world's timeout (Note [Collective
//   timeouts] in process_group.h) and fails with kDeadlineExceeded naming
//   the key and the address; a server that answers wrongly (another program
//   at the port) is named as such.
// - Not a hot path: a call is a TCP round trip to rank 0; set and add share
//   one connection per process, one at a time, and each get has a connection
//   of its own (a get waiting for its key holds up no other call). The
//   server's sockets are non-blocking, so a rank that stops reading holds up
//   only itself. Values are bytes (at most 64 MiB); keys are non-empty
//   strings (at most 4 KiB).
// - Not authenticated, as torch.distributed's TCPStore: whoever reaches the
//   port can read and write keys. Run jobs on networks you trust.

#include <cstdint>
#include <string>
#include <string_view>

namespace backplane::comm {

class Store {
 public:
  virtual ~Store() = default;
  // Sets `key` to `value`, replacing what it held, and wakes every get() of it.
  virtual void set(std::string_view key, std::string_view value) = 0;
  // The value of `key`, waiting for a set() up to `timeout_seconds`;
  // kDeadlineExceeded after that.
  virtual std::string get(std::string_view key, double timeout_seconds) = 0;
  // Adds `delta` to the 64-bit integer `key` holds (0 when unset) and returns
  // the sum: a counter the ranks share (how many have arrived).
  virtual int64_t add(std::string_view key, int64_t delta) = 0;
};

// The world's store (Note [The world's store]). Throws backplane::Error
// (kFailedPrecondition) naming BACKPLANE_MASTER_PORT in a world of two or
// more without it, and the launcher's error for a bad environment.
Store& worldStore();

namespace detail {
// Starts serving the world's store when this process is rank 0 of a world of
// two or more with BACKPLANE_MASTER_PORT set (process_group.cc calls it when
// the world is first read). A failure to serve is kept and reported by
// worldStore() on this rank; the others time out.
void serveWorldStoreIfRankZero(int rank, int size);
}  // namespace detail

}  // namespace backplane::comm
