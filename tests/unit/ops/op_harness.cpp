// The op harness's runner: tensors made from a case's seed on any backend, poisoned outputs, read-back and compare.
#include "ops/op_harness.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"

namespace pagoda::op_harness {

namespace {

// Extra F32 elements after each activation row under Layout::Padded: 64 bytes keep rows 16-byte aligned, so the
// vectorised kernel paths are the ones checked.
constexpr int64_t kRowPad = 16;

uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Element i of the random tensor `seed`: uniform in [-scale, scale), rounded to bf16 so that a BF16 or F16 copy
// holds exactly the same number.
float random_value(uint64_t seed, int64_t i, float scale) {
    const uint64_t h = splitmix(seed ^ splitmix(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
    return bf16_to_f32(f32_to_bf16(u * scale));
}

void store(const Tensor& t, int64_t i, float v) {
    switch (t.dtype()) {
        case DType::F32:
            t.data_as<float>()[i] = v;
            break;
        case DType::BF16:
            t.data_as<uint16_t>()[i] = f32_to_bf16(v);
            break;
        case DType::F16:
            t.data_as<uint16_t>()[i] = f32_to_f16(v);
            break;
        case DType::I32:
            t.data_as<int32_t>()[i] = std::isnan(v) ? -1 : static_cast<int32_t>(v);
            break;
        case DType::U8:  // packed int4 weights: a random byte from a random value in [-1, 1]
            t.data_as<uint8_t>()[i] =
                std::isnan(v) ? 0 : static_cast<uint8_t>(static_cast<int64_t>(std::floor(v * 128.0f)) & 0xFF);
            break;
        case DType::F8_E4M3:  // weights only (NaN in, NaN out)
            t.data_as<uint8_t>()[i] = f32_to_f8e4m3(v);
            break;
        default:
            PAGODA_CHECK_MSG(false, "op harness: unsupported dtype");
    }
}

float load(const Tensor& t, int64_t i) {
    switch (t.dtype()) {
        case DType::F32:
            return t.data_as<float>()[i];
        case DType::BF16:
            return bf16_to_f32(t.data_as<uint16_t>()[i]);
        case DType::F16:
            return f16_to_f32(t.data_as<uint16_t>()[i]);
        case DType::I32:
            return static_cast<float>(t.data_as<int32_t>()[i]);
        case DType::F8_E4M3:  // fp8 KV caches: compared as the e4m3 values stored (the scale aside)
            return f8e4m3_to_f32(t.data_as<uint8_t>()[i]);
        default:
            PAGODA_CHECK_MSG(false, "op harness: unsupported dtype");
    }
    return 0;
}

Tensor with_strides(void* data, DType dtype, const Shape& shape, const Tensor& like, Device device) {
    int64_t strides[kMaxRank] = {};
    for (int i = 0; i < like.rank(); ++i)
        strides[i] = like.stride(i);
    return Tensor(data, dtype, shape, std::span<const int64_t>(strides, static_cast<size_t>(like.rank())), device);
}

}  // namespace

CaseRun::CaseRun(Backend& backend, Layout layout, uint64_t seed) : backend_(backend), layout_(layout), seed_(seed) {}

Tensor CaseRun::allocate(const Shape& alloc_shape, DType dtype) {
    const size_t bytes = static_cast<size_t>(alloc_shape.numel()) * dtype_size(dtype);
    auto buffer = Buffer::allocate(backend_.allocator(), std::max<size_t>(bytes, 16), 256);
    PAGODA_CHECK_MSG(buffer.ok(), buffer.message().c_str());
    buffers_.push_back(std::move(buffer).value());
    Tensor whole = buffers_.back().view(dtype, alloc_shape);
    wholes_.emplace_back(whole.data(), whole);
    return whole;
}

Shape CaseRun::act_alloc_shape(const Shape& shape) const {
    PAGODA_CHECK_MSG(shape.rank() == 2 || shape.rank() == 3, "activations are [T, N] or [T, H, D]");
    const int64_t row = shape.rank() == 2 ? shape[1] : shape[1] * shape[2];
    return Shape{shape[0], row + (layout_ == Layout::Padded ? kRowPad : 0)};
}

Tensor CaseRun::view_as_act(const Tensor& whole, const Shape& shape) const {
    if (shape.rank() == 2) return whole.narrow(1, 0, shape[1]);
    const int64_t strides[3] = {whole.stride(0), shape[2], 1};
    return Tensor(whole.data(), whole.dtype(), shape, strides, whole.device());
}

HostTensor CaseRun::host_random(const Shape& shape, float scale) {
    HostTensor h = HostTensor::empty(DType::F32, shape);
    const uint64_t seed = next_seed();
    float* p = h.tensor.data_as<float>();
    for (int64_t i = 0; i < shape.numel(); ++i)
        p[i] = random_value(seed, i, scale);
    return h;
}

Tensor CaseRun::act(const Shape& shape, float scale) {
    const Shape alloc = act_alloc_shape(shape);
    HostTensor h = HostTensor::empty(DType::F32, alloc);
    const uint64_t seed = next_seed();
    // Element (t, j) of the activation gets the same value whatever the padding.
    const int64_t row = shape.numel() / shape[0];
    for (int64_t t = 0; t < alloc[0]; ++t)
        for (int64_t j = 0; j < alloc[1]; ++j)
            h.tensor.data_as<float>()[t * alloc[1] + j] =
                j < row ? random_value(seed, t * row + j, scale) : std::numeric_limits<float>::quiet_NaN();
    Tensor whole = allocate(alloc, DType::F32);
    backend_.copy(whole, h.tensor);
    const Tensor v = view_as_act(whole, shape);
    made_bytes_ += static_cast<double>(v.nbytes());
    return v;
}

Tensor CaseRun::upload_act(const HostTensor& host) {
    const Shape& shape = host.tensor.shape();
    const Shape alloc = act_alloc_shape(shape);
    HostTensor h = HostTensor::empty(DType::F32, alloc);
    const int64_t row = shape.numel() / shape[0];
    for (int64_t t = 0; t < alloc[0]; ++t)
        for (int64_t j = 0; j < alloc[1]; ++j)
            h.tensor.data_as<float>()[t * alloc[1] + j] =
                j < row ? host.tensor.data_as<float>()[t * row + j] : std::numeric_limits<float>::quiet_NaN();
    Tensor whole = allocate(alloc, DType::F32);
    backend_.copy(whole, h.tensor);
    const Tensor v = view_as_act(whole, shape);
    made_bytes_ += static_cast<double>(v.nbytes());
    return v;
}

Tensor CaseRun::upload_dense(const HostTensor& host) {
    Tensor whole = allocate(host.tensor.shape(), host.tensor.dtype());
    backend_.copy(whole, host.tensor);
    made_bytes_ += static_cast<double>(whole.nbytes());
    return whole;
}

Tensor CaseRun::out(const Shape& shape, std::string what, float tol) {
    const Shape alloc = act_alloc_shape(shape);
    HostTensor h = HostTensor::empty(DType::F32, alloc);
    std::fill_n(h.tensor.data_as<float>(), alloc.numel(), std::numeric_limits<float>::quiet_NaN());
    Tensor whole = allocate(alloc, DType::F32);
    backend_.copy(whole, h.tensor);
    const Tensor v = view_as_act(whole, shape);
    made_bytes_ += static_cast<double>(v.nbytes());
    register_check(v, whole, std::move(what), tol);
    return v;
}

Tensor CaseRun::dense(const Shape& shape, DType dtype, float scale) {
    HostTensor h = HostTensor::empty(dtype, shape);
    const uint64_t seed = next_seed();
    for (int64_t i = 0; i < shape.numel(); ++i)
        store(h.tensor, i, random_value(seed, i, scale));
    Tensor whole = allocate(shape, dtype);
    backend_.copy(whole, h.tensor);
    made_bytes_ += static_cast<double>(whole.nbytes());
    return whole;
}

Tensor CaseRun::dense_out(const Shape& shape, DType dtype, std::string what, float tol) {
    HostTensor h = HostTensor::empty(dtype, shape);
    for (int64_t i = 0; i < shape.numel(); ++i)
        store(h.tensor, i, std::numeric_limits<float>::quiet_NaN());
    Tensor whole = allocate(shape, dtype);
    backend_.copy(whole, h.tensor);
    made_bytes_ += static_cast<double>(whole.nbytes());
    register_check(whole, whole, std::move(what), tol);
    return whole;
}

Tensor CaseRun::kv_cache(const Shape& shape) {
    return dense(shape, on_cuda() ? DType::BF16 : DType::F32);
}

std::span<const int32_t> CaseRun::ints(size_t n, int32_t lo, int32_t hi) {
    auto& v = int_arrays_.emplace_back(n);
    const uint64_t seed = next_seed();
    for (size_t i = 0; i < n; ++i)
        v[i] = lo + static_cast<int32_t>(splitmix(seed ^ splitmix(i)) % static_cast<uint64_t>(hi - lo));
    return v;
}

std::span<int32_t> CaseRun::int_out(size_t n, std::string what) {
    auto& v = int_arrays_.emplace_back(n, -1);
    Checked c;
    c.what = std::move(what);
    c.tol = kExact;
    c.ints = &v;
    checked_.push_back(std::move(c));
    return v;
}

void CaseRun::check(const Tensor& t, std::string what, float tol) {
    const auto* p = static_cast<const char*>(t.data());
    for (const auto& [start, whole] : wholes_) {
        const auto* s = static_cast<const char*>(start);
        if (p >= s && p < s + whole.nbytes()) {
            register_check(t, whole, std::move(what), tol);
            return;
        }
    }
    PAGODA_CHECK_MSG(false, "op harness: check() of memory the case did not make");
}

void CaseRun::register_check(const Tensor& view, const Tensor& whole, std::string what, float tol) {
    Checked c;
    c.what = std::move(what);
    c.tol = tol;
    c.view = view;
    c.whole = whole;
    checked_.push_back(std::move(c));
}

ForwardBatch& CaseRun::batch(std::unique_ptr<ForwardBatchBuilder> builder) {
    builder_ = std::move(builder);
    batch_ = builder_->view();
    return *batch_;
}

void CaseRun::collect() {
    backend_.synchronize();
    for (Checked& c : checked_) {
        if (c.ints) continue;
        HostTensor raw = HostTensor::empty(c.whole.dtype(), c.whole.shape());
        backend_.copy(raw.tensor, c.whole);
        c.host = HostTensor::empty(DType::F32, c.whole.shape());
        for (int64_t i = 0; i < c.whole.numel(); ++i)
            c.host.tensor.data_as<float>()[i] = load(raw.tensor, i);
        const int64_t offset = (static_cast<const char*>(c.view.data()) - static_cast<const char*>(c.whole.data())) /
                               static_cast<int64_t>(dtype_size(c.whole.dtype()));
        c.host_view =
            with_strides(c.host.tensor.data_as<float>() + offset, DType::F32, c.view.shape(), c.view, Device{});
    }
}

namespace {
// f(a, b) for each pair of elements of two same-shaped F32 host views of any rank and strides, in order, until f
// returns false.
template <class F>
void for_each_pair(const Tensor& ref, const Tensor& got, F&& f) {
    PAGODA_CHECK_MSG(ref.shape() == got.shape(), "op harness: shapes differ");
    const int r = ref.rank();
    int64_t idx[kMaxRank] = {};
    for (int64_t n = 0; n < ref.numel(); ++n) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < r; ++d)
            oa += idx[d] * ref.stride(d), ob += idx[d] * got.stride(d);
        if (!f(ref.data_as<float>()[oa], got.data_as<float>()[ob])) return;
        for (int d = r - 1; d >= 0; --d) {
            if (++idx[d] < ref.dim(d)) break;
            idx[d] = 0;
        }
    }
}
}  // namespace

float rel_error(const Tensor& ref, const Tensor& got) {
    float max_ref = 0, max_diff = 0;
    bool nan = false;
    for_each_pair(ref, got, [&](float a, float b) {
        nan = std::isnan(a) || std::isnan(b);
        max_ref = std::max(max_ref, std::fabs(a));
        max_diff = std::max(max_diff, std::fabs(a - b));
        return !nan;
    });
    if (nan) return std::numeric_limits<float>::infinity();
    if (max_diff == 0) return 0;
    return max_diff / std::max(max_ref, 1e-30f);
}

bool same_bits(const Tensor& ref, const Tensor& got) {
    bool same = true;
    for_each_pair(ref, got, [&](float a, float b) {
        same = !std::isnan(a) && std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
        return same;
    });
    return same;
}

std::vector<Comparison> compare(const CaseRun& reference, const CaseRun& got) {
    const auto& a = reference.checked();
    const auto& b = got.checked();
    PAGODA_CHECK_MSG(a.size() == b.size(), "compare: runs of different cases");
    std::vector<Comparison> out;
    for (size_t i = 0; i < a.size(); ++i) {
        Comparison c{a[i].what, 0, a[i].tol, true};
        if (a[i].ints) {
            c.ok = *a[i].ints == *b[i].ints;
            c.error = c.ok ? 0.0f : std::numeric_limits<float>::infinity();
        } else {
            c.error = rel_error(a[i].host_view, b[i].host_view);
            c.ok = c.error <= c.tol;  // false for NaN
        }
        out.push_back(std::move(c));
    }
    return out;
}

void call_linear(Ops& ops, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
    call_linear(ops, x, LinearWeight::dense(weight, bias), y);
}

void call_linear(Ops& ops, const Tensor& x, const LinearWeight& w, const Tensor& y) {
    ops.linear(x, w, y);
}

std::string test_name(std::string_view case_name) {
    std::string s;
    for (char ch : case_name) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok)
            s += ch;
        else if (!s.empty() && s.back() != '_')
            s += '_';
    }
    while (!s.empty() && s.back() == '_')
        s.pop_back();
    return s;
}

std::unique_ptr<CaseRun> run_case(const OpCase& c, Backend& backend, Layout layout, bool through_step,
                                  std::string* why) {
    if (!backend.ops().supports(c.op)) {
        if (why) *why = c.op + ": not on " + backend.name() + " yet";
        return nullptr;
    }
    auto run = std::make_unique<CaseRun>(backend, layout, c.seed ^ std::hash<std::string>{}(c.name));
    const std::function<void()> op = c.build(*run);
    const ForwardBatch* batch = run->step_batch();
    const bool step = (through_step || c.needs_step) && batch;
    if (step) backend.ops().begin_step(*batch);
    op();
    if (step) backend.ops().end_step();
    run->collect();
    return run;
}

}  // namespace pagoda::op_harness
