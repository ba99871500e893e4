// Shape and Tensor view arithmetic.
#include "tensor/tensor.h"

#include "common/check.h"

namespace pagoda {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
    PAGODA_CHECK(dims.size() <= static_cast<size_t>(kMaxRank));
    rank_ = static_cast<int>(dims.size());
    for (int i = 0; i < rank_; ++i) {
        PAGODA_CHECK(dims[i] >= 0);
        dims_[i] = dims[i];
    }
}

int64_t Shape::numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i)
        n *= dims_[i];
    return n;
}

std::string Shape::to_string() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
        if (i) s += ", ";
        s += std::to_string(dims_[i]);
    }
    return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
        if (a.dims_[i] != b.dims_[i]) return false;
    return true;
}

Tensor::Tensor(void* data, DType dtype, Shape shape, Device device)
    : data_(data), dtype_(dtype), shape_(shape), device_(device) {
    int64_t s = 1;
    for (int i = shape_.rank() - 1; i >= 0; --i) {
        strides_[i] = s;
        s *= shape_[i];
    }
}

Tensor::Tensor(void* data, DType dtype, Shape shape, std::span<const int64_t> strides, Device device)
    : data_(data), dtype_(dtype), shape_(shape), device_(device) {
    PAGODA_CHECK(static_cast<int>(strides.size()) == shape_.rank());
    for (int i = 0; i < shape_.rank(); ++i)
        strides_[i] = strides[i];
}

bool Tensor::is_contiguous() const {
    int64_t s = 1;
    for (int i = rank() - 1; i >= 0; --i) {
        if (shape_[i] != 1 && strides_[i] != s) return false;
        s *= shape_[i];
    }
    return true;
}

Tensor Tensor::reshape(Shape shape) const {
    PAGODA_CHECK_MSG(is_contiguous(), "reshape of a non-contiguous tensor");
    PAGODA_CHECK_MSG(shape.numel() == numel(), "reshape changes the element count");
    return Tensor(data_, dtype_, shape, device_);
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
    if (dim < 0) dim += rank();
    PAGODA_CHECK(dim >= 0 && dim < rank());
    PAGODA_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dim]);
    Tensor t = *this;
    t.shape_[dim] = length;
    t.data_ = static_cast<char*>(data_) + start * strides_[dim] * static_cast<int64_t>(dtype_size(dtype_));
    return t;
}

Tensor Tensor::select(int64_t i) const {
    PAGODA_CHECK(rank() >= 1 && i >= 0 && i < shape_[0]);
    int64_t dims[kMaxRank];
    int64_t strides[kMaxRank];
    for (int d = 1; d < rank(); ++d) {
        dims[d - 1] = shape_[d];
        strides[d - 1] = strides_[d];
    }
    void* p = static_cast<char*>(data_) + i * strides_[0] * static_cast<int64_t>(dtype_size(dtype_));
    const auto n = static_cast<size_t>(rank() - 1);
    return Tensor(p, dtype_, Shape(std::span<const int64_t>(dims, n)), std::span<const int64_t>(strides, n), device_);
}

Tensor Tensor::unflatten(int dim, int64_t outer, int64_t inner) const {
    if (dim < 0) dim += rank();
    PAGODA_CHECK(dim >= 0 && dim < rank() && rank() < kMaxRank);
    PAGODA_CHECK_MSG(outer * inner == shape_[dim], "unflatten sizes do not multiply to the dimension");
    int64_t dims[kMaxRank];
    int64_t strides[kMaxRank];
    int n = 0;
    for (int d = 0; d < rank(); ++d) {
        if (d == dim) {
            dims[n] = outer;
            strides[n++] = strides_[d] * inner;
            dims[n] = inner;
            strides[n++] = strides_[d];
        } else {
            dims[n] = shape_[d];
            strides[n++] = strides_[d];
        }
    }
    const auto r = static_cast<size_t>(n);
    return Tensor(data_, dtype_, Shape(std::span<const int64_t>(dims, r)), std::span<const int64_t>(strides, r),
                  device_);
}

std::string Tensor::to_string() const {
    std::string name(dtype_name(dtype_));
    for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name + shape_.to_string();
}

}  // namespace pagoda
