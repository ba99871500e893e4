// safetensors reader: header validation follows the reference implementation (huggingface/safetensors
// `Metadata::validate`): offsets sorted, contiguous, sized by shape × dtype, ending at the file's end.
#include "model/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "common/json.h"

namespace pagoda::model {
namespace {

// The reference implementation refuses headers above 100 MB; so do we (a bigger one is corrupt).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
    StorageDType dtype;
    std::string_view name;
    size_t size;
    bool floating;
};

constexpr DTypeInfo kDTypes[] = {
    {StorageDType::kBool, "BOOL", 1, false},      {StorageDType::kU8, "U8", 1, false},
    {StorageDType::kI8, "I8", 1, false},          {StorageDType::kI16, "I16", 2, false},
    {StorageDType::kU16, "U16", 2, false},        {StorageDType::kF16, "F16", 2, true},
    {StorageDType::kBF16, "BF16", 2, true},       {StorageDType::kI32, "I32", 4, false},
    {StorageDType::kU32, "U32", 4, false},        {StorageDType::kF32, "F32", 4, true},
    {StorageDType::kF64, "F64", 8, true},         {StorageDType::kI64, "I64", 8, false},
    {StorageDType::kU64, "U64", 8, false},        {StorageDType::kF8_E4M3, "F8_E4M3", 1, true},
    {StorageDType::kF8_E5M2, "F8_E5M2", 1, true},
};

const DTypeInfo& info(StorageDType dtype) {
    for (const auto& d : kDTypes)
        if (d.dtype == dtype) return d;
    return kDTypes[0];  // unreachable for valid enum values
}

std::string in_quotes(std::string_view s) {
    std::string out = "'";
    out += s;
    out += "'";
    return out;
}

Status tensor_error(std::string_view label, std::string_view name, const std::string& what) {
    return Status::error(std::string(label) + ": tensor " + in_quotes(name) + ": " + what);
}

// Reads a JSON value that must be a non-negative integer.
bool non_negative_int(const Json& v, uint64_t& out) {
    if (!v.is_int() || v.as_int() < 0) return false;
    out = static_cast<uint64_t>(v.as_int());
    return true;
}

struct Entry {
    TensorView view;
    uint64_t begin = 0, end = 0;
};

Result<Entry> parse_entry(std::string_view label, const std::string& name, const Json& desc) {
    Entry e;
    e.view.name = name;
    if (!desc.is_object())
        return tensor_error(label, name,
                            std::string("entry is a JSON ") + Json::type_name(desc.type()) +
                                ", expected an object with dtype, shape and data_offsets");
    const Json* dtype = desc.find("dtype");
    if (!dtype) return tensor_error(label, name, "missing \"dtype\"");
    if (!dtype->is_string()) return tensor_error(label, name, "\"dtype\" is not a string");
    if (!parse_storage_dtype(dtype->as_string(), e.view.dtype))
        return tensor_error(label, name,
                            "unknown dtype " + in_quotes(dtype->as_string()) +
                                " (known: BOOL U8 I8 I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64 "
                                "F8_E4M3 F8_E5M2)");
    const Json* shape = desc.find("shape");
    if (!shape) return tensor_error(label, name, "missing \"shape\"");
    if (!shape->is_array()) return tensor_error(label, name, "\"shape\" is not an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (const Json& d : shape->as_array()) {
        uint64_t dim = 0;
        if (!non_negative_int(d, dim) || dim > static_cast<uint64_t>(INT64_MAX))
            return tensor_error(label, name, "\"shape\" has an entry that is not a non-negative integer: " + d.dump());
        e.view.shape.push_back(static_cast<int64_t>(dim));
        if (__builtin_mul_overflow(numel, dim, &numel)) overflow = true;
    }
    const size_t elem = storage_dtype_size(e.view.dtype);
    uint64_t expected = 0;
    if (overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(elem), &expected))
        return tensor_error(label, name, "shape " + e.view.shape_string() + " is too large");
    const Json* offsets = desc.find("data_offsets");
    if (!offsets) return tensor_error(label, name, "missing \"data_offsets\"");
    if (!offsets->is_array() || offsets->size() != 2 || !non_negative_int(offsets->as_array()[0], e.begin) ||
        !non_negative_int(offsets->as_array()[1], e.end))
        return tensor_error(label, name,
                            "\"data_offsets\" must be [begin, end] with non-negative integers, got " + offsets->dump());
    if (e.end < e.begin)
        return tensor_error(label, name,
                            "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                "] are out of order (end before begin)");
    if (e.end - e.begin != expected)
        return tensor_error(label, name,
                            "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] hold " +
                                std::to_string(e.end - e.begin) + " bytes but shape " + e.view.shape_string() + " of " +
                                std::string(storage_dtype_name(e.view.dtype)) + " needs " + std::to_string(expected));
    e.view.nbytes = static_cast<size_t>(expected);
    return e;
}

}  // namespace

size_t storage_dtype_size(StorageDType dtype) {
    return info(dtype).size;
}
std::string_view storage_dtype_name(StorageDType dtype) {
    return info(dtype).name;
}
bool is_floating(StorageDType dtype) {
    return info(dtype).floating;
}

bool parse_storage_dtype(std::string_view name, StorageDType& out) {
    for (const auto& d : kDTypes) {
        if (d.name == name) {
            out = d.dtype;
            return true;
        }
    }
    return false;
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

std::string TensorView::shape_string() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

Result<SafetensorsContents> parse_safetensors(std::string_view bytes, std::string_view label) {
    const std::string where(label);
    if (bytes.size() < 8)
        return Status::error(where + ": file is " + std::to_string(bytes.size()) +
                             " bytes, too short for a safetensors header (truncated?)");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
        header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
    const uint64_t available = bytes.size() - 8;
    if (header_len > available)
        return Status::error(where + ": header length " + std::to_string(header_len) +
                             " runs past the end of the file (" + std::to_string(bytes.size()) +
                             " bytes; truncated or not a safetensors file)");
    if (header_len > kMaxHeaderBytes)
        return Status::error(where + ": header length " + std::to_string(header_len) + " exceeds the limit of " +
                             std::to_string(kMaxHeaderBytes) + " bytes");
    const std::string_view header_text = bytes.substr(8, header_len);
    if (header_text.empty() || header_text.front() != '{')
        return Status::error(where + ": header does not start with '{' (not a safetensors file?)");
    auto parsed = Json::parse(header_text, 64);
    if (!parsed.ok()) return Status::error(where + ": header is not valid JSON: " + parsed.message());
    const Json& header = parsed.value();
    if (!header.is_object()) return Status::error(where + ": header is not a JSON object");

    SafetensorsContents out;
    out.header_bytes = static_cast<size_t>(header_len);
    out.data_offset = 8 + out.header_bytes;
    const uint64_t data_size = available - header_len;
    const std::byte* data = reinterpret_cast<const std::byte*>(bytes.data()) + out.data_offset;

    std::vector<Entry> entries;
    std::unordered_set<std::string_view> seen;
    bool have_metadata = false;
    for (const auto& [name, desc] : header.as_object()) {
        if (name == "__metadata__") {
            if (have_metadata) return Status::error(where + ": \"__metadata__\" appears twice");
            have_metadata = true;
            if (!desc.is_object()) return Status::error(where + ": \"__metadata__\" is not an object");
            for (const auto& [k, v] : desc.as_object()) {
                if (!v.is_string())
                    return Status::error(where + ": \"__metadata__\" value for " + in_quotes(k) + " is not a string");
                out.metadata.emplace_back(k, v.as_string());
            }
            continue;
        }
        if (!seen.insert(name).second) return tensor_error(where, name, "appears twice in the header");
        PAGODA_ASSIGN_OR_RETURN(Entry e, parse_entry(where, name, desc));
        entries.push_back(std::move(e));
    }

    // Sort by position (ties: empty tensors first) and require the data to be tiled exactly.
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t cursor = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
        if (e.end > data_size)
            return tensor_error(where, e.view.name,
                                "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                    "] run past the end of the data (" + std::to_string(data_size) +
                                    " bytes; file truncated?)");
        if (e.begin < cursor)
            return tensor_error(where, e.view.name,
                                "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                    "] overlap tensor " + in_quotes(previous->view.name) + " (which ends at " +
                                    std::to_string(cursor) + ")");
        if (e.begin > cursor)
            return tensor_error(where, e.view.name,
                                "data_offsets begin at " + std::to_string(e.begin) +
                                    " but the previous tensor ends at " + std::to_string(cursor) +
                                    " (a gap in the data)");
        cursor = e.end;
        previous = &e;
    }
    if (cursor != data_size)
        return Status::error(where + ": tensors cover " + std::to_string(cursor) +
                             " bytes of data but the file holds " + std::to_string(data_size) +
                             " (trailing bytes or a missing tensor)");

    out.tensors.reserve(entries.size());
    for (Entry& e : entries) {
        e.view.data = data + e.begin;
        out.tensors.push_back(std::move(e.view));
    }
    return out;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
    SafetensorsFile f;
    PAGODA_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(f.contents_, parse_safetensors(f.file_.view(), path));
    f.by_name_.reserve(f.contents_.tensors.size());
    for (size_t i = 0; i < f.contents_.tensors.size(); ++i)
        f.by_name_.emplace(f.contents_.tensors[i].name, i);
    return f;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &contents_.tensors[it->second];
}

Status Checkpoint::add_file(SafetensorsFile file) {
    for (const TensorView& t : file.tensors()) {
        auto [it, inserted] = by_name_.emplace(t.name, &t);
        if (!inserted) {
            // Find which earlier file holds it, for the message.
            std::string other;
            for (const auto& f : files_)
                if (f.find(t.name)) other = f.path();
            return Status::error("tensor " + in_quotes(t.name) + " appears in both " + other + " and " + file.path());
        }
    }
    files_.push_back(std::move(file));
    return ok_status();
}

Result<Checkpoint> Checkpoint::from_memory(std::vector<TensorView> views, std::shared_ptr<const void> storage) {
    Checkpoint c;
    c.memory_views_ = std::move(views);
    c.memory_ = std::move(storage);
    for (const TensorView& t : c.memory_views_)
        if (!c.by_name_.emplace(t.name, &t).second)
            return Status::error("tensor " + in_quotes(t.name) + " given twice");
    c.finish();
    return c;
}

void Checkpoint::finish() {
    sorted_.clear();
    sorted_.reserve(by_name_.size());
    for (const auto& [name, view] : by_name_)
        sorted_.push_back(view);
    std::sort(sorted_.begin(), sorted_.end(),
              [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
}

const TensorView* Checkpoint::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
}

size_t Checkpoint::total_bytes() const {
    size_t n = 0;
    for (const TensorView* t : sorted_)
        n += t->nbytes;
    return n;
}

Result<Checkpoint> Checkpoint::open_files(const std::vector<std::string>& paths) {
    Checkpoint c;
    for (const std::string& p : paths) {
        PAGODA_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(p));
        PAGODA_RETURN_IF_ERROR(c.add_file(std::move(f)));
    }
    c.finish();
    return c;
}

Result<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    const fs::path root(dir);
    const fs::path index_path = root / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::is_regular_file(index_path, ec)) {
        const std::string index_name = index_path.string();
        PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(index_name));
        auto parsed = Json::parse(text);
        if (!parsed.ok()) return Status::error(index_name + ": " + parsed.message());
        const Json& index = parsed.value();
        const Json* weight_map = index.find("weight_map");
        if (!weight_map || !weight_map->is_object())
            return Status::error(index_name + ": missing or non-object \"weight_map\"");
        std::vector<std::string> shards;
        std::unordered_set<std::string> shard_set;
        for (const auto& [tensor, shard] : weight_map->as_object()) {
            if (!shard.is_string())
                return Status::error(index_name + ": weight_map entry for " + in_quotes(tensor) + " is not a string");
            const std::string& s = shard.as_string();
            const fs::path sp(s);
            if (s.empty() || sp.is_absolute() || s.find("..") != std::string::npos)
                return Status::error(index_name + ": weight_map entry for " + in_quotes(tensor) +
                                     " names an invalid shard file " + in_quotes(s));
            if (shard_set.insert(s).second) shards.push_back(s);
        }
        Checkpoint c;
        std::unordered_map<std::string, size_t> file_of_shard;
        for (const std::string& s : shards) {
            const std::string shard_path = (root / s).string();
            if (!fs::is_regular_file(shard_path, ec))
                return Status::error(index_name + " lists shard " + in_quotes(s) + " but " + shard_path +
                                     " does not exist");
            PAGODA_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(shard_path));
            PAGODA_RETURN_IF_ERROR(c.add_file(std::move(f)));
            file_of_shard.emplace(s, c.files_.size() - 1);
        }
        for (const auto& [tensor, shard] : weight_map->as_object()) {
            const SafetensorsFile& f = c.files_[file_of_shard.at(shard.as_string())];
            if (!f.find(tensor))
                return Status::error(index_name + " lists tensor " + in_quotes(tensor) + " in " + f.path() +
                                     " but that shard has no such tensor");
        }
        if (const Json* md = index.find("metadata")) c.index_metadata_json_ = md->dump();
        c.finish();
        return c;
    }
    const fs::path single = root / "model.safetensors";
    if (fs::is_regular_file(single, ec)) return open_files({single.string()});

    // Neither: take every *.safetensors file (e.g. consolidated checkpoints written by other tools).
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors")
            found.push_back(entry.path().string());
    }
    if (ec) return Status::error(dir + ": cannot list the directory: " + ec.message());
    if (found.empty())
        return Status::error(dir +
                             ": no safetensors weights (expected model.safetensors or "
                             "model.safetensors.index.json)");
    std::sort(found.begin(), found.end());
    return open_files(found);
}

}  // namespace pagoda::model
