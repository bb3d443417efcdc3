// The world's key-value store (Note [The world's store] in
// backplane/runtime/store.h): a TCP server on world rank 0, a client in
// every rank, and an in-process store for a world of one.
//
// The protocol, every integer little-endian (the ranks of a job share an
// architecture): a request is op (u8), key length (u32), value length (u32),
// the key, the value; the answer to hello is the magic (u32), to set one
// zero byte, to get the value's length (u32) and the value once it is set,
// to add the sum (i64). A connection carries one request at a time.
#include "backplane/runtime/store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/runtime/process_group.h"

namespace backplane::comm {
namespace {

using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kAdd = 4 };
constexpr uint32_t kMagic = 0x54535042;  // "BPST"
constexpr uint32_t kMaxKey = 4096;
constexpr uint32_t kMaxValue = 64u << 20;
constexpr size_t kHeader = 9;

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::min(seconds, 1e7)));  // "forever" clamped: no overflow
}

void putU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t getU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::string i64Bytes(int64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[static_cast<size_t>(i)] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  return s;
}
int64_t i64Of(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < s.size(); ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return static_cast<int64_t>(v);
}

std::string request(Op op, std::string_view key, std::string_view value) {
  std::string r;
  r.reserve(kHeader + key.size() + value.size());
  r.push_back(static_cast<char>(op));
  putU32(r, static_cast<uint32_t>(key.size()));
  putU32(r, static_cast<uint32_t>(value.size()));
  r.append(key);
  r.append(value);
  return r;
}

// --- A world of one: the store is this process's.

void checkSizes(std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > kMaxKey || value.size() > kMaxValue)
    throw Error(absl::StatusCode::kInvalidArgument,
                strCat("the store holds keys of 1 to ", kMaxKey, " bytes and values of at most ", kMaxValue,
                       " bytes; got a key of ", key.size(), " and a value of ", value.size()));
}

class LocalStore final : public Store {
 public:
  void set(std::string_view key, std::string_view value) override {
    checkSizes(key, value);
    {
      std::lock_guard<std::mutex> lock(mu_);
      values_[std::string(key)] = std::string(value);
    }
    cv_.notify_all();
  }
  std::string get(std::string_view key, double timeout_seconds) override {
    checkSizes(key, {});
    std::unique_lock<std::mutex> lock(mu_);
    const std::string k(key);
    if (!cv_.wait_until(lock, deadlineAfter(timeout_seconds), [&] { return values_.count(k) != 0; }))
      throw Error(absl::StatusCode::kDeadlineExceeded,
                  strCat("the store's key '", key, "' was not set within ", timeout_seconds,
                         " s (a world of one: only this process sets keys)"));
    return values_[k];
  }
  int64_t add(std::string_view key, int64_t delta) override {
    checkSizes(key, {});
    int64_t sum;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::string& v = values_[std::string(key)];
      sum = i64Of(v) + delta;
      v = i64Bytes(sum);
    }
    cv_.notify_all();
    return sum;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string, std::less<>> values_;
};

// --- The server, on world rank 0: one thread polling its sockets.

class Server {
 public:
  // Binds and listens; "" or why it could not.
  std::string listenOn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return strCat("socket() failed: ", std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 128) != 0) {
      const std::string why = std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return strCat("world rank 0 cannot serve the store on port ", port, ": ", why,
                    " (BACKPLANE_MASTER_PORT: choose a free port)");
    }
    return "";
  }

  // Serves until the process exits (the thread is detached). Client
  // sockets are non-blocking, each with its own output buffer, so a client
  // that stops reading holds up only itself.
  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({fd_, POLLIN, 0});
      for (const Client& c : clients_)
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "backplane: the world's store stopped serving: poll() failed: %s\n", std::strerror(errno));
        return;
      }
      if (fds[0].revents & POLLIN) accept();
      for (size_t i = 1; i < fds.size(); ++i) {
        Client& c = clients_[i - 1];
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          char buf[65536];
          const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n > 0) {
            c.in.append(buf, static_cast<size_t>(n));
            serveRequests(c);
          } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c.closed = true;
          }
        }
        if (!c.closed && (fds[i].revents & POLLOUT)) flush(c);
      }
      dropClosed();
    }
  }

 private:
  struct Client {
    int fd;
    std::string in;
    std::string out;                         // answers not sent yet
    std::optional<std::string> waiting_for;  // the key of a get not answered yet
    bool closed = false;
  };

  void accept() {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      // Out of file descriptors: the connection stays queued; wait rather
      // than spin, and say why once.
      if (errno == EMFILE || errno == ENFILE) {
        if (!warned_fds_)
          std::fprintf(stderr, "backplane: the world's store cannot accept a connection: %s (raise ulimit -n)\n",
                       std::strerror(errno));
        warned_fds_ = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    const int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    clients_.push_back(Client{c, {}, {}, std::nullopt, false});
  }

  // Sends what the socket takes now; the rest waits for POLLOUT.
  void flush(Client& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        c.closed = true;
        return;
      }
    }
  }

  void send(Client& c, const std::string& bytes) {
    c.out += bytes;
    flush(c);
  }

  void answerGet(Client& c, const std::string& value) {
    std::string r;
    putU32(r, static_cast<uint32_t>(value.size()));
    r.append(value);
    send(c, r);
    c.waiting_for.reset();
  }

  void wake(const std::string& key) {
    for (Client& w : clients_)
      if (!w.closed && w.waiting_for == key) answerGet(w, values_[key]);
  }

  void serveRequests(Client& c) {
    while (!c.closed && !c.waiting_for && c.in.size() >= kHeader) {
      const auto op = static_cast<Op>(c.in[0]);
      const uint32_t klen = getU32(c.in.data() + 1), vlen = getU32(c.in.data() + 5);
      if (klen > kMaxKey || vlen > kMaxValue) {
        c.closed = true;  // not one of ours, or corrupt
        return;
      }
      if (c.in.size() < kHeader + klen + vlen) return;
      const std::string key = c.in.substr(kHeader, klen);
      const std::string value = c.in.substr(kHeader + klen, vlen);
      c.in.erase(0, kHeader + klen + vlen);
      switch (op) {
        case kHello: {
          std::string r;
          putU32(r, kMagic);
          send(c, r);
          break;
        }
        case kSet:
          values_[key] = value;
          send(c, std::string(1, '\0'));
          wake(key);
          break;
        case kGet:
          if (auto it = values_.find(key); it != values_.end()) {
            answerGet(c, it->second);
          } else {
            c.waiting_for = key;
          }
          break;
        case kAdd: {
          std::string& v = values_[key];
          v = i64Bytes(i64Of(v) + i64Of(value));
          send(c, v);
          wake(key);
          break;
        }
        default: c.closed = true; return;
      }
    }
  }

  void dropClosed() {
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->closed) {
        ::close(it->fd);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
  }

  int fd_ = -1;
  bool warned_fds_ = false;
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
};

struct ServerState {
  std::mutex mu;
  bool serving = false;  // or tried and failed (error says why)
  std::string error;     // why rank 0 does not serve; "" when it does or has not tried
};
ServerState& serverState() {
  static ServerState* s = new ServerState();  // read by worldStore() for the life of the process
  return *s;
}

// --- The client, in every rank of a world of two or more.

// One connection to the server: a non-blocking socket, every wait a poll()
// bounded by the call's deadline (connect included), so no call outlives
// its timeout but for resolving the host's name. Not thread-safe.
class Connection {
 public:
  Connection(const std::string& host, int port) : host_(host), port_(port) {}
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool open() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);  // the server forgets a closed connection's pending get
    fd_ = -1;
  }
  std::string where() const { return strCat(host_, ":", port_); }

  // Connects (retrying while rank 0 is not up yet) and checks that the
  // server is the world's store.
  void connect(Clock::time_point deadline, double timeout_seconds) {
    if (fd_ >= 0) return;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    std::string last_error = "no answer";
    for (;;) {
      addrinfo* found = nullptr;
      const int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
      if (rc != 0) {
        last_error = strCat("cannot resolve '", host_, "': ", gai_strerror(rc));
      } else {
        for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
          const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
          if (s < 0) continue;
          if (::connect(s, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && connected(s, deadline))) {
            fd_ = s;
          } else {
            last_error = std::strerror(errno);
            ::close(s);
          }
        }
        ::freeaddrinfo(found);
      }
      if (fd_ >= 0) break;
      if (Clock::now() > deadline)
        throw Error(
            absl::StatusCode::kDeadlineExceeded,
            strCat("the world's store at ", where(), " did not answer within ", timeout_seconds, " s (", last_error,
                   "): world rank 0 serves it from its first use of process groups; is rank 0 alive, and "
                   "are BACKPLANE_MASTER_ADDR and BACKPLANE_MASTER_PORT the same on every rank?"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    send(request(kHello, {}, {}), "(hello)", "hello", deadline, timeout_seconds);
    const std::string magic = receive(4, "(hello)", "hello", deadline, timeout_seconds);
    if (getU32(magic.data()) != kMagic)
      fail(absl::StatusCode::kFailedPrecondition,
           strCat("something other than the world's store answers at ", where(),
                  " (BACKPLANE_MASTER_PORT: choose a port no other program uses)"));
  }

  void send(const std::string& bytes, std::string_view key, const char* what, Clock::time_point deadline,
            double timeout_seconds) {
    size_t done = 0;
    while (done < bytes.size()) {
      if (!wait(POLLOUT, deadline))
        fail(absl::StatusCode::kDeadlineExceeded, strCat("the store's ", what, " of '", key, "' could not be sent to ",
                                                         where(), " within ", timeout_seconds, " s"));
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) lost(key, what);
      done += static_cast<size_t>(n);
    }
  }

  std::string receive(size_t n, std::string_view key, const char* what, Clock::time_point deadline,
                      double timeout_seconds) {
    std::string out(n, '\0');
    size_t done = 0;
    while (done < n) {
      if (!wait(POLLIN, deadline))
        fail(absl::StatusCode::kDeadlineExceeded,
             std::string_view(what) == "get" ? strCat("the store's key '", key, "' was not set within ",
                                                      timeout_seconds, " s (the world's store at ", where(),
                                                      "): the rank that sets it has died, hangs, or never got there")
                                             : strCat("the world's store at ", where(), " did not answer the ", what,
                                                      " of '", key, "' within ", timeout_seconds, " s"));
      const ssize_t got = ::recv(fd_, out.data() + done, n - done, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) lost(key, what);
      done += static_cast<size_t>(got);
    }
    return out;
  }

 private:
  // Waits until the socket is ready for `events`; false at the deadline.
  // A signal's EINTR waits on; a failing poll() is a lost connection.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return true;  // the send or recv that follows reports it
    }
  }

  // Whether non-blocking connect() of `s` completes before the deadline.
  static bool connected(int s, Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{s, POLLOUT, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1 << 30))));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) {
        errno = ETIMEDOUT;
        return false;
      }
      int error = 0;
      socklen_t len = sizeof error;
      if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return false;
      errno = error;
      return error == 0;
    }
  }

  [[noreturn]] void fail(absl::StatusCode code, const std::string& message) {
    close();
    throw Error(code, message);
  }
  [[noreturn]] void lost(std::string_view key, const char* what) {
    fail(absl::StatusCode::kUnavailable, strCat("the world's store at ", where(), " closed the connection during the ",
                                                what, " of '", key, "': world rank 0 has exited or died"));
  }

  const std::string host_;
  const int port_;
  int fd_ = -1;
};

class TcpStore final : public Store {
 public:
  TcpStore(std::string host, int port, double timeout_seconds)
      : host_(std::move(host)), port_(port), timeout_(timeout_seconds), shared_(host_, port_) {}

  void set(std::string_view key, std::string_view value) override {
    checkSizes(key, value);
    roundTrip(request(kSet, key, value), key, 1, "set");
  }
  // On a connection of its own: a get waiting for its key blocks no other
  // call of this process (the set it waits for may come from here).
  std::string get(std::string_view key, double timeout_seconds) override {
    checkSizes(key, {});
    const Clock::time_point deadline = deadlineAfter(timeout_seconds);
    Connection c(host_, port_);
    c.connect(deadline, timeout_seconds);
    c.send(request(kGet, key, {}), key, "get", deadline, timeout_seconds);
    const std::string length = c.receive(4, key, "get", deadline, timeout_seconds);
    return c.receive(getU32(length.data()), key, "get", deadline, timeout_seconds);
  }
  int64_t add(std::string_view key, int64_t delta) override {
    checkSizes(key, {});
    return i64Of(roundTrip(request(kAdd, key, i64Bytes(delta)), key, 8, "add"));
  }

 private:
  // set and add: a short request and answer on the shared connection.
  std::string roundTrip(const std::string& req, std::string_view key, size_t answer, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point deadline = deadlineAfter(timeout_);
    shared_.connect(deadline, timeout_);
    shared_.send(req, key, what, deadline, timeout_);
    return shared_.receive(answer, key, what, deadline, timeout_);
  }

  const std::string host_;
  const int port_;
  const double timeout_;
  std::mutex mu_;  // one request at a time on the shared connection
  Connection shared_;
};

// BACKPLANE_MASTER_PORT as a port; 0 when unset; throws when malformed.
int masterPort() {
  const char* v = std::getenv("BACKPLANE_MASTER_PORT");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long p = std::strtol(v, &end, 10);
  if (*end != '\0' || p < 1 || p > 65535)
    throw Error(absl::StatusCode::kInvalidArgument,
                strCat("BACKPLANE_MASTER_PORT='", v, "' is not a TCP port (1 to 65535)"));
  return static_cast<int>(p);
}

std::string masterAddr() {
  const char* v = std::getenv("BACKPLANE_MASTER_ADDR");
  return v != nullptr && *v != '\0' ? v : "127.0.0.1";
}

}  // namespace

namespace detail {
void serveWorldStoreIfRankZero(int rank, int size) {
  if (rank != 0 || size < 2) return;
  ServerState& s = serverState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.serving) return;
  int port = 0;
  try {
    port = masterPort();
  } catch (const Error& e) {
    s.error = e.what();
    return;
  }
  if (port == 0) return;  // not yet: a later call (worldStore()) may find it set
  s.serving = true;
  auto* server = new Server();  // lives as long as the process, as its thread does
  s.error = server->listenOn(port);
  if (s.error.empty()) std::thread([server] { server->run(); }).detach();
}
}  // namespace detail

Store& worldStore() {
  static Store* store = []() -> Store* {
    const Group w = world();
    if (w.size() == 1) return new LocalStore();
    const int port = masterPort();
    if (port == 0)
      throw Error(absl::StatusCode::kFailedPrecondition,
                  strCat("the world's store (Note [The world's store] in backplane/runtime/store.h) needs "
                         "BACKPLANE_MASTER_PORT in a world of ",
                         w.size(),
                         " ranks: a free TCP port on world rank 0's host, the same on every rank (and "
                         "BACKPLANE_MASTER_ADDR, rank 0's host, when the ranks span machines); under mpirun pass "
                         "them with -x"));
    detail::serveWorldStoreIfRankZero(w.rank(), w.size());
    if (w.rank() == 0) {
      std::lock_guard<std::mutex> lock(serverState().mu);
      if (!serverState().error.empty()) throw Error(absl::StatusCode::kUnavailable, serverState().error);
    }
    return new TcpStore(masterAddr(), port, w.timeoutSeconds());
  }();
  return *store;
}

}  // namespace backplane::comm
