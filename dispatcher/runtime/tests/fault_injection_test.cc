// Faults injected inside ops on the test device (Note [Fault injection on
// the test device]): every allocation, copy and memset an op makes, failed
// one at a time, in ops served by the CPU fallback (with out= and (a!)
// arguments, contiguous and strided) and in composites built from them.
// Each fault must surface as an Error naming the op and the device, leave
// the inputs unchanged and the written arguments as Note [Faults in the CPU
// fallback's copies] says, leak no device memory, and leave the device able
// to run the op again. The number of (op, fault point) pairs tested is
// printed at the end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/fault_tally.h"
#include "backplane/testing/plugin_environment.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::FaultPoint;
using ::testing::HasSubstr;
using testing::TestDevice;

constexpr FaultPoint kPoints[] = {FaultPoint::kAllocate, FaultPoint::kCopyHostToDevice, FaultPoint::kCopyDeviceToHost,
                                  FaultPoint::kCopyDeviceToDevice, FaultPoint::kMemset};

// (op, fault point, k): every fault injected that the op recovered from.
fault_test::Tally& kTally = fault_test::Tally::install("test device");
using fault_test::bytesOf;

TestDevice& faultDevice() { return TestDevice::install("faultdev", 1); }

const auto* const kEnv = &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).afterLoad([] { faultDevice(); });

std::string qualified(const char* name) { return std::string(kStandardNamespace) + "::" + name; }

struct Case {
  std::string op;                                   // the op called, as errors name it
  std::vector<std::string> named;                   // ops the error may name: the op, or (composite) an op it calls
  std::function<std::vector<Tensor>(Device)> make;  // its arguments, fresh, on the device
  std::vector<size_t> written;                      // the arguments it writes (out=, (a!)), in schema order
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
};

Tensor f32(std::vector<float> v, IntArrayRef sizes, Device d) { return tensorFromVector<float>(v, sizes, d); }

// Runs `c` clean to count its fault points, then fails each one in turn.
void injectEveryFault(const Case& c) {
  TestDevice& dev = faultDevice();
  const Device d = dev.device(0);
  dev.disarmFaults();
  // A clean run: what each fault point sees, and the results.
  std::vector<Tensor> args = c.make(d);
  const auto inputs_before = bytesOf(args);
  for (FaultPoint p : kPoints) dev.armFault(p, 0);
  const std::vector<Tensor> results = c.run(args);
  uint64_t calls[std::size(kPoints)];
  for (size_t i = 0; i < std::size(kPoints); ++i) calls[i] = dev.faultPointCalls(kPoints[i]);
  dev.disarmFaults();
  const auto expected = bytesOf(results);
  const auto args_after = bytesOf(args);
  uint64_t total = 0;
  for (uint64_t n : calls) total += n;
  ASSERT_GT(total, 0u) << c.op << " reached no fault point";
  std::printf("%s: allocation %llu, host-to-device %llu, device-to-host %llu, device-to-device %llu, memset %llu\n",
              c.op.c_str(), static_cast<unsigned long long>(calls[0]), static_cast<unsigned long long>(calls[1]),
              static_cast<unsigned long long>(calls[2]), static_cast<unsigned long long>(calls[3]),
              static_cast<unsigned long long>(calls[4]));

  for (size_t pi = 0; pi < std::size(kPoints); ++pi) {
    const FaultPoint p = kPoints[pi];
    for (uint64_t k = 1; k <= calls[pi]; ++k) {
      const std::string what = c.op + " with " + testing::faultPointName(p) + " #" + std::to_string(k) + " failing";
      SCOPED_TRACE(what);
      std::vector<Tensor> a = c.make(d);
      ASSERT_EQ(bytesOf(a), inputs_before);
      const size_t live = dev.liveAllocations();
      dev.armFault(p, k);
      std::string message;
      try {
        (void)c.run(a);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        message = e.message();
        EXPECT_EQ(e.code(),
                  p == FaultPoint::kAllocate ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal)
            << message;
      }
      dev.disarmFaults();
      EXPECT_THAT(message, HasSubstr("fault injected by the test"));
      EXPECT_THAT(message, HasSubstr(d.str())) << "the error must name the device";
      bool names_op = false;
      for (const std::string& op : c.named)
        names_op =
            names_op || message.find(op + ":") != std::string::npos || message.find(op + " ") != std::string::npos;
      EXPECT_TRUE(names_op) << "the error must name the op (" << ::testing::PrintToString(c.named) << "): " << message;
      // Nothing leaked: the arguments are all that is left on the device.
      EXPECT_EQ(dev.liveAllocations(), live) << message;
      // Inputs unchanged; written arguments as Note [Faults in the CPU
      // fallback's copies] says: a prefix (in schema order) holds the
      // results, the rest is unchanged (a failed copy here writes nothing).
      const auto now = bytesOf(a);
      size_t prefix = 0;
      bool in_prefix = true;
      for (size_t i = 0; i < a.size(); ++i) {
        const bool written = std::find(c.written.begin(), c.written.end(), i) != c.written.end();
        if (!written) {
          EXPECT_EQ(now[i], inputs_before[i]) << "input " << i << " changed; " << message;
          continue;
        }
        if (in_prefix && now[i] == args_after[i] && now[i] != inputs_before[i]) {
          ++prefix;
          continue;
        }
        in_prefix = false;
        EXPECT_EQ(now[i], inputs_before[i]) << "written argument " << i << " is neither unchanged nor complete, or "
                                            << "one before it was not written; " << message;
      }
      if (message.find("staging its arguments") != std::string::npos) {
        EXPECT_EQ(prefix, 0u) << "a fault while staging must leave every argument unchanged";
      }
      // The device runs the op again, correctly.
      std::vector<Tensor> again = c.make(d);
      EXPECT_EQ(bytesOf(c.run(again)), expected);
      EXPECT_EQ(bytesOf(again), args_after);
      if (!::testing::Test::HasFailure()) {
        kTally.record(c.op, testing::faultPointName(p), k);
      }
    }
  }
}

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

TEST(FaultInjection, TheTestDeviceFailsExactlyTheArmedCallsOfOnePoint) {
  TestDevice& dev = faultDevice();
  const Device d = dev.device(0);
  dev.disarmFaults();
  dev.armFault(FaultPoint::kCopyHostToDevice, 2, 2);  // calls 2 and 3 fail
  dev.armFault(FaultPoint::kAllocate, 0);             // only counted
  std::vector<std::string> errors;
  for (int i = 0; i < 4; ++i) {
    try {
      (void)f32({1, 2, 3}, {3}, d);  // an allocation, then a host-to-device copy
      errors.push_back("");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
      errors.push_back(e.message());
    }
  }
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1],
            "test device: host-to-device copy #2 of 12 bytes on faultdev:0 failed: fault injected by the "
            "test (TestDevice::armFault)");
  EXPECT_THAT(errors[2], HasSubstr("host-to-device copy #3 of 12 bytes"));
  EXPECT_EQ(errors[3], "");
  EXPECT_EQ(dev.faultPointCalls(FaultPoint::kCopyHostToDevice), 4u);
  EXPECT_EQ(dev.faultPointCalls(FaultPoint::kAllocate), 4u);
  EXPECT_EQ(dev.faultPointCalls(FaultPoint::kCopyDeviceToHost), 0u);  // not armed: not counted
  dev.armFault(FaultPoint::kAllocate, 1);
  try {
    (void)f32({1, 2, 3}, {3}, d);
    ADD_FAILURE() << "the allocation did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(e.message(), HasSubstr("test device: allocation #1 of 12 bytes on faultdev:0 failed"));
  }
  dev.disarmFaults();
  EXPECT_EQ(dev.faultPointCalls(FaultPoint::kAllocate), 0u);
  EXPECT_EQ(f32({1, 2, 3}, {3}, d).cpu().toVector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(FaultInjection, CpuFallbackOutArgument) {
  injectEveryFault({qualified("add.out"),
                    {qualified("add.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({10, 20, 30}, {3}, d),
                                                 f32({0, 0, 0, 0, 0, 0}, {2, 3}, d)};
                    },
                    {2},
                    [](const std::vector<Tensor>& a) {
                      static auto op = Dispatcher::singleton()
                                           .findOpOrThrow(qualified("add.out"))
                                           .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
                      return one(op.call(a[0], a[1], Scalar(2), a[2]));
                    }});
}

TEST(FaultInjection, CpuFallbackStridedOutArgument) {
  // out= is a column of a 3x2 tensor: the fallback stages its span (with
  // the other column in the gaps) and writes the span back.
  injectEveryFault({qualified("mul.out"),
                    {qualified("mul.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3}, {3}, d), f32({4, 5, 6}, {3}, d),
                                                 f32({-1, -2, -3, -4, -5, -6}, {3, 2}, d)};
                    },
                    {2},
                    [](const std::vector<Tensor>& a) {
                      static auto op = Dispatcher::singleton()
                                           .findOpOrThrow(qualified("mul.out"))
                                           .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
                      return one(op.call(a[0], a[1], a[2].select(1, 0)));
                    }});
}

TEST(FaultInjection, CpuFallbackInPlaceArgument) {
  injectEveryFault({qualified("add_.Tensor"),
                    {qualified("add_.Tensor"), qualified("add.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4}, {4}, d), f32({10, 20, 30, 40}, {4}, d)};
                    },
                    {0},
                    [](const std::vector<Tensor>& a) {
                      static auto op = Dispatcher::singleton()
                                           .findOpOrThrow(qualified("add_.Tensor"))
                                           .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
                      return one(op.call(a[0], a[1], Scalar(1)));
                    }});
}

TEST(FaultInjection, CpuFallbackTwoOutArguments) {
  // sort.values writes values, then indices: a fault writing indices back
  // leaves values written (Note [Faults in the CPU fallback's copies]).
  injectEveryFault(
      {qualified("sort.values"),
       {qualified("sort.values"), qualified("sort.values_stable")},
       [](Device d) {
         return std::vector<Tensor>{f32({3, 1, 2, 0}, {4}, d), f32({0, 0, 0, 0}, {4}, d),
                                    tensorFromVector<int64_t>({0, 0, 0, 0}, {4}, d)};
       },
       {1, 2},
       [](const std::vector<Tensor>& a) {
         static auto op =
             Dispatcher::singleton()
                 .findOpOrThrow(qualified("sort.values"))
                 .typed<std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool, const Tensor&, const Tensor&)>();
         auto [v, i] = op.call(a[0], 0, false, a[1], a[2]);
         return std::vector<Tensor>{v, i};
       }});
}

TEST(FaultInjection, CpuFallbackFreshResult) {
  // The result is made on the host and copied to the device.
  injectEveryFault({qualified("sum.dim_IntList"),
                    {qualified("sum.dim_IntList"), qualified("sum.IntList_out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(sum(a[0], {1})); }});
}

TEST(FaultInjection, CompositeMatrixProduct) {
  injectEveryFault(
      {qualified("mm"),
       {qualified("mm"), qualified("mm.out")},
       [](Device d) {
         return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({1, 0, 0, 1, 1, 1}, {3, 2}, d)};
       },
       {},
       [](const std::vector<Tensor>& a) { return one(mm(a[0], a[1])); }});
}

TEST(FaultInjection, CompositeLinear) {
  injectEveryFault({qualified("linear"),
                    {qualified("linear"), qualified("addmm"), qualified("addmm.out"), qualified("mm"),
                     qualified("mm.out"), qualified("add.out"), qualified("mul.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({1, 0, 0, 0, 1, 0}, {2, 3}, d),
                                                 f32({5, 7}, {2}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(linear(a[0], a[1], a[2])); }});
}

TEST(FaultInjection, CompositeSiluOut) {
  // silu.out on a device without kernels: sigmoid, then mul.out.
  injectEveryFault(
      {qualified("silu.out"),
       {qualified("silu.out"), qualified("sigmoid"), qualified("sigmoid.out"), qualified("mul.out")},
       [](Device d) {
         return std::vector<Tensor>{f32({-1, 0, 1, 2}, {4}, d), f32({9, 9, 9, 9}, {4}, d)};
       },
       {1},
       [](const std::vector<Tensor>& a) {
         static auto op =
             Dispatcher::singleton().findOpOrThrow(qualified("silu.out")).typed<Tensor(const Tensor&, const Tensor&)>();
         return one(op.call(a[0], a[1]));
       }});
}

TEST(FaultInjection, CopyOnTheDevice) {
  // copy_ of a strided source: a composite over _copy_on_device_.
  injectEveryFault(
      {qualified("copy_"),
       {qualified("copy_"), qualified("_copy_on_device_")},
       [](Device d) {
         return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({0, 0, 0, 0, 0, 0}, {3, 2}, d)};
       },
       {1},
       [](const std::vector<Tensor>& a) { return one(a[1].copy_(a[0].t())); }});
}

TEST(FaultInjection, CopyToTheHost) {
  injectEveryFault({qualified("copy_"),
                    {qualified("copy_"), qualified("_copy_on_device_")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d),
                                                 f32({0, 0, 0, 0, 0, 0}, {2, 3}, Device(DeviceType::CPU))};
                    },
                    {1},
                    [](const std::vector<Tensor>& a) { return one(a[1].copy_(a[0])); }});
}

}  // namespace
}  // namespace backplane
