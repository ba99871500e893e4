// A safetensors file as a list of editable entries, for tests that break or convert a golden checkpoint: read one,
// change names, dtypes, shapes or bytes, write it back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace pagoda::model::test {

struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string data;
};

inline std::vector<Entry> read_entries(const std::string& path) {
    auto file = SafetensorsFile::open(path);
    EXPECT_TRUE(file.ok()) << file.message();
    std::vector<Entry> out;
    if (!file.ok()) return out;
    for (const TensorView& t : file->tensors()) {
        out.push_back({t.name, std::string(storage_dtype_name(t.dtype)), t.shape,
                       std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
    return out;
}

inline void write_entries(const std::string& path, const std::vector<Entry>& entries) {
    std::string header = "{";
    size_t offset = 0;
    for (const Entry& e : entries) {
        if (header.size() > 1) header += ",";
        header += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
        for (size_t i = 0; i < e.shape.size(); ++i) {
            // Appended piece by piece: "," + std::to_string(...) trips GCC 12's -Wrestrict false positive when
            // this is inlined into some tests.
            if (i > 0) header += ',';
            header += std::to_string(e.shape[i]);
        }
        header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e.data.size()) + "]}";
        offset += e.data.size();
    }
    header += "}";
    while (header.size() % 8 != 0)
        header += ' ';
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const Entry& e : entries)
        out.write(e.data.data(), static_cast<std::streamsize>(e.data.size()));
}

}  // namespace pagoda::model::test
