// Shape/Tensor view arithmetic and Buffer ownership.
#include <gtest/gtest.h>

#include <cstdint>

#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace pagoda {
namespace {

TEST(Shape, BasicsAndToString) {
    Shape s{2, 3, 4};
    EXPECT_EQ(s.rank(), 3);
    EXPECT_EQ(s.numel(), 24);
    EXPECT_EQ(s.to_string(), "[2, 3, 4]");
    EXPECT_EQ(Shape().numel(), 1);
    EXPECT_TRUE((Shape{2, 3} == Shape{2, 3}));
    EXPECT_FALSE((Shape{2, 3} == Shape{3, 2}));
}

TEST(Tensor, ContiguousStridesAndViews) {
    HostTensor h = HostTensor::zeros(DType::F32, {4, 6});
    float* p = h.tensor.data_as<float>();
    for (int i = 0; i < 24; ++i)
        p[i] = static_cast<float>(i);
    const Tensor& t = h.tensor;
    EXPECT_EQ(t.stride(0), 6);
    EXPECT_EQ(t.stride(1), 1);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.nbytes(), 96u);
    EXPECT_EQ(t.to_string(), "f32[4, 6]");

    Tensor cols = t.narrow(1, 2, 3);  // columns 2..4
    EXPECT_EQ(cols.shape(), (Shape{4, 3}));
    EXPECT_EQ(cols.stride(0), 6);
    EXPECT_FALSE(cols.is_contiguous());
    EXPECT_EQ(cols.data_as<float>()[0], 2.0f);
    EXPECT_EQ(cols.data_as<float>()[cols.stride(0)], 8.0f);

    Tensor row2 = t.select(2);
    EXPECT_EQ(row2.rank(), 1);
    EXPECT_EQ(row2.data_as<float>()[0], 12.0f);

    Tensor heads = t.unflatten(1, 2, 3);  // [4, 2, 3]
    EXPECT_EQ(heads.shape(), (Shape{4, 2, 3}));
    EXPECT_EQ(heads.stride(0), 6);
    EXPECT_EQ(heads.stride(1), 3);
    EXPECT_EQ(heads.stride(2), 1);
    // Per-head halves (Qwen3-Next q/gate interleave): head 1's second half starts at column 3+... of a [4, 2, 3].
    Tensor qg = t.unflatten(1, 2, 3).narrow(2, 1, 2);
    EXPECT_EQ(qg.shape(), (Shape{4, 2, 2}));
    EXPECT_EQ(qg.data_as<float>()[qg.stride(0) * 1 + qg.stride(1) * 1], 6.0f + 3 + 1);

    Tensor r = t.reshape({24});
    EXPECT_EQ(r.rank(), 1);
    EXPECT_EQ(r.data(), t.data());
}

TEST(Buffer, OwnsAndMoves) {
    Buffer a = Buffer::host_zeros(1000);
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % kHostAlignment, 0u);
    EXPECT_EQ(static_cast<const uint8_t*>(a.data())[999], 0);
    void* p = a.data();
    Buffer b = std::move(a);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
    EXPECT_EQ(b.data(), p);
    Tensor v = b.view(DType::BF16, {10, 50});
    EXPECT_EQ(v.data(), p);
    EXPECT_EQ(v.nbytes(), 1000u);

    auto r = Buffer::allocate(host_allocator(), 64);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().size(), 64u);
    EXPECT_EQ(pinned_allocator(), nullptr);
}

}  // namespace
}  // namespace pagoda
