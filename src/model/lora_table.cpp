#include "model/lora_table.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/align.h"
#include "common/check.h"
#include "model/parallel_copy.h"
#include "model/tensor_parallel.h"
#include "tensor/dtype.h"

namespace pagoda::model {

namespace {

constexpr std::string_view kWeightSuffix = ".weight";

std::string module_of(const std::string& weight) {
    return weight.substr(0, weight.size() - kWeightSuffix.size());
}

// The projections of one layer that a fused view may replace: the fused weight, then its parts in row order.
struct FusedGroup {
    LinearWeight* fused;
    std::vector<LinearWeight*> parts;
};

std::vector<FusedGroup> fused_groups(LayerWeights& l) {
    return {
        {&l.attn.qkv, {&l.attn.q, &l.attn.k, &l.attn.v}},
        {&l.dense.gate_up, {&l.dense.gate, &l.dense.up}},
        {&l.moe.shared.gate_up, {&l.moe.shared.gate, &l.moe.shared.up}},
        {&l.delta.in_proj, {&l.delta.qkv, &l.delta.z, &l.delta.b, &l.delta.a}},
    };
}

// Qwen3-Next's packed modules, as an adapter names them, over the split weights the model holds. `qkv_shape` is the
// whole in_proj_qkv's (the checkpoint's, not a tensor-parallel rank's shard): adapters are read whole, then cut.
void add_packed_targets(const ModelSpec& spec, const std::string& layer, const Shape& qkv_shape, LoraTargets& targets) {
    const PackedDeltaNetRows rows = packed_delta_net_rows(spec);
    const auto n_qkv = static_cast<size_t>(qkv_shape[0]);
    const int64_t K = qkv_shape[1];
    const auto take = [](const std::vector<int64_t>& all, size_t begin, size_t end) {
        return std::vector<int64_t>(all.begin() + static_cast<ptrdiff_t>(begin),
                                    all.begin() + static_cast<ptrdiff_t>(end));
    };
    const size_t hv = rows.ba.size() / 2;
    targets[layer + "in_proj_qkvz"] =
        LoraTarget{static_cast<int64_t>(rows.qkvz.size()),
                   K,
                   {{layer + "in_proj_qkv.weight", take(rows.qkvz, 0, n_qkv)},
                    {layer + "in_proj_z.weight", take(rows.qkvz, n_qkv, rows.qkvz.size())}}};
    targets[layer + "in_proj_ba"] = LoraTarget{static_cast<int64_t>(rows.ba.size()),
                                               K,
                                               {{layer + "in_proj_b.weight", take(rows.ba, 0, hv)},
                                                {layer + "in_proj_a.weight", take(rows.ba, hv, rows.ba.size())}}};
}

}  // namespace

LoraTable::LoraTable(ModelWeights& weights, const ModelSpec& spec, const ShardPlan& plan, Backend& backend,
                     int32_t max_loras, int64_t max_rank)
    : backend_(backend), plan_(plan), max_rank_(max_rank), slots_(static_cast<size_t>(max_loras)) {
    // Every rank-2 projection of the decoder layers, by checkpoint name (the stacked experts are rank 3; the LM head
    // and the embedding are not under layers.).
    const std::string layers = spec.weight_prefix + "layers.";
    std::unordered_map<LinearWeight*, std::string> names;
    std::unordered_map<std::string, ShardRole> roles;
    std::unordered_map<LinearWeight*, std::pair<int64_t, int64_t>> dims;  // (N, K) at this rank
    Status walked = visit_weights(weights, spec, [&](const WeightEntry& e) {
        if (e.linear == nullptr || !e.name.starts_with(layers) || !e.name.ends_with(kWeightSuffix) ||
            e.shape.rank() != 2)
            return ok_status();
        names[e.linear] = e.name;
        roles[e.name] = e.role;
        // A slot's room on this projection: A [r, K] and B [N, r] at the largest rank, at this rank's K or N.
        const WeightSlice cut = plan.size > 1 && e.role.splittable() ? plan.slice(e.role) : WeightSlice{};
        const int64_t N = cut.dim == SplitDim::kRows ? cut.length() : e.shape[0];
        const int64_t K = cut.dim == SplitDim::kColumns ? cut.length() : e.shape[1];
        dims[e.linear] = {N, K};
        if (e.source == WeightSource::kLinear) {
            targets_[module_of(e.name)] = LoraTarget{e.shape[0], e.shape[1], {{e.name, {}}}};
        } else if (e.name.ends_with(".in_proj_qkv.weight")) {  // built from Qwen3-Next's packed projections
            add_packed_targets(spec, e.name.substr(0, e.name.size() - std::string_view("in_proj_qkv.weight").size()),
                               e.shape, targets_);
        }
        return ok_status();
    });
    PAGODA_CHECK_MSG(walked.ok(), walked.message().c_str());  // the visitor never fails

    const auto new_set = [this](LinearWeight& w) {
        sets_.push_back(std::make_unique<LoraAdapterSet>());
        sets_.back()->slots.resize(slots_.size());
        w.lora = sets_.back().get();
        return sets_.back().get();
    };
    // A part of a set: where its deltas go, and its places in every device slot: its rank in the slot's header (one
    // int32 a part), its A then B after the header, each at a 256-byte boundary, one part after another.
    size_t matrix_bytes = 0, num_parts = 0;
    const auto add_part = [&](LoraAdapterSet* set, LinearWeight* w, int64_t row_offset) {
        const std::string& name = names.at(w);
        const auto [N, K] = dims.at(w);
        LoraDeviceLayout& layout = set->device;
        layout.rank = max_rank;
        layout.K = K;
        LoraDeviceLayout::Part part{row_offset, N, matrix_bytes, 0, num_parts++ * sizeof(int32_t)};
        matrix_bytes += align_up(static_cast<size_t>(max_rank * K) * sizeof(uint16_t), 256);
        part.b_offset = matrix_bytes;
        matrix_bytes += align_up(static_cast<size_t>(N * max_rank) * sizeof(uint16_t), 256);
        layout.parts.push_back(part);
        landing_[name] = Landing{set, row_offset, roles.at(name), layout.parts.size() - 1};
    };
    for (LayerWeights& layer : weights.layers) {
        for (FusedGroup& g : fused_groups(layer)) {
            if (!g.fused->defined()) continue;  // its parts run one by one: each gets its own set below
            LoraAdapterSet* set = new_set(*g.fused);
            int64_t offset = 0;
            for (LinearWeight* part : g.parts) {
                if (names.count(part)) add_part(set, part, offset);
                offset += part->out_features();
            }
        }
    }
    for (auto& [w, name] : names)
        if (!landing_.count(name)) add_part(new_set(*w), w, 0);
    // The header of ranks first, then the matrices.
    header_bytes_ = align_up(num_parts * sizeof(int32_t), 256);
    for (auto& set : sets_)
        for (LoraDeviceLayout::Part& part : set->device.parts) {
            part.a_offset += header_bytes_;
            part.b_offset += header_bytes_;
        }
    slot_bytes_ = header_bytes_ + matrix_bytes;
}

int32_t LoraTable::slot_of(int32_t id) const {
    for (size_t s = 0; s < slots_.size(); ++s)
        if (slots_[s].id == id && !slots_[s].filling) return static_cast<int32_t>(s);
    return -1;
}

bool LoraTable::filling(int32_t id) const {
    return std::any_of(slots_.begin(), slots_.end(), [id](const Slot& s) { return s.id == id && s.filling; });
}

std::vector<int32_t> LoraTable::resident_ids() const {
    std::vector<int32_t> ids;
    for (const Slot& s : slots_)
        if (s.id != 0 && !s.filling) ids.push_back(s.id);
    return ids;
}

void LoraTable::clear(int32_t slot) {
    // (A device slot keeps its bytes: no token maps to a free slot, and the next install rewrites the whole header of
    // ranks, so the old matrices are never read past the new ranks or under a rank of 0.)
    for (auto& set : sets_)
        set->slots[static_cast<size_t>(slot)].clear();
    slots_[static_cast<size_t>(slot)] = Slot{};
}

int32_t LoraTable::victim(std::span<const int32_t> keep, bool spare_this_step) const {
    int32_t victim = -1;
    for (size_t s = 0; s < slots_.size(); ++s) {
        const Slot& slot = slots_[s];
        if (slot.id == 0) return static_cast<int32_t>(s);
        if ((spare_this_step && slot.last_used == clock_) || slot.filling ||
            std::find(keep.begin(), keep.end(), slot.id) != keep.end())
            continue;
        if (victim < 0 || slot.last_used < slots_[static_cast<size_t>(victim)].last_used)
            victim = static_cast<int32_t>(s);
    }
    return victim;
}

Status LoraTable::reserve_slots() {
    if (backend_.device().kind == DeviceKind::Host || slot_bytes_ == 0) return ok_status();
    auto buffer = Buffer::allocate(backend_.allocator(), slot_bytes_ * slots_.size(), 256);
    if (!buffer.ok()) {
        return buffer.status().with_context("LoRA: " + std::to_string(slots_.size()) +
                                            " adapter slots (--max-loras) of " + std::to_string(slot_bytes_ >> 20) +
                                            " MiB each at rank " + std::to_string(max_rank_) + " (--max-lora-rank)");
    }
    device_ = std::move(buffer).value();
    // Where an adapter's slot is put together before its one copy to the device: page-locked where the backend
    // provides it. Filled with 0xff bytes (NaN as bf16) once, as the device's memory may hold anything.
    Allocator* pinned = pinned_allocator();
    auto staging = Buffer::allocate(pinned ? *pinned : host_allocator(), slot_bytes_, 256);
    if (!staging.ok()) return staging.status().with_context("LoRA: the host buffer of one adapter slot");
    staging_ = std::move(staging).value();
    std::memset(staging_.data(), 0xff, slot_bytes_);
    // Every slot's ranks 0 until an adapter moves in: a step may name an empty slot (the runner's warm-up does).
    std::vector<int32_t> zeros(header_bytes_ / sizeof(int32_t), 0);
    for (size_t s = 0; s < slots_.size(); ++s)
        backend_.copy(Tensor(static_cast<std::byte*>(device_.data()) + s * slot_bytes_, DType::I32,
                             Shape{static_cast<int64_t>(zeros.size())}, backend_.device()),
                      Tensor(zeros.data(), DType::I32, Shape{static_cast<int64_t>(zeros.size())}));
    for (auto& set : sets_) {
        set->device.base = static_cast<const std::byte*>(device_.data());
        set->device.slot_stride = slot_bytes_;
    }
    return ok_status();
}

Status LoraTable::write_image(const std::vector<Cut>& cuts, float scale, std::byte* image, unsigned threads) const {
    const int64_t R = max_rank_;
    // Every part's rank in this slot: 0 for the parts the adapter leaves alone (their old matrices are never read).
    auto* ranks = reinterpret_cast<int32_t*>(image);
    std::fill(ranks, ranks + header_bytes_ / sizeof(int32_t), 0);
    std::vector<bool> written(header_bytes_ / sizeof(int32_t), false);
    for (const Cut& c : cuts) {
        const LoraDeviceLayout& layout = c.landing->set->device;
        const LoraDeviceLayout::Part& part = layout.parts[c.landing->part];
        const size_t at = part.rank_offset / sizeof(int32_t);
        // (The host path would add both; a slot holds one A and B a part.)
        if (written[at]) return Status::error("two modules of the LoRA adapter land on one projection");
        written[at] = true;
        const int64_t r = c.a.dim(0);
        PAGODA_CHECK_MSG(c.a.dtype() == DType::F32 && c.a.is_contiguous() && c.a.dim(1) == layout.K && r <= R &&
                             c.b.dtype() == DType::F32 && c.b.is_contiguous() && c.b.dim(0) == part.rows &&
                             c.b.dim(1) == r,
                         "a LoRA adapter's matrices do not fit their slot");
        ranks[at] = static_cast<int32_t>(r);
    }
    // The matrices in bf16 on every core (a rank-16 adapter on every projection of Qwen3-8B is 44M values): each
    // part's A [r, K], its first r rows; its B [rows, R] times the scale, each row's r values then zeros. What the
    // image holds past a part's rank, or on a part of rank 0, is never read.
    parallel_for(
        cuts.size() * 2,
        [&](size_t i) {
            const Cut& c = cuts[i / 2];
            const LoraDeviceLayout::Part& part = c.landing->set->device.parts[c.landing->part];
            const int64_t r = c.a.dim(0);
            if (i % 2 == 0) {
                const float* a = c.a.data_as<float>();
                auto* out = reinterpret_cast<uint16_t*>(image + part.a_offset);
                for (int64_t k = 0; k < c.a.numel(); ++k)
                    out[k] = f32_to_bf16(a[k]);
                return;
            }
            const float* b = c.b.data_as<float>();
            auto* out = reinterpret_cast<uint16_t*>(image + part.b_offset);
            for (int64_t n = 0; n < part.rows; ++n) {
                for (int64_t j = 0; j < r; ++j)
                    out[n * R + j] = f32_to_bf16(scale * b[n * r + j]);
                std::fill(out + n * R + r, out + (n + 1) * R, uint16_t{0});
            }
        },
        threads);
    return ok_status();
}

Result<LoraTable::Staged> LoraTable::stage(int32_t id, std::shared_ptr<const LoraAdapter> adapter, Buffer* image,
                                           unsigned threads) const {
    Staged staged;
    staged.id = id;
    // This rank's share of each module: B's rows of a column-parallel projection, A's columns of a row-parallel one.
    for (const LoraModule& m : adapter->modules) {
        const auto it = landing_.find(m.weight);
        PAGODA_CHECK_MSG(it != landing_.end(), "an adapter read against this model targets a weight it lacks");
        Cut c{&it->second, m.a, m.b};
        const ShardRole& role = it->second.role;
        if (plan_.size > 1 && role.split != Split::kReplicated) {
            if (!role.splittable())  // (the projections here are rank 2: never the vocabulary or stacked experts)
                return Status::error("LoRA adapter " + adapter->path + ": " + m.weight + " (" + describe(role) +
                                     ") cannot be split for tensor parallelism");
            Tensor& side = role.split == Split::kRows ? c.b : c.a;
            auto shard = cut_tensor(side, plan_.slice(role), staged.shards);
            if (!shard.ok()) return shard.status().with_context("LoRA adapter " + adapter->path + ": " + m.weight);
            side = std::move(shard).value();
        }
        staged.cuts.push_back(std::move(c));
    }
    if (on_device()) {
        if (!device_.data()) return Status::error("LoRA adapter slots were not reserved on the device");
        PAGODA_CHECK_MSG(image != nullptr && image->size() >= slot_bytes_, "a LoRA slot image needs slot_bytes()");
        PAGODA_RETURN_IF_ERROR(write_image(staged.cuts, adapter->scale, static_cast<std::byte*>(image->data()), threads)
                                   .with_context("LoRA adapter " + adapter->path));
        staged.image = image;
    }
    staged.adapter = std::move(adapter);
    return staged;
}

void LoraTable::put(int32_t slot, Staged staged, bool behind) {
    clear(slot);
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (!on_device()) {
        for (const Cut& c : staged.cuts)
            c.landing->set->slots[static_cast<size_t>(slot)].push_back(
                LoraSlice{c.landing->row_offset, c.a, c.b, staged.adapter->scale});
    } else {
        // One copy of the whole slot from page-locked memory, at the bus's speed.
        const auto bytes = static_cast<int64_t>(slot_bytes_);
        const Tensor dst(static_cast<std::byte*>(device_.data()) + static_cast<size_t>(slot) * slot_bytes_, DType::U8,
                         Shape{bytes}, backend_.device());
        const Tensor src(const_cast<void*>(staged.image->data()), DType::U8, Shape{bytes});
        if (behind) {
            s.filling = backend_.copy_behind(dst, src);
        } else {
            backend_.copy(dst, src);
        }
        staged.image = nullptr;  // (the image's owner may reuse it once the copy has arrived)
    }
    s.id = staged.id;
    s.staged = std::move(staged);
    s.last_used = clock_;
}

bool LoraTable::place(Staged& staged, std::span<const int32_t> keep) {
    if (slot_of(staged.id) >= 0 || filling(staged.id)) return true;  // (already there or on its way)
    const int32_t slot = victim(keep, /*spare_this_step=*/false);
    if (slot < 0) return false;
    put(slot, std::move(staged), /*behind=*/true);
    return true;
}

void LoraTable::settle(bool wait) {
    for (Slot& s : slots_) {
        if (!s.filling) continue;
        if (wait) s.filling->wait();
        if (wait || s.filling->arrived()) s.filling.reset();
    }
}

Status LoraTable::make_resident(std::span<const int32_t> ids, const LoraFetch& fetch, std::span<const int32_t> keep) {
    if (ids.size() > slots_.size())
        return Status::error("a step uses " + std::to_string(ids.size()) + " LoRA adapters; --max-loras is " +
                             std::to_string(slots_.size()));
    settle(/*wait=*/false);
    // An adapter of the step still on its way, or one that must come in now while others are: wait for the copies
    // (then every slot but this step's may be taken).
    if (std::any_of(ids.begin(), ids.end(), [this](int32_t id) { return slot_of(id) < 0; })) settle(/*wait=*/true);
    ++clock_;
    for (int32_t id : ids)
        if (const int32_t s = slot_of(id); s >= 0) slots_[static_cast<size_t>(s)].last_used = clock_;
    for (int32_t id : ids) {
        if (slot_of(id) >= 0) continue;
        // A free slot, else the least recently used one this step does not need (one in `keep` only if it must).
        int32_t slot = victim(keep, /*spare_this_step=*/true);
        if (slot < 0) slot = victim({}, /*spare_this_step=*/true);
        PAGODA_CHECK(slot >= 0);  // ids.size() <= slots
        auto adapter = fetch(id);
        if (!adapter.ok()) return adapter.status();
        auto staged = stage(id, std::move(adapter).value(), &staging_);
        if (!staged.ok()) return staged.status();
        put(slot, std::move(staged).value(), /*behind=*/false);
    }
    return ok_status();
}

Status LoraTable::map_tokens(std::span<const int32_t> ids, std::vector<int32_t>& slots) const {
    slots.resize(ids.size());
    int32_t last_id = 0, last_slot = -1;  // tokens of one sequence come together
    for (size_t t = 0; t < ids.size(); ++t) {
        if (ids[t] != last_id) {
            last_id = ids[t];
            last_slot = last_id == 0 ? -1 : slot_of(last_id);
            if (last_id != 0 && last_slot < 0)
                return Status::error("LoRA adapter " + std::to_string(last_id) + " is not resident");
        }
        slots[t] = ids[t] == 0 ? -1 : last_slot;
    }
    return ok_status();
}

void LoraTable::evict(int32_t id) {
    if (const int32_t s = slot_of(id); s >= 0) clear(s);
}

}  // namespace pagoda::model
