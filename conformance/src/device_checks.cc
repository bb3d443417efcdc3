// Device API checks (suite.h, Note [Device API checks]): what every device
// type must do for the host to hold tensors on it, exercised through the
// same DeviceInterface calls the core makes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"

namespace backplane::conformance {
namespace {

// A failed check: says which step and why; caught by runDeviceCheck.
struct CheckFailed {
  std::string step;
  std::string why;
};

[[noreturn]] void failed(std::string step, std::string why) { throw CheckFailed{std::move(step), std::move(why)}; }

// Deterministic bytes that differ between `salt`s and from a shifted copy.
std::vector<uint8_t> pattern(size_t n, uint64_t salt) {
  std::vector<uint8_t> out(n);
  Rng rng(salt);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng.next();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

void* at(const DataPtr& p, size_t offset) { return static_cast<char*>(p.get()) + offset; }

class DeviceProbe {
 public:
  explicit DeviceProbe(DeviceType type) : iface_(DeviceTypeRegistry::global().interfaceOrThrow(type)), type_(type) {}

  int count() const { return iface_.deviceCount(); }
  Device device(int i) const { return Device(type_, static_cast<DeviceIndex>(i)); }

  DataPtr allocate(size_t nbytes, Device d, const std::string& step) {
    DataPtr p = iface_.allocator().allocate(nbytes, d);
    if (nbytes > 0 && p.get() == nullptr) failed(step, "allocate(" + std::to_string(nbytes) + ") returned null");
    if (p.device() != d) {
      failed(step,
             "allocate(" + std::to_string(nbytes) + ") on " + d.str() + " returned memory of " + p.device().str());
    }
    return p;
  }

  void upload(const DataPtr& p, size_t offset, const std::vector<uint8_t>& bytes) {
    iface_.copyHostToDevice(at(p, offset), p.device(), bytes.data(), bytes.size());
  }
  std::vector<uint8_t> download(const DataPtr& p, size_t offset, size_t n) {
    std::vector<uint8_t> out(n);
    iface_.copyDeviceToHost(out.data(), at(p, offset), p.device(), n);
    return out;
  }
  // Reads back [offset, offset + want.size()) of `p` and compares.
  void expectBytes(const DataPtr& p, size_t offset, const std::vector<uint8_t>& want, const std::string& step) {
    const std::vector<uint8_t> got = download(p, offset, want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        failed(step, "byte " + std::to_string(offset + i) + " of the allocation reads " + std::to_string(got[i]) +
                         ", expected " + std::to_string(want[i]));
      }
    }
  }

  DeviceInterface& iface() { return iface_; }

 private:
  DeviceInterface& iface_;
  DeviceType type_;
};

// Zero bytes, small odd sizes and a large block are usable to their last
// byte; live allocations do not overlap; an impossible size is refused with
// an Error, not a crash.
int checkAllocate(DeviceProbe& c, Device d) {
  int steps = 0;
  {
    DataPtr zero = c.allocate(0, d, "allocate 0 bytes");
    ++steps;
  }
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, (size_t{1} << 20) + 3, kLargeAllocationBytes}) {
    const std::string step = "allocate " + std::to_string(n) + " bytes";
    DataPtr p = c.allocate(n, d, step);
    const size_t edge = std::min<size_t>(n, 4096);
    const std::vector<uint8_t> head = pattern(edge, n), tail = pattern(edge, n + 1);
    c.upload(p, 0, head);
    c.upload(p, n - edge, tail);
    if (n > 2 * edge) c.expectBytes(p, 0, head, step + ": first bytes");
    c.expectBytes(p, n - edge, tail, step + ": last bytes");
    ++steps;
  }
  {
    DataPtr a = c.allocate(4096, d, "two live allocations"), b = c.allocate(4096, d, "two live allocations");
    const std::vector<uint8_t> pa = pattern(4096, 11), pb = pattern(4096, 12);
    c.upload(a, 0, pa);
    c.upload(b, 0, pb);
    c.expectBytes(a, 0, pa, "two live allocations: the first");
    c.expectBytes(b, 0, pb, "two live allocations: the second");
    ++steps;
  }
  try {
    DataPtr huge = c.iface().allocator().allocate(kImpossibleAllocationBytes, d);
    failed("allocate 2^60 bytes", "the allocation succeeded; it must throw Error(kResourceExhausted)");
  } catch (const Error& e) {
    if (e.code() != absl::StatusCode::kResourceExhausted) {
      failed("allocate 2^60 bytes",
             "threw " + std::string(absl::StatusCodeToString(e.code())) + ", expected RESOURCE_EXHAUSTED: " + e.what());
    }
  }
  return ++steps;
}

// Host <-> device and device -> device copies of whole blocks and of
// unaligned ranges at offsets leave exactly the right bytes; memset and
// zero-byte copies too.
int checkCopy(DeviceProbe& c, Device d) {
  const size_t n = (size_t{1} << 20) + 13;
  const std::vector<uint8_t> base = pattern(n, 21);
  DataPtr a = c.allocate(n, d, "copy"), b = c.allocate(n, d, "copy");
  c.upload(a, 0, base);
  c.expectBytes(a, 0, base, "host -> device -> host, whole block");

  // A range from an offset of the host buffer to an odd offset on the device.
  std::vector<uint8_t> want = base;
  const std::vector<uint8_t> patch = pattern(1003, 22);
  c.iface().copyHostToDevice(at(a, 3), d, patch.data() + 5, 998);
  std::memcpy(want.data() + 3, patch.data() + 5, 998);
  c.expectBytes(a, 0, want, "host -> device at offset 3");
  std::vector<uint8_t> part(998 + 10, 0xEE);
  c.iface().copyDeviceToHost(part.data() + 10, at(a, 3), d, 998);
  for (size_t i = 0; i < 10; ++i)
    if (part[i] != 0xEE) failed("device -> host at offset 3", "wrote before the destination range");
  if (std::memcmp(part.data() + 10, patch.data() + 5, 998) != 0) {
    failed("device -> host at offset 3", "the bytes read differ from those written");
  }

  // Device -> device between two allocations, at different odd offsets.
  const std::vector<uint8_t> b_base = pattern(n, 23);
  c.upload(b, 0, b_base);
  c.iface().copyDeviceToDevice(at(b, 11), d, at(a, 7), d, 5000);
  std::vector<uint8_t> b_want = b_base;
  std::memcpy(b_want.data() + 11, want.data() + 7, 5000);
  c.expectBytes(b, 0, b_want, "device -> device at offsets 7 -> 11");

  c.iface().memset(at(b, 17), d, 0xAB, 100);
  std::memset(b_want.data() + 17, 0xAB, 100);
  c.expectBytes(b, 0, b_want, "memset 100 bytes at offset 17");

  // Zero-byte copies move nothing and do not fail.
  c.iface().copyHostToDevice(at(b, 0), d, patch.data(), 0);
  c.iface().copyDeviceToHost(part.data(), at(b, 0), d, 0);
  c.iface().copyDeviceToDevice(at(b, 0), d, at(a, 0), d, 0);
  c.expectBytes(b, 0, b_want, "zero-byte copies");

  // The core's generic path (used by tensor copies) agrees.
  std::vector<uint8_t> back(n);
  copyBytesBetweenDevices(back.data(), Device(DeviceType::CPU), b.get(), d, n);
  if (back != b_want) failed("copyBytesBetweenDevices device -> host", "the bytes read differ");
  return 6;
}

// synchronize returns on every device after queued copies.
int checkSynchronize(DeviceProbe& c) {
  int steps = 0;
  for (int i = 0; i < c.count(); ++i) {
    const Device d = c.device(i);
    const std::vector<uint8_t> bytes = pattern(1 << 16, 31 + static_cast<uint64_t>(i));
    DataPtr a = c.allocate(bytes.size(), d, "synchronize"), b = c.allocate(bytes.size(), d, "synchronize");
    c.upload(a, 0, bytes);
    c.iface().copyDeviceToDevice(b.get(), d, a.get(), d, bytes.size());
    c.iface().synchronize(d);
    c.expectBytes(b, 0, bytes, "copies before synchronize on " + d.str());
    ++steps;
  }
  return steps;
}

std::string handleText(const void* h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", h);
  return buf;
}

// Streams (where the type has them): a created stream is synchronizable;
// with current_stream, setCurrentStream(s) makes currentStream() return s
// on that device and on no other, work queued meanwhile is finished by
// synchronizeStream(s), and restoring the previous stream restores it.
int checkStreams(DeviceProbe& c) {
  int steps = 0;
  const bool current = c.iface().capabilities().current_stream;
  for (int i = 0; i < c.count(); ++i) {
    const Device d = c.device(i);
    DeviceInterface::StreamHandle s = c.iface().createStream(d);
    c.iface().synchronizeStream(d, s);  // an empty stream
    ++steps;
    if (current) {
      const size_t n = size_t{1} << 16;
      DataPtr b = c.allocate(n, d, "streams");
      DeviceInterface::StreamHandle prev = c.iface().currentStream(d);
      std::vector<DeviceInterface::StreamHandle> others;
      for (int j = 0; j < c.count(); ++j)
        if (j != i) others.push_back(c.iface().currentStream(c.device(j)));
      c.iface().setCurrentStream(d, s);
      DeviceInterface::StreamHandle now = c.iface().currentStream(d);
      if (now != s) {
        c.iface().setCurrentStream(d, prev);
        c.iface().destroyStream(d, s);
        failed("setCurrentStream on " + d.str(),
               "setCurrentStream(" + handleText(s) + ") had no effect: currentStream() then returned " +
                   handleText(now) + "; work meant for the stream would go elsewhere");
      }
      for (int j = 0, k = 0; j < c.count(); ++j) {
        if (j == i) continue;
        if (c.iface().currentStream(c.device(j)) != others[static_cast<size_t>(k++)]) {
          failed("setCurrentStream on " + d.str(),
                 "it also changed the current stream of " + c.device(j).str() + ": a current stream is per device");
        }
      }
      c.iface().memset(b.get(), d, 0x5A, n);
      c.iface().synchronizeStream(d, s);
      c.iface().setCurrentStream(d, prev);
      if (c.iface().currentStream(d) != prev) {
        c.iface().destroyStream(d, s);
        failed("setCurrentStream on " + d.str(), "restoring the previous stream " + handleText(prev) +
                                                     " did not: currentStream() returns " +
                                                     handleText(c.iface().currentStream(d)));
      }
      c.expectBytes(b, 0, std::vector<uint8_t>(n, 0x5A), "memset on a created stream of " + d.str());
      ++steps;
    }
    c.iface().destroyStream(d, s);
  }
  return steps;
}

// A fill of n bytes of `buffer` with `value` queued on a new stream of `d`
// (made current for it, then the previous one restored), and an event
// recorded after it. The caller synchronizes the stream and destroys both.
struct QueuedFill {
  DeviceInterface::StreamHandle stream;
  DeviceInterface::EventHandle event;
};
QueuedFill fillOnNewStream(DeviceProbe& c, Device d, const DataPtr& buffer, uint8_t value, size_t n) {
  DeviceInterface::StreamHandle prev = c.iface().currentStream(d);
  QueuedFill q{c.iface().createStream(d), c.iface().createEvent(d)};
  c.iface().setCurrentStream(d, q.stream);
  c.iface().memset(buffer.get(), d, value, n);
  c.iface().recordEvent(d, q.event, q.stream);
  c.iface().setCurrentStream(d, prev);
  return q;
}
void release(DeviceProbe& c, Device d, QueuedFill q) {
  c.iface().synchronizeStream(d, q.stream);
  c.iface().destroyEvent(d, q.event);
  c.iface().destroyStream(d, q.stream);
}

// Polls queryEvent until it says complete, for at most `limit`; false if it
// never does.
bool completesWithin(DeviceProbe& c, Device d, DeviceInterface::EventHandle e, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (c.iface().queryEvent(d, e)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Events (where the type has them): recorded on the current stream and
// synchronized; with event_query, an event never recorded reads complete,
// one recorded after queued work completes without the host synchronizing
// (polled for kEventQueryLimit) and reads complete after synchronizeEvent;
// with streams and current_stream, an event orders two streams: a fill on a
// created stream, an event recorded after it, the current stream waiting
// for it (or the host, without event_wait), then a copy on the current
// stream must read the filled bytes; with several devices and
// event_wait_device, an event of one device orders another's stream; with
// event_timing (ABI 1.12), two timed events around a memset give a time
// that is not negative, no longer than the host waited for it, and the
// same negated when asked the other way round, and an event made without
// timing is refused.
constexpr std::chrono::milliseconds kEventQueryLimit{2000};

void checkEventTiming(DeviceProbe& c, Device d, const DataPtr& b, size_t n) {
  DeviceInterface& iface = c.iface();
  // Destroyed on every path, a failed check's included.
  struct Events {
    DeviceInterface& iface;
    Device d;
    std::vector<DeviceInterface::EventHandle> made;
    DeviceInterface::EventHandle add(DeviceInterface::EventHandle e) { return made.emplace_back(e); }
    ~Events() {
      for (DeviceInterface::EventHandle e : made) {
        try {
          iface.destroyEvent(d, e);
        } catch (...) {
        }
      }
    }
  } events{iface, d, {}};
  DeviceInterface::EventHandle start = events.add(iface.createTimedEvent(d));
  DeviceInterface::EventHandle end = events.add(iface.createTimedEvent(d));
  DeviceInterface::EventHandle plain = events.add(iface.createEvent(d));
  const auto host_before = std::chrono::steady_clock::now();
  iface.recordEvent(d, start, nullptr);
  iface.memset(b.get(), d, 0x22, n);
  iface.recordEvent(d, end, nullptr);
  iface.recordEvent(d, plain, nullptr);
  iface.synchronizeEvent(d, end);
  iface.synchronizeEvent(d, plain);
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_before).count();
  const double ms = iface.eventElapsedMs(d, start, end), back = iface.eventElapsedMs(d, end, start);
  bool plain_refused = false;
  try {
    (void)iface.eventElapsedMs(d, start, plain);
  } catch (const Error&) {
    plain_refused = true;
  }
  const std::string what = "eventElapsedMs on " + d.str();
  if (!(ms >= 0) || ms > host_ms * 1.01 + 1.0)
    failed(what, strCat("two timed events around a 64 KiB memset are ", ms, " ms apart, but the host waited ", host_ms,
                        " ms for them: the time must be >= 0 and at most what the host saw"));
  if (std::abs(ms + back) > 1e-3)
    failed(what, strCat("start to end is ", ms, " ms but end to start is ", back, " ms: it must be the negation"));
  if (!plain_refused)
    failed(what, "an event made by createEvent (no timing) was accepted: it must be refused with an error");
}

int checkEvents(DeviceProbe& c) {
  int steps = 0;
  const DeviceCapabilities caps = c.iface().capabilities();
  for (int i = 0; i < c.count(); ++i) {
    const Device d = c.device(i);
    const size_t n = size_t{1} << 16;
    DataPtr b = c.allocate(n, d, "events");
    {
      DeviceInterface::EventHandle e = c.iface().createEvent(d);
      if (caps.event_query && !c.iface().queryEvent(d, e)) {
        c.iface().destroyEvent(d, e);
        failed("queryEvent on " + d.str(), "an event never recorded must read complete; queryEvent said not");
      }
      c.iface().memset(b.get(), d, 0x11, n);
      c.iface().recordEvent(d, e, nullptr);
      if (caps.event_query && !completesWithin(c, d, e, kEventQueryLimit)) {
        c.iface().destroyEvent(d, e);
        failed("queryEvent on " + d.str(),
               "an event recorded after a 64 KiB memset still read incomplete after " +
                   std::to_string(kEventQueryLimit.count()) +
                   " ms of polling: queryEvent must report completion without the host synchronizing");
      }
      c.iface().synchronizeEvent(d, e);
      if (caps.event_query && !c.iface().queryEvent(d, e)) {
        c.iface().destroyEvent(d, e);
        failed("queryEvent on " + d.str(), "after synchronizeEvent returned, queryEvent said the event is incomplete");
      }
      c.expectBytes(b, 0, std::vector<uint8_t>(n, 0x11), "memset before a synchronized event of " + d.str());
      c.iface().destroyEvent(d, e);
      ++steps;
    }
    if (caps.event_timing) {
      checkEventTiming(c, d, b, n);
      ++steps;
    }
    if (caps.streams && caps.current_stream) {
      DataPtr out = c.allocate(n, d, "event ordering");
      const QueuedFill q = fillOnNewStream(c, d, b, 0x3C, n);
      if (caps.event_wait) {
        c.iface().waitEvent(d, q.event, c.iface().currentStream(d));
      } else {
        c.iface().synchronizeEvent(d, q.event);
      }
      c.iface().copyDeviceToDevice(out.get(), d, b.get(), d, n);
      c.expectBytes(out, 0, std::vector<uint8_t>(n, 0x3C),
                    "a copy after waiting for an event recorded on another stream of " + d.str());
      release(c, d, q);
      ++steps;
    }
  }
  if (c.count() > 1 && caps.event_wait_device && caps.streams && caps.current_stream) {
    // With event_wait_device (ABI 1.8), an event of device 1 orders device
    // 0's current stream: a fill queued on a created stream of device 1, an
    // event recorded after it, device 0's stream waiting for it, then a
    // copy from device 1 to device 0 must read the filled bytes.
    const Device d0 = c.device(0), d1 = c.device(1);
    const size_t n = size_t{1} << 16;
    DataPtr src = c.allocate(n, d1, "cross-device event"), dst = c.allocate(n, d0, "cross-device event");
    const QueuedFill q = fillOnNewStream(c, d1, src, 0x5C, n);
    c.iface().waitEventOnDevice(d1, q.event, d0, c.iface().currentStream(d0));
    c.iface().copyDeviceToDevice(dst.get(), d0, src.get(), d1, n);
    c.expectBytes(dst, 0, std::vector<uint8_t>(n, 0x5C),
                  "a copy to " + d0.str() + " after its stream waited for an event of " + d1.str());
    release(c, d1, q);
    ++steps;
  }
  return steps;
}

// With several devices: each one describes itself and copies a range to
// the next one (device to device across devices).
int checkSeveralDevices(DeviceProbe& c) {
  const int n = c.count();
  const size_t bytes = (size_t{1} << 16) + 5;
  std::vector<DataPtr> src, dst;
  for (int i = 0; i < n; ++i) {
    const Device d = c.device(i);
    if (c.iface().properties(d).name.empty()) failed("properties of " + d.str(), "the device has no name");
    src.push_back(c.allocate(bytes, d, "allocate on " + d.str()));
    dst.push_back(c.allocate(bytes, d, "allocate on " + d.str()));
    c.upload(src.back(), 0, pattern(bytes, 41 + static_cast<uint64_t>(i)));
  }
  for (int i = 0; i < n; ++i) {
    const size_t j = static_cast<size_t>((i + 1) % n);
    c.iface().copyDeviceToDevice(at(dst[j], 1), c.device(static_cast<int>(j)), at(src[static_cast<size_t>(i)], 2),
                                 c.device(i), bytes - 2);
  }
  for (int i = 0; i < n; ++i) {
    const size_t j = static_cast<size_t>((i + 1) % n);
    const std::vector<uint8_t> from = pattern(bytes, 41 + static_cast<uint64_t>(i));
    c.expectBytes(dst[j], 1, std::vector<uint8_t>(from.begin() + 2, from.end()),
                  c.device(i).str() + " -> " + c.device(static_cast<int>(j)).str());
  }
  return n;
}

// A check that runs on each device in turn.
template <int (*Check)(DeviceProbe&, Device)>
int onEveryDevice(DeviceProbe& c) {
  int samples = 0;
  for (int i = 0; i < c.count(); ++i) samples += Check(c, c.device(i));
  return samples;
}

enum class Needs { Nothing, SeveralDevices, Streams, Events };
struct DeviceCheck {
  const char* name;
  Needs needs;
  int (*run)(DeviceProbe&);  // the samples it checked; throws CheckFailed
};
constexpr DeviceCheck kDeviceChecks[] = {
    {"device.allocate", Needs::Nothing, &onEveryDevice<checkAllocate>},
    {"device.copy", Needs::Nothing, &onEveryDevice<checkCopy>},
    {"device.synchronize", Needs::Nothing, &checkSynchronize},
    {"device.streams", Needs::Streams, &checkStreams},
    {"device.events", Needs::Events, &checkEvents},
    {"device.several_devices", Needs::SeveralDevices, &checkSeveralDevices},
};

}  // namespace

std::vector<std::string> deviceCheckNames(DeviceType type) {
  const DeviceInterface& iface = DeviceTypeRegistry::global().interfaceOrThrow(type);
  const int count = iface.deviceCount();
  const DeviceCapabilities caps = iface.capabilities();
  std::vector<std::string> out;
  for (const DeviceCheck& c : kDeviceChecks) {
    const bool applies = c.needs == Needs::Nothing || (c.needs == Needs::SeveralDevices && count > 1) ||
                         (c.needs == Needs::Streams && caps.streams) || (c.needs == Needs::Events && caps.events);
    if (applies) out.emplace_back(c.name);
  }
  return out;
}

Result runDeviceCheck(const std::string& name, DeviceType type) {
  Result r;
  r.op = name;
  r.form = "device";
  r.backend = std::string(deviceTypeName(type));
  try {
    DeviceProbe c(type);
    if (c.count() == 0) failed("deviceCount", "the device type has no devices");
    const DeviceCheck* check = nullptr;
    for (const DeviceCheck& k : kDeviceChecks)
      if (name == k.name) check = &k;
    if (check == nullptr) BP_THROW(kInvalidArgument, "unknown device check '", name, "'");
    r.samples = check->run(c);
  } catch (const CheckFailed& f) {
    r.outcome = Outcome::Fail;
    r.sample = f.step;
    r.message = f.why;
  } catch (const std::exception& e) {
    r.outcome = Outcome::Error;
    r.message = e.what();
  }
  return r;
}

}  // namespace backplane::conformance
