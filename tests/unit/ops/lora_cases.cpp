// The op harness's multi-LoRA cases (runtime/lora.h): Ops::linear of a bf16 projection made of uneven parts (a fused
// q/k/v's), through a step whose tokens are spread over three adapter slots and the base model. Each adapter has its
// own rank and scale and touches some of the parts. The CPU adds the host slices; CUDA reads the same matrices from
// a device layout as model::LoraTable writes it (bf16, room for the table's rank R, B times the scale, each part's rank
// in the slot's header, 0 where the adapter leaves it alone) over the step's tiles of up to 16 tokens of one slot.
#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/align.h"
#include "ops/op_harness.h"
#include "runtime/lora.h"
#include "tensor/dtype.h"

namespace pagoda::op_harness {

OpCase lora_linear(int64_t T, int64_t K, int64_t R, std::vector<int64_t> parts, LoraCaseOptions options) {
    std::string name =
        "linear lora T=" + std::to_string(T) + " K=" + std::to_string(K) + " R=" + std::to_string(R) + " parts";
    for (int64_t p : parts)
        name += " " + std::to_string(p);
    if (options.one_slot) name += " one slot";
    if (options.zero_base) name += " zero base";
    const bool one_slot = options.one_slot;
    const float base_scale = options.zero_base ? 0.0f : 0.05f;
    return {name, "linear",
            [=](CaseRun& r) {
                const int64_t N = std::accumulate(parts.begin(), parts.end(), int64_t{0});
                const auto P = static_cast<int64_t>(parts.size());
                const Tensor x = r.act(Shape{T, K});
                auto& w = r.keep(LinearWeight::dense(r.dense(Shape{N, K}, DType::BF16, base_scale)));
                const Tensor y = r.out(Shape{T, N}, "y", kBf16Tol);
                constexpr int32_t kSlots = 3;
                const int64_t ranks[kSlots] = {std::min<int64_t>(5, R), std::min<int64_t>(12, R), R};
                const float scales[kSlots] = {0.5f, 2.0f, 1.0f};
                // Adapter 0 touches the even parts, adapter 1 every part, adapter 2 the odd ones (or the only one).
                const auto touches = [P](int32_t a, int64_t p) {
                    return a == 1 || (a == 0 && p % 2 == 0) || (a == 2 && (p % 2 == 1 || P == 1));
                };
                // The device layout: the parts' ranks, then per part A [R, K] and B [rows, R], each at a 256-byte
                // boundary.
                LoraDeviceLayout layout;
                layout.rank = R;
                layout.K = K;
                size_t bytes = 256;
                for (int64_t p = 0, offset = 0; p < P; offset += parts[static_cast<size_t>(p)], ++p) {
                    LoraDeviceLayout::Part part{offset, parts[static_cast<size_t>(p)], bytes, 0,
                                                static_cast<size_t>(p) * sizeof(int32_t)};
                    bytes += align_up(static_cast<size_t>(R * K) * sizeof(uint16_t), 256);  // bf16
                    part.b_offset = bytes;
                    bytes += align_up(static_cast<size_t>(part.rows * R) * sizeof(uint16_t), 256);
                    layout.parts.push_back(part);
                }
                layout.slot_stride = bytes;
                auto& set = r.keep(LoraAdapterSet{});
                set.slots.resize(kSlots);
                // Ranks 0 (no adapter on a part) unless written below; every matrix NaN where nothing is written, so
                // that a kernel reading past a part's rank, or a part its adapter leaves alone, poisons y.
                HostTensor image = HostTensor::zeros(DType::F32, Shape{static_cast<int64_t>(kSlots * bytes / 4)});
                auto* base = static_cast<std::byte*>(image.tensor.data());
                for (int32_t a = 0; a < kSlots; ++a) {
                    auto* h = reinterpret_cast<uint16_t*>(base + static_cast<size_t>(a) * bytes);
                    std::fill(h + 256 / sizeof(uint16_t), h + bytes / sizeof(uint16_t),
                              f32_to_bf16(std::numeric_limits<float>::quiet_NaN()));
                }
                for (int32_t a = 0; a < kSlots; ++a) {
                    const int64_t rank = ranks[a];
                    for (int64_t p = 0; p < P; ++p) {
                        if (!touches(a, p)) continue;
                        const LoraDeviceLayout::Part& part = layout.parts[static_cast<size_t>(p)];
                        // The same values on every backend: drawn in the same order whatever the backend.
                        HostTensor& A = r.keep(r.host_random(Shape{rank, K}, 0.2f));
                        HostTensor& B = r.keep(r.host_random(Shape{part.rows, rank}, 0.2f));
                        set.slots[static_cast<size_t>(a)].push_back(
                            LoraSlice{part.row_offset, A.tensor, B.tensor, scales[a]});
                        std::byte* slot = base + static_cast<size_t>(a) * bytes;
                        *reinterpret_cast<int32_t*>(slot + part.rank_offset) = static_cast<int32_t>(rank);
                        auto* da = reinterpret_cast<uint16_t*>(slot + part.a_offset);
                        auto* db = reinterpret_cast<uint16_t*>(slot + part.b_offset);
                        const float* ha = A.tensor.data_as<float>();
                        const float* hb = B.tensor.data_as<float>();
                        for (int64_t i = 0; i < rank * K; ++i)
                            da[i] = f32_to_bf16(ha[i]);
                        for (int64_t n = 0; n < part.rows; ++n)
                            for (int64_t j = 0; j < rank; ++j)
                                db[n * R + j] = f32_to_bf16(scales[a] * hb[n * rank + j]);
                    }
                }
                if (r.on_cuda()) {
                    const Tensor device = r.upload_dense(image);
                    layout.base = static_cast<const std::byte*>(device.data());
                    set.slots.assign(kSlots, {});  // as model::LoraTable leaves them on a device
                }
                set.device = std::move(layout);
                w.lora = &set;
                // One sequence of T tokens: every slot, more than a tile of slot 0 where T allows, and base tokens;
                // or (one_slot) every token on slot 0, as a decode step of one adapter's sequences has them.
                auto builder = std::make_unique<ForwardBatchBuilder>(16);
                std::vector<int32_t> table(static_cast<size_t>((T + 15) / 16));
                std::iota(table.begin(), table.end(), 0);
                builder->add_sequence(std::vector<int32_t>(static_cast<size_t>(T), 1), 0, table, 0,
                                      ForwardBatchBuilder::Logits::None);
                ForwardBatch& batch = r.batch(std::move(builder));
                auto& slots = r.keep(std::vector<int32_t>(static_cast<size_t>(T)));
                constexpr int32_t kPattern[] = {0, 0, 1, -1, 2, 0, 2};
                for (size_t t = 0; t < slots.size(); ++t)
                    slots[t] = one_slot ? 0 : kPattern[t % 7];
                batch.lora_slots = slots;
                batch.lora_slot_count = kSlots;
                r.set_flops(2.0 * T * N * K);
                return [=, &r, &w] { call_linear(r.ops(), x, w, y); };
            },
            1, /*needs_step=*/true};
}

}  // namespace pagoda::op_harness
