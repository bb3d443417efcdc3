// The typed (unboxed) call path performs no heap allocation. A separate
// binary, because it replaces the global operator new to count allocations.
#include <cstdlib>
#include <new>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"

namespace {
thread_local bool g_count_allocations = false;
thread_local size_t g_allocations = 0;
}  // namespace

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  if (g_count_allocations) ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace backplane {
namespace {

using testing::floats;

Dispatcher& dispatcher() { return Dispatcher::singleton(); }

TEST(NoAllocationTest, UnboxedCallAllocatesNothing) {
  Library lib("dt14");
  ASSERT_TRUE(lib.def("noop(Tensor self) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("noop", DispatchKey::CPU, [](const Tensor& a) { return a; }).ok());
  auto op = dispatcher().findOpOrThrow("dt14::noop").typed<Tensor(const Tensor&)>();
  Tensor x = floats({1, 2});
  op.call(x);  // warm up
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 1000; ++i) {
    Tensor y = op.call(x);
    if (!y.defined()) break;
  }
  g_count_allocations = false;
  EXPECT_EQ(g_allocations, 0u);
}

// Note [Declared dtypes]: testing the arguments' dtypes against a kernel's
// declared set, and following where a refused call goes, allocate nothing
// either (here both kernels are in-process CPU kernels: the newer declares
// float32, the older serves the rest).
TEST(NoAllocationTest, DeclaredDtypesAllocateNothing) {
  Library lib("dtmask");
  ASSERT_TRUE(lib.def("noop(Tensor self, Tensor[] more) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("noop", DispatchKey::CPU, [](const Tensor&, TensorList) { return Tensor(); }).ok());
  ASSERT_TRUE(
      lib.impl("noop", DispatchKey::CPU, [](const Tensor& a, TensorList) { return a; }, {ScalarType::Float32}).ok());
  auto op = dispatcher().findOpOrThrow("dtmask::noop").typed<Tensor(const Tensor&, TensorList)>();
  Tensor x = floats({1, 2});
  Tensor i = Tensor(tensorFromVector<int64_t>({1, 2}, {2}));
  const std::vector<Tensor> floats_only{x, x}, mixed{x, i};
  ASSERT_TRUE(op.call(x, floats_only).defined()) << "float32 reaches the kernel that declares it";
  ASSERT_FALSE(op.call(x, mixed).defined()) << "an int64 list element goes to the older kernel";
  g_allocations = 0;
  g_count_allocations = true;
  for (int n = 0; n < 1000; ++n) {
    if (!op.call(x, floats_only).defined() || op.call(x, mixed).defined()) break;
  }
  g_count_allocations = false;
  EXPECT_EQ(g_allocations, 0u);
}

TEST(NoAllocationTest, CounterSeesAllocations) {
  g_allocations = 0;
  g_count_allocations = true;
  Tensor t = floats({1, 2, 3});
  g_count_allocations = false;
  EXPECT_GT(g_allocations, 0u) << "the counting operator new must be in effect for the test above to mean anything";
}

}  // namespace
}  // namespace backplane
