// The size-1 communicator and the in-process CPU group (std::barrier between the ranks' threads).
#include "runtime/communicator.h"

#include <barrier>
#include <cstddef>
#include <cstring>

#include "common/check.h"

namespace pagoda {

namespace {

void check_contiguous_host(const Tensor& t, const char* what) {
    PAGODA_CHECK_MSG(t.is_host(), what);
    PAGODA_CHECK_MSG(t.is_contiguous(), what);
}

class SingleCommunicator final : public Communicator {
  public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::string name() const override { return "single"; }
    void all_reduce_sum(const Tensor&) override {}
    void all_gather(const Tensor& in, const Tensor& out) override {
        PAGODA_CHECK_MSG(in.nbytes() == out.nbytes() && in.dtype() == out.dtype(), "all_gather: out != size * in");
        if (in.data() == out.data()) return;
        check_contiguous_host(in, "single all_gather: host tensors, or in place");
        check_contiguous_host(out, "single all_gather: host tensors, or in place");
        std::memcpy(out.data(), in.data(), in.nbytes());
    }
    void broadcast(const Tensor&, int root) override { PAGODA_CHECK_MSG(root == 0, "broadcast: root outside group"); }
};

// State shared by the ranks of one CPU group. Each collective is: publish a pointer, barrier (every rank's data is
// ready), read the others' data, barrier (nobody overwrites what another rank still reads).
struct CpuGroup {
    explicit CpuGroup(int n) : barrier(n), data(static_cast<size_t>(n)), numel(static_cast<size_t>(n)) {}
    std::barrier<> barrier;
    std::vector<void*> data;
    std::vector<int64_t> numel;  // to catch ranks that disagree on a shape
};

class CpuCommunicator final : public Communicator {
  public:
    CpuCommunicator(std::shared_ptr<CpuGroup> group, int rank, int size)
        : group_(std::move(group)), rank_(rank), size_(size) {}
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string name() const override { return "cpu threads"; }

    void all_reduce_sum(const Tensor& x) override {
        check_contiguous_host(x, "cpu all_reduce_sum: contiguous host tensor");
        PAGODA_CHECK_MSG(x.dtype() == DType::F32, "cpu all_reduce_sum: F32 only");
        publish(x.data(), x.numel());
        // Rank r reduces the r-th chunk of the elements over all ranks (in rank order) and writes the sum back to
        // every rank's tensor: disjoint chunks, so no rank writes what another reads.
        const int64_t n = x.numel();
        const int64_t begin = n * rank_ / size_, end = n * (rank_ + 1) / size_;
        auto buffer = [&](int r) { return static_cast<float*>(group_->data[static_cast<size_t>(r)]); };
        for (int64_t i = begin; i < end; ++i) {
            float sum = buffer(0)[i];
            for (int r = 1; r < size_; ++r)
                sum += buffer(r)[i];
            for (int r = 0; r < size_; ++r)
                buffer(r)[i] = sum;
        }
        group_->barrier.arrive_and_wait();
    }

    void all_gather(const Tensor& in, const Tensor& out) override {
        check_contiguous_host(in, "cpu all_gather: contiguous host tensors");
        check_contiguous_host(out, "cpu all_gather: contiguous host tensors");
        PAGODA_CHECK_MSG(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
                         "all_gather: out must hold size() times in");
        publish(in.data(), in.numel());
        const size_t bytes = in.nbytes();
        for (int r = 0; r < size_; ++r) {
            std::byte* dst = static_cast<std::byte*>(out.data()) + static_cast<size_t>(r) * bytes;
            const void* src = group_->data[static_cast<size_t>(r)];
            if (dst != src) std::memcpy(dst, src, bytes);  // in place: this rank's part is already there
        }
        group_->barrier.arrive_and_wait();
    }

    void broadcast(const Tensor& x, int root) override {
        check_contiguous_host(x, "cpu broadcast: contiguous host tensor");
        PAGODA_CHECK_MSG(root >= 0 && root < size_, "broadcast: root outside group");
        publish(x.data(), x.numel());
        if (rank_ != root) std::memcpy(x.data(), group_->data[static_cast<size_t>(root)], x.nbytes());
        group_->barrier.arrive_and_wait();
    }

  private:
    void publish(void* data, int64_t numel) {
        group_->data[static_cast<size_t>(rank_)] = data;
        group_->numel[static_cast<size_t>(rank_)] = numel;
        group_->barrier.arrive_and_wait();
        for (int64_t other : group_->numel)
            PAGODA_CHECK_MSG(other == numel, "collective: ranks disagree on the size");
    }

    std::shared_ptr<CpuGroup> group_;
    int rank_, size_;
};

}  // namespace

Communicator& single_communicator() {
    static SingleCommunicator instance;
    return instance;
}

std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int size) {
    PAGODA_CHECK_MSG(size >= 1, "make_cpu_communicators: size must be at least 1");
    auto group = std::make_shared<CpuGroup>(size);
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < size; ++r)
        comms.push_back(std::make_unique<CpuCommunicator>(group, r, size));
    return comms;
}

}  // namespace pagoda
