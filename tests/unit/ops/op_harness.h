// The op harness: one table of kernel cases (op, shapes, dtypes, strides) that runs every case on a backend against
// the CPU backend (backend_ops_test.cpp) and times the same cases on a GPU (bench/gpu/op_bench.cpp), in the manner of
// llama.cpp's tests/test-backend-ops.cpp. A case is a name, the Ops member it exercises and a builder; the builder
// makes its tensors through a CaseRun (so every backend gets the same values, outputs poisoned with NaN) and returns
// the call to run. Adding a case is one line in a table (op_cases.cpp); adding an op is one builder function there.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend.h"
#include "runtime/forward_batch.h"
#include "runtime/ops.h"
#include "tensor/buffer.h"

namespace pagoda::op_harness {

// Tolerances (max|Δ| / max|ref|): fp32 paths, paths that round an operand to bf16 (GEMMs with 16-bit weights,
// the tensor-core attention kernels, bf16 KV caches), and ops that only move bits.
inline constexpr float kF32Tol = 1e-5f;
inline constexpr float kBf16Tol = 1e-2f;
inline constexpr float kExact = 0.0f;

// How a run lays out the activations a case asks for: densely, or with each row followed by padding (a row stride
// wider than the row, as a column slice of a fused projection has). Every [T, N] / [T, H, D] op takes any row stride.
enum class Layout : uint8_t { Contiguous, Padded };

// One case on one backend: owns the case's memory, records what is compared afterwards and what the perf mode
// divides the time by. Values come from the case's seed, never from the backend, so every backend sees the same.
class CaseRun {
  public:
    CaseRun(Backend& backend, Layout layout, uint64_t seed);
    CaseRun(const CaseRun&) = delete;
    CaseRun& operator=(const CaseRun&) = delete;

    Backend& backend() { return backend_; }
    Ops& ops() { return backend_.ops(); }
    bool on_cuda() const { return backend_.device().kind == DeviceKind::Cuda; }

    // A random F32 activation [T, N] or [T, H, D] (values in [-scale, scale], bf16-exact), laid out per Layout.
    Tensor act(const Shape& shape, float scale = 1.0f);
    // A poisoned (NaN) F32 activation, compared with the reference after the run within `tol`.
    Tensor out(const Shape& shape, std::string what, float tol);
    // A random dense tensor in `dtype` (weights, norm weights, biases, tables; F8_E4M3 weights too, values rounded
    // to e4m3). Laid out densely on every run.
    Tensor dense(const Shape& shape, DType dtype = DType::F32, float scale = 1.0f);
    // A poisoned dense output of any dtype (I32 outputs are compared as numbers), compared within `tol`.
    Tensor dense_out(const Shape& shape, DType dtype, std::string what, float tol);
    // Host values the case made itself (e.g. logits with planted ties), uploaded as an activation or densely.
    Tensor upload_act(const HostTensor& host);
    Tensor upload_dense(const HostTensor& host);
    // The case's random host values (bf16-exact), for upload_act.
    HostTensor host_random(const Shape& shape, float scale = 1.0f);
    // A paged KV cache [blocks, block_size, H_kv, D] in the backend's cache dtype (F32 on the CPU, BF16 on CUDA),
    // filled with random values (the cached prefixes); the same numbers on every backend.
    Tensor kv_cache(const Shape& shape);
    // Random host ints in [lo, hi) (token ids, rows, positions), the same on every backend.
    std::span<const int32_t> ints(size_t n, int32_t lo, int32_t hi);
    // Host ints written by the op (argmax), poisoned with -1 and compared exactly.
    std::span<int32_t> int_out(size_t n, std::string what);

    // Compare `t` (a view of memory this run made; strided views are fine) with the reference after the run.
    void check(const Tensor& t, std::string what, float tol);

    // A forward batch that lives as long as the run; the runner brackets the op with begin_step/end_step of it when
    // asked to (the model's path: the batch's arrays uploaded once per step).
    ForwardBatch& batch(std::unique_ptr<ForwardBatchBuilder> builder);
    const ForwardBatch* step_batch() const { return batch_ ? &*batch_ : nullptr; }
    // Anything else the op call refers to (expert weight spans, ...).
    template <typename T>
    T& keep(T value) {
        auto p = std::make_shared<T>(std::move(value));
        kept_.push_back(p);
        return *p;
    }

    // What one call moves and computes, for the perf mode. Bytes default to the sum of the tensors this run made
    // (inputs read, outputs written); a case whose op reads less (attention reads part of the cache) says so.
    void set_bytes(double bytes) { bytes_ = bytes; }
    void set_flops(double flops) { flops_ = flops; }
    double bytes() const { return bytes_ >= 0 ? bytes_ : made_bytes_; }
    double flops() const { return flops_; }

    // One compared tensor or int array, read back to the host as F32 after the run.
    struct Checked {
        std::string what;
        float tol;
        Tensor view;      // on the backend
        Tensor whole;     // the allocation it lies in
        HostTensor host;  // `whole` read back as F32 (collect())
        Tensor host_view;
        std::vector<int32_t>* ints = nullptr;
    };
    // Reads every compared tensor back to the host (after the op ran).
    void collect();
    const std::vector<Checked>& checked() const { return checked_; }

  private:
    Tensor allocate(const Shape& alloc_shape, DType dtype);
    uint64_t next_seed() { return seed_ * 0x9E3779B97F4A7C15ull + ++tensors_; }
    Tensor view_as_act(const Tensor& whole, const Shape& shape) const;
    Shape act_alloc_shape(const Shape& shape) const;
    void register_check(const Tensor& view, const Tensor& whole, std::string what, float tol);

    Backend& backend_;
    Layout layout_;
    uint64_t seed_;
    uint64_t tensors_ = 0;
    std::vector<Buffer> buffers_;
    std::vector<std::pair<const void*, Tensor>> wholes_;  // allocation start -> its dense tensor
    std::deque<std::vector<int32_t>> int_arrays_;
    std::vector<std::shared_ptr<void>> kept_;
    std::unique_ptr<ForwardBatchBuilder> builder_;
    std::optional<ForwardBatch> batch_;
    std::vector<Checked> checked_;
    double bytes_ = -1, flops_ = 0, made_bytes_ = 0;
};

// A builder makes the case's tensors on one run and returns the call that runs the op (called once to check, many
// times to time).
using CaseBuilder = std::function<std::function<void()>(CaseRun&)>;

struct OpCase {
    std::string name;  // "linear T=1 N=64 K=128 bf16 bias": unique in its table
    std::string op;    // the Ops member it exercises, asked of Ops::supports
    CaseBuilder build;
    uint64_t seed = 1;
    // The op reads its step's batch (LoRA's adapter slots): every run goes through begin_step/end_step of it.
    bool needs_step = false;
};

// The correctness table (also timed by the perf mode): every op, small and odd shapes, strided views, every dtype.
const std::vector<OpCase>& op_cases();
// Real Qwen3-8B shapes (decode at batch 1 and 256, prefill of 512 and 2,048 tokens): timed by the perf mode only.
const std::vector<OpCase>& qwen3_8b_cases();
// Qwen3-30B-A3B's MoE layers (router and experts, decode at 1 to 256 tokens and a prefill of 2,048): perf mode only.
const std::vector<OpCase>& qwen3_30b_a3b_cases();

// Ops::linear with LoRA adapters over three slots and the base (lora_cases.cpp): T tokens, K inputs, the table's rank
// R, a projection of `parts` (their output features, one after another). Its values depend on the case's seed and
// name and on their place only: renamed alike, a case of T tokens has the first rows of one of more tokens.
struct LoraCaseOptions {
    bool one_slot = false;   // every token on slot 0 (a decode step of one adapter's sequences), not a mix
    bool zero_base = false;  // a zero base weight: y is the adapters' delta alone, whichever base path ran
};
OpCase lora_linear(int64_t T, int64_t K, int64_t R, std::vector<int64_t> parts, LoraCaseOptions options = {});

// The only place the harness calls Ops::linear, so a change of its signature touches one line.
void call_linear(Ops& ops, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y);
void call_linear(Ops& ops, const Tensor& x, const LinearWeight& w, const Tensor& y);

// A case's name as a gtest name: letters, digits and underscores.
std::string test_name(std::string_view case_name);

// Builds `c` on `backend` and runs it once (inside begin_step/end_step of its batch when `through_step` or the case
// needs it), then reads
// its outputs back. Null (and `why` set) when the backend does not run the op.
std::unique_ptr<CaseRun> run_case(const OpCase& c, Backend& backend, Layout layout, bool through_step,
                                  std::string* why);

// One compared output: its error against the reference, and whether that is within its tolerance (NaN never is).
struct Comparison {
    std::string what;
    float error;
    float tol;
    bool ok;
};
std::vector<Comparison> compare(const CaseRun& reference, const CaseRun& got);

// max|got - ref| / max|ref| over two same-shaped F32 host views of any rank and strides; infinity when either holds
// a NaN (an output element the op did not write stays NaN).
float rel_error(const Tensor& ref, const Tensor& got);
// Whether two such views hold the same bits in every element (-0 and +0 differ), none of them NaN.
bool same_bits(const Tensor& ref, const Tensor& got);

}  // namespace pagoda::op_harness
