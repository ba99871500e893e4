// The model's adapter table: `max_loras` slots, each holding one adapter's A and B matrices on the model's device,
// and one LoraAdapterSet per projection that LoRA may touch (LinearWeight::lora points at it; a fused q/k/v or
// gate/up view gets one set, each part's slices at its rows). Adapters come in by id, least recently used out when
// the slots are full; ids are mapped to slots per token for each step. An adapter comes in two ways: inside the step
// that needs it (make_resident), or paged in beside the steps before its requests run (stage on any thread, then
// place and settle: executor/lora_pager.h). Engine thread only (between steps), but for stage().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/arch/arch.h"
#include "model/lora_adapter.h"
#include "model/shard_plan.h"
#include "runtime/backend.h"
#include "runtime/lora.h"
#include "tensor/buffer.h"

namespace pagoda::model {

// Gives the adapter of an id (reading it again from disk if the host copy was dropped).
using LoraFetch = std::function<Result<std::shared_ptr<const LoraAdapter>>(int32_t id)>;

class LoraTable {
  public:
    // Points the projections of `weights` (after fuse_projections) at empty sets of `max_loras` slots. With a split
    // model (`plan` of N > 1 ranks) each adapter is cut as its projection is: a column-parallel projection (output
    // features split) keeps its rows of B, a row-parallel one (input features split) its columns of A, whose partial
    // delta then joins the projection's partial sum in the same all-reduce; replicated projections keep both whole.
    LoraTable(ModelWeights& weights, const ModelSpec& spec, const ShardPlan& plan, Backend& backend, int32_t max_loras,
              int64_t max_rank);

    // On a device backend, takes the slots' memory now (one block, each slot at the places its projections'
    // LoraDeviceLayout gives): room for an adapter of max_rank on every projection (this rank's share of each), so
    // that the KV pool, sized after this, leaves it free and no adapter fails to fit later. An error says how much
    // could not be had. Also a host buffer of one slot (page-locked on a GPU) that each adapter is put together in
    // before it goes to the device. Nothing to do on the CPU (adapters stay in host memory).
    Status reserve_slots();
    // The bytes of one slot on a device: every part's rank, then A [max_rank, K] and B [N, max_rank] in bf16 for
    // every projection (this rank's share), each at a 256-byte boundary.
    size_t slot_bytes() const { return slot_bytes_; }
    // Whether the slots are device memory (an adapter moves in as one image) rather than host slices.
    bool on_device() const { return backend_.device().kind != DeviceKind::Host; }

    // The modules an adapter may target (read_lora_adapter checks adapters against these).
    const LoraTargets& targets() const { return targets_; }
    int32_t max_loras() const { return static_cast<int32_t>(slots_.size()); }
    int64_t max_rank() const { return max_rank_; }

    // Makes the adapters of `ids` (non-zero, distinct, at most max_loras) resident, evicting the least recently used
    // others (those in `keep` last); a failure (too many ids, an adapter that cannot be fetched or uploaded) says
    // which. Waits for the copies of adapters being paged in first.
    Status make_resident(std::span<const int32_t> ids, const LoraFetch& fetch, std::span<const int32_t> keep = {});

    // Where the deltas of one projection's adapters go.
    struct Landing {
        LoraAdapterSet* set = nullptr;
        int64_t row_offset = 0;
        ShardRole role;   // of the projection: how this rank's share of an adapter on it is cut
        size_t part = 0;  // its place in set->device.parts
    };
    // This rank's share of one module of an adapter.
    struct Cut {
        const Landing* landing;
        Tensor a, b;
    };
    // An adapter put together for this table (stage), waiting to move into a slot (place).
    struct Staged {
        int32_t id = 0;
        std::shared_ptr<const LoraAdapter> adapter;
        OwnedWeights shards;  // this rank's cuts of its matrices, where a cut is a copy
        std::vector<Cut> cuts;
        const Buffer* image = nullptr;  // on a device: the slot's image, what one copy moves there (not owned)
    };
    // Paging in. stage(): adapter `id` put together on any thread: this rank's cuts and, on a device backend, its
    // slot's image written into `image` (slot_bytes() of host memory, page-locked for the copy to run beside the
    // steps; it must stay untouched until the adapter has arrived). place(): moves it into a free slot, else the least
    // recently used one whose adapter is not in `keep`; false when there is none (every slot kept or still being
    // filled). On a device its copy runs behind the steps queued so far and beside the next ones
    // (Backend::copy_behind); the adapter is resident once settle() has seen the copy arrive. On the host at once.
    // `threads`: the cores that write the image (0: all, as make_resident, whose step waits for it).
    Result<Staged> stage(int32_t id, std::shared_ptr<const LoraAdapter> adapter, Buffer* image,
                         unsigned threads = 0) const;
    bool place(Staged& staged, std::span<const int32_t> keep);
    // Makes the adapters whose copies have arrived resident (with `wait`, all of them, after waiting).
    void settle(bool wait);
    // Whether `id`'s copy into its slot is under way.
    bool filling(int32_t id) const;
    // The resident adapters' ids.
    std::vector<int32_t> resident_ids() const;
    // slots[t] = the slot of ids[t] (-1 for 0); every non-zero id must be resident.
    Status map_tokens(std::span<const int32_t> ids, std::vector<int32_t>& slots) const;
    // Frees the slot of `id`, if it has one (an unloaded adapter).
    void evict(int32_t id);
    bool resident(int32_t id) const { return slot_of(id) >= 0; }
    // Projections with an adapter set (a fused q/k/v, gate/up or delta-net input projection counts once).
    size_t num_sets() const { return sets_.size(); }

  private:
    struct Slot {
        int32_t id = 0;                        // 0: free
        Staged staged;                         // the adapter, its cuts
        std::unique_ptr<PendingCopy> filling;  // its copy to the device, until settle() has seen it arrive
        uint64_t last_used = 0;
    };
    int32_t slot_of(int32_t id) const;
    // A free slot, else the least recently used one not in `keep`, not being filled and (`spare_this_step`) not used
    // by make_resident's step (last_used < clock_); -1 when none.
    int32_t victim(std::span<const int32_t> keep, bool spare_this_step) const;
    // Writes an adapter's slot image: every part's rank (0 where it has none), then the matrices in bf16, on every
    // core.
    Status write_image(const std::vector<Cut>& cuts, float scale, std::byte* image, unsigned threads) const;
    // Moves a staged adapter into `slot`: its slices on the host; on a device its image, copied now or (`behind`)
    // beside the steps.
    void put(int32_t slot, Staged staged, bool behind);
    void clear(int32_t slot);

    Backend& backend_;
    ShardPlan plan_;
    int64_t max_rank_;
    size_t slot_bytes_ = 0;
    size_t header_bytes_ = 0;  // the parts' ranks at the start of each device slot
    LoraTargets targets_;
    std::map<std::string, Landing> landing_;  // model weight name -> where its deltas go
    std::vector<std::unique_ptr<LoraAdapterSet>> sets_;
    std::vector<Slot> slots_;
    Buffer device_;   // every slot's matrices on a device backend (reserve_slots)
    Buffer staging_;  // make_resident's slot image in host memory (page-locked on a GPU), copied to the device at once
    uint64_t clock_ = 0;
};

}  // namespace pagoda::model
