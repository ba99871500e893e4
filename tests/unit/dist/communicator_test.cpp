// Communicators (runtime/communicator.h) and the thread-per-rank executor (dist/rank_threads.h): the collectives
// of the in-process CPU group against sums and concatenations computed here, for group sizes 1..4 and element counts
// that the size does not divide; the size-1 communicator; the NCCL entry points of a build without NCCL.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/communicator.h"
#include "dist/nccl_communicator.h"
#include "dist/rank_threads.h"
#include "tensor/buffer.h"

namespace pagoda {
namespace {

// Calls fn(rank, comm) on `size` ranks at once, through RankThreads.
template <typename F>
void on_ranks(int size, F fn) {
    auto comms = make_cpu_communicators(size);
    RankThreads threads(RankThreadsOptions{size, 0});
    threads.run([&](int r) { fn(r, *comms[static_cast<size_t>(r)]); });
}

TEST(RankThreads, RunsEveryRankOnceRankZeroOnTheCaller) {
    for (int size : {1, 2, 4}) {
        RankThreads threads(RankThreadsOptions{size, 1});
        EXPECT_EQ(threads.size(), size);
        for (int step = 0; step < 50; ++step) {
            std::vector<std::atomic<int>> calls(static_cast<size_t>(size));
            std::vector<std::thread::id> ids(static_cast<size_t>(size));
            threads.run([&](int r) {
                ++calls[static_cast<size_t>(r)];
                ids[static_cast<size_t>(r)] = std::this_thread::get_id();
            });
            for (int r = 0; r < size; ++r)
                ASSERT_EQ(calls[static_cast<size_t>(r)].load(), 1);
            EXPECT_EQ(ids[0], std::this_thread::get_id());
            for (int r = 1; r < size; ++r)
                EXPECT_NE(ids[static_cast<size_t>(r)], std::this_thread::get_id());
        }
    }
}

TEST(CpuCommunicator, AllReduceSumIsTheSumOnEveryRank) {
    for (int size : {1, 2, 3, 4}) {
        for (int64_t n : {1, 5, 7, 64, 1001}) {  // fewer elements than ranks, and counts the size does not divide
            std::vector<std::vector<float>> out(static_cast<size_t>(size));
            on_ranks(size, [&](int r, Communicator& comm) {
                EXPECT_EQ(comm.rank(), r);
                EXPECT_EQ(comm.size(), size);
                HostTensor x = HostTensor::empty(DType::F32, Shape{n});
                for (int64_t i = 0; i < n; ++i)
                    x.tensor.data_as<float>()[i] = static_cast<float>((r + 1) * 1000 + i);
                comm.all_reduce_sum(x.tensor);
                out[static_cast<size_t>(r)].assign(x.tensor.data_as<float>(), x.tensor.data_as<float>() + n);
            });
            for (int r = 0; r < size; ++r) {
                for (int64_t i = 0; i < n; ++i) {
                    const float want = static_cast<float>(size * (size + 1) / 2 * 1000 + size * i);
                    ASSERT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(i)], want)
                        << "size " << size << " n " << n << " rank " << r << " i " << i;
                }
            }
        }
    }
}

TEST(CpuCommunicator, AllReduceAddsInRankOrderSoEveryRankGetsTheSameBits) {
    // 1e8 + 3 + ... in fp32 depends on the order; rank order is what the contract says.
    const float values[] = {1e8f, 3.0f, 3.0f, -1e8f};
    float want = values[0];
    for (int r = 1; r < 4; ++r)
        want += values[r];
    std::vector<float> got(4);
    on_ranks(4, [&](int r, Communicator& comm) {
        HostTensor x = HostTensor::empty(DType::F32, Shape{3});
        for (int i = 0; i < 3; ++i)
            x.tensor.data_as<float>()[i] = values[r];
        comm.all_reduce_sum(x.tensor);
        got[static_cast<size_t>(r)] = x.tensor.data_as<float>()[r % 3];
    });
    for (float g : got)
        EXPECT_EQ(g, want);
}

TEST(CpuCommunicator, AllGatherConcatenatesInRankOrder) {
    for (int size : {1, 2, 3, 4}) {
        const int64_t n = 5;
        std::vector<std::vector<int32_t>> out(static_cast<size_t>(size));
        on_ranks(size, [&](int r, Communicator& comm) {
            HostTensor in = HostTensor::empty(DType::I32, Shape{n});
            for (int64_t i = 0; i < n; ++i)
                in.tensor.data_as<int32_t>()[i] = static_cast<int32_t>(r * 100 + i);
            HostTensor all = HostTensor::zeros(DType::I32, Shape{size, n});
            comm.all_gather(in.tensor, all.tensor);
            out[static_cast<size_t>(r)].assign(all.tensor.data_as<int32_t>(), all.tensor.data_as<int32_t>() + size * n);
        });
        for (int r = 0; r < size; ++r)
            for (int s = 0; s < size; ++s)
                for (int64_t i = 0; i < n; ++i)
                    ASSERT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(s * n + i)], s * 100 + i);
    }
}

TEST(CpuCommunicator, AllGatherInPlace) {
    std::vector<std::vector<float>> out(3);
    on_ranks(3, [&](int r, Communicator& comm) {
        HostTensor all = HostTensor::zeros(DType::F32, Shape{3, 2});
        Tensor mine = all.tensor.select(r);  // this rank's part of the output is the input (as NCCL allows)
        mine.data_as<float>()[0] = static_cast<float>(r);
        mine.data_as<float>()[1] = static_cast<float>(10 * r);
        comm.all_gather(mine, all.tensor);
        out[static_cast<size_t>(r)].assign(all.tensor.data_as<float>(), all.tensor.data_as<float>() + 6);
    });
    for (const auto& o : out)
        EXPECT_EQ(o, (std::vector<float>{0, 0, 1, 10, 2, 20}));
}

TEST(CpuCommunicator, BroadcastFromAnyRoot) {
    for (int root : {0, 2}) {
        std::vector<std::vector<int32_t>> out(3);
        on_ranks(3, [&](int r, Communicator& comm) {
            HostTensor x = HostTensor::empty(DType::I32, Shape{4});
            for (int i = 0; i < 4; ++i)
                x.tensor.data_as<int32_t>()[i] = r * 10 + i;
            comm.broadcast(x.tensor, root);
            out[static_cast<size_t>(r)].assign(x.tensor.data_as<int32_t>(), x.tensor.data_as<int32_t>() + 4);
        });
        for (const auto& o : out)
            EXPECT_EQ(o, (std::vector<int32_t>{root * 10, root * 10 + 1, root * 10 + 2, root * 10 + 3}));
    }
}

TEST(CpuCommunicator, ManyCollectivesBackToBack) {
    // Races between one collective's readers and the next one's writers would show up here as wrong sums.
    std::vector<float> last(4);
    on_ranks(4, [&](int r, Communicator& comm) {
        HostTensor x = HostTensor::empty(DType::F32, Shape{33});
        HostTensor all = HostTensor::empty(DType::F32, Shape{4, 33});
        float total = 0;
        for (int step = 0; step < 300; ++step) {
            for (int64_t i = 0; i < 33; ++i)
                x.tensor.data_as<float>()[i] = static_cast<float>(r + step);
            comm.all_reduce_sum(x.tensor);
            EXPECT_EQ(x.tensor.data_as<float>()[32], static_cast<float>(6 + 4 * step));  // no ASSERT: a rank
            comm.all_gather(x.tensor, all.tensor);                                       // leaving early blocks
            EXPECT_EQ(all.tensor.data_as<float>()[3 * 33], static_cast<float>(6 + 4 * step));
            if (step % 7 == 0) comm.broadcast(x.tensor, step % 4);
            total += x.tensor.data_as<float>()[0];
        }
        last[static_cast<size_t>(r)] = total;
    });
    for (float t : last)
        EXPECT_EQ(t, last[0]);
}

TEST(SingleCommunicator, IsTheIdentity) {
    Communicator& comm = single_communicator();
    EXPECT_EQ(comm.size(), 1);
    EXPECT_EQ(comm.rank(), 0);
    HostTensor x = HostTensor::empty(DType::F32, Shape{3});
    for (int i = 0; i < 3; ++i)
        x.tensor.data_as<float>()[i] = static_cast<float>(i + 1);
    comm.all_reduce_sum(x.tensor);
    comm.broadcast(x.tensor, 0);
    HostTensor y = HostTensor::zeros(DType::F32, Shape{3});
    comm.all_gather(x.tensor, y.tensor);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(x.tensor.data_as<float>()[i], static_cast<float>(i + 1));
        EXPECT_EQ(y.tensor.data_as<float>()[i], static_cast<float>(i + 1));
    }
}

TEST(NcclCommunicator, EntryPointsOfThisBuild) {
    if (nccl_compiled()) GTEST_SKIP() << "built with NCCL; its collectives need several GPUs (not run here)";
    const int devices[] = {0, 1};
    void* const streams[] = {nullptr, nullptr};
    auto comms = make_nccl_communicators(devices, streams);
    ASSERT_FALSE(comms.ok());
    EXPECT_NE(comms.message().find("without NCCL"), std::string::npos) << comms.message();
    EXPECT_FALSE(make_nccl_unique_id().ok());
}

}  // namespace
}  // namespace pagoda
