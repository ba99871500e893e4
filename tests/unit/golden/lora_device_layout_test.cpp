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
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "executor/lora_pager.h"
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
// runs a forward on it). With hold_copies, a copy_behind lands only when the test lets it (release_copies) or someone
// waits for it, as a copy on a second stream lands when the GPU gets to it: until then the slot holds what it held.
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
    std::unique_ptr<PendingCopy> copy_behind(const Tensor& dst, const Tensor& src) override {
        ++copies_behind;
        if (!hold_copies) return Backend::copy_behind(dst, src);
        return std::make_unique<HeldCopy>(*this, dst, src);
    }
    void synchronize() override {}
    void release_copies() { released_ = true; }

    bool hold_copies = false;
    int copies_behind = 0;

  private:
    class HeldCopy final : public PendingCopy {
      public:
        HeldCopy(PretendDeviceBackend& b, const Tensor& dst, const Tensor& src) : b_(b), dst_(dst), src_(src) {}
        ~HeldCopy() override { wait(); }
        bool arrived() override {
            if (b_.released_) wait();
            return done_;
        }
        void wait() override {
            if (!done_) b_.copy(dst_, src_);
            done_ = true;
        }

      private:
        PretendDeviceBackend& b_;
        Tensor dst_, src_;
        bool done_ = false;
    };

    std::unique_ptr<Backend> cpu_ = make_cpu_backend();
    PretendDeviceAllocator allocator_;
    bool released_ = false;
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

// Every projection's deltas from `device`'s slots, by the kernels' contract, equal those of `host`'s slices, for 40
// tokens of the adapters `ids` (resident in both tables, each in its own slots) and of the base model.
void expect_same_deltas(Model& host, Model& device, std::span<const int32_t> ids, int32_t num_slots) {
    // 40 tokens: the first adapter's in two full tiles and a short one, the last one's in one, base ones.
    std::vector<int32_t> token_ids(40);
    for (size_t t = 0; t < token_ids.size(); ++t)
        token_ids[t] = t % 5 == 1 ? ids[ids.size() - 1] : t % 5 == 2 ? 0 : ids[0];
    std::vector<int32_t> slots;
    ASSERT_TRUE(device.lora()->map_tokens(token_ids, slots).ok());
    std::vector<int32_t> host_slots;
    ASSERT_TRUE(host.lora()->map_tokens(token_ids, host_slots).ok());
    for (size_t t = 0; t < slots.size(); ++t)
        ASSERT_EQ(slots[t] < 0, host_slots[t] < 0) << "token " << t;
    LoraTokenGroups groups;
    groups.build(slots, num_slots);
    const auto T = static_cast<int32_t>(slots.size());
    groups.tile(T, lora_tile_bound(T, num_slots));
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    int touched = 0;
    const auto& host_layers = host.weights().layers;
    const auto& device_layers = device.weights().layers;
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
            // The slots hold bf16 (A, and B times the scale, each rounded once): within 1% of the largest delta.
            // Elements off by more, or NaN (read from unwritten memory), are errors.
            size_t off = 0;
            for (size_t e = 0; e < want.size(); ++e)
                off += !(std::fabs(want[e] - got[e]) <= 1e-2 * std::max(max_want, 1e-3));
            EXPECT_EQ(off, 0u) << "layer " << l << " projection " << i;
            touched += max_want > 0;
        }
    }
    EXPECT_GT(touched, 0) << "no projection got a delta";
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
                expect_same_deltas(**host_model, **device_model, ids, kSlots);
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

// Two cold adapters asked for while one slot is free (the other taken by a running adapter): the first brought in is
// not evicted for the second while its request keeps asking, so it becomes ready and stays so (the pager kept only
// the scheduled steps' adapters, and the two took the free slot from each other at every step: a reviewer's
// reproduction, 200 copies in 200 steps). Each step here asks, schedules and runs as the engine does with async
// scheduling (the copies land during the step).
TEST(LoraPagerTest, TwoColdAdaptersDoNotTakeOneSlotFromEachOther) {
    const std::string lora_dir = golden::dir("lora/qwen3");
    if (!file_exists(lora_dir + "/reference.json")) GTEST_SKIP() << "no LoRA golden data";
    LoadOptions options;
    options.pack_weights = true;
    PretendDeviceBackend device;
    auto model = Model::load(golden::dir("qwen3"), device, single_communicator(), options);
    ASSERT_TRUE(model.ok()) << model.message();
    ASSERT_TRUE((*model)->enable_lora(2, 16).ok());
    std::vector<std::shared_ptr<const LoraAdapter>> adapters;
    for (const char* name : {"attn", "mlp_rslora", "regex"}) {
        auto a = (*model)->read_lora(lora_dir + "/" + name);
        ASSERT_TRUE(a.ok()) << a.message();
        adapters.push_back(*a);
    }
    LoraTable& table = *(*model)->lora();
    executor::LoraPager pager(table,
                              [&](int32_t id) { return Result<std::shared_ptr<const LoraAdapter>>(adapters[id - 1]); });
    const std::vector<int32_t> running = {1};
    ASSERT_TRUE(pager.prepare(running).ok());  // adapter 1 installed by its first step
    int ready_at = -1;
    for (int step = 0; step < 200 && ready_at < 0; ++step) {
        const bool two = pager.ready(2), three = pager.ready(3);
        if (two || three) ready_at = step;
        pager.in_use(running);
        ASSERT_TRUE(pager.prepare(running).ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GE(ready_at, 0) << "neither cold adapter became ready in 200 steps";
    EXPECT_EQ(pager.paged_in(), 1);
    // The one that came in stays while its request keeps asking.
    const int32_t in = pager.ready(2) ? 2 : 3;
    for (int step = 0; step < 20; ++step) {
        EXPECT_TRUE(pager.ready(in)) << "step " << step;
        (void)pager.ready(in == 2 ? 3 : 2);
        pager.in_use(running);
        ASSERT_TRUE(pager.prepare(running).ok());
    }
    EXPECT_TRUE(table.resident(1));
}

// A gate the test opens: fetches of the pager's thread wait at it.
class Gate {
  public:
    void open() {
        std::lock_guard lock(mu_);
        open_ = true;
        cv_.notify_all();
    }
    void close() {
        std::lock_guard lock(mu_);
        open_ = false;
    }
    void pass() {
        std::unique_lock lock(mu_);
        ++waiting_;
        cv_.notify_all();
        cv_.wait(lock, [this] { return open_; });
        --waiting_;
    }
    // Waits until someone waits at the gate.
    void await_visitor() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return waiting_ > 0; });
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = false;
    int waiting_ = 0;
};

// Paging an adapter in beside the steps (executor/lora_pager.h) on the stand-in device: the steps before it arrives
// run without it (while its fetch is held, and while its copy is on its way, which writes nothing before it lands);
// it is resident only once the copy has landed, and then gives the host deltas; the slots of adapters that steps
// scheduled or running use are not taken; a step that needs an adapter the pager is staging waits for it, and one
// that needs an adapter no one asked for installs it itself.
TEST(LoraPagerTest, PagesAdaptersInBesideTheSteps) {
    const std::string lora_dir = golden::dir("lora/qwen3");
    if (!file_exists(lora_dir + "/reference.json")) GTEST_SKIP() << "no LoRA golden data";
    LoadOptions options;
    options.pack_weights = true;
    auto cpu = make_cpu_backend();
    PretendDeviceBackend device;
    device.hold_copies = true;
    auto host_model = Model::load(golden::dir("qwen3"), *cpu, single_communicator(), options);
    ASSERT_TRUE(host_model.ok()) << host_model.message();
    auto device_model = Model::load(golden::dir("qwen3"), device, single_communicator(), options);
    ASSERT_TRUE(device_model.ok()) << device_model.message();
    constexpr int32_t kSlots = 2;
    ASSERT_TRUE((*host_model)->enable_lora(kSlots, 16).ok());
    ASSERT_TRUE((*device_model)->enable_lora(kSlots, 16).ok());
    std::vector<std::shared_ptr<const LoraAdapter>> adapters;
    for (const char* name : {"attn", "mlp_rslora", "regex"}) {
        auto a = (*host_model)->read_lora(lora_dir + "/" + name);
        ASSERT_TRUE(a.ok()) << a.message();
        adapters.push_back(*a);
    }
    const auto host_fetch = [&](int32_t id) { return Result<std::shared_ptr<const LoraAdapter>>(adapters[id - 1]); };
    Gate gate;
    std::atomic<int> fetches{0};
    LoraTable& table = *(*device_model)->lora();
    executor::LoraPager pager(table, [&](int32_t id) {
        ++fetches;
        gate.pass();
        return host_fetch(id);
    });
    // Steps until `done` holds (each prepare() is a step's), at most 5 s.
    const auto steps_until = [&](const std::function<bool()>& done) {
        for (int i = 0; i < 5000 && !done(); ++i) {
            ASSERT_TRUE(pager.prepare({}).ok());
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(done());
    };
    const auto ranks_of_slot = [&](int32_t slot) {
        int64_t sum = 0;
        for (const LayerWeights& layer : (*device_model)->weights().layers)
            for (const LinearWeight* w : projections(layer))
                if (w->lora != nullptr)
                    for (const LoraDeviceLayout::Part& part : w->lora->device.parts)
                        sum += *reinterpret_cast<const int32_t*>(w->lora->device.base +
                                                                 slot * w->lora->device.slot_stride + part.rank_offset);
        return sum;
    };

    EXPECT_FALSE(pager.ready(1));
    gate.await_visitor();  // the pager's thread is fetching adapter 1, held at the gate
    for (int step = 0; step < 3; ++step)
        ASSERT_TRUE(pager.prepare({}).ok()) << "steps without the adapter run while it is fetched";
    EXPECT_FALSE(pager.ready(1));
    gate.open();
    steps_until([&] { return table.filling(1); });
    // Placed, its copy on the way: not resident, and nothing written to its slot yet (ranks 0 in both).
    EXPECT_FALSE(table.resident(1));
    EXPECT_FALSE(pager.ready(1));
    std::vector<int32_t> slots;
    EXPECT_FALSE(table.map_tokens(std::vector<int32_t>{1}, slots).ok());
    EXPECT_EQ(ranks_of_slot(0) + ranks_of_slot(1), 0);
    device.release_copies();
    // The copy has landed. Asked from another thread (an engine whose steps run on a worker), ready() waits for the
    // next prepare() to see it; asked on the thread that runs the steps (a synchronous engine, between two steps), it
    // sees it at once, a step sooner (here: the thread's first ask would have said true before that prepare()).
    bool from_another_thread = true;
    std::thread([&] { from_another_thread = pager.ready(1); }).join();
    EXPECT_FALSE(from_another_thread);
    ASSERT_TRUE(pager.prepare({}).ok());
    std::thread([&] { from_another_thread = pager.ready(1); }).join();
    EXPECT_TRUE(from_another_thread) << "the next prepare() saw it land";
    EXPECT_TRUE(pager.ready(1));
    EXPECT_TRUE(table.resident(1));
    ASSERT_TRUE((*host_model)->lora()->make_resident(std::vector<int32_t>{1}, host_fetch).ok());
    expect_same_deltas(**host_model, **device_model, std::vector<int32_t>{1}, kSlots);
    EXPECT_EQ(pager.paged_in(), 1);
    EXPECT_EQ(pager.installed_by_steps(), 0);

    // Adapter 2 comes into the free slot; with 1 and 2 in the steps scheduled, 3 finds no slot and waits.
    EXPECT_FALSE(pager.ready(2));
    steps_until([&] { return pager.ready(2); });
    pager.in_use(std::vector<int32_t>{1, 2});
    EXPECT_FALSE(pager.ready(3));
    for (int step = 0; step < 20; ++step) {
        ASSERT_TRUE(pager.prepare({}).ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_FALSE(table.filling(3));
    EXPECT_TRUE(table.resident(1) && table.resident(2));
    // Two steps scheduled without adapter 1 (only 2): its slot may go to 3.
    pager.in_use(std::vector<int32_t>{2});
    pager.in_use(std::vector<int32_t>{2});
    steps_until([&] { return pager.ready(3); });
    EXPECT_TRUE(table.resident(2));
    EXPECT_EQ(pager.paged_in(), 3);

    // A step that needs adapter 1 (evicted: paged in again) while the pager's thread stages it waits for that staging
    // (one fetch, no install of its own); the gate opens from another thread.
    gate.close();
    EXPECT_FALSE(pager.ready(1));
    pager.in_use(std::vector<int32_t>{});
    pager.in_use(std::vector<int32_t>{});
    gate.await_visitor();
    const int fetched = fetches.load();
    std::thread opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        gate.open();
    });
    ASSERT_TRUE(pager.prepare(std::vector<int32_t>{1}).ok());
    opener.join();
    EXPECT_TRUE(table.resident(1));
    EXPECT_EQ(fetches.load(), fetched);
    EXPECT_EQ(pager.installed_by_steps(), 0);
    EXPECT_EQ(pager.paged_in(), 4);
    ASSERT_TRUE((*host_model)->lora()->make_resident(std::vector<int32_t>{1}, host_fetch).ok());
    expect_same_deltas(**host_model, **device_model, std::vector<int32_t>{1}, kSlots);
    // One no one asked for (its request ran alone): the step installs it.
    ASSERT_TRUE(pager.prepare(std::vector<int32_t>{2}).ok());
    EXPECT_TRUE(table.resident(2));
    EXPECT_EQ(pager.installed_by_steps(), 1);
    EXPECT_GT(device.copies_behind, 0);
}

}  // namespace
}  // namespace pagoda::model
