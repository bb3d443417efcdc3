// Faults injected in the GPU simulator (Note [Fault injection in the
// simulator], plugins/gpu/sim/sim_faults.h) inside ops on gpusim: every
// device allocation, copy, memset and kernel launch an op makes, failed one
// at a time, in the plugin's native kernels, in composites built on them,
// and in the CPU fallback (ops the plugin lacks: the test's own, since
// gpusim has a kernel for every standard op). Each fault must surface as
// an Error naming the op and the device, leave the inputs unchanged and
// written arguments as documented (Note [Faults in the CPU fallback's
// copies]), leak no device memory (the caching allocator's allocated bytes
// return to where they were), and leave the device able to run the op
// again. The number of (op, fault point) pairs tested is printed at the end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/testing/fault_tally.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPoints[] = {"malloc", "memcpy", "memset", "launch"};

fault_test::Tally& kTally = fault_test::Tally::install("gpusim");
using fault_test::bytesOf;

std::string qualified(const char* name) { return std::string(kStandardNamespace) + "::" + name; }

Tensor f32(std::vector<float> v, IntArrayRef sizes, Device d) { return tensorFromVector<float>(v, sizes, d); }
std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

struct Case {
  std::string op;                  // the op called
  KernelKind kind;                 // how gpusim serves it: native, composite or the CPU fallback
  std::vector<std::string> named;  // ops the error may name: the op, or (composite) an op it calls
  std::function<std::vector<Tensor>(Device)> make;
  std::vector<size_t> written;  // the arguments it writes (out=, (a!)), in schema order
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
};

class GpusimFaultInjection : public gpu_test::GpusimSuite {
 protected:
  static void injectFault(const char* point, int64_t nth, int64_t count = 1) {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::inject_fault").typed<void(std::string_view, int64_t, int64_t)>();
    op.call(point, nth, count);
  }
  static int64_t faultCalls(const char* point) {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::fault_calls").typed<int64_t(std::string_view)>();
    return op.call(point);
  }
  static void clearFaults() {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::clear_faults").typed<void()>();
    op.call();
  }
  static void emptyCache() {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::empty_cache").typed<void(int64_t)>();
    op.call(0);
  }
  static int64_t allocatedBytes() {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
    return op.call("allocated_bytes", 0);
  }
  void TearDown() override { clearFaults(); }

  // Runs `c` clean to count its fault points, then fails each in turn.
  void injectEveryFault(const Case& c) {
    const Device d = sim();
    EXPECT_EQ(Dispatcher::singleton().findOpOrThrow(c.op).kernelKind(backendKey(d.type)), c.kind)
        << c.op << " is not served on gpusim the way this case means to test";
    clearFaults();
    std::vector<Tensor> args = c.make(d);
    const auto inputs_before = bytesOf(args);
    emptyCache();  // so that the op's allocations reach gpuMalloc
    for (const char* p : kPoints) injectFault(p, 0);
    const std::vector<Tensor> results = c.run(args);
    int64_t calls[std::size(kPoints)];
    for (size_t i = 0; i < std::size(kPoints); ++i) calls[i] = faultCalls(kPoints[i]);
    clearFaults();
    const auto expected = bytesOf(results);
    const auto args_after = bytesOf(args);
    int64_t total = 0;
    for (int64_t n : calls) total += n;
    ASSERT_GT(total, 0) << c.op << " reached no fault point";
    std::printf("%s: malloc %lld, memcpy %lld, memset %lld, launch %lld\n", c.op.c_str(),
                static_cast<long long>(calls[0]), static_cast<long long>(calls[1]), static_cast<long long>(calls[2]),
                static_cast<long long>(calls[3]));

    for (size_t pi = 0; pi < std::size(kPoints); ++pi) {
      const std::string_view p = kPoints[pi];
      for (int64_t k = 1; k <= calls[pi]; ++k) {
        const std::string what = c.op + " with " + std::string(p) + " #" + std::to_string(k) + " failing";
        SCOPED_TRACE(what);
        std::vector<Tensor> a = c.make(d);
        ASSERT_EQ(bytesOf(a), inputs_before);
        emptyCache();
        const int64_t live = allocatedBytes();
        // The caching allocator retries a failed gpuMalloc once after
        // emptying its cache: fail the retry too.
        injectFault(kPoints[pi], k, p == "malloc" ? 2 : 1);
        std::string message;
        try {
          (void)c.run(a);
          ADD_FAILURE() << "no error";
        } catch (const Error& e) {
          message = e.message();
          EXPECT_EQ(e.code(), p == "malloc" ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal)
              << message;
        }
        clearFaults();
        EXPECT_THAT(message, p == "malloc" ? HasSubstr("out of memory") : HasSubstr("fault injected by the test"));
        EXPECT_TRUE(message.find("gpusim:0") != std::string::npos || message.find("on gpusim") != std::string::npos ||
                    message.find("device type 'gpusim'") != std::string::npos)
            << "the error must name the device: " << message;
        bool names_op = false;
        for (const std::string& op : c.named)
          names_op =
              names_op || message.find(op + ":") != std::string::npos || message.find(op + " ") != std::string::npos;
        EXPECT_TRUE(names_op) << "the error must name the op (" << ::testing::PrintToString(c.named)
                              << "): " << message;
        EXPECT_EQ(allocatedBytes(), live) << "device memory leaked; " << message;
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
          EXPECT_EQ(now[i], inputs_before[i]) << "written argument " << i << " is neither unchanged nor complete, "
                                              << "or one before it was not written; " << message;
        }
        if (message.find("staging its arguments") != std::string::npos || p == "launch") {
          EXPECT_EQ(prefix, 0u) << "a fault before any result exists must leave every argument unchanged";
        }
        std::vector<Tensor> again = c.make(d);
        EXPECT_EQ(bytesOf(c.run(again)), expected);
        EXPECT_EQ(bytesOf(again), args_after);
        if (!HasFailure()) {
          kTally.record(c.op, std::string(p), k);
        }
      }
    }
  }
};

TEST_F(GpusimFaultInjection, NativeKernelWithOutArgument) {
  injectEveryFault({qualified("add.out"),
                    KernelKind::Native,
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

TEST_F(GpusimFaultInjection, NativeKernelThatChecksOnTheDevice) {
  // floor_divide.out of integers checks its divisors in the kernel itself,
  // which records a zero for the next synchronization (Note [Deferred
  // device errors]): one launch, no read back.
  injectEveryFault({qualified("floor_divide.out"),
                    KernelKind::Native,
                    {qualified("floor_divide.out")},
                    [](Device d) {
                      return std::vector<Tensor>{tensorFromVector<int32_t>({7, -7, 9, 10}, {4}, d),
                                                 tensorFromVector<int32_t>({2, 2, -4, 3}, {4}, d),
                                                 tensorFromVector<int32_t>({0, 0, 0, 0}, {4}, d)};
                    },
                    {2},
                    [](const std::vector<Tensor>& a) {
                      static auto op = Dispatcher::singleton()
                                           .findOpOrThrow(qualified("floor_divide.out"))
                                           .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
                      return one(op.call(a[0], a[1], a[2]));
                    }});
}

TEST_F(GpusimFaultInjection, NativeReduction) {
  injectEveryFault({qualified("sum.IntList_out"),
                    KernelKind::Native,
                    {qualified("sum.IntList_out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({0, 0}, {2}, d)};
                    },
                    {1},
                    [](const std::vector<Tensor>& a) {
                      static auto op = Dispatcher::singleton()
                                           .findOpOrThrow(qualified("sum.IntList_out"))
                                           .typed<Tensor(const Tensor&, std::optional<IntArrayRef>, bool,
                                                         std::optional<ScalarType>, const Tensor&)>();
                      const std::vector<int64_t> dim = {1};
                      return one(op.call(a[0], IntArrayRef(dim), false, std::nullopt, a[1]));
                    }});
}

TEST_F(GpusimFaultInjection, NativeLinear) {
  injectEveryFault({qualified("linear"),
                    KernelKind::Native,
                    {qualified("linear")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({1, 0, 0, 0, 1, 0}, {2, 3}, d),
                                                 f32({5, 7}, {2}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(linear(a[0], a[1], a[2])); }});
}

TEST_F(GpusimFaultInjection, CompositeSoftmax) {
  // softmax.int: allocates its result, then calls the native softmax.int_out.
  injectEveryFault({qualified("softmax.int"),
                    KernelKind::Composite,
                    {qualified("softmax.int"), qualified("softmax.int_out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(softmax(a[0], 1)); }});
}

TEST_F(GpusimFaultInjection, CompositeInPlace) {
  // add_.Tensor: the composite calls add.out with self as out.
  injectEveryFault({qualified("add_.Tensor"),
                    KernelKind::Composite,
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

TEST_F(GpusimFaultInjection, CompositeCopy) {
  // copy_ of a strided source: a composite over the native _copy_on_device_.
  injectEveryFault(
      {qualified("copy_"),
       KernelKind::Composite,
       {qualified("copy_"), qualified("_copy_on_device_")},
       [](Device d) {
         return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({0, 0, 0, 0, 0, 0}, {3, 2}, d)};
       },
       {1},
       [](const std::vector<Tensor>& a) { return one(a[1].copy_(a[0].t())); }});
}

TEST_F(GpusimFaultInjection, CompositeOverNativeKernels) {
  // mm (allocate, mm.out), cumsum (allocate, cumsum.out), cat (allocate,
  // cat.out), zeros_like (allocate, zero fill): results fresh on gpusim.
  injectEveryFault(
      {qualified("mm"),
       KernelKind::Composite,
       {qualified("mm"), qualified("mm.out")},
       [](Device d) {
         return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({1, 0, 0, 1, 1, 1}, {3, 2}, d)};
       },
       {},
       [](const std::vector<Tensor>& a) { return one(mm(a[0], a[1])); }});
  injectEveryFault({qualified("cumsum"),
                    KernelKind::Composite,
                    {qualified("cumsum"), qualified("cumsum.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(cumsum(a[0], 1)); }});
  injectEveryFault({qualified("cat"),
                    KernelKind::Composite,
                    {qualified("cat"), qualified("cat.out")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d), f32({7, 8, 9}, {1, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) {
                      return one(cat({a[0], a[1]}, 0));
                    }});
  injectEveryFault({qualified("zeros_like"),
                    Dispatcher::singleton().findOpOrThrow(qualified("zeros_like")).kernelKind(backendKey(sim().type)),
                    {qualified("zeros_like"), qualified("zero_"), qualified("fill_.Scalar"), qualified("empty_like"),
                     qualified("empty.memory_format")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) { return one(zeros_like(a[0])); }});
}

TEST_F(GpusimFaultInjection, CopyToTheHost) {
  injectEveryFault({qualified("copy_"),
                    KernelKind::Composite,
                    {qualified("copy_"), qualified("_copy_on_device_")},
                    [](Device d) {
                      return std::vector<Tensor>{f32({1, 2, 3, 4, 5, 6}, {2, 3}, d),
                                                 f32({0, 0, 0, 0, 0, 0}, {2, 3}, Device(DeviceType::CPU))};
                    },
                    {1},
                    [](const std::vector<Tensor>& a) { return one(a[1].copy_(a[0])); }});
}

TEST_F(GpusimFaultInjection, NativeSort) {
  // sort (functional): allocates values and indices on gpusim, then
  // sort.values_stable's kernels: a scratch copy, the bitonic passes (a
  // line of 1500 takes global steps too), the results written out.
  injectEveryFault({qualified("sort"),
                    KernelKind::Composite,
                    {qualified("sort"), qualified("sort.values"), qualified("sort.values_stable")},
                    [](Device d) {
                      std::vector<float> v(3000);
                      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 2654435761u) % 97);
                      return std::vector<Tensor>{f32(v, {2, 1500}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) {
                      auto [v, i] = sort(a[0], 1, true);
                      return std::vector<Tensor>{v, i};
                    }});
}

TEST_F(GpusimFaultInjection, NativeConv2d) {
  // conv2d: the bias broadcast into the output, then the im2col columns
  // and their product with the weight (Note [conv2d on the GPU]).
  injectEveryFault(
      {qualified("conv2d"),
       KernelKind::Native,
       {qualified("conv2d")},
       [](Device d) {
         std::vector<float> x(2 * 4 * 5 * 5), w(6 * 4 * 3 * 3);
         for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
         for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2;
         return std::vector<Tensor>{f32(x, {2, 4, 5, 5}, d), f32(w, {6, 4, 3, 3}, d), f32({1, 2, 3, 4, 5, 6}, {6}, d)};
       },
       {},
       [](const std::vector<Tensor>& a) {
         return one(conv2d(a[0], a[1], a[2], {1, 1}, {1, 1}, {1, 1}, 1));
       }});
}

// Ops gpusim lacks reach its CPU fallback: every standard op has a gpusim
// kernel, so these are the test's own, with a CPU kernel only, as a
// plugin's op that another device lacks.
class GpusimFallbackFaultInjection : public GpusimFaultInjection {
 protected:
  static void SetUpTestSuite() {
    GpusimFaultInjection::SetUpTestSuite();
    library() = std::make_unique<Library>("fit");
    Library& lib = *library();
    // Two written arguments: the CPU kernel is the CPU plugin's sort.
    ASSERT_TRUE(lib.def("sort_pair(Tensor self, *, Tensor(a!) values, Tensor(b!) indices) -> "
                        "(Tensor(a!) values, Tensor(b!) indices)")
                    .ok());
    ASSERT_TRUE(lib.impl("sort_pair", DispatchKey::CPU,
                         [](const Tensor& self, const Tensor& values, const Tensor& indices) {
                           return sortValuesStable().call(self, true, 0, false, values, indices);
                         })
                    .ok());
    // A composite over it: allocates the results on the device first.
    ASSERT_TRUE(lib.def("sorted(Tensor self) -> (Tensor values, Tensor indices)").ok());
    ASSERT_TRUE(lib.implComposite("sorted",
                                  [](const Tensor& self) {
                                    Tensor values = empty(self.sizes(), {self.dtype(), self.device()});
                                    Tensor indices = empty(self.sizes(), {ScalarType::Int64, self.device()});
                                    return sortPair().call(self, values, indices);
                                  })
                    .ok());
  }
  static void TearDownTestSuite() {
    library().reset();
    GpusimFaultInjection::TearDownTestSuite();
  }
  static std::unique_ptr<Library>& library() {
    static std::unique_ptr<Library> lib;
    return lib;
  }
  using Pair = std::tuple<Tensor, Tensor>;
  static TypedOperatorHandle<Pair(const Tensor&, std::optional<bool>, int64_t, bool, const Tensor&, const Tensor&)>
  sortValuesStable() {
    return Dispatcher::singleton()
        .findOpOrThrow(qualified("sort.values_stable"))
        .typed<Pair(const Tensor&, std::optional<bool>, int64_t, bool, const Tensor&, const Tensor&)>();
  }
  static TypedOperatorHandle<Pair(const Tensor&, const Tensor&, const Tensor&)> sortPair() {
    return Dispatcher::singleton()
        .findOpOrThrow("fit::sort_pair")
        .typed<Pair(const Tensor&, const Tensor&, const Tensor&)>();
  }
};

TEST_F(GpusimFallbackFaultInjection, CpuFallbackTwoOutArguments) {
  // The CPU fallback stages self, runs the CPU kernel, writes values and
  // then indices back.
  injectEveryFault({"fit::sort_pair",
                    KernelKind::CpuFallback,
                    {"fit::sort_pair"},
                    [](Device d) {
                      return std::vector<Tensor>{f32({3, 1, 2, 0}, {4}, d), f32({0, 0, 0, 0}, {4}, d),
                                                 tensorFromVector<int64_t>({0, 0, 0, 0}, {4}, d)};
                    },
                    {1, 2},
                    [](const std::vector<Tensor>& a) {
                      auto [v, i] = sortPair().call(a[0], a[1], a[2]);
                      return std::vector<Tensor>{v, i};
                    }});
}

TEST_F(GpusimFallbackFaultInjection, CompositeOverTheCpuFallback) {
  // fit::sorted: allocates values and indices on gpusim, then the CPU
  // fallback of fit::sort_pair.
  injectEveryFault({"fit::sorted",
                    KernelKind::Composite,
                    {"fit::sorted", "fit::sort_pair"},
                    [](Device d) {
                      return std::vector<Tensor>{f32({3, 1, 2, 0, 7, 5}, {2, 3}, d)};
                    },
                    {},
                    [](const std::vector<Tensor>& a) {
                      static auto op =
                          Dispatcher::singleton().findOpOrThrow("fit::sorted").typed<Pair(const Tensor&)>();
                      auto [v, i] = op.call(a[0]);
                      return std::vector<Tensor>{v, i};
                    }});
}

}  // namespace
}  // namespace backplane
