#pragma once
// Checks of a plugin file made before any of its code runs (Note [Plugin
// file checks]) and of who else can change it (Note [Plugin trust]).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace backplane::plugin_detail {

// Note [Plugin file checks]
// A plugin file is a shared library the loader is about to dlopen(), which
// runs its static constructors and maps its segments. Before that the loader
// reads the file itself, so that what is not a plugin never runs and a
// damaged file is an error instead of a dead process:
// - open() with O_NONBLOCK (and a stat() first, so a device is never opened
//   at all): a FIFO named x.so would block open() forever, and a device's
//   open() may act (a tty becomes the controlling terminal, a tape rewinds).
// - fstat() of that descriptor: only a regular file is a plugin.
// - the ELF header: magic, class, byte order and machine of this host, and
//   ET_DYN (a shared library).
// - every program header within the file, and every segment's bytes too: a
//   truncated copy of a plugin has PT_LOAD segments past its end, which
//   dlopen() maps anyway; touching them is SIGBUS (`head -c 20000 x.so`).
// - the section headers within the file, and through them .dynsym and its
//   .dynstr: the two entry points (BP_PLUGIN_QUERY_SYMBOL and
//   BP_PLUGIN_INIT_SYMBOL) must be exported functions. So a folder scan
//   (loadAll over BACKPLANE_PLUGIN_PATH pointed at /usr/lib) refuses other
//   libraries without running their constructors.
// The file is hostile input: every offset and size is checked against the
// file's size before it is read (the reads go through pread() into buffers,
// never a mapping that a shrinking file would turn into SIGBUS), sizes are
// capped, and tests mutate real plugins byte by byte through
// checkPluginImage. These checks catch accidents, not attackers: the
// dynamic loader follows PT_DYNAMIC, not the section headers, and the file
// may change between the check and dlopen(); a plugin is code that runs with
// the process's rights, which is what Note [Plugin trust] is about.

// The file the checks read, from fstat() of the descriptor they read.
struct PluginFileFacts {
  uint64_t size = 0;
  mode_t mode = 0;
  uid_t owner = 0;
  gid_t group = 0;
};

// Opens `path` without blocking, requires a regular file and checks it as
// checkPluginImage does. Errors start "cannot load plugin '<path>': ".
absl::StatusOr<PluginFileFacts> checkPluginFile(const std::string& path);

// Reads `size` bytes at `offset` (always within the image) into `out`.
using ImageReader = std::function<absl::Status(uint64_t offset, size_t size, void* out)>;

// The ELF checks of Note [Plugin file checks] on an image of `file_size`
// bytes; `path` names it in errors. Never reads outside [0, file_size).
absl::Status checkPluginImage(const std::string& path, uint64_t file_size, const ImageReader& read);
// The same on bytes in memory (tests and fuzzing).
absl::Status checkPluginImage(const std::string& path, std::string_view bytes);

// Note [Plugin trust]
// A plugin runs in-process with the process's full rights, so whoever can
// write the file, or rename or replace it in a folder on its path, can run
// code as every user that loads it. Before loading, the loader checks the
// file (from the descriptor it checked) and every folder above it: each
// must be owned by root or by this process's user, and not writable by
// group or others. Exceptions: a folder with the sticky bit owned by root
// or this user (like /tmp), since others cannot rename or remove what they
// do not own there; and group write when the group's id equals its owner's
// user id (the user-private-group convention, without asking the user
// database, whose lookups can block on a network). A folder the loader
// scans (BACKPLANE_PLUGIN_PATH, the default folder) gets no sticky
// exception: anyone who can create a file there adds a plugin.
// A problem is a warning on stderr, once per path, because refusing would
// break installs that work today; BACKPLANE_PLUGIN_TRUST=strict refuses
// instead (docs/plugins.md#plugin-trust). Not checked: what the plugin's
// own dependencies are and who can write them, ACLs and capabilities, and
// anything that happens after the check.
enum class TrustTarget { PluginFile, ScannedFolder };

struct TrustProblem {
  std::string path;  // the file or folder at fault
  std::string what;  // "is writable by every user (mode 0777)"
  std::string fix;   // "chmod o-w '/x'"
};

// The first problem of `canonical` (a canonical path, with no symbolic
// links) and the folders above it; `facts` describe the file itself when
// the loader has them (else it is stat()ed). nullopt: nothing found.
std::optional<TrustProblem> trustProblem(const std::string& canonical, TrustTarget target,
                                         const PluginFileFacts* facts = nullptr);

enum class TrustMode { Warn, Strict };
// From BACKPLANE_PLUGIN_TRUST: "strict" refuses; unset, "" or "warn" warns.
// Any other value warns about itself once and means warn.
TrustMode trustMode();

// Writes `line` (and a newline) on stderr unless a line with the same `key`
// was written before in this process. Thread-safe.
void warnOnce(const std::string& key, const std::string& line);

}  // namespace backplane::plugin_detail
