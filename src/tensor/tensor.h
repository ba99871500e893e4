// Shape and Tensor: a non-owning, strided view of memory on one device. Buffers (buffer.h) own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "tensor/dtype.h"

namespace pagoda {

enum class DeviceKind : uint8_t { Host, Cuda };

struct Device {
    DeviceKind kind = DeviceKind::Host;
    int index = 0;
    friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr int kMaxRank = 6;

class Shape {
  public:
    Shape() = default;
    Shape(std::initializer_list<int64_t> dims);
    explicit Shape(std::span<const int64_t> dims);

    int rank() const { return rank_; }
    int64_t operator[](int i) const { return dims_[i]; }
    int64_t& operator[](int i) { return dims_[i]; }
    int64_t numel() const;  // 1 for rank 0
    std::span<const int64_t> dims() const { return {dims_, static_cast<size_t>(rank_)}; }
    std::string to_string() const;  // "[2, 3]"

    friend bool operator==(const Shape& a, const Shape& b);

  private:
    int64_t dims_[kMaxRank] = {};
    int rank_ = 0;
};

// A view: data pointer, dtype, shape, strides in ELEMENTS (not bytes), device. Copying a Tensor copies the view.
// Kernels require the innermost dimension to be contiguous (stride 1) unless they say otherwise; outer strides
// may be anything, so column slices of a fused projection output are passed without copies.
class Tensor {
  public:
    Tensor() = default;
    // Contiguous (row-major) view.
    Tensor(void* data, DType dtype, Shape shape, Device device = {});
    // Strided view.
    Tensor(void* data, DType dtype, Shape shape, std::span<const int64_t> strides, Device device = {});

    bool defined() const { return data_ != nullptr; }
    void* data() const { return data_; }
    template <typename T>
    T* data_as() const {
        return static_cast<T*>(data_);
    }
    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int rank() const { return shape_.rank(); }
    int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
    int64_t stride(int i) const { return strides_[i < 0 ? i + rank() : i]; }
    int64_t numel() const { return shape_.numel(); }
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }  // of the elements viewed
    Device device() const { return device_; }
    bool is_host() const { return device_.kind == DeviceKind::Host; }
    bool is_contiguous() const;

    // Same memory, new shape; requires a contiguous tensor and an equal element count.
    Tensor reshape(Shape shape) const;
    // Elements [start, start+length) along `dim` (a view; strides unchanged).
    Tensor narrow(int dim, int64_t start, int64_t length) const;
    // Drops dimension 0 by selecting index i.
    Tensor select(int64_t i) const;
    // Splits dimension `dim` into (outer, size/outer) keeping strides valid.
    Tensor unflatten(int dim, int64_t outer, int64_t inner) const;

    std::string to_string() const;  // "bf16[2, 3]" for messages

  private:
    void* data_ = nullptr;
    DType dtype_ = DType::F32;
    Shape shape_;
    int64_t strides_[kMaxRank] = {};
    Device device_;
};

}  // namespace pagoda
