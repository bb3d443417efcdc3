// The replay driver of a fuzz target outside the fuzz build (Note [Fuzzing]
// in docs/design.md): runs LLVMFuzzerTestOneInput once on every file named, and
// on every file inside every folder named, in name order, and prints how
// many it ran. A folder with no inputs is an error: a corpus that vanished
// must not pass as a test. A crash or sanitizer report fails the process
// as it would under libFuzzer, with the input's path printed first.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool readFile(const std::filesystem::path& path, std::vector<uint8_t>& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n  runs the fuzz target once on every input\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    std::vector<std::filesystem::path> inputs;
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
      if (ec) {
        std::fprintf(stderr, "%s: cannot list %s: %s\n", argv[0], argv[i], ec.message().c_str());
        return 2;
      }
      if (inputs.empty()) {
        std::fprintf(stderr, "%s: the corpus folder %s has no inputs; check in at least one\n", argv[0], argv[i]);
        return 2;
      }
      std::sort(inputs.begin(), inputs.end());
    } else {
      inputs.push_back(arg);
    }
    std::vector<uint8_t> bytes;
    for (const auto& path : inputs) {
      if (!readFile(path, bytes)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], path.c_str());
        return 2;
      }
      // Printed before the run, so that a crash's report follows its input's name.
      std::fprintf(stderr, "input %s (%zu bytes)\n", path.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++ran;
    }
  }
  std::printf("replayed %zu inputs, none crashed\n", ran);
  return 0;
}
