// What the loader checks before a plugin's code runs and what happens when
// that code ends the process: Note [Plugin file checks], Note [Plugin
// trust], Note [Plugin path entries] and Note [Plugin load breadcrumb].
//
// Tests that set the environment, count warnings (printed once per process)
// or end the process run their body in a child process (a gtest death test,
// re-executing this program), so the parent's state stays as it was.
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/core/str_cat.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "load_breadcrumb.h"
#include "plugin_file_check.h"

namespace backplane {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeBytes(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string loadError(const std::string& path) {
  absl::StatusOr<PluginStatus> s = plugins().load(path);
  EXPECT_FALSE(s.ok()) << path << " loaded, but must not";
  return s.ok() ? std::string() : std::string(s.status().message());
}

// The check's error on an image (in memory), "" if it passes.
std::string imageError(const std::string& bytes) {
  absl::Status s = plugin_detail::checkPluginImage("p.so", bytes);
  EXPECT_NE(s.code(), absl::StatusCode::kInternal) << s;  // the check read outside the image
  return std::string(s.message());
}

class PluginFileTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  const std::string good_ = readBytes(pluginFile("tp_good"));
};

// Ends a test's child process; std::exit() runs no destructor of the test,
// so its folder is removed here.
[[noreturn]] void exitChild(bool ok, const testing::TempDir& scratch) {
  std::error_code ec;
  fs::remove_all(scratch.path(), ec);
  std::exit(ok ? 0 : 1);
}

// ------------------------------------------------ Note [Plugin file checks]

// `head -c 20000 backplane_cpu.so`: dlopen() mapped segments past the end of
// the file, and the process died of SIGBUS.
TEST_F(PluginFileTest, TruncatedCopyIsAnErrorNotSigbus) {
  testing::TempDir scratch{"bp_plugin_file_test"};
  ASSERT_GT(good_.size(), 20000u);
  fs::path cut = scratch.path() / "tp_cut.so";
  writeBytes(cut, good_.substr(0, 20000));
  const std::string canonical = fs::canonical(cut).string();
  std::string error = loadError(cut.string());
  EXPECT_THAT(error, HasSubstr("cannot load plugin '" + canonical + "': truncated ELF file ("));
  EXPECT_THAT(error, HasSubstr("ends at byte "));
  EXPECT_THAT(error, HasSubstr(", the file has 20000 bytes)"));
  // Every length: an error that names the truncation, never a crash.
  for (size_t n = 0; n < good_.size(); n += 97) {
    std::string e = imageError(good_.substr(0, n));
    EXPECT_FALSE(e.empty()) << n << " bytes passed the check";
  }
  EXPECT_EQ(imageError(good_), "");
}

// A FIFO named like a plugin blocked open() forever.
TEST_F(PluginFileTest, FifoDeviceAndFolderAreRefusedWithoutBlocking) {
  testing::TempDir scratch{"bp_plugin_file_test"};
  fs::path fifo = scratch.path() / "tp_fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(loadError(fifo.string()),
            "cannot load plugin '" + fs::canonical(fifo).string() + "': it is a FIFO, not a regular file");
  EXPECT_EQ(loadError("/dev/null"), "cannot load plugin '/dev/null': it is a character device, not a regular file");
  EXPECT_THAT(loadError(scratch.str()), HasSubstr("': it is a directory, not a regular file (name a plugin file"));
}

TEST_F(PluginFileTest, HeadersOfAnotherKindOfFileSayWhatItIs) {
  ASSERT_GE(good_.size(), sizeof(Elf64_Ehdr));
  auto patched = [&](size_t offset, std::string_view bytes) {
    std::string b = good_;
    b.replace(offset, bytes.size(), bytes);
    return b;
  };
  auto u16 = [](uint16_t v) { return std::string(reinterpret_cast<const char*>(&v), 2); };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  EXPECT_THAT(imageError(""), HasSubstr("the file is empty"));
  EXPECT_THAT(imageError("not ELF\n"), HasSubstr("not an ELF file"));
  EXPECT_THAT(imageError(good_.substr(0, 40)), HasSubstr("truncated ELF file (the ELF header ends at byte 64"));
  EXPECT_THAT(imageError(patched(EI_CLASS, "\x01")), HasSubstr("it is a 32-bit ELF file, but this host is 64-bit"));
  EXPECT_THAT(imageError(patched(EI_DATA, "\x02")), HasSubstr("it is a big-endian ELF file"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_machine), u16(EM_S390 + 1))),
              HasSubstr("it is built for ELF machine 23, but this host is"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_type), u16(ET_EXEC))),
              HasSubstr("it is an executable, not a shared library"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_type), u16(ET_REL))), HasSubstr("it is an object file (.o)"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_phoff), u64(good_.size() - 8))),
              HasSubstr("truncated ELF file (the program header table ends at byte"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_shoff), u64(~uint64_t{0} - 8))),
              HasSubstr("truncated ELF file (the section header table ends at byte 18446744073709551615"));
  EXPECT_THAT(imageError(patched(offsetof(Elf64_Ehdr, e_shoff), u64(0))), HasSubstr("it has no section headers"));
}

TEST_F(PluginFileTest, LibraryWithoutTheEntryPointsNeverRuns) {
  unsetenv("TP_NO_ENTRY_CONSTRUCTOR_RAN");
  const std::string file = pluginFile("tp_no_entry");
  EXPECT_EQ(loadError(file), "cannot load plugin '" + fs::canonical(file).string() +
                                 "': it is not a Backplane plugin: it does not export backplane_plugin_query (define "
                                 "the entry points with BACKPLANE_PLUGIN(...) from backplane/plugin.hpp, or build it "
                                 "with backplane_add_plugin())");
  EXPECT_EQ(std::getenv("TP_NO_ENTRY_CONSTRUCTOR_RAN"), nullptr) << "its static constructor ran";
  // The entry point's name renamed in .dynstr: the other one is named.
  std::string renamed = good_;
  size_t at = renamed.find("backplane_plugin_init");
  ASSERT_NE(at, std::string::npos);
  renamed[at] = 'B';
  EXPECT_THAT(imageError(renamed), HasSubstr("it does not export backplane_plugin_init"));
}

// Fuzz-like inputs: cuts and byte changes at the places the check reads
// (the headers, the tables, the symbols); each must end in a verdict read
// within the image (checkPluginImage's reader refuses any other read with
// kInternal; ASan watches the check's own buffers).
TEST_F(PluginFileTest, MutatedPluginsNeverReadOutOfBounds) {
  uint64_t state = 0x9e3779b97f4a7c15u;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  Elf64_Ehdr eh;
  std::memcpy(&eh, good_.data(), sizeof eh);
  const std::vector<std::pair<size_t, size_t>> regions = {{0, sizeof eh},
                                                          {eh.e_phoff, eh.e_phnum * sizeof(Elf64_Phdr)},
                                                          {eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr)},
                                                          {0, good_.size()}};
  int verdicts = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = good_;
    const auto& [start, length] = regions[next() % regions.size()];
    for (int k = 1 + static_cast<int>(next() % 8); k > 0; --k) {
      const size_t at = start + next() % length;
      const uint64_t how = next();
      b[at] = how % 3 == 0 ? static_cast<char>(0xff) : how % 3 == 1 ? 0 : static_cast<char>(how >> 8);
    }
    if (next() % 4 == 0) b.resize(next() % b.size());
    verdicts += !imageError(b).empty();
  }
  EXPECT_GT(verdicts, 100) << "the mutations hardly ever hit what the check reads";
}

// A folder scan skips what is no plugin without dlopen()ing it (a scan of
// /usr/lib ran 228 libraries' constructors), and says why in plugins().
TEST_F(PluginFileTest, FolderScanSkipsNonPluginsWithoutRunningThemAndSaysWhy) {
  testing::TempDir scratch{"bp_plugin_file_test"};
  fs::copy_file(pluginFile("tp_no_entry"), scratch.path() / "a_not_a_plugin.so");
  writeBytes(scratch.path() / "b_cut.so", good_.substr(0, 20000));
  writeBytes(scratch.path() / "c_text.so", "not a library\n");
  ASSERT_EQ(::mkfifo((scratch.path() / "d_fifo.so").c_str(), 0644), 0);
  const std::string folder = fs::canonical(scratch.path()).string();
  EXPECT_EXIT(
      {
        setenv("BACKPLANE_PLUGIN_PATH", folder.c_str(), 1);
        unsetenv("TP_NO_ENTRY_CONSTRUCTOR_RAN");
        (void)plugins().loadAll();
        if (std::getenv("TP_NO_ENTRY_CONSTRUCTOR_RAN")) std::fprintf(stderr, "a constructor ran\n");
        for (const PluginStatus& p : plugins().plugins())
          if (p.path.rfind(folder, 0) == 0) std::fprintf(stderr, "[%s: %s]\n", p.path.c_str(), p.error.c_str());
        exitChild(std::getenv("TP_NO_ENTRY_CONSTRUCTOR_RAN") == nullptr, scratch);
      },
      ::testing::ExitedWithCode(0),
      "a_not_a_plugin.so: .*it does not export backplane_plugin_query.*\\]\n"
      "\\[.*b_cut.so: .*truncated ELF file.*\\]\n"
      "\\[.*c_text.so: .*not an ELF file.*\\]\n"
      "\\[.*d_fifo.so: .*it is a FIFO, not a regular file\\]");
}

// ------------------------------------------------ Note [Plugin path entries]

// Runs `body` with stderr in a file; returns what it wrote.
template <typename Fn>
std::string capturedStderr(Fn body) {
  std::fflush(stderr);
  char name[] = "/tmp/bp_plugin_file_test_stderr_XXXXXX";
  int file = ::mkstemp(name);
  int saved = ::dup(2);
  ::dup2(file, 2);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  std::string text = readBytes(name);
  ::unlink(name);
  return text;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST_F(PluginFileTest, MissingRelativeAndLoopingPathEntriesAreWarnedAboutOnceAndListed) {
  testing::TempDir scratch{"bp_plugin_file_test"};
  const fs::path loop = scratch.path() / "loop";
  fs::create_symlink(loop, loop);
  const std::string missing = (scratch.path() / "missing").string();
  const std::string path = strCat("relative/plugins:", missing, "::", loop.string());
  EXPECT_EXIT(
      {
        setenv("BACKPLANE_PLUGIN_PATH", path.c_str(), 1);
        std::string err = capturedStderr([] {
          (void)plugins().loadAll();
          (void)plugins().loadAll();
        });
        int failures = 0;
        auto expect = [&](const std::string& line) {
          if (occurrences(err, line) != 1) {
            std::fprintf(stderr, "expected once: %s\n", line.c_str());
            ++failures;
          }
        };
        expect(
            "backplane: warning: BACKPLANE_PLUGIN_PATH entry 'relative/plugins' is a relative path (it would name "
            "another folder in every working directory); write it as an absolute path; it is skipped\n");
        expect("backplane: warning: BACKPLANE_PLUGIN_PATH entry '" + missing + "' does not exist; it is skipped\n");
        expect("backplane: warning: BACKPLANE_PLUGIN_PATH entry '" + loop.string() +
               "' is a symbolic link loop (too many levels of symbolic links); it is skipped\n");
        std::vector<PluginSourceProblem> skipped = plugins().skippedSources();
        for (const PluginSourceProblem& s : skipped)
          std::fprintf(stderr, "[%s %s]\n", s.entry.c_str(), s.reason.c_str());
        exitChild(failures == 0 && skipped.size() == 3, scratch);
      },
      ::testing::ExitedWithCode(0),
      "\\[relative/plugins is a relative path .*\\]\n\\[.*/missing does not exist\\]\n"
      "\\[.*/loop is a symbolic link loop .*\\]");
}

// -------------------------------------------------------- Note [Plugin trust]

TEST_F(PluginFileTest, PluginsOthersCanWriteGetAWarningOnceOrARefusalWhenStrict) {
  testing::TempDir scratch{"bp_plugin_file_test"};
  const fs::path open_folder = scratch.path() / "open";
  fs::create_directory(open_folder);
  fs::permissions(open_folder, fs::perms::all);  // 0777, not sticky
  const fs::path plugin = open_folder / "tp_good.so";
  fs::copy_file(pluginFile("tp_good"), plugin);
  const std::string folder = fs::canonical(open_folder).string();
  const std::string file = fs::canonical(plugin).string();
  EXPECT_EXIT(
      {
        std::string err = capturedStderr([&] {
          for (int i = 0; i < 2; ++i) {
            absl::StatusOr<PluginStatus> s = plugins().load(file);
            if (!s.ok() || !plugins().unload("tp_good").ok()) std::fprintf(stderr, "did not load and unload\n");
          }
        });
        const std::string warning = "backplane: warning: plugin '" + file + "': '" + folder +
                                    "' is writable by every user (mode 0777), so others can replace the code this "
                                    "process runs; chmod o-w '" +
                                    folder + "' (BACKPLANE_PLUGIN_TRUST=strict refuses such plugins)\n";
        std::fprintf(stderr, "%s", err.c_str());
        exitChild(occurrences(err, warning) == 1 && err.size() == warning.size(), scratch);
      },
      ::testing::ExitedWithCode(0), "is writable by every user \\(mode 0777\\)");
  EXPECT_EXIT(
      {
        setenv("BACKPLANE_PLUGIN_TRUST", "strict", 1);
        absl::StatusOr<PluginStatus> s = plugins().load(file);
        std::fprintf(stderr, "[%s]\n", std::string(s.status().message()).c_str());
        exitChild(s.status().code() == absl::StatusCode::kFailedPrecondition, scratch);
      },
      ::testing::ExitedWithCode(0),
      "\\[cannot load plugin '.*/open/tp_good.so': '.*/open' is writable by every user \\(mode 0777\\), so others "
      "can replace the code this process runs \\(refused: BACKPLANE_PLUGIN_TRUST=strict\\); chmod o-w '.*/open', or "
      "unset BACKPLANE_PLUGIN_TRUST to load it with a warning\\]");

  // A sticky folder (as /tmp) protects a plugin in it, but scanning it loads
  // whatever anyone put there; and a file others can write is a problem too.
  fs::permissions(open_folder, fs::perms::all | fs::perms::sticky_bit);
  EXPECT_FALSE(plugin_detail::trustProblem(file, plugin_detail::TrustTarget::PluginFile).has_value());
  std::optional<plugin_detail::TrustProblem> scanned =
      plugin_detail::trustProblem(folder, plugin_detail::TrustTarget::ScannedFolder);
  ASSERT_TRUE(scanned.has_value());
  EXPECT_EQ(scanned->what, "is writable by every user (mode 1777)");
  fs::permissions(plugin, fs::perms::group_write, fs::perm_options::add);
  std::optional<plugin_detail::TrustProblem> group =
      plugin_detail::trustProblem(file, plugin_detail::TrustTarget::PluginFile);
  if (::getegid() == ::geteuid()) {
    EXPECT_FALSE(group.has_value()) << "the group is the owner's own (user private groups)";
  } else {
    ASSERT_TRUE(group.has_value());
    EXPECT_EQ(group->fix, "chmod g-w '" + file + "'");
  }
}

// ---------------------------------------------- Note [Plugin load breadcrumb]

// `backplane --plugin p.so conformance` whose plugin called exit(0) in its
// init exited 0 with no report.
TEST_F(PluginFileTest, ExitWhileLoadingIsNamedAndNeverSuccess) {
  const std::string init_exit = fs::canonical(pluginFile("tp_init_exit")).string();
  EXPECT_EXIT((void)plugins().load(init_exit), ::testing::ExitedWithCode(plugin_detail::kPluginEndedProcessStatus),
              "backplane: error: plugin 'tp_init_exit' \\(" + init_exit +
                  "\\) ended the process \\(exit\\) while loading; exit status 3\n$");
  const std::string ctor_exit = fs::canonical(pluginFile("tp_ctor_exit")).string();
  EXPECT_EXIT((void)plugins().load(ctor_exit), ::testing::ExitedWithCode(plugin_detail::kPluginEndedProcessStatus),
              "backplane: error: plugin '" + ctor_exit + "' ended the process \\(exit\\) while loading");
}

TEST_F(PluginFileTest, FatalSignalWhileLoadingIsNamedAndStillKills) {
  EXPECT_EXIT((void)plugins().load(pluginFile("tp_init_abort")), ::testing::KilledBySignal(SIGABRT),
              "backplane: error: plugin 'tp_init_abort' \\(.*tp_init_abort.so\\) ended the process \\(SIGABRT\\) "
              "while loading");
  // Under a sanitizer, its own SEGV handler (the previous one) reports and
  // exits 1; without, the default action kills.
  EXPECT_EXIT((void)plugins().load(pluginFile("tp_init_segv")),
              [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); },
              "backplane: error: plugin 'tp_init_segv' \\(.*tp_init_segv.so\\) ended the process \\(SIGSEGV\\) "
              "while loading");
}

TEST_F(PluginFileTest, SignalHandlersAreTheCallersAgainAfterALoad) {
  struct sigaction before {
  }, after{};
  ASSERT_EQ(::sigaction(SIGSEGV, nullptr, &before), 0);
  ASSERT_TRUE(plugins().load(pluginFile("tp_good")).ok());
  ASSERT_EQ(::sigaction(SIGSEGV, nullptr, &after), 0);
  EXPECT_EQ(reinterpret_cast<void*>(before.sa_handler), reinterpret_cast<void*>(after.sa_handler));
  EXPECT_TRUE(plugins().unload("tp_good").ok());
}

}  // namespace
}  // namespace backplane
