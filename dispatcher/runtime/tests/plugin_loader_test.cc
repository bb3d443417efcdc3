// The plugin loader (Note [Plugin loading] in plugin_registry.h, Note [ABI
// rules] in plugin_api.h), driven with the test plugins of tests/plugins/:
// one small library per way a plugin can be broken, each of which must fail
// to load with a message that says what is wrong while the host keeps
// running, and tp_good, a well-behaved plugin with its own device type.
//
// Plugins load once per process and device type names keep their number for
// the life of the process, so every test plugin has its own name, device type
// names are unique across tests, and each test unloads what it loaded (the
// fixture's TearDown catches what a failing test left behind). Tests must
// also pass one per process (ctest runs them that way).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/plugin_api.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"
#include "backplane/testing/temp_dir.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif
#ifndef BACKPLANE_TEST_PLUGIN_DEP_DIR
#error "BACKPLANE_TEST_PLUGIN_DEP_DIR must name the folder libbp_missing_dep.so is built into"
#endif

namespace backplane {
namespace {

namespace fs = std::filesystem;
using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;

using Twice = TypedOperatorHandle<Tensor(const Tensor&)>;

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }
std::string canonicalPath(const std::string& path) { return fs::canonical(path).string(); }

// The most recent entry of plugins() for the library at `canonical`.
std::optional<PluginStatus> latestAttempt(const std::string& canonical) {
  std::vector<PluginStatus> all = plugins().plugins();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->path == canonical) return *it;
  return std::nullopt;
}

bool isLoaded(std::string_view name) {
  for (const PluginStatus& p : plugins().plugins())
    if (p.loaded && p.name == name) return true;
  return false;
}

int loadedCount(std::string_view name) {
  int n = 0;
  for (const PluginStatus& p : plugins().plugins()) n += p.loaded && p.name == name;
  return n;
}

bool opDefined(std::string_view name) {
  std::optional<OperatorHandle> op = Dispatcher::singleton().findOp(name);
  return op && op->hasSchema();
}

Twice twiceOp() { return Dispatcher::singleton().findOpOrThrow("tp::twice").typed<Tensor(const Tensor&)>(); }

Device tpdev(DeviceIndex index = 0) {
  std::optional<DeviceType> t = DeviceTypeRegistry::global().find("tpdev");
  BP_CHECK(t.has_value(), "device type tpdev is not registered (is tp_good loaded?)");
  return Device(*t, index);
}

// True if the library at `canonical` is mapped into this process.
bool isMapped(const std::string& canonical) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.size() >= canonical.size() &&
        line.compare(line.size() - canonical.size(), canonical.size(), canonical) == 0)
      return true;
  return false;
}

class PluginLoaderTest : public ::testing::Test {
 protected:
  // A folder of this test's own (ctest runs test processes in parallel),
  // removed after it.
  fs::path scratchDir() const { return scratch_.path(); }
  testing::TempDir scratch_{"bp_plugin_loader_test"};

  void TearDown() override {
    for (const char* name : {"tp_good", "tp_absent", "tp_kernel_error", "tp_dup_dev_a", "tp_dup_dev_b", "tp_dup_impl",
                             "tp_rollback", "tp_init_error", "tp_init_throws"}) {
      if (isLoaded(name)) {
        absl::Status s = plugins().unload(name);
        EXPECT_TRUE(s.ok()) << "left loaded by the test and cannot be unloaded: " << s;
      }
    }
    absl::Status inv = Dispatcher::singleton().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }

  // tp_good loads (or is loaded) and tp::twice works on cpu and on tpdev.
  // Unloads it again if it was not loaded before.
  static void expectGoodPluginWorks() {
    const bool was_loaded = isLoaded("tp_good");
    absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_good"));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->loaded);
    Twice twice = twiceOp();
    EXPECT_EQ(twice.call(floats({1, -2.5f, 3})).toVector<float>(), (std::vector<float>{2, -5, 6}));
    {
      Tensor r = twice.call(floats({4, 5}, tpdev(1)));
      EXPECT_EQ(r.device(), tpdev(1));
      EXPECT_EQ(r.toVector<float>(), (std::vector<float>{8, 10}));
    }
    if (!was_loaded) {
      absl::Status u = plugins().unload("tp_good");
      EXPECT_TRUE(u.ok()) << u;
    }
  }

  // Loads `file` expecting it to fail with `code` and a message holding every
  // part; then checks that plugins() lists the attempt with that message, the
  // dispatch table is intact, and tp_good still loads and works. Returns the
  // attempt's status.
  static PluginStatus expectLoadFails(const std::string& file, absl::StatusCode code,
                                      const std::vector<std::string>& parts) {
    const size_t attempts_before = plugins().plugins().size();
    absl::StatusOr<PluginStatus> s = plugins().load(file);
    EXPECT_FALSE(s.ok()) << file << " loaded, but must not";
    if (s.ok()) return *s;
    EXPECT_EQ(s.status().code(), code) << s.status();
    for (const std::string& p : parts) EXPECT_THAT(std::string(s.status().message()), HasSubstr(p));

    std::vector<PluginStatus> all = plugins().plugins();
    EXPECT_EQ(all.size(), attempts_before + 1) << "the failed attempt is listed once";
    PluginStatus attempt = all.back();
    std::error_code ec;
    fs::path canonical = fs::canonical(file, ec);
    EXPECT_EQ(attempt.path, ec ? file : canonical.string());
    EXPECT_FALSE(attempt.loaded);
    EXPECT_EQ(attempt.error, s.status().message());
    EXPECT_TRUE(attempt.devices.empty());
    EXPECT_EQ(attempt.live_allocations, 0);

    absl::Status inv = Dispatcher::singleton().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
    expectGoodPluginWorks();
    return attempt;
  }
};

// ------------------------------------------------- files that are no plugin

TEST_F(PluginLoaderTest, MissingFileIsReported) {
  const std::string missing = pluginFile("tp_there_is_no_such_plugin");
  PluginStatus st = expectLoadFails(missing, absl::StatusCode::kNotFound, {"cannot load plugin", missing});
  EXPECT_TRUE(st.name.empty());
}

TEST_F(PluginLoaderTest, TextFileNamedLikeALibraryIsNotASharedLibrary) {
  // Generated at build time next to the real test plugins.
  const std::string file = pluginFile("tp_not_a_library");
  ASSERT_TRUE(fs::exists(file));
  expectLoadFails(file, absl::StatusCode::kInvalidArgument,
                  {"cannot load plugin '" + canonicalPath(file) + "'", "not an ELF file",
                   "a shared library built with backplane_add_plugin() is expected"});

  // And one the test writes itself: too short to hold an ELF header.
  fs::path tiny = scratchDir() / "tp_tiny.so";
  std::ofstream(tiny) << "not ELF\n";
  expectLoadFails(tiny.string(), absl::StatusCode::kInvalidArgument,
                  {"cannot load plugin '" + canonicalPath(tiny.string()) + "'",
                   "a shared library built with backplane_add_plugin() is expected"});
}

TEST_F(PluginLoaderTest, MissingDependencyIsNamed) {
  // The dependency exists, but where the loader does not look.
  ASSERT_TRUE(fs::exists(strCat(BACKPLANE_TEST_PLUGIN_DEP_DIR, "/libbp_missing_dep.so")));
  const std::string file = pluginFile("tp_missing_dep");
  PluginStatus st = expectLoadFails(
      file, absl::StatusCode::kInvalidArgument,
      {"cannot load plugin '" + canonicalPath(file) + "'", "libbp_missing_dep.so", "cannot open shared object file"});
  EXPECT_TRUE(st.name.empty()) << "the library never opened, so its query never ran";
}

TEST_F(PluginLoaderTest, LibraryWithoutQueryEntryPointIsRefused) {
  const std::string file = pluginFile("tp_no_entry");
  expectLoadFails(file, absl::StatusCode::kInvalidArgument,
                  {"cannot load plugin '" + canonicalPath(file) + "': it is not a Backplane plugin",
                   "does not export backplane_plugin_query"});
}

// ------------------------------------------------------------ BP_PluginInfo

TEST_F(PluginLoaderTest, BadMagicIsRefused) {
  expectLoadFails(pluginFile("tp_bad_magic"), absl::StatusCode::kInvalidArgument,
                  {"bad magic 0xdeadbeef", "not a Backplane plugin, or a corrupt one"});
}

// A valid name of 73 characters was told it "must be lowercase letters".
TEST_F(PluginLoaderTest, NameTooLongSaysSo) {
  PluginStatus st = expectLoadFails(pluginFile("tp_long_name"), absl::StatusCode::kInvalidArgument,
                                    {"its name is too long (73 characters; at most 63)"});
  EXPECT_THAT(st.error, ::testing::Not(HasSubstr("lowercase")));
}

TEST_F(PluginLoaderTest, AbiMajorTooNewOrTooOldIsRefusedWithDifferentAdvice) {
  PluginStatus newer =
      expectLoadFails(pluginFile("tp_abi_major2"), absl::StatusCode::kFailedPrecondition,
                      {"was built for plugin ABI 2.", strCat("this host speaks ABI ", BP_ABI_MAJOR, ".", BP_ABI_MINOR),
                       "the plugin is newer than this host"});
  EXPECT_EQ(newer.abi_major, 2u);
  EXPECT_THAT(newer.error, ::testing::Not(HasSubstr("too old")));

  PluginStatus older = expectLoadFails(
      pluginFile("tp_abi_major0"), absl::StatusCode::kFailedPrecondition,
      {"was built for plugin ABI 0.", "the plugin is too old", "rebuild it against this host's plugin SDK"});
  EXPECT_EQ(older.abi_major, 0u);
  EXPECT_THAT(older.error, ::testing::Not(HasSubstr("newer")));
}

TEST_F(PluginLoaderTest, AbiMinorNewerThanHostIsRefused) {
  PluginStatus st =
      expectLoadFails(pluginFile("tp_abi_minor_newer"), absl::StatusCode::kFailedPrecondition,
                      {strCat("needs plugin ABI ", BP_ABI_MAJOR, ".", BP_ABI_MINOR + 1),
                       strCat("this host provides ", BP_ABI_MAJOR, ".", BP_ABI_MINOR), "upgrade the host"});
  EXPECT_EQ(st.abi_minor, static_cast<uint32_t>(BP_ABI_MINOR + 1));
}

TEST_F(PluginLoaderTest, GarbageStructSizeIsRefused) {
  PluginStatus zero = expectLoadFails(pluginFile("tp_bad_size0"), absl::StatusCode::kInvalidArgument,
                                      {"BP_PluginInfo has an invalid struct_size 0", "broken or foreign header"});
  EXPECT_TRUE(zero.name.empty()) << "nothing is read from a struct of unknown size";
  PluginStatus huge = expectLoadFails(pluginFile("tp_bad_size_huge"), absl::StatusCode::kInvalidArgument,
                                      {strCat("BP_PluginInfo has an invalid struct_size ", size_t{1} << 30)});
  EXPECT_TRUE(huge.name.empty());
}

// --------------------------------------------------------------------- init

TEST_F(PluginLoaderTest, InitErrorIsReportedAndItsRegistrationsUndone) {
  const std::string file = pluginFile("tp_init_error");
  PluginStatus st = expectLoadFails(
      file, absl::StatusCode::kFailedPrecondition,
      {"plugin 'tp_init_error' (" + canonicalPath(file) + ")", "init failed: toy firmware blob tp_fw.bin not found"});
  EXPECT_EQ(st.name, "tp_init_error");
  EXPECT_EQ(st.version, "0.0.1");
  EXPECT_FALSE(opDefined("tp_init_error::probe")) << "the op its init defined is undefined again";
  // A second attempt fails the same way (nothing was left half-registered).
  expectLoadFails(file, absl::StatusCode::kFailedPrecondition, {"init failed: toy firmware blob tp_fw.bin not found"});
}

TEST_F(PluginLoaderTest, InitThrowingIsCaught) {
  PluginStatus st = expectLoadFails(pluginFile("tp_init_throws"), absl::StatusCode::kFailedPrecondition,
                                    {"plugin 'tp_init_throws'", "init threw an exception",
                                     "plugins must return errors, not throw", "toy driver exploded during init"});
  EXPECT_EQ(st.name, "tp_init_throws");
  EXPECT_FALSE(opDefined("tp_init_throws::probe"));
}

TEST_F(PluginLoaderTest, KernelForUndefinedOpFailsAndRollsBackEveryRegistration) {
  ASSERT_FALSE(DeviceTypeRegistry::global().find("tprbdev").has_value());
  expectLoadFails(pluginFile("tp_rollback"), absl::StatusCode::kFailedPrecondition,
                  {"plugin 'tp_rollback'", "init failed", "bp::sum.dim_IntList_out", "which is not defined",
                   "def() it first, or load the plugin that defines it",
                   // Note [Did you mean]: the closest defined names.
                   "Did you mean bp::sum.IntList_out, bp::sum.dim_IntList, bp::sum.out?"});
  EXPECT_FALSE(DeviceTypeRegistry::global().find("tprbdev").has_value()) << "its device type is unregistered";
  EXPECT_FALSE(opDefined("tp_rollback::thing")) << "its op is undefined";
  if (std::optional<OperatorHandle> op = Dispatcher::singleton().findOp("tp_rollback::thing")) {
    EXPECT_EQ(op->kernelKind(DispatchKey::CPU), KernelKind::Missing) << "its cpu kernel is gone";
  }
  // The name is free again: someone else can claim it.
  absl::StatusOr<DeviceType> t = DeviceTypeRegistry::global().registerType("tprbdev");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(DeviceTypeRegistry::global().unregisterType(*t).ok());
}

// ---------------------------------------------------------------- conflicts

TEST_F(PluginLoaderTest, SecondImplementationOfAnOpOnADeviceTypeIsRefused) {
  ASSERT_TRUE(plugins().load(pluginFile("tp_good")).ok());
  const std::string good = canonicalPath(pluginFile("tp_good"));
  expectLoadFails(pluginFile("tp_dup_impl"), absl::StatusCode::kFailedPrecondition,
                  {"plugin 'tp_dup_impl' cannot register a CPU kernel for tp::twice",
                   "plugin 'tp_good' (" + good + ") already implements it"});
  // tp_good's kernel still serves the op.
  EXPECT_EQ(twiceOp().call(floats({21})).item<float>(), 42);
  ASSERT_TRUE(plugins().unload("tp_good").ok());
}

TEST_F(PluginLoaderTest, SecondClaimOfADeviceTypeNameIsRefused) {
  absl::StatusOr<PluginStatus> a = plugins().load(pluginFile("tp_dup_dev_a"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->devices.size(), 1u);
  EXPECT_EQ(a->devices[0].type_name, "tpdupdev");
  const DeviceType type = a->devices[0].type;
  expectLoadFails(pluginFile("tp_dup_dev_b"), absl::StatusCode::kFailedPrecondition,
                  {"plugin 'tp_dup_dev_b' cannot register device type 'tpdupdev'",
                   "plugin 'tp_dup_dev_a' (" + canonicalPath(pluginFile("tp_dup_dev_a")) + ")"});
  // b's failure took nothing of a's.
  EXPECT_EQ(DeviceTypeRegistry::global().find("tpdupdev"), std::optional<DeviceType>(type));
  EXPECT_NE(DeviceTypeRegistry::global().interface(type), nullptr);
  // Once a is gone, b may have the name.
  ASSERT_TRUE(plugins().unload("tp_dup_dev_a").ok());
  EXPECT_FALSE(DeviceTypeRegistry::global().find("tpdupdev").has_value());
  absl::StatusOr<PluginStatus> b = plugins().load(pluginFile("tp_dup_dev_b"));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->devices.size(), 1u);
  EXPECT_EQ(b->devices[0].type, type) << "a name keeps its number";
  ASSERT_TRUE(plugins().unload("tp_dup_dev_b").ok());
}

// ------------------------------------------------------------ absent device

TEST_F(PluginLoaderTest, PluginWithoutDevicesLoadsAndSaysWhy) {
  absl::StatusOr<PluginStatus> s = plugins().load(pluginFile("tp_absent"));
  ASSERT_TRUE(s.ok()) << s.status();
  auto check = [](const PluginStatus& st) {
    EXPECT_TRUE(st.loaded);
    EXPECT_TRUE(st.error.empty()) << st.error;
    ASSERT_EQ(st.devices.size(), 1u);
    EXPECT_EQ(st.devices[0].type_name, "tpabsentdev");
    EXPECT_EQ(st.devices[0].device_count, 0);
    EXPECT_EQ(st.devices[0].unavailable_reason, "no toy hardware attached");
  };
  check(*s);
  std::optional<PluginStatus> listed = latestAttempt(canonicalPath(pluginFile("tp_absent")));
  ASSERT_TRUE(listed.has_value());
  check(*listed);

  std::optional<DeviceType> type = DeviceTypeRegistry::global().find("tpabsentdev");
  ASSERT_TRUE(type.has_value());
  expectError([&] { (void)emptyTensor({2}, ScalarType::Float32, Device(*type, 0)); },
              {"cannot allocate on tpabsentdev:0", "no tpabsentdev devices are present", "no toy hardware attached"});
  ASSERT_TRUE(plugins().unload("tp_absent").ok());
  expectGoodPluginWorks();
}

// ------------------------------------------------------------------ tp_good

TEST_F(PluginLoaderTest, GoodPluginLifecycle) {
  const std::string file = pluginFile("tp_good");
  const std::string canonical = canonicalPath(file);
  ASSERT_FALSE(isLoaded("tp_good"));
  absl::StatusOr<PluginStatus> s = plugins().load(file);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->loaded);
  EXPECT_EQ(s->name, "tp_good");
  EXPECT_EQ(s->version, "1.0.0");
  EXPECT_EQ(s->path, canonical);
  EXPECT_TRUE(isMapped(canonical));
  EXPECT_EQ(s->abi_major, static_cast<uint32_t>(BP_ABI_MAJOR));
  EXPECT_EQ(s->abi_minor, static_cast<uint32_t>(BP_ABI_MINOR));
  EXPECT_EQ(s->kernels, 2u) << "tp::twice for tpdev and for cpu";
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->devices[0].type_name, "tpdev");
  EXPECT_EQ(s->devices[0].device_count, 2);
  EXPECT_TRUE(s->devices[0].unavailable_reason.empty());
  const DeviceType type = s->devices[0].type;
  EXPECT_EQ(DeviceTypeRegistry::global().find("tpdev"), std::optional<DeviceType>(type));
  EXPECT_FALSE(DeviceTypeRegistry::global().interfaceOrThrow(type).isHostAccessible());

  Twice twice = twiceOp();
  {
    // On tpdev: its memory is reachable only through the plugin's copies.
    Tensor x = tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, Device(type, 0));
    EXPECT_GE(reinterpret_cast<uintptr_t>(x.data_ptr()), uintptr_t{0xBEEF000000000000})
        << "tpdev hands out non-canonical addresses";
    EXPECT_EQ(plugins().plugins().back().live_allocations, 1);
    Tensor r = twice.call(x);
    EXPECT_EQ(r.device(), Device(type, 0));
    EXPECT_EQ(r.sizes(), x.sizes());
    EXPECT_EQ(r.toVector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    // On cpu.
    Tensor c = twice.call(tensorFromVector<float>({0.5f, -1, 7}, {3}, Device(DeviceType::CPU)));
    EXPECT_TRUE(c.device().isCpu());
    EXPECT_EQ(c.toVector<float>(), (std::vector<float>{1, -2, 14}));
    // Boxed calls reach the same kernels.
    Stack stack{IValue(x)};
    twice.callBoxed(stack);
    ASSERT_EQ(stack.size(), 1u);
    EXPECT_EQ(stack[0].toTensor().toVector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    // Errors from the kernel carry its context.
    expectError([&] { (void)twice.call(tensorFromVector<int64_t>({1}, {1}, Device(type, 0))); },
                {"kernel of plugin 'tp_good' for tp::twice on tpdev failed", "float32 only"});
  }

  // The same file through a second path loads once.
  fs::path link = scratchDir() / "tp_good_link.so";
  fs::create_symlink(file, link);
  absl::StatusOr<PluginStatus> again = plugins().load(link.string());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->loaded);
  EXPECT_EQ(again->name, "tp_good");
  EXPECT_EQ(again->path, canonical);
  EXPECT_EQ(loadedCount("tp_good"), 1);
  // A different file claiming the same plugin name is refused.
  fs::path copy = scratchDir() / "tp_good_copy.so";
  fs::copy_file(file, copy);
  absl::StatusOr<PluginStatus> impostor = plugins().load(copy.string());
  ASSERT_FALSE(impostor.ok());
  EXPECT_EQ(impostor.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(impostor.status().message()),
              HasSubstr("a plugin named 'tp_good' is already loaded from " + canonical));
  EXPECT_EQ(loadedCount("tp_good"), 1);

  // Unloading refuses while a tpdev tensor is alive.
  {
    Tensor alive = tensorFromVector<float>({1}, {1}, Device(type, 1));
    absl::Status u = plugins().unload("tp_good");
    EXPECT_EQ(u.code(), absl::StatusCode::kFailedPrecondition) << u;
    EXPECT_THAT(std::string(u.message()), HasSubstr("cannot unload plugin 'tp_good': 1 allocation(s) it made on tpdev "
                                                    "are still alive; destroy those tensors first"));
    EXPECT_TRUE(isLoaded("tp_good"));
    EXPECT_EQ(twice.call(alive).toVector<float>(), std::vector<float>{2}) << "still works after the refusal";
  }
  EXPECT_EQ(latestAttempt(canonical)->live_allocations, 0);
  absl::Status u = plugins().unload("tp_good");
  ASSERT_TRUE(u.ok()) << u;
  EXPECT_FALSE(isLoaded("tp_good"));
  EXPECT_EQ(latestAttempt(canonical)->error, "unloaded");
  EXPECT_FALSE(opDefined("tp::twice"));
  EXPECT_FALSE(DeviceTypeRegistry::global().find("tpdev").has_value());
  EXPECT_FALSE(isMapped(canonical)) << "the library is closed";
  expectError([&] { (void)twice.call(floats({1})); }, {"tp::twice", "is not defined"});
  absl::Status u2 = plugins().unload("tp_good");
  EXPECT_EQ(u2.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(u2.message()), HasSubstr("no plugin named 'tp_good' is loaded"));

  // And it loads again, with the same device type number.
  absl::StatusOr<PluginStatus> re = plugins().load(file);
  ASSERT_TRUE(re.ok()) << re.status();
  ASSERT_EQ(re->devices.size(), 1u);
  EXPECT_EQ(re->devices[0].type, type);
  EXPECT_EQ(twice.call(tensorFromVector<float>({3}, {1}, Device(type, 0))).toVector<float>(), std::vector<float>{6})
      << "the handle from before the unload works again";
  ASSERT_TRUE(plugins().unload("tp_good").ok());
}

// Unloading while other threads call, hold tensors or read the status:
// plugin_concurrency_test.cc (the ThreadSanitizer subset).

// ----------------------------------------------------------- kernel errors

TEST_F(PluginLoaderTest, KernelErrorCarriesCodeMessageAndContext) {
  ASSERT_TRUE(plugins().load(pluginFile("tp_kernel_error")).ok());
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tp_kernel_error::fail");
  const std::string expected =
      "kernel of plugin 'tp_kernel_error' for tp_kernel_error::fail on CPU failed: toy kernel refuses: value out of "
      "range";
  // Unboxed ...
  try {
    (void)op.typed<Tensor(const Tensor&)>().call(floats({1}));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(e.message(), expected);
  }
  // ... and boxed.
  try {
    Stack stack{IValue(floats({1}))};
    op.callBoxed(stack);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(e.message(), expected);
  }
  ASSERT_TRUE(plugins().unload("tp_kernel_error").ok());
  EXPECT_FALSE(opDefined("tp_kernel_error::fail"));
  expectGoodPluginWorks();
}

// Note [Default plugin directory]: the default directory is found from
// where libbackplane.so was loaded, not compiled in, and in the build tree
// that is where the in-tree plugins are built. (run_vendor_test.sh checks
// the same rule on an install moved to another prefix.)
TEST(PluginDefaultDirectoryTest, IsBackplanePluginsNextToTheHostLibrary) {
  const fs::path library = fs::canonical(BACKPLANE_HOST_LIBRARY_FILE);
  const std::vector<std::string> dirs = PluginRegistry::defaultDirectories();
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0], (library.parent_path() / "backplane" / "plugins").string());
  EXPECT_EQ(dirs[0], fs::weakly_canonical(BACKPLANE_BUILD_TREE_PLUGIN_DIR).string())
      << "the build tree's in-tree plugins are not where the host library looks for its plugins";
}

}  // namespace
}  // namespace backplane
