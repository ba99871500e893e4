// The adapter slots a device backend keeps (model::LoraTable with runtime's LoraDeviceLayout), read as the CUDA kernels
// read them (kernels/cuda/lora/lora.h: the step's tokens in tiles of one slot, A and B of every part at fixed places,
// zero-padded to the table's rank, B times the adapter's scale), must add the deltas the host backend's slices add
// (runtime/lora.h's definition), for every projection of the tiny golden models with peft's adapters, on one rank and
// on each of two tensor-parallel ranks, and after an adapter with other targets moves into a slot.
//
// No GPU is needed: the "device" here is a stand-in, host memory under a backend that calls itself CUDA device 0, so
// that LoraTable takes its device path; the kernels' arithmetic is written out below from their contract. The CUDA
// kernels themselves are checked against the CPU by cuda_lora_test on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/file.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/lora.h"
#include "tensor/dtype.h"

namespace pagoda::model {
namespace {

constexpr Device kPretendDevice{DeviceKind::Cuda, 0};

// Host memory that says it is on CUDA device 0, handed out filled with 0xff bytes (NaN as floats, -1 as ints), as
// uninitialised device memory may hold anything: what the table does not write must not be read.
class PretendDeviceAllocator final : public Allocator {
  public:
    Device device() const override { return kPretendDevice; }
    void* allocate(size_t bytes, size_t alignment) override {
        void* p = host_allocator().allocate(bytes, alignment);
        if (p) std::memset(p, 0xff, bytes);
        return p;
    }
    void deallocate(void* ptr, size_t bytes) override { host_allocator().deallocate(ptr, bytes); }
};

// A backend on that memory: copies are memcpy; ops are the CPU's (Model::load asks them which ops exist; nothing here
// runs a forward on it).
class PretendDeviceBackend final : public Backend {
  public:
    Device device() const override { return kPretendDevice; }
    std::string name() const override { return "a stand-in device (host memory)"; }
    Ops& ops() override { return cpu_->ops(); }
    Allocator& allocator() override { return allocator_; }
    void copy(const Tensor& dst, const Tensor& src) override {
        PAGODA_CHECK(dst.nbytes() == src.nbytes() && dst.is_contiguous() && src.is_contiguous());
        std::memcpy(dst.data(), src.data(), dst.nbytes());
    }
    void synchronize() override {}

  private:
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();
    PretendDeviceAllocator allocator_;
};

// Every projection of a layer that may carry adapters, fused views included.
std::vector<const LinearWeight*> projections(const LayerWeights& l) {
    return {&l.attn.q,
            &l.attn.k,
            &l.attn.v,
            &l.attn.o,
            &l.attn.qkv,
            &l.dense.gate,
            &l.dense.up,
            &l.dense.down,
            &l.dense.gate_up,
            &l.moe.shared.gate,
            &l.moe.shared.up,
            &l.moe.shared.down,
            &l.moe.shared.gate_up,
            &l.delta.qkv,
            &l.delta.z,
            &l.delta.b,
            &l.delta.a,
            &l.delta.out,
            &l.delta.in_proj};
}

// y[t, :] += the delta of token t's slot, from the host backend's slices (runtime/lora.h), in double.
void host_deltas(const LoraAdapterSet& set, const std::vector<float>& x, int64_t K, const std::vector<int32_t>& slots,
                 std::vector<double>& y, int64_t N) {
    for (size_t t = 0; t < slots.size(); ++t) {
        if (slots[t] < 0) continue;
        for (const LoraSlice& s : set.slots[static_cast<size_t>(slots[t])]) {
            const int64_t r = s.a.dim(0), n_rows = s.b.dim(0);
            const float* a = s.a.data_as<float>();
            const float* b = s.b.data_as<float>();
            std::vector<double> u(static_cast<size_t>(r));
            for (int64_t j = 0; j < r; ++j)
                for (int64_t k = 0; k < K; ++k)
                    u[j] += static_cast<double>(x[t * K + k]) * a[j * K + k];
            for (int64_t n = 0; n < n_rows; ++n)
                for (int64_t j = 0; j < r; ++j)
                    y[t * N + s.row_offset + n] += s.scale * u[j] * b[n * r + j];
        }
    }
}

// The same by the kernels' contract over the device layout: shrink then expand, tile by tile.
void device_deltas(const LoraDeviceLayout& layout, const LoraTokenGroups& groups, const std::vector<float>& x,
                   std::vector<double>& y, int64_t N) {
    const int64_t R = layout.rank, K = layout.K, P = static_cast<int64_t>(layout.parts.size());
    std::vector<double> u(groups.order.size() * static_cast<size_t>(P * R));
    for (const LoraTile& tile : groups.tiles) {
        const std::byte* slot_base = layout.base + tile.slot * layout.slot_stride;
        for (int32_t i = 0; i < tile.count; ++i) {
            const int64_t row = tile.begin + i, t = groups.order[static_cast<size_t>(row)];
            for (int64_t p = 0; p < P; ++p) {
                const LoraDeviceLayout::Part& part = layout.parts[static_cast<size_t>(p)];
                const int32_t rank = *reinterpret_cast<const int32_t*>(slot_base + part.rank_offset);
                EXPECT_TRUE(rank >= 0 && rank <= R) << rank;
                const auto* a = reinterpret_cast<const uint16_t*>(slot_base + part.a_offset);  // bf16
                const auto* b = reinterpret_cast<const uint16_t*>(slot_base + part.b_offset);
                double* up = &u[static_cast<size_t>((row * P + p) * R)];
                for (int64_t j = 0; j < rank; ++j)
                    for (int64_t k = 0; k < K; ++k)
                        up[j] += static_cast<double>(x[t * K + k]) * bf16_to_f32(a[j * K + k]);
                for (int64_t n = 0; n < part.rows; ++n)
                    for (int64_t j = 0; j < rank; ++j)
                        y[t * N + part.row_offset + n] += up[j] * bf16_to_f32(b[n * R + j]);
            }
        }
    }
}

struct Case {
    std::string model;
    std::vector<std::string> adapters;  // installed as ids 1, 2, ...; then the first one's slot is given to the last
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.model;
}

class LoraDeviceLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(LoraDeviceLayoutTest, SlotsGiveTheHostDeltas) {
    const Case& c = GetParam();
    const std::string lora_dir = golden::dir("lora/" + c.model);
    if (!file_exists(lora_dir + "/reference.json")) GTEST_SKIP() << "no LoRA golden data";
    for (const int ranks : {1, 2}) {
        auto comms = make_cpu_communicators(ranks);
        for (int r = 0; r < ranks; ++r) {
            SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(ranks));
            Communicator& comm = ranks == 1 ? single_communicator() : *comms[static_cast<size_t>(r)];
            LoadOptions options;
            options.pack_weights = true;  // the fused projections a device backend runs
            auto cpu = make_cpu_backend();
            PretendDeviceBackend device;
            auto host_model = Model::load(golden::dir(c.model), *cpu, comm, options);
            ASSERT_TRUE(host_model.ok()) << host_model.message();
            auto device_model = Model::load(golden::dir(c.model), device, comm, options);
            ASSERT_TRUE(device_model.ok()) << device_model.message();
            constexpr int32_t kSlots = 3;
            ASSERT_TRUE((*host_model)->enable_lora(kSlots, 16).ok());
            ASSERT_TRUE((*device_model)->enable_lora(kSlots, 16).ok());
            // Before any adapter moves in, every slot reads as empty (ranks 0): the runner's warm-up names slot 0.
            for (const LayerWeights& layer : (*device_model)->weights().layers) {
                for (const LinearWeight* w : projections(layer)) {
                    if (w->lora == nullptr) continue;
                    const LoraDeviceLayout& layout = w->lora->device;
                    for (int32_t s = 0; s < kSlots; ++s) {
                        for (const LoraDeviceLayout::Part& part : layout.parts) {
                            const std::byte* at = layout.base + s * layout.slot_stride + part.rank_offset;
                            ASSERT_EQ(*reinterpret_cast<const int32_t*>(at), 0) << "slot " << s;
                        }
                    }
                }
            }
            std::vector<std::shared_ptr<const LoraAdapter>> adapters;
            for (const std::string& name : c.adapters) {
                auto a = (*host_model)->read_lora(lora_dir + "/" + name);
                ASSERT_TRUE(a.ok()) << a.message();
                adapters.push_back(*a);
            }
            const auto fetch = [&](int32_t id) { return Result<std::shared_ptr<const LoraAdapter>>(adapters[id - 1]); };
            const auto check = [&](std::span<const int32_t> ids, const char* when) {
                SCOPED_TRACE(when);
                for (Model* m : {host_model->get(), device_model->get()})
                    ASSERT_TRUE(m->lora()->make_resident(ids, fetch).ok());
                // 40 tokens: the first adapter's in two full tiles and a short one, the second's in one, base ones.
                std::vector<int32_t> token_ids(40);
                for (size_t t = 0; t < token_ids.size(); ++t)
                    token_ids[t] = t % 5 == 1 ? ids[ids.size() - 1] : t % 5 == 2 ? 0 : ids[0];
                std::vector<int32_t> slots;
                ASSERT_TRUE((*device_model)->lora()->map_tokens(token_ids, slots).ok());
                std::vector<int32_t> host_slots;
                ASSERT_TRUE((*host_model)->lora()->map_tokens(token_ids, host_slots).ok());
                ASSERT_EQ(slots, host_slots) << "both tables fill their slots alike";
                LoraTokenGroups groups;
                groups.build(slots, kSlots);
                const auto T = static_cast<int32_t>(slots.size());
                groups.tile(T, lora_tile_bound(T, kSlots));
                std::mt19937 rng(11);
                std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
                int touched = 0;
                const auto& host_layers = (*host_model)->weights().layers;
                const auto& device_layers = (*device_model)->weights().layers;
                for (size_t l = 0; l < host_layers.size(); ++l) {
                    const auto host_ws = projections(host_layers[l]), device_ws = projections(device_layers[l]);
                    for (size_t i = 0; i < host_ws.size(); ++i) {
                        const LinearWeight& hw = *host_ws[i];
                        const LinearWeight& dw = *device_ws[i];
                        ASSERT_EQ(hw.lora == nullptr, dw.lora == nullptr) << "layer " << l << " projection " << i;
                        if (hw.lora == nullptr) continue;
                        const int64_t K = hw.in_features(), N = hw.out_features();
                        const LoraDeviceLayout& layout = dw.lora->device;
                        ASSERT_EQ(layout.K, K);
                        ASSERT_NE(layout.base, nullptr);
                        // The kernels read B's rows as float4 (runtime/cuda/lora.cpp): every matrix 16-byte aligned.
                        ASSERT_EQ(layout.slot_stride % 256, 0u);
                        for (const LoraDeviceLayout::Part& part : layout.parts)
                            ASSERT_TRUE(part.a_offset % 256 == 0 && part.b_offset % 256 == 0);
                        std::vector<float> x(static_cast<size_t>(T * K));
                        for (float& v : x)
                            v = dist(rng);
                        std::vector<double> want(static_cast<size_t>(T * N)), got(want.size());
                        host_deltas(*hw.lora, x, K, host_slots, want, N);
                        device_deltas(dw.lora->device, groups, x, got, N);
                        double max_want = 0;
                        for (double v : want)
                            max_want = std::max(max_want, std::fabs(v));
                        // The slots hold bf16 (A, and B times the scale, each rounded once): within 1% of the
                        // largest delta. Elements off by more, or NaN (read from unwritten memory), are errors.
                        size_t off = 0;
                        for (size_t e = 0; e < want.size(); ++e)
                            off += !(std::fabs(want[e] - got[e]) <= 1e-2 * std::max(max_want, 1e-3));
                        EXPECT_EQ(off, 0u) << "layer " << l << " projection " << i;
                        touched += max_want > 0;
                    }
                }
                EXPECT_GT(touched, 0) << "no projection got a delta";
            };
            std::vector<int32_t> ids;
            for (size_t i = 0; i < adapters.size(); ++i)
                ids.push_back(static_cast<int32_t>(i) + 1);
            check(ids, "every adapter resident");
            // The first adapter's slot goes to the last one's twin (a new id): the parts the new one does not target
            // must read as untouched (rank 0), whatever the first one left there. (Only qwen3's case has adapters of
            // other targets and ranks: attn, r = 8 on q/k/v/o, gives way to regex, r = 2 on q and down; the others
            // put their one adapter back.)
            for (Model* m : {host_model->get(), device_model->get()})
                m->lora()->evict(1);
            adapters.push_back(adapters.back());
            const int32_t moved[] = {static_cast<int32_t>(adapters.size())};
            check(moved, "an adapter moved into a used slot");
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Peft, LoraDeviceLayoutTest,
                         ::testing::Values(Case{"qwen3", {"attn", "mlp_rslora", "regex"}}, Case{"qwen3_5", {"all"}},
                                           Case{"qwen3_next", {"mixed"}}, Case{"qwen3_moe", {"attn"}}),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.model; });

}  // namespace
}  // namespace pagoda::model
