// WireWriter / WireReader: the byte layout of the messages between the nodes of a multi-node group (the handshake in
// node_group.cpp, the steps in step_codec.cpp): little-endian integers and length-prefixed arrays. The
// reader never reads past its input; every read says whether it succeeded, so that a decoder turns short or garbled
// input into an error instead of undefined behaviour.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace pagoda {

// The nodes of a group run the same binary on the same kind of host; the integers are copied as they are in memory.
static_assert(std::endian::native == std::endian::little, "the node wire format assumes a little-endian host");

class WireWriter {
  public:
    // Appends to `out` (cleared first); the caller keeps the vector, so its capacity is reused across messages.
    explicit WireWriter(std::vector<std::byte>& out) : out_(out) { out_.clear(); }

    template <typename T>
    void put(T value) {
        static_assert(std::is_trivially_copyable_v<T>);
        append(&value, sizeof(T));
    }
    // A u32 element count, then the elements.
    template <typename T>
    void put_array(std::span<const T> values) {
        static_assert(std::is_trivially_copyable_v<T>);
        put(static_cast<uint32_t>(values.size()));
        append(values.data(), values.size_bytes());
    }
    void put_string(std::string_view s) { put_array(std::span<const char>(s.data(), s.size())); }

  private:
    void append(const void* data, size_t bytes) {
        const size_t at = out_.size();
        out_.resize(at + bytes);
        if (bytes > 0) std::memcpy(out_.data() + at, data, bytes);
    }
    std::vector<std::byte>& out_;
};

class WireReader {
  public:
    explicit WireReader(std::span<const std::byte> in) : in_(in) {}

    template <typename T>
    bool get(T& value) {
        static_assert(std::is_trivially_copyable_v<T>);
        if (in_.size() - at_ < sizeof(T)) return false;
        std::memcpy(&value, in_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return true;
    }
    // A u32 element count, then the elements; false when the count runs past the input or above `max_count`.
    template <typename T>
    bool get_array(std::vector<T>& values, size_t max_count = SIZE_MAX) {
        static_assert(std::is_trivially_copyable_v<T>);
        uint32_t count = 0;
        if (!get(count) || count > max_count || (in_.size() - at_) / sizeof(T) < count) return false;
        values.resize(count);
        if (count > 0) std::memcpy(values.data(), in_.data() + at_, count * sizeof(T));
        at_ += count * sizeof(T);
        return true;
    }
    bool get_string(std::string& s, size_t max_bytes = SIZE_MAX) {
        std::vector<char> chars;
        if (!get_array(chars, max_bytes)) return false;
        s.assign(chars.begin(), chars.end());
        return true;
    }
    bool at_end() const { return at_ == in_.size(); }

  private:
    std::span<const std::byte> in_;
    size_t at_ = 0;
};

}  // namespace pagoda
