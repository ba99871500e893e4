// Owning memory: allocators (host now; pinned and device come with the CUDA backend) and the RAII Buffer.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "tensor/tensor.h"

namespace pagoda {

class Allocator {
  public:
    virtual ~Allocator() = default;
    virtual Device device() const = 0;
    // nullptr when out of memory. Alignment is a power of two.
    virtual void* allocate(size_t bytes, size_t alignment) = 0;
    virtual void deallocate(void* ptr, size_t bytes) = 0;
};

inline constexpr size_t kHostAlignment = 64;  // one cache line; enough for AVX-512 loads

// Process-wide aligned host allocator (thread-safe).
Allocator& host_allocator();
// Page-locked host memory and device memory: provided by the CUDA backend (runtime/); nullptr in CPU-only builds.
Allocator* pinned_allocator();
Allocator* device_allocator(int device_index);
// Called once by the CUDA backend at start-up to provide the two above.
void set_cuda_allocators(Allocator* pinned, Allocator* (*device)(int device_index));

// Move-only owner of one allocation. Memory is NOT zeroed unless you ask (Buffer::zeros / fill_zero on host).
class Buffer {
  public:
    Buffer() = default;
    ~Buffer();
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    // Error (naming the byte count) when the allocator has no memory.
    static Result<Buffer> allocate(Allocator& allocator, size_t bytes, size_t alignment = kHostAlignment);
    // Host shortcut that CHECKs success (for small test/activation buffers).
    static Buffer host(size_t bytes);
    static Buffer host_zeros(size_t bytes);

    void* data() const { return data_; }
    size_t size() const { return size_; }
    Device device() const;
    bool empty() const { return data_ == nullptr; }
    void fill_zero();  // host buffers only

    // A contiguous view of the start of the buffer; CHECKs that it fits.
    Tensor view(DType dtype, Shape shape) const;

  private:
    Allocator* allocator_ = nullptr;
    void* data_ = nullptr;
    size_t size_ = 0;
};

// A Buffer together with one contiguous Tensor over it: the usual way to hold an activation or a test input.
struct HostTensor {
    Buffer buffer;
    Tensor tensor;
    static HostTensor empty(DType dtype, Shape shape);  // uninitialised
    static HostTensor zeros(DType dtype, Shape shape);
};

}  // namespace pagoda
