// safetensors reader: hand-built files (8-byte little-endian header length + JSON + data), valid and
// malformed; every error must name the file and, where there is one, the tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

// Builds a file the way the format defines it: u64 LE header size, header, then `data`.
std::string build(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
        out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
}

std::string zeros(size_t n) {
    return std::string(n, '\0');
}

std::string parse_error(const std::string& bytes) {
    auto r = parse_safetensors(bytes, "test.safetensors");
    EXPECT_FALSE(r.ok()) << "expected an error";
    return r.ok() ? std::string() : r.message();
}

class TempDir {
  public:
    TempDir() {
        path_ =
            fs::temp_directory_path() / ("pagoda_st_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    std::string write(const std::string& name, const std::string& bytes) const {
        std::ofstream f(file(name), std::ios::binary);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return file(name);
    }
    const fs::path& path() const { return path_; }

  private:
    static inline int counter_ = 0;
    fs::path path_;
};

TEST(Safetensors, ParsesTensorsMetadataAndData) {
    // a: F32 [2] = {1.5, -2}; b: BF16 [1, 3]; header padded with spaces as the Python writer does.
    std::string data(8 + 6, '\0');
    const float a[2] = {1.5f, -2.0f};
    std::memcpy(data.data(), a, sizeof a);
    data[8] = 0x11, data[13] = 0x22;
    std::string header = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1,3],"data_offsets":[8,14]},)"
                         R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    while (header.size() % 8)
        header += ' ';
    const std::string bytes = build(header, data);
    auto r = parse_safetensors(bytes, "x.safetensors");
    ASSERT_TRUE(r.ok()) << r.message();
    const auto& c = r.value();
    ASSERT_EQ(c.tensors.size(), 2u);
    EXPECT_EQ(c.tensors[0].name, "a");  // data-offset order
    EXPECT_EQ(c.tensors[0].dtype, StorageDType::kF32);
    EXPECT_EQ(c.tensors[0].shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(c.tensors[0].nbytes, 8u);
    float got[2];
    std::memcpy(got, c.tensors[0].data, 8);
    EXPECT_EQ(got[0], 1.5f);
    EXPECT_EQ(got[1], -2.0f);
    EXPECT_EQ(c.tensors[1].name, "b");
    EXPECT_EQ(c.tensors[1].dtype, StorageDType::kBF16);
    EXPECT_EQ(c.tensors[1].numel(), 3);
    EXPECT_EQ(c.tensors[1].shape_string(), "[1, 3]");
    EXPECT_EQ(static_cast<unsigned char>(c.tensors[1].data[0]), 0x11);
    EXPECT_EQ(static_cast<unsigned char>(c.tensors[1].data[5]), 0x22);
    // Zero-copy: views point into the caller's bytes.
    EXPECT_EQ(reinterpret_cast<const char*>(c.tensors[0].data), bytes.data() + 8 + header.size());
    ASSERT_EQ(c.metadata.size(), 1u);
    EXPECT_EQ(c.metadata[0].first, "format");
    EXPECT_EQ(c.metadata[0].second, "pt");
    EXPECT_EQ(c.header_bytes, header.size());
}

TEST(Safetensors, AcceptsEveryDtypeWithItsSize) {
    const std::pair<const char*, size_t> dtypes[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2},     {"BF16", 2},    {"I32", 4},
        {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (const auto& [name, size] : dtypes) {
        const std::string header = std::string(R"({"t":{"dtype":")") + name + R"(","shape":[3],"data_offsets":[0,)" +
                                   std::to_string(3 * size) + "]}}";
        auto r = parse_safetensors(build(header, zeros(3 * size)), "x");
        ASSERT_TRUE(r.ok()) << name << ": " << r.message();
        EXPECT_EQ(storage_dtype_name(r.value().tensors[0].dtype), name);
        EXPECT_EQ(storage_dtype_size(r.value().tensors[0].dtype), size);
    }
}

TEST(Safetensors, ScalarsAndEmptyTensors) {
    const std::string header =
        R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F16","shape":[0,7],"data_offsets":[4,4]}})";
    auto r = parse_safetensors(build(header, zeros(4)), "x");
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_EQ(r.value().tensors.size(), 2u);
    for (const auto& t : r.value().tensors) {
        if (t.name == "s") {
            EXPECT_EQ(t.numel(), 1);
        }
        if (t.name == "e") {
            EXPECT_EQ(t.nbytes, 0u);
        }
    }
    // A header with no tensors at all and no data is a valid (empty) file.
    EXPECT_TRUE(parse_safetensors(build("{}", ""), "x").ok());
}

TEST(Safetensors, TruncatedBeforeHeaderLength) {
    const std::string msg = parse_error(std::string("\x10\0\0", 3));
    EXPECT_NE(msg.find("test.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
    EXPECT_NE(parse_error("").find("too short"), std::string::npos);
}

TEST(Safetensors, HeaderLengthBeyondFile) {
    std::string bytes = build(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(4));
    bytes[0] = static_cast<char>(0xff), bytes[1] = static_cast<char>(0xff);  // claims ~65 KB of header
    const std::string msg = parse_error(bytes);
    EXPECT_NE(msg.find("test.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("runs past the end of the file"), std::string::npos) << msg;
    // An absurd length (2^63) must not overflow anything either.
    std::string huge = bytes;
    for (int i = 0; i < 8; ++i)
        huge[i] = static_cast<char>(i == 7 ? 0x80 : 0);
    EXPECT_NE(parse_error(huge).find("runs past the end"), std::string::npos);
}

TEST(Safetensors, HeaderNotJson) {
    EXPECT_NE(parse_error(build("{\"t\": ", zeros(0))).find("not valid JSON"), std::string::npos);
    EXPECT_NE(parse_error(build("[1,2]", "")).find("does not start with '{'"), std::string::npos);
    EXPECT_NE(parse_error(build("", "")).find("does not start with '{'"), std::string::npos);
}

TEST(Safetensors, UnknownDtypeNamesFileAndTensor) {
    const std::string msg =
        parse_error(build(R"({"layer.w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", zeros(2)));
    EXPECT_NE(msg.find("test.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'layer.w'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown dtype 'Q4_K'"), std::string::npos) << msg;
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", zeros(2))).find("dtype"),
              std::string::npos);
}

TEST(Safetensors, NonIntegerShape) {
    for (const char* shape : {"[2.5]", "[\"2\"]", "[-1]", "[null]", "[[2]]", "3", "null"}) {
        const std::string header = std::string(R"({"w":{"dtype":"U8","shape":)") + shape + R"(,"data_offsets":[0,2]}})";
        const std::string msg = parse_error(build(header, zeros(2)));
        EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << shape << ": " << msg;
        EXPECT_NE(msg.find("shape"), std::string::npos) << shape << ": " << msg;
    }
}

TEST(Safetensors, MissingOrMalformedFields) {
    EXPECT_NE(parse_error(build(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", zeros(1))).find("missing \"dtype\""),
              std::string::npos);
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", zeros(1))).find("missing \"shape\""),
              std::string::npos);
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":"U8","shape":[1]}})", zeros(1))).find("missing \"data_offsets\""),
              std::string::npos);
    EXPECT_NE(
        parse_error(build(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", zeros(1))).find("data_offsets"),
        std::string::npos);
    EXPECT_NE(
        parse_error(build(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,-1]}})", zeros(1))).find("data_offsets"),
        std::string::npos);
    EXPECT_NE(parse_error(build(R"({"w":[1,2]})", "")).find("tensor 'w'"), std::string::npos);
}

TEST(Safetensors, OffsetsOutOfOrder) {
    const std::string msg = parse_error(build(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})", zeros(4)));
    EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of order"), std::string::npos) << msg;
}

TEST(Safetensors, OverlappingTensors) {
    const std::string msg = parse_error(build(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                              zeros(12)));
    EXPECT_NE(msg.find("test.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'b'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("overlap tensor 'a'"), std::string::npos) << msg;
}

TEST(Safetensors, OffsetsPastTheEnd) {
    const std::string msg = parse_error(build(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                              zeros(12)));  // truncated: 4 bytes of b are missing
    EXPECT_NE(msg.find("tensor 'b'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("run past the end"), std::string::npos) << msg;
}

TEST(Safetensors, SizeDoesNotMatchShape) {
    const std::string msg =
        parse_error(build(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}})", zeros(10)));
    EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs 12"), std::string::npos) << msg;
}

TEST(Safetensors, GapsAndTrailingBytesAreRejected) {
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", zeros(4))).find("gap"),
              std::string::npos);
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", zeros(5))).find("trailing"),
              std::string::npos);
}

TEST(Safetensors, ShapeOverflow) {
    const std::string msg = parse_error(
        build(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", zeros(4)));
    EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
}

TEST(Safetensors, DuplicateNamesAndBadMetadata) {
    // A repeated key: the last one wins (as in Python's json and serde's maps), so the data of the
    // first is uncovered and the file is rejected.
    EXPECT_NE(parse_error(build(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                zeros(2)))
                  .find("tensor 'w'"),
              std::string::npos);
    EXPECT_NE(parse_error(build(R"({"__metadata__":{"n":1}})", "")).find("__metadata__"), std::string::npos);
    EXPECT_NE(parse_error(build(R"({"__metadata__":[]})", "")).find("__metadata__"), std::string::npos);
}

TEST(SafetensorsFile, MapsAFileAndFindsTensors) {
    TempDir dir;
    const std::string path = dir.write(
        "m.safetensors",
        build(R"({"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", std::string("\x01\0\0\0\x02\0\0\0", 8)));
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    const TensorView* x = f.value().find("x");
    ASSERT_NE(x, nullptr);
    int32_t v[2];
    std::memcpy(v, x->data, 8);
    EXPECT_EQ(v[0], 1);
    EXPECT_EQ(v[1], 2);
    EXPECT_EQ(f.value().find("y"), nullptr);
    EXPECT_EQ(f.value().path(), path);
}

TEST(SafetensorsFile, ErrorsNameThePath) {
    TempDir dir;
    auto missing = SafetensorsFile::open(dir.file("nope.safetensors"));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("nope.safetensors"), std::string::npos) << missing.message();

    // A valid file cut short on disk.
    std::string bytes = build(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", zeros(16));
    bytes.resize(bytes.size() - 5);
    const std::string path = dir.write("cut.safetensors", bytes);
    auto cut = SafetensorsFile::open(path);
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.message().find(path), std::string::npos) << cut.message();
    EXPECT_NE(cut.message().find("tensor 'w'"), std::string::npos) << cut.message();

    const std::string empty = dir.write("empty.safetensors", "");
    auto e = SafetensorsFile::open(empty);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.message().find("empty.safetensors"), std::string::npos) << e.message();
}

std::string one_tensor(const std::string& name, size_t n_f32) {
    return build(R"({")" + name + R"(":{"dtype":"F32","shape":[)" + std::to_string(n_f32) + R"(],"data_offsets":[0,)" +
                     std::to_string(4 * n_f32) + "]}}",
                 zeros(4 * n_f32));
}

TEST(Checkpoint, SingleFile) {
    TempDir dir;
    dir.write("model.safetensors", one_tensor("model.norm.weight", 4));
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_TRUE(c.ok()) << c.message();
    ASSERT_EQ(c.value().tensors().size(), 1u);
    EXPECT_NE(c.value().find("model.norm.weight"), nullptr);
    EXPECT_EQ(c.value().total_bytes(), 16u);
}

TEST(Checkpoint, ShardedWithIndex) {
    TempDir dir;
    dir.write("model-00001-of-00002.safetensors", one_tensor("a", 2));
    dir.write("model-00002-of-00002.safetensors", one_tensor("b", 3));
    dir.write("model.safetensors.index.json",
              R"({"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
              R"("b":"model-00002-of-00002.safetensors"}})");
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_TRUE(c.ok()) << c.message();
    ASSERT_EQ(c.value().tensors().size(), 2u);
    EXPECT_EQ(c.value().tensors()[0]->name, "a");
    EXPECT_EQ(c.value().tensors()[1]->name, "b");
    EXPECT_EQ(c.value().files().size(), 2u);
    EXPECT_EQ(c.value().total_bytes(), 20u);
    EXPECT_EQ(c.value().index_metadata_json(), R"({"total_size":20})");
}

TEST(Checkpoint, TensorMissingFromItsShard) {
    TempDir dir;
    dir.write("s1.safetensors", one_tensor("a", 2));
    dir.write("model.safetensors.index.json",
              R"({"weight_map":{"a":"s1.safetensors","lost.weight":"s1.safetensors"}})");
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.message().find("'lost.weight'"), std::string::npos) << c.message();
    EXPECT_NE(c.message().find("s1.safetensors"), std::string::npos) << c.message();
    EXPECT_NE(c.message().find("no such tensor"), std::string::npos) << c.message();
}

TEST(Checkpoint, IndexErrors) {
    TempDir dir;
    dir.write("model.safetensors.index.json", R"({"weight_map":{"a":"gone.safetensors"}})");
    auto missing = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("gone.safetensors"), std::string::npos) << missing.message();

    dir.write("model.safetensors.index.json", R"({"weight_map":{"a":"../etc/passwd"}})");
    EXPECT_FALSE(Checkpoint::open_dir(dir.path().string()).ok());
    dir.write("model.safetensors.index.json", R"({"weight_map":{"a":5}})");
    EXPECT_FALSE(Checkpoint::open_dir(dir.path().string()).ok());
    dir.write("model.safetensors.index.json", R"({"nothing":1})");
    auto no_map = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(no_map.ok());
    EXPECT_NE(no_map.message().find("weight_map"), std::string::npos) << no_map.message();
    dir.write("model.safetensors.index.json", "{not json");
    auto bad = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("model.safetensors.index.json"), std::string::npos) << bad.message();
}

TEST(Checkpoint, DuplicateTensorAcrossShards) {
    TempDir dir;
    dir.write("s1.safetensors", one_tensor("a", 2));
    dir.write("s2.safetensors", one_tensor("a", 2));
    dir.write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.message().find("appears in both"), std::string::npos) << c.message();
}

TEST(Checkpoint, NoWeights) {
    TempDir dir;
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.message().find("no safetensors weights"), std::string::npos) << c.message();
}

TEST(Checkpoint, BadShardIsReportedWithItsPath) {
    TempDir dir;
    const std::string path =
        dir.write("model.safetensors", build(R"({"w":{"dtype":"X","shape":[1],"data_offsets":[0,1]}})", zeros(1)));
    auto c = Checkpoint::open_dir(dir.path().string());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.message().find(path), std::string::npos) << c.message();
    EXPECT_NE(c.message().find("tensor 'w'"), std::string::npos) << c.message();
}

}  // namespace
}  // namespace pagoda::model
