// Files: whole-file reads with clear errors, and read-only memory maps (RAII).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda {

// Reads a whole file; the error names the path and the reason (errno text).
Result<std::string> read_file(const std::string& path);
bool file_exists(const std::string& path);

// A read-only, private memory map of a whole file. Movable, not copyable; unmapped on destruction.
class MappedFile {
public:
    static Result<MappedFile> open(const std::string& path);
    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
    const std::string& path() const { return path_; }

private:
    void reset();
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

}  // namespace pagoda
