#pragma once
// Reading a fuzz target's input as typed fields (the fuzz targets of
// dispatcher/fuzz/): each take<T>() consumes sizeof(T) bytes, and reads
// zero once the input is used up, so every input, however short, decodes to
// some value of every field and libFuzzer's mutations of a byte change one
// field. Works with any compiler (the replay build has no
// FuzzedDataProvider.h).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace backplane::fuzz {

class FieldReader {
 public:
  FieldReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  T take() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value{};
    const size_t n = sizeof(T) < size_ ? sizeof(T) : size_;
    if (n > 0) std::memcpy(&value, data_, n);
    data_ += n;
    size_ -= n;
    return value;
  }
  // A value in [0, n) (n > 0).
  uint32_t below(uint32_t n) { return take<uint8_t>() % n; }
  bool flag() { return (take<uint8_t>() & 1) != 0; }
  size_t remaining() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace backplane::fuzz
