// safetensors checkpoints: a memory-mapped reader with zero-copy tensor views, strict header
// validation (a bad file is an error naming the file and the tensor, never a crash), and sharded
// checkpoints through model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/status.h"

namespace pagoda::model {

// The element types a safetensors file can declare (names as in the format: "BF16", "F8_E4M3", ...).
enum class StorageDType {
    kBool,
    kU8,
    kI8,
    kI16,
    kU16,
    kF16,
    kBF16,
    kI32,
    kU32,
    kF32,
    kF64,
    kI64,
    kU64,
    kF8_E4M3,
    kF8_E5M2,
};

size_t storage_dtype_size(StorageDType dtype);                       // bytes per element
std::string_view storage_dtype_name(StorageDType dtype);             // "BF16"
bool parse_storage_dtype(std::string_view name, StorageDType& out);  // false for an unknown name
bool is_floating(StorageDType dtype);                                // F16, BF16, F32, F64, F8_*

// One tensor as stored: a view into the mapped file (or the caller's buffer for parse_safetensors).
struct TensorView {
    std::string name;
    StorageDType dtype = StorageDType::kF32;
    std::vector<int64_t> shape;
    const std::byte* data = nullptr;  // first byte of the tensor's data
    size_t nbytes = 0;                // == numel() * storage_dtype_size(dtype)

    int64_t numel() const;
    std::string shape_string() const;  // "[4096, 2560]"
};

// The parsed contents of one safetensors file.
struct SafetensorsContents {
    std::vector<TensorView> tensors;                            // in data-offset order
    std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__" (string → string)
    size_t header_bytes = 0;  // the JSON header's length (the 8-byte prefix not included)
    size_t data_offset = 0;   // 8 + header_bytes
};

// Parses and validates a whole safetensors file held in memory (the fuzzing entry point).
// `label` names the file in error messages. Views point into `bytes`.
// Checks: 8-byte prefix present; header length within the file; header is a JSON object;
// each entry has a known dtype, a shape of non-negative integers and data_offsets [begin, end]
// with begin <= end, end - begin == numel * dtype size, no overlap, no gap, and the last one
// ending exactly at the end of the file (as the reference implementation requires).
Result<SafetensorsContents> parse_safetensors(std::string_view bytes, std::string_view label);

// One memory-mapped safetensors file. Movable; views stay valid while the object lives.
class SafetensorsFile {
  public:
    static Result<SafetensorsFile> open(const std::string& path);

    const std::string& path() const { return file_.path(); }
    std::span<const TensorView> tensors() const { return contents_.tensors; }
    const TensorView* find(std::string_view name) const;  // nullptr when absent
    const std::vector<std::pair<std::string, std::string>>& metadata() const { return contents_.metadata; }
    size_t file_size() const { return file_.size(); }

  private:
    MappedFile file_;
    SafetensorsContents contents_;
    std::unordered_map<std::string, size_t> by_name_;
};

// All tensors of a checkpoint: either one model.safetensors, or the shards listed in
// model.safetensors.index.json (weight_map: tensor name → shard file), or, with neither,
// every *.safetensors file in the directory. Tensor names must be unique across shards.
class Checkpoint {
  public:
    // Opens the checkpoint inside `dir` (a Hugging Face model directory).
    static Result<Checkpoint> open_dir(const std::string& dir);
    // Opens an explicit list of files (e.g. one file given on the command line).
    static Result<Checkpoint> open_files(const std::vector<std::string>& paths);
    // Tensors the caller made in memory (`storage` keeps their data alive), named, typed and shaped as a checkpoint's
    // would be: what `--load-format dummy` loads (dummy_checkpoint.h). An error for a name given twice.
    static Result<Checkpoint> from_memory(std::vector<TensorView> views, std::shared_ptr<const void> storage);

    const TensorView* find(std::string_view name) const;  // nullptr when absent
    // Every tensor, sorted by name.
    const std::vector<const TensorView*>& tensors() const { return sorted_; }
    std::span<const SafetensorsFile> files() const { return files_; }
    // The "metadata" object of the index file (e.g. total_size), as compact JSON; empty when none.
    const std::string& index_metadata_json() const { return index_metadata_json_; }
    size_t total_bytes() const;  // sum of tensor nbytes

  private:
    Status add_file(SafetensorsFile file);
    void finish();

    std::vector<SafetensorsFile> files_;
    std::vector<TensorView> memory_views_;  // from_memory's; their data lives in memory_
    std::shared_ptr<const void> memory_;
    std::unordered_map<std::string, const TensorView*> by_name_;
    std::vector<const TensorView*> sorted_;
    std::string index_metadata_json_;
};

}  // namespace pagoda::model
