// Fuzz target: ONNX node tests as the loader reads them (loadNodeTest in
// onnx_node_test.cc, Note [ONNX node tests]): a model.onnx and the protobuf
// tensors of one test_data_set, all of them untrusted files.
//
// The input is a sequence of sections, each a 4-byte little-endian length
// and that many bytes (the last one takes what is left when its length runs
// past the end): model.onnx, then input_0.pb, output_0.pb, input_1.pb,
// output_1.pb, ... They are written to a private temporary node-test folder
// and loaded. A test that loads must be consistent (every data set has a
// tensor or an omitted slot for each of the node's inputs and outputs, and
// every tensor's bytes are all readable); one that does not must fail with
// a status that says why. Anything else (a crash, a sanitizer report, an
// exception, a leak) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "backplane/conformance/onnx_node_test.h"

namespace {

namespace fs = std::filesystem;
namespace bonnx = backplane::conformance::onnx;

fs::path& testDir() {
  static fs::path dir;
  return dir;
}

void removeTestDir() {
  std::error_code ec;
  fs::remove_all(testDir().parent_path(), ec);
}

void writeFile(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "onnx_node_test_fuzzer: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::vector<std::string_view> sections(const uint8_t* data, size_t size) {
  std::vector<std::string_view> out;
  const char* p = reinterpret_cast<const char*>(data);
  while (size >= 4 && out.size() < 9) {
    uint32_t n;
    std::memcpy(&n, p, 4);
    p += 4;
    size -= 4;
    const size_t take = n < size ? n : size;
    out.emplace_back(p, take);
    p += take;
    size -= take;
  }
  return out;
}

// Every byte of every loaded tensor is read (ASan checks each read lies
// inside the tensor's allocation).
void touch(const backplane::Tensor& t) {
  const auto* bytes = static_cast<const volatile uint8_t*>(t.data_ptr());
  const size_t n = t.nbytes();
  uint8_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum = static_cast<uint8_t>(sum + bytes[i]);
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string pattern = (fs::temp_directory_path() / "backplane-onnx-fuzz-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("onnx_node_test_fuzzer: mkdtemp");
    std::abort();
  }
  testDir() = fs::path(pattern) / "test_fuzzed";
  fs::create_directories(testDir() / "test_data_set_0");
  std::atexit(removeTestDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = testDir();
  const fs::path set = dir / "test_data_set_0";
  // The previous input's files go first: each input stands alone.
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(set, ec)) fs::remove(e.path(), ec);
  std::vector<std::string_view> parts = sections(data, size);
  writeFile(dir / "model.onnx", parts.empty() ? std::string_view() : parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t k = (i - 1) / 2;
    writeFile(set / ((i % 2 == 1 ? "input_" : "output_") + std::to_string(k) + ".pb"), parts[i]);
  }

  absl::StatusOr<bonnx::NodeTest> test = bonnx::loadNodeTest(dir.string());
  if (!test.ok()) {
    if (test.status().message().empty()) {
      std::fprintf(stderr, "loadNodeTest failed with an empty message (code %d)\n",
                   static_cast<int>(test.status().code()));
      std::abort();
    }
    return 0;
  }
  for (const bonnx::NodeTest::DataSet& ds : test->data_sets) {
    if (ds.inputs.size() != test->inputs.size() || ds.outputs.size() != test->outputs.size()) {
      std::fprintf(stderr, "data set %s has %zu inputs and %zu outputs for a node with %zu and %zu\n", ds.name.c_str(),
                   ds.inputs.size(), ds.outputs.size(), test->inputs.size(), test->outputs.size());
      std::abort();
    }
    for (const auto& t : ds.inputs) {
      if (t) touch(*t);
    }
    for (const auto& t : ds.outputs) {
      if (t) touch(*t);
    }
  }
  for (const auto& [name, value] : test->attributes) {
    if (const auto* t = std::get_if<backplane::Tensor>(&value)) touch(*t);
  }
  return 0;
}
