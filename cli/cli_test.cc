// Runs the built `backplane` tool as a separate process and checks its
// output and exit codes. Tests that need known content load the test plugin
// (testing/cli_test_plugin.cc) with --no-default-plugins; the others must
// hold whatever plugins and operators the build provides.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/plugin_api.h"
#include "gtest/gtest.h"

namespace {

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `backplane <args>` (args are shell words, already quoted as needed),
// with `env` ("NAME=value ...", shell words too) added to its environment.
Result run(const std::string& args, const std::string& env = "") {
  static std::atomic<int> counter{0};
  std::string base = ::testing::TempDir() + "/cli_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  std::string out = base + ".out", err = base + ".err";
  std::string cmd =
      env + (env.empty() ? "'" : " '") + BACKPLANE_CLI_PATH + "' " + args + " >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out);
  r.err = readFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

const std::string kTestPlugin = std::string("--no-default-plugins --plugin '") + CLI_TEST_PLUGIN_PATH + "' ";

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// The line whose first word is `word`, or "".
std::string lineStartingWith(const std::string& text, const std::string& word) {
  for (const std::string& l : lines(text))
    if (l.rfind(word + " ", 0) == 0 || l == word) return l;
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)
#define EXPECT_NOT_CONTAINS(haystack, needle) EXPECT_EQ((haystack).find(needle), std::string::npos) << (haystack)

TEST(CliTest, HelpExitsZeroAndListsCommands) {
  for (const char* args : {"--help", "-h", "help", "ops --help"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 0) << args;
    EXPECT_EQ(r.out.rfind("usage: backplane", 0), 0u) << r.out;
    for (const char* word : {"plugins", "devices", "ops", "--plugin", "--no-default-plugins", "--format"})
      EXPECT_CONTAINS(r.out, word);
    EXPECT_EQ(r.err, "");
  }
}

TEST(CliTest, VersionNamesTheAbi) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("backplane ", 0), 0u) << r.out;
  EXPECT_CONTAINS(r.out, "plugin ABI 1.");
}

TEST(CliTest, UnknownCommandIsAUsageError) {
  Result r = run("nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  std::vector<std::string> err = lines(r.err);
  ASSERT_FALSE(err.empty());
  EXPECT_CONTAINS(err[0], "unknown command 'nope'");
  EXPECT_CONTAINS(r.err, "usage: backplane");
}

TEST(CliTest, BadOptionsAreUsageErrors) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c :
       {Case{"", "no command given"}, Case{"--frobnicate devices", "unknown option '--frobnicate'"},
        Case{"devices --plugin", "option --plugin needs a value"}, Case{"ops --format xml", "unknown format 'xml'"},
        Case{"ops --format", "option --format needs a value"},
        Case{"devices --format json", "--format applies only to the 'ops' command"},
        Case{"devices ops", "unexpected argument 'ops'"}}) {
    Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
    EXPECT_EQ(lines(r.err).at(0).rfind("backplane: error: ", 0), 0u) << r.err;
    EXPECT_CONTAINS(lines(r.err).at(0), c.message);
    EXPECT_CONTAINS(r.err, "usage: backplane");
  }
}

TEST(CliTest, DevicesListsTheBuiltInTypes) {
  Result r = run("devices");  // with whatever plugins the build and environment provide
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("DEVICE TYPE", 0), 0u) << r.out;
  EXPECT_CONTAINS(lineStartingWith(r.out, "cpu"), "built-in");
  EXPECT_CONTAINS(lineStartingWith(r.out, "cpu"), "available; capabilities: host_accessible");
  EXPECT_CONTAINS(lineStartingWith(r.out, "  cpu:0"), " GiB, ");  // the machine's memory
  EXPECT_CONTAINS(lineStartingWith(r.out, "  cpu:0"), " threads");
  for (const char* type : {"cuda", "hip"}) {
    std::string line = lineStartingWith(r.out, type);
    ASSERT_NE(line, "") << r.out;
    // Either a plugin provides it, or the line says none does.
    if (line.find("no plugin") != std::string::npos) {
      EXPECT_CONTAINS(line, " 0 ");
    }
  }
}

TEST(CliTest, DevicesWithoutPluginsSaysWhy) {
  Result r = run("--no-default-plugins devices");
  EXPECT_EQ(r.code, 0) << r.err;
  std::string cuda = lineStartingWith(r.out, "cuda");
  EXPECT_CONTAINS(cuda, "no plugin");
  EXPECT_CONTAINS(cuda, "no plugin provides cuda");
  EXPECT_CONTAINS(lineStartingWith(r.out, "hip"), "no plugin provides hip");
  EXPECT_NOT_CONTAINS(r.out, "cuda:0");
}

TEST(CliTest, DevicesShowsPluginTypesAndIndices) {
  Result r = run(kTestPlugin + "devices");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::string clitest = lineStartingWith(r.out, "clitest");
  EXPECT_CONTAINS(clitest, "cli_test_plugin");
  EXPECT_CONTAINS(clitest, " 2 ");
  EXPECT_CONTAINS(clitest, "available; capabilities: host_accessible");
  // Each device's properties, under STATUS.
  for (const char* i : {"0", "1"}) {
    std::string line = lineStartingWith(r.out, std::string("  clitest:") + i);
    EXPECT_CONTAINS(line, std::string("  CLI test device ") + i + ", 2.0 GiB, compute 1.2, 4 compute units");
    EXPECT_EQ(line.find("compute units"), line.size() - 13) << line;
    EXPECT_NOT_CONTAINS(line, "SMs") << "a vendor-neutral name for multiprocessor_count";
  }
  EXPECT_NOT_CONTAINS(r.out, "clitest:2");
  std::string none = lineStartingWith(r.out, "clitestnone");
  EXPECT_CONTAINS(none, " 0 ");
  EXPECT_CONTAINS(none, "no clitestnone hardware (test plugin)");
}

// A plugin named with --plugin that does not load is listed with its
// reason, and `plugins` fails: a CI step that checks the plugin it built
// must not pass without it.
TEST(CliTest, PluginsReportsAnExplicitPluginThatFailedAndExitsOne) {
  Result r = run("plugins --plugin /nonexistent.so");
  EXPECT_EQ(r.code, 1) << r.err;
  std::vector<std::string> out = lines(r.out);
  size_t row = 0;
  while (row < out.size() && out[row].find("/nonexistent.so") == std::string::npos) ++row;
  ASSERT_LT(row + 1, out.size()) << r.out;
  EXPECT_CONTAINS(out[row], "FAILED");
  // The error, verbatim, on the next line.
  EXPECT_CONTAINS(out[row + 1], "error: cannot load plugin '/nonexistent.so': No such file or directory");
  EXPECT_CONTAINS(r.out, "failed to load");
  EXPECT_CONTAINS(r.err,
                  "backplane: error: the plugin named with --plugin /nonexistent.so did not load: cannot load "
                  "plugin '/nonexistent.so': No such file or directory");
}

// One found in a default source (here BACKPLANE_PLUGIN_PATH) is listed the
// same way, but is not the command line's fault: exit 0.
TEST(CliTest, PluginsListsADefaultSourcePluginThatFailedAndExitsZero) {
  std::string junk = ::testing::TempDir();
  junk += (junk.back() == '/' ? "" : "/") + std::string("cli_test_not_a_plugin.so");  // as the registry prints it
  std::ofstream(junk) << "not a shared library\n";
  Result r = run("plugins", "BACKPLANE_PLUGIN_PATH='" + junk + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(lineStartingWith(r.out, "-"), "FAILED");
  EXPECT_CONTAINS(r.out, "error: cannot load plugin '" + junk + "'");
  EXPECT_EQ(r.err, "");
  for (const char* command : {"devices", "ops"}) {
    r = run(command, "BACKPLANE_PLUGIN_PATH='" + junk + "'");
    EXPECT_EQ(r.code, 0) << command << ": " << r.err;
    EXPECT_CONTAINS(r.err, "backplane: warning: plugin " + junk + " not loaded");
  }
  std::remove(junk.c_str());
}

// A plugin's path or error that holds an escape sequence reaches the
// terminal as text (Note [Report text]), in the table and in the messages.
TEST(CliTest, PluginPathsAndErrorsAreShownAsText) {
  for (const char* command : {"plugins", "devices"}) {
    Result r = run(std::string("--no-default-plugins --plugin '/nonexistent/\x1b[31mred.so' ") + command);
    EXPECT_EQ(r.code, 1) << command;
    EXPECT_NOT_CONTAINS(r.out + r.err, "\x1b");
    EXPECT_CONTAINS(r.err, "--plugin /nonexistent/\\x1b[31mred.so did not load");
  }
  std::string junk = ::testing::TempDir();
  junk += (junk.back() == '/' ? "" : "/") + std::string("cli_test_\x1b[31mred.so");
  std::ofstream(junk) << "not a shared library\n";
  for (const char* command : {"plugins", "devices"}) {
    Result r = run(command, "BACKPLANE_PLUGIN_PATH='" + junk + "'");
    EXPECT_EQ(r.code, 0) << command << ": " << r.err;
    EXPECT_NOT_CONTAINS(r.out + r.err, "\x1b");
    EXPECT_CONTAINS(r.out + r.err, "cli_test_\\x1b[31mred.so");
  }
  std::remove(junk.c_str());
}

// A FIFO named with --plugin blocked open() forever; now it is refused
// before anything reads it.
TEST(CliTest, PluginThatIsAFifoIsRefusedWithoutBlocking) {
  std::string fifo = ::testing::TempDir();
  fifo += (fifo.back() == '/' ? "" : "/") + std::string("cli_test_fifo_") + std::to_string(getpid()) + ".so";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  Result r = run("--no-default-plugins --plugin '" + fifo + "' plugins", "timeout 60");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "did not load: cannot load plugin '" + fifo + "': it is a FIFO, not a regular file");
  std::remove(fifo.c_str());
}

// A plugin whose init called exit(0) made `conformance` exit 0 with no
// report: a CI job went green.
TEST(CliTest, PluginThatExitsWhileLoadingFailsTheRunAndIsNamed) {
  Result r = run(std::string("--no-default-plugins --plugin '") + CLI_TP_INIT_EXIT_PATH +
                 "' conformance --backend cpu --ops '^bp::mul\\b'");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_CONTAINS(r.err, "backplane: error: plugin 'tp_init_exit' (");
  EXPECT_CONTAINS(r.err, "tp_init_exit.so) ended the process (exit) while loading; exit status 3");
  EXPECT_NOT_CONTAINS(r.out, "PASSED");
}

// BACKPLANE_PLUGIN_PATH entries that cannot be used were ignored silently.
TEST(CliTest, PluginsListsSkippedPathEntries) {
  Result r = run("plugins", "BACKPLANE_PLUGIN_PATH='relative/plugins:/nonexistent_backplane_plugins'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out,
                  "BACKPLANE_PLUGIN_PATH entries skipped:\n"
                  "  relative/plugins: is a relative path (it would name another folder in every working directory); "
                  "write it as an absolute path\n"
                  "  /nonexistent_backplane_plugins: does not exist\n");
  EXPECT_CONTAINS(r.err,
                  "backplane: warning: BACKPLANE_PLUGIN_PATH entry '/nonexistent_backplane_plugins' does not exist; "
                  "it is skipped\n");
}

TEST(CliTest, PluginsShowsALoadedPlugin) {
  Result r = run(kTestPlugin + "--plugin /nonexistent.so plugins");
  EXPECT_EQ(r.code, 1) << "an explicit plugin did not load: " << r.err;
  EXPECT_EQ(r.out.rfind("NAME", 0), 0u) << r.out;
  std::string line = lineStartingWith(r.out, "cli_test_plugin");
  EXPECT_CONTAINS(line, "0.1.0-test");
  // The plugin is built with the same SDK, so it reports the host's ABI.
  EXPECT_CONTAINS(line, " " + std::to_string(BP_ABI_MAJOR) + "." + std::to_string(BP_ABI_MINOR) + " ");
  EXPECT_CONTAINS(line, "clitest: 2, clitestnone: 0");
  // Six kernels (five impls and a fallback), none typed: the plugin is
  // written against the C header and gives no typed_fn.
  EXPECT_TRUE(std::regex_search(line, std::regex(R"( 6 +0 +loaded )"))) << line;
  EXPECT_CONTAINS(r.out.substr(0, r.out.find('\n')), " KERNELS  TYPED  STATUS ");
  EXPECT_CONTAINS(line, "cli_test_plugin.so");
  EXPECT_CONTAINS(line, "loaded");
  EXPECT_CONTAINS(r.out, "2 plugins: 1 loaded, 1 failed to load");
  r = run(kTestPlugin + "plugins");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "1 plugin: 1 loaded, 0 failed to load");
}

TEST(CliTest, PluginsWithNothingToLoad) {
  Result r = run("--no-default-plugins plugins");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("no plugins found", 0), 0u) << r.out;
  EXPECT_CONTAINS(r.out, "--no-default-plugins");
}

// Every other command stops before doing anything when a plugin named with
// --plugin did not load, saying which and why.
TEST(CliTest, FailedExplicitPluginFailsEveryCommand) {
  for (const char* command : {"devices", "ops", "ops --format json", "conformance --backend cpu --ops ^bp::mul\\b"}) {
    Result r = run(std::string("--no-default-plugins --plugin /nonexistent.so ") + command);
    EXPECT_EQ(r.code, 1) << command;
    EXPECT_EQ(r.out, "") << command;
    EXPECT_CONTAINS(r.err,
                    "backplane: error: the plugin named with --plugin /nonexistent.so did not load: cannot "
                    "load plugin '/nonexistent.so': No such file or directory");
    EXPECT_CONTAINS(r.err, "leave out --plugin");
  }
}

TEST(CliTest, OpsTextWorksWithWhateverIsDefined) {
  Result r = run("ops");
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.out.rfind("no operators defined", 0) == 0) return;  // an empty table is fine
  EXPECT_EQ(r.out.rfind("OPERATOR", 0), 0u) << r.out;
  std::string header = lines(r.out).at(0);
  for (const char* b : {" cpu ", " cuda ", " hip"}) EXPECT_CONTAINS(header, b);
  EXPECT_CONTAINS(r.out, "native:");  // the legend
}

TEST(CliTest, OpsTextMatrix) {
  Result r = run(kTestPlugin + "ops");
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> out = lines(r.out);
  ASSERT_FALSE(out.empty());
  // Columns are aligned: every backend name starts where its cells do.
  const std::string& header = out[0];
  size_t clitest_col = header.find(" clitest ") + 1;
  std::string row = lineStartingWith(r.out, "clitest::cpu_only");
  ASSERT_NE(row, "") << r.out;
  EXPECT_EQ(row.substr(header.find(" cpu ") + 1, 6), "native");
  EXPECT_EQ(row.substr(clitest_col, 12), "cpu_fallback");
  EXPECT_EQ(row.substr(header.find(" clitestnone") + 1, 16), "backend_fallback");
  std::string missing = lineStartingWith(r.out, "clitest::no_kernels");
  EXPECT_EQ(missing.substr(header.find(" cpu ") + 1, 7), "missing");
  EXPECT_EQ(lineStartingWith(r.out, "clitest::native_everywhere").substr(clitest_col, 6), "native");
  // A kernel that declares its dtypes (Note [Declared dtypes]): the rest go
  // to the CPU fallback.
  EXPECT_EQ(lineStartingWith(r.out, "clitest::some_dtypes").substr(clitest_col),
            "native (float16, float32), cpu_fallback (others)  backend_fallback");
  EXPECT_CONTAINS(r.out, "no plugin loaded for cuda, hip");
}

// Kernels registered with impl_when_defined that serve no call are listed
// below the matrix: one waiting for its operator (which has no row), one
// whose signature does not fit the schema (which fills no cell).
TEST(CliTest, OpsListsInactiveKernels) {
  const std::string waiting = std::string("--no-default-plugins --plugin '") + CLI_WD_KERNEL_PATH + "' ";
  Result r = run(waiting + "ops");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lineStartingWith(r.out, "tpwd::scale"), "") << "an undefined operator has no row: " << r.out;
  EXPECT_CONTAINS(r.out,
                  "inactive kernels (registered, but serving no call):\n  tpwd::scale CPU [plugin tp_wd_kernel]: "
                  "tpwd::scale is not defined");

  const std::string stale = std::string("--no-default-plugins --plugin '") + CLI_WD_KERNEL_BAD_PATH + "' --plugin '" +
                            CLI_WD_DEFINER_PATH + "' ";
  r = run(stale + "ops");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lineStartingWith(r.out, "tpwd::scale").substr(lines(r.out).at(0).find(" cpu ") + 1, 7), "missing");
  EXPECT_CONTAINS(r.out,
                  "  tpwd::scale CPU [plugin tp_wd_kernel_bad]: the CPU kernel for tpwd::scale from plugin "
                  "tp_wd_kernel_bad has C++ signature (Tensor, int) -> Tensor");
  r = run(stale + "ops --format markdown");
  EXPECT_CONTAINS(r.out,
                  "Inactive kernels (registered, but serving no call):\n\n- `tpwd::scale` CPU [plugin "
                  "tp_wd_kernel_bad]: the CPU kernel");
  r = run(stale + "ops --format json");
  EXPECT_EQ(r.out.find("inactive"), std::string::npos) << "the JSON document keeps its documented shape";
}

TEST(CliTest, OpsMarkdownStartsWithATableHeader) {
  for (const std::string& prefix : {std::string(), kTestPlugin}) {
    Result r = run(prefix + "ops --format markdown");
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<std::string> out = lines(r.out);
    ASSERT_GE(out.size(), 2u);
    EXPECT_EQ(out[0].rfind("| operator | cpu | cuda | hip |", 0), 0u) << r.out;
    EXPECT_EQ(out[1].rfind("| --- |", 0), 0u) << r.out;
    EXPECT_CONTAINS(r.out, "Legend:");
  }
  Result r = run(kTestPlugin + "ops --format=markdown");
  EXPECT_CONTAINS(r.out,
                  "| `clitest::cpu_only` | native | cpu_fallback | cpu_fallback | cpu_fallback | backend_fallback |");
  EXPECT_CONTAINS(r.out,
                  "| `clitest::some_dtypes` | native | cpu_fallback | cpu_fallback | native (float16, float32), "
                  "cpu_fallback (others) | backend_fallback |");
}

TEST(CliTest, OpsJsonHasTheDocumentedShape) {
  // Full parsing is check_ops_json.py's job (CTest cli_ops_json_*); this
  // checks the escaping and the cells without python.
  Result r = run(kTestPlugin + "ops --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\n  \"backends\": [\"cpu\", \"cuda\", \"hip\", \"clitest\", \"clitestnone\"],", 0), 0u)
      << r.out;
  EXPECT_CONTAINS(r.out, R"("kernels": {"cpu": "native", "cuda": "cpu_fallback", "hip": "cpu_fallback", )"
                         R"("clitest": "cpu_fallback", "clitestnone": "backend_fallback"})");
  EXPECT_CONTAINS(r.out, R"(str note=\"say \\\"hi\\\" \\\\ bye\")");
  // Declared dtypes: only the backends whose native kernel declares some.
  EXPECT_CONTAINS(r.out, R"("clitestnone": "backend_fallback"}, "dtypes": {"clitest": ["float16", "float32"]}, )"
                         R"("declined": {"clitest": "cpu_fallback"}})");
  EXPECT_CONTAINS(r.out, R"("clitestnone": "backend_fallback"}, "dtypes": {}, "declined": {}})");
}

}  // namespace
