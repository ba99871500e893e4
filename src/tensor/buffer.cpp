// Host allocator and the RAII Buffer.
#include "tensor/buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/check.h"

namespace pagoda {

namespace {
class HostAllocator final : public Allocator {
  public:
    Device device() const override { return {}; }
    void* allocate(size_t bytes, size_t alignment) override {
        if (alignment < sizeof(void*)) alignment = sizeof(void*);
        // aligned_alloc needs a size that is a multiple of the alignment.
        const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
        return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
    }
    void deallocate(void* ptr, size_t) override { std::free(ptr); }
};
}  // namespace

Allocator& host_allocator() {
    static HostAllocator allocator;
    return allocator;
}

namespace {
// Set by the CUDA backend (runtime/cuda) at start-up; CPU-only builds have neither.
Allocator* g_pinned = nullptr;
Allocator* (*g_device)(int) = nullptr;
}  // namespace

Allocator* pinned_allocator() {
    return g_pinned;
}
Allocator* device_allocator(int device_index) {
    return g_device ? g_device(device_index) : nullptr;
}
void set_cuda_allocators(Allocator* pinned, Allocator* (*device)(int)) {
    g_pinned = pinned;
    g_device = device;
}

Buffer::~Buffer() {
    if (data_) allocator_->deallocate(data_, size_);
}

Buffer::Buffer(Buffer&& other) noexcept : allocator_(other.allocator_), data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        if (data_) allocator_->deallocate(data_, size_);
        allocator_ = other.allocator_;
        data_ = other.data_;
        size_ = other.size_;
        other.data_ = nullptr;
        other.size_ = 0;
    }
    return *this;
}

Result<Buffer> Buffer::allocate(Allocator& allocator, size_t bytes, size_t alignment) {
    Buffer b;
    if (bytes == 0) return b;
    b.data_ = allocator.allocate(bytes, alignment);
    if (!b.data_) return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes");
    b.allocator_ = &allocator;
    b.size_ = bytes;
    return b;
}

Buffer Buffer::host(size_t bytes) {
    auto r = allocate(host_allocator(), bytes);
    PAGODA_CHECK_MSG(r.ok(), "host allocation failed");
    return std::move(r).value();
}

Buffer Buffer::host_zeros(size_t bytes) {
    Buffer b = host(bytes);
    b.fill_zero();
    return b;
}

Device Buffer::device() const {
    return allocator_ ? allocator_->device() : Device{};
}

void Buffer::fill_zero() {
    PAGODA_CHECK(device().kind == DeviceKind::Host);
    if (data_) std::memset(data_, 0, size_);
}

Tensor Buffer::view(DType dtype, Shape shape) const {
    PAGODA_CHECK_MSG(static_cast<size_t>(shape.numel()) * dtype_size(dtype) <= size_, "view larger than the buffer");
    return Tensor(data_, dtype, shape, device());
}

HostTensor HostTensor::empty(DType dtype, Shape shape) {
    HostTensor t;
    t.buffer = Buffer::host(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    t.tensor = Tensor(t.buffer.data(), dtype, shape);
    return t;
}

HostTensor HostTensor::zeros(DType dtype, Shape shape) {
    HostTensor t = empty(dtype, shape);
    t.buffer.fill_zero();
    return t;
}

}  // namespace pagoda
