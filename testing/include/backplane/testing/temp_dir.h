#pragma once
// A temporary folder for a test (plugin folders, reports), removed with
// everything in it when the object goes.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace backplane::testing {

class TempDir {
 public:
  // A new, empty folder under the system's temporary directory, named
  // `<prefix>_<pid>_<n>`; an existing folder of that name is emptied first.
  explicit TempDir(const std::string& prefix) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace backplane::testing
