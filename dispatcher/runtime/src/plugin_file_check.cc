// Note [Plugin file checks] and Note [Plugin trust] (plugin_file_check.h).
#include "plugin_file_check.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>
#include <vector>

#include "backplane/core/str_cat.h"
#include "backplane/plugin_api.h"

namespace backplane::plugin_detail {

namespace {

// The ELF structures of this host's class: a plugin is loaded into this
// process, so it has this process's class, byte order and machine.
#if UINTPTR_MAX == 0xffffffffffffffffu
using Ehdr = Elf64_Ehdr;
using Phdr = Elf64_Phdr;
using Shdr = Elf64_Shdr;
using Sym = Elf64_Sym;
constexpr unsigned char kHostClass = ELFCLASS64;
constexpr int kHostBits = 64;
#else
using Ehdr = Elf32_Ehdr;
using Phdr = Elf32_Phdr;
using Shdr = Elf32_Shdr;
using Sym = Elf32_Sym;
constexpr unsigned char kHostClass = ELFCLASS32;
constexpr int kHostBits = 32;
#endif
// ELF{32,64}_ST_{BIND,TYPE,VISIBILITY} are the same for both classes.
constexpr unsigned symBind(unsigned char info) { return info >> 4; }
constexpr unsigned symType(unsigned char info) { return info & 0xf; }
constexpr unsigned symVisibility(unsigned char other) { return other & 0x3; }

constexpr unsigned char kHostData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;

// Caps on what the checks read, far above any real plugin's (which exports
// a handful of symbols and imports a few thousand), so a hostile header
// cannot make the loader allocate gigabytes.
constexpr uint64_t kMaxSections = uint64_t{1} << 18;
constexpr uint64_t kMaxSymbolTableBytes = uint64_t{64} << 20;

const char kExpected[] = " (a shared library built with backplane_add_plugin() is expected)";

// The ELF machine libbackplane.so was built for, read from its own ELF
// header as the dynamic loader mapped it; 0 if that cannot be found (then
// the machine is not checked, and dlopen() still refuses a wrong one).
const char kMachineAnchor = 0;
uint16_t hostMachine() {
  static const uint16_t machine = [] {
    Dl_info info{};
    if (dladdr(&kMachineAnchor, &info) == 0 || info.dli_fbase == nullptr) return uint16_t{0};
    Ehdr header;
    std::memcpy(&header, info.dli_fbase, sizeof header);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return uint16_t{0};
    return static_cast<uint16_t>(header.e_machine);
  }();
  return machine;
}

std::string machineName(unsigned machine) {
  switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "x86 (32-bit)";
    case EM_AARCH64: return "AArch64";
    case EM_ARM: return "ARM (32-bit)";
    case EM_PPC64: return "PowerPC 64";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "s390";
    default: return strCat("ELF machine ", machine);
  }
}

// a + b, or the largest value when it overflows (for "ends at byte X").
uint64_t saturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}
// Whether [offset, offset + size) lies within a file of `file_size` bytes.
bool within(uint64_t offset, uint64_t size, uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

struct ImageCheck {
  const std::string& path;
  uint64_t file_size;
  const ImageReader& read;

  absl::Status error(std::string_view why) const {
    return absl::InvalidArgumentError(strCat("cannot load plugin '", path, "': ", why));
  }
  absl::Status truncated(std::string_view what, uint64_t end) const {
    return error(strCat("truncated ELF file (", what, " ends at byte ", end, ", the file has ", file_size,
                        " bytes): a damaged or partly copied file; copy or build the plugin again"));
  }
  absl::Status corrupt(std::string_view why) const {
    return error(strCat("corrupt ELF file: ", why, "; copy or build the plugin again"));
  }

  absl::Status run() const;
  absl::Status checkEntryPoints(const std::vector<Shdr>& sections) const;
};

absl::Status ImageCheck::run() const {
  // The identification bytes first: only they say how to read the rest.
  unsigned char ident[EI_NIDENT] = {};
  const size_t ident_bytes = static_cast<size_t>(std::min<uint64_t>(file_size, EI_NIDENT));
  if (ident_bytes > 0)
    if (absl::Status s = read(0, ident_bytes, ident); !s.ok()) return s;
  if (ident_bytes < SELFMAG || std::memcmp(ident, ELFMAG, SELFMAG) != 0) {
    return error(file_size == 0
                     ? strCat("the file is empty", kExpected)
                     : strCat("not an ELF file (it does not start with the ELF magic bytes 7f 45 4c 46)", kExpected));
  }
  if (ident_bytes < EI_NIDENT) return truncated("the ELF identification", EI_NIDENT);
  if (ident[EI_CLASS] != kHostClass) {
    if (ident[EI_CLASS] == ELFCLASS32 || ident[EI_CLASS] == ELFCLASS64) {
      return error(strCat("it is a ", ident[EI_CLASS] == ELFCLASS32 ? 32 : 64, "-bit ELF file, but this host is ",
                          kHostBits, "-bit; build the plugin for this host"));
    }
    return corrupt(strCat("ELF class byte ", int{ident[EI_CLASS]}, " is neither 32- nor 64-bit"));
  }
  if (ident[EI_DATA] != kHostData) {
    if (ident[EI_DATA] == ELFDATA2LSB || ident[EI_DATA] == ELFDATA2MSB) {
      return error(strCat("it is a ", ident[EI_DATA] == ELFDATA2LSB ? "little" : "big",
                          "-endian ELF file, but this host is ", kHostData == ELFDATA2LSB ? "little" : "big",
                          "-endian; build the plugin for this host"));
    }
    return corrupt(strCat("ELF byte order byte ", int{ident[EI_DATA]}, " is neither little- nor big-endian"));
  }
  if (ident[EI_VERSION] != EV_CURRENT) return corrupt(strCat("ELF version ", int{ident[EI_VERSION]}, " is unknown"));
  if (file_size < sizeof(Ehdr)) return truncated("the ELF header", sizeof(Ehdr));

  Ehdr eh;
  if (absl::Status s = read(0, sizeof eh, &eh); !s.ok()) return s;
  if (uint16_t host = hostMachine(); host != 0 && eh.e_machine != host) {
    return error(strCat("it is built for ", machineName(eh.e_machine), ", but this host is ", machineName(host),
                        "; build the plugin for this host"));
  }
  if (eh.e_type != ET_DYN) {
    switch (eh.e_type) {
      case ET_EXEC: return error(strCat("it is an executable, not a shared library", kExpected));
      case ET_REL: return error(strCat("it is an object file (.o), not a shared library", kExpected));
      case ET_CORE: return error(strCat("it is a core dump, not a shared library", kExpected));
      default: return error(strCat("its ELF type is ", eh.e_type, ", not a shared library (ET_DYN)", kExpected));
    }
  }

  // The program headers: the table, then every segment's bytes.
  if (eh.e_phnum == 0) return error(strCat("it has no program headers, so nothing to load", kExpected));
  if (eh.e_phentsize != sizeof(Phdr)) {
    return corrupt(strCat("its program headers are ", eh.e_phentsize, " bytes each, not ", sizeof(Phdr)));
  }
  if (eh.e_phnum == PN_XNUM) return corrupt("it claims more than 65534 program headers");
  const uint64_t ph_bytes = uint64_t{eh.e_phnum} * sizeof(Phdr);
  if (!within(eh.e_phoff, ph_bytes, file_size))
    return truncated("the program header table", saturatingAdd(eh.e_phoff, ph_bytes));
  std::vector<Phdr> phdrs(eh.e_phnum);
  if (absl::Status s = read(eh.e_phoff, ph_bytes, phdrs.data()); !s.ok()) return s;
  bool has_load = false, has_dynamic = false;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Phdr& ph = phdrs[i];
    has_load |= ph.p_type == PT_LOAD;
    has_dynamic |= ph.p_type == PT_DYNAMIC;
    // Every segment with bytes in the file, not just PT_LOAD and PT_DYNAMIC:
    // the loader reads notes and properties from the file too.
    if (ph.p_filesz > 0 && !within(ph.p_offset, ph.p_filesz, file_size))
      return truncated(strCat("segment ", i), saturatingAdd(ph.p_offset, ph.p_filesz));
  }
  if (!has_load) return error(strCat("it has no loadable segment", kExpected));
  if (!has_dynamic) return error(strCat("it has no dynamic segment, so it is not a shared library", kExpected));

  // The section headers: the table, with its count in section 0 when there
  // are SHN_LORESERVE or more.
  if (eh.e_shoff == 0) {
    return error(
        strCat("it has no section headers, so its exported symbols cannot be checked (was it stripped with "
               "a tool that removes them? strip keeps them)",
               kExpected));
  }
  if (eh.e_shentsize != sizeof(Shdr)) {
    return corrupt(strCat("its section headers are ", eh.e_shentsize, " bytes each, not ", sizeof(Shdr)));
  }
  uint64_t section_count = eh.e_shnum;
  if (section_count == 0) {
    if (!within(eh.e_shoff, sizeof(Shdr), file_size))
      return truncated("section header 0", saturatingAdd(eh.e_shoff, sizeof(Shdr)));
    Shdr first;
    if (absl::Status s = read(eh.e_shoff, sizeof first, &first); !s.ok()) return s;
    section_count = first.sh_size;
  }
  if (section_count > kMaxSections)
    return corrupt(strCat("it claims ", section_count, " sections (at most ", kMaxSections, " are read)"));
  const uint64_t sh_bytes = section_count * sizeof(Shdr);
  if (!within(eh.e_shoff, sh_bytes, file_size))
    return truncated("the section header table", saturatingAdd(eh.e_shoff, sh_bytes));
  std::vector<Shdr> sections(static_cast<size_t>(section_count));
  if (sh_bytes > 0)
    if (absl::Status s = read(eh.e_shoff, static_cast<size_t>(sh_bytes), sections.data()); !s.ok()) return s;
  return checkEntryPoints(sections);
}

// The entry points, through .dynsym (the one SHT_DYNSYM section) and the
// string table its sh_link names.
absl::Status ImageCheck::checkEntryPoints(const std::vector<Shdr>& sections) const {
  size_t dynsym = sections.size();
  for (size_t i = 0; i < sections.size() && dynsym == sections.size(); ++i)
    if (sections[i].sh_type == SHT_DYNSYM) dynsym = i;
  const std::string_view advice =
      " (define the entry points with BACKPLANE_PLUGIN(...) from backplane/plugin.hpp, or build it with "
      "backplane_add_plugin())";
  if (dynsym == sections.size())
    return error(strCat("it is not a Backplane plugin: it has no dynamic symbol table, so it exports nothing", advice));
  const Shdr& symtab = sections[dynsym];
  if (symtab.sh_link >= sections.size() || sections[symtab.sh_link].sh_type != SHT_STRTAB)
    return corrupt(strCat("section ", dynsym, " (.dynsym) links to section ", symtab.sh_link, ", no string table"));
  const Shdr& strtab = sections[symtab.sh_link];
  for (const auto& [index, section] : {std::pair<size_t, const Shdr*>{dynsym, &symtab}, {symtab.sh_link, &strtab}}) {
    if (!within(section->sh_offset, section->sh_size, file_size))
      return truncated(strCat("section ", index), saturatingAdd(section->sh_offset, section->sh_size));
    if (section->sh_size > kMaxSymbolTableBytes) {
      return corrupt(strCat("section ", index, " of the dynamic symbols is ", section->sh_size, " bytes (at most ",
                            kMaxSymbolTableBytes, " are read)"));
    }
  }
  if (symtab.sh_entsize != sizeof(Sym))
    return corrupt(strCat(".dynsym entries are ", symtab.sh_entsize, " bytes, not ", sizeof(Sym)));

  std::vector<unsigned char> symbols(static_cast<size_t>(symtab.sh_size));
  std::vector<char> names(static_cast<size_t>(strtab.sh_size));
  if (!symbols.empty())
    if (absl::Status s = read(symtab.sh_offset, symbols.size(), symbols.data()); !s.ok()) return s;
  if (!names.empty())
    if (absl::Status s = read(strtab.sh_offset, names.size(), names.data()); !s.ok()) return s;

  // 0: not found; 1: found, but not an exported function; 2: exported.
  struct Wanted {
    const char* name;
    int state = 0;
  } wanted[] = {{BP_PLUGIN_QUERY_SYMBOL}, {BP_PLUGIN_INIT_SYMBOL}};
  const size_t count = symbols.size() / sizeof(Sym);
  for (size_t i = 1; i < count; ++i) {  // symbol 0 is the undefined symbol
    Sym sym;
    std::memcpy(&sym, symbols.data() + i * sizeof(Sym), sizeof sym);
    if (sym.st_name >= names.size()) continue;  // glibc would not find it either
    const char* name = names.data() + sym.st_name;
    const size_t room = names.size() - sym.st_name;
    const size_t length = strnlen(name, room);
    if (length == room) continue;  // runs past the table: no name to match
    for (Wanted& w : wanted) {
      if (std::string_view(name, length) != w.name) continue;
      if (sym.st_shndx == SHN_UNDEF) continue;  // an import of that name, not a definition
      const bool exported =
          (symBind(sym.st_info) == STB_GLOBAL || symBind(sym.st_info) == STB_WEAK ||
           symBind(sym.st_info) == STB_GNU_UNIQUE) &&
          (symVisibility(sym.st_other) == STV_DEFAULT || symVisibility(sym.st_other) == STV_PROTECTED);
      const bool function = symType(sym.st_info) == STT_FUNC || symType(sym.st_info) == STT_GNU_IFUNC;
      w.state = std::max(w.state, exported && function ? 2 : 1);
    }
  }
  for (const Wanted& w : wanted) {
    if (w.state == 0) return error(strCat("it is not a Backplane plugin: it does not export ", w.name, advice));
    if (w.state == 1)
      return error(
          strCat("it is not a Backplane plugin: it defines ", w.name, " but not as an exported function", advice));
  }
  return absl::OkStatus();
}

std::string fileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  char buf[32];
  std::snprintf(buf, sizeof buf, "of file type 0%o", static_cast<unsigned>(mode & S_IFMT));
  return buf;
}

absl::Status notRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      strCat("cannot load plugin '", path, "': it is ", fileTypeName(mode), ", not a regular file",
             S_ISDIR(mode) ? " (name a plugin file, or put the folder in BACKPLANE_PLUGIN_PATH)" : ""));
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::Status checkPluginImage(const std::string& path, uint64_t file_size, const ImageReader& read) {
  // Every read the checks make is within the image: the reader is told so.
  ImageReader bounded = [&](uint64_t offset, size_t size, void* out) -> absl::Status {
    if (!within(offset, size, file_size)) {
      return absl::InternalError(strCat("cannot load plugin '", path, "': the file check read bytes ", offset, "+",
                                        size, " of ", file_size, " (a bug in the check)"));
    }
    return read(offset, size, out);
  };
  return ImageCheck{path, file_size, bounded}.run();
}

absl::Status checkPluginImage(const std::string& path, std::string_view bytes) {
  return checkPluginImage(path, bytes.size(), [&](uint64_t offset, size_t size, void* out) {
    std::memcpy(out, bytes.data() + offset, size);
    return absl::OkStatus();
  });
}

absl::StatusOr<PluginFileFacts> checkPluginFile(const std::string& path) {
  auto failed = [&](int err) {
    return absl::InvalidArgumentError(strCat("cannot load plugin '", path, "': ", std::strerror(err)));
  };
  // stat() before open(), so that a device is not even opened; fstat()
  // after it decides, on what was opened.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode)) return notRegular(path, st.st_mode);
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return failed(errno);
  if (::fstat(fd.get(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode)) return notRegular(path, st.st_mode);
  PluginFileFacts facts;
  facts.size = static_cast<uint64_t>(st.st_size);
  facts.mode = st.st_mode;
  facts.owner = st.st_uid;
  facts.group = st.st_gid;
  absl::Status s = checkPluginImage(path, facts.size, [&](uint64_t offset, size_t size, void* out) -> absl::Status {
    auto* to = static_cast<char*>(out);
    while (size > 0) {
      ssize_t n = ::pread(fd.get(), to, size, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return failed(errno);
      if (n == 0) {
        return absl::InvalidArgumentError(
            strCat("cannot load plugin '", path, "': the file shrank while it was being checked; try again"));
      }
      to += n;
      offset += static_cast<uint64_t>(n);
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return facts;
}

// ------------------------------------------------------------------ trust

namespace {

// What lets someone other than the owner (and root) change the file or
// folder `st` describes; "" if nothing. See Note [Plugin trust].
TrustProblem problemOf(const std::string& path, const struct stat& st, bool sticky_exempt) {
  const uid_t me = ::geteuid();
  TrustProblem p;
  p.path = path;
  if (st.st_uid != 0 && st.st_uid != me) {
    p.what = strCat("is owned by another user (uid ", st.st_uid, "), who can change it");
    p.fix = strCat("have root or yourself own it (chown)");
    return p;
  }
  const bool sticky = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
  if (sticky && sticky_exempt) return {};
  const bool others = st.st_mode & S_IWOTH;
  const bool group = (st.st_mode & S_IWGRP) && st.st_gid != st.st_uid;
  if (!others && !group) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  p.what = strCat("is writable by ", others ? "every user" : strCat("group ", st.st_gid), " (mode ", mode, ")");
  p.fix = strCat("chmod ", others && group ? "go-w" : others ? "o-w" : "g-w", " '", path, "'");
  return p;
}

}  // namespace

std::optional<TrustProblem> trustProblem(const std::string& canonical, TrustTarget target,
                                         const PluginFileFacts* facts) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (facts) {
    st.st_mode = facts->mode;
    st.st_uid = facts->owner;
    st.st_gid = facts->group;
  } else if (::stat(canonical.c_str(), &st) != 0) {
    return std::nullopt;  // gone: loading it fails with its own reason
  }
  TrustProblem own = problemOf(canonical, st, /*sticky_exempt=*/target != TrustTarget::ScannedFolder);
  if (!own.what.empty()) return own;
  fs::path folder = fs::path(canonical).parent_path();
  for (;;) {
    if (::stat(folder.c_str(), &st) == 0) {
      TrustProblem p = problemOf(folder.string(), st, /*sticky_exempt=*/true);
      if (!p.what.empty()) return p;
    }
    if (!folder.has_relative_path()) break;  // the root
    folder = folder.parent_path();
  }
  return std::nullopt;
}

void warnOnce(const std::string& key, const std::string& line) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>();  // never destroyed: warnings may come during exit
  std::lock_guard<std::mutex> lock(mu);
  if (!seen->insert(key).second) return;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

TrustMode trustMode() {
  const char* value = std::getenv("BACKPLANE_PLUGIN_TRUST");
  const std::string_view v = value ? value : "";
  if (v == "strict") return TrustMode::Strict;
  if (!v.empty() && v != "warn") {
    warnOnce(strCat("BACKPLANE_PLUGIN_TRUST=", v),
             strCat("backplane: warning: BACKPLANE_PLUGIN_TRUST='", v,
                    "' is neither 'warn' nor 'strict'; plugins writable by others are loaded with a warning"));
  }
  return TrustMode::Warn;
}

}  // namespace backplane::plugin_detail
