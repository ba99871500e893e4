#include "model/parallel_copy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace pagoda {
namespace {

// Jobs of odd sizes whose bytes the threads split in the middle of a job: every destination byte equals its source.
TEST(ParallelCopyTest, EveryByteLandsWhereItsJobSays) {
    const std::vector<size_t> sizes = {1, 3, size_t{70} << 20, 12345, size_t{90} << 20, 0, size_t{40} << 20, 7};
    std::vector<std::vector<uint8_t>> src, dst;
    std::vector<CopyJob> jobs;
    uint32_t x = 12345;
    for (size_t n : sizes) {
        auto& s = src.emplace_back(n);
        for (uint8_t& b : s)
            b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
        dst.emplace_back(n, uint8_t{0xAA});
    }
    for (size_t i = 0; i < sizes.size(); ++i)
        jobs.push_back({dst[i].data(), src[i].data(), sizes[i]});
    for (const unsigned threads : {1u, 3u, 7u}) {
        for (auto& d : dst)
            std::fill(d.begin(), d.end(), uint8_t{0xAA});
        parallel_copy(jobs, threads);
        for (size_t i = 0; i < sizes.size(); ++i)
            EXPECT_TRUE(dst[i] == src[i]) << "job " << i << " with " << threads << " threads";
    }
}

// Every index runs exactly once, whatever the thread count (none for an empty range).
TEST(ParallelCopyTest, ParallelForRunsEachIndexOnce) {
    for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
        for (const unsigned threads : {1u, 3u, 0u}) {
            std::vector<std::atomic<int>> runs(count);
            parallel_for(
                count, [&runs](size_t i) { ++runs[i]; }, threads);
            for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(runs[i].load(), 1) << "index " << i << " of " << count << ", " << threads << " threads";
        }
    }
}

}  // namespace
}  // namespace pagoda
