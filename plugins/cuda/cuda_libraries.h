#pragma once
// The CUDA plugin's optional libraries (cuBLAS, NCCL) are opened with
// dlopen on first use, not linked: loading the plugin then costs what the
// plugin itself costs (libcublasLt alone takes ~60 ms to map and relocate),
// and a machine without them still loads the plugin. Note [Libraries opened
// on first use].
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace bp_cuda {

// The files to try for a library: `env`'s value alone when set, else
// `soname` through the loader's search (LD_LIBRARY_PATH, the plugin's
// RUNPATH, the system) and then in the CUDA toolkit the plugin was built
// against (BP_CUDA_TOOLKIT_LIBDIR).
inline std::vector<std::string> libraryCandidates(const char* env, const std::string& soname) {
  if (const char* path = std::getenv(env); path != nullptr && *path != '\0') return {path};
  std::vector<std::string> c{soname};
#ifdef BP_CUDA_TOOLKIT_LIBDIR
  c.push_back(std::string(BP_CUDA_TOOLKIT_LIBDIR) + "/" + soname);
#endif
  return c;
}

// The first of `candidates` that opens (RTLD_NOW | RTLD_LOCAL), or null with
// each file and the loader's reason appended to *tried (a line each).
// *opened names the file that opened.
inline void* openFirst(const std::vector<std::string>& candidates, std::string* tried, std::string* opened) {
  for (const std::string& c : candidates) {
    if (void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = c;
      return lib;
    }
    const char* why = dlerror();
    *tried += "\n  " + c + ": " + (why != nullptr ? why : "not found");
  }
  return nullptr;
}

// `name`'s library (libraryCandidates(env, soname)), or null with
// *unavailable = "<name> could not be opened (<install>):" and each file
// tried with the loader's reason. *opened names the file that opened.
inline void* openLibrary(const char* name, const char* env, const std::string& soname, const std::string& install,
                         std::string* opened, std::string* unavailable) {
  std::string tried;
  void* lib = openFirst(libraryCandidates(env, soname), &tried, opened);
  if (lib == nullptr) *unavailable = std::string(name) + " could not be opened (" + install + "):" + tried;
  return lib;
}

// slot = the function `name` of `lib`; false when it has none.
template <class F>
bool resolve(void* lib, const char* name, F& slot) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  return slot != nullptr;
}

}  // namespace bp_cuda
