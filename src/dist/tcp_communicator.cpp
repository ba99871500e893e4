// TcpCommunicator: gather at rank 0, combine there, send back (see the header for why this shape).
#include "dist/tcp_communicator.h"

#include <cstring>
#include <string>

#include "common/check.h"

namespace pagoda {

namespace {

// Frame tags: a rank that runs another collective than its peer is out of step, and recv_into says so.
constexpr uint32_t kAllReduceTag = 1;
constexpr uint32_t kAllGatherTag = 2;
constexpr uint32_t kBroadcastTag = 3;

std::span<const std::byte> bytes_of(const Tensor& t) {
    return {static_cast<const std::byte*>(t.data()), t.nbytes()};
}
std::span<std::byte> writable_bytes_of(const Tensor& t) {
    return {static_cast<std::byte*>(t.data()), t.nbytes()};
}

void check_contiguous_host(const Tensor& t, const char* what) {
    PAGODA_CHECK_MSG(t.is_host() && t.is_contiguous(), what);
}

}  // namespace

TcpCommunicator::TcpCommunicator(std::vector<TcpChannel> channels, int rank, int size, Timeout timeout)
    : channels_(std::move(channels)), rank_(rank), size_(size), timeout_(timeout) {
    PAGODA_CHECK_MSG(size >= 1 && rank >= 0 && rank < size, "TcpCommunicator: rank outside the group");
    PAGODA_CHECK_MSG(static_cast<int>(channels_.size()) == (rank == 0 ? size - 1 : 1),
                     "TcpCommunicator: rank 0 needs a channel per other rank, the others one to rank 0");
}

void TcpCommunicator::fail(const Status& s) {
    if (status_.ok()) status_ = s.with_context("tensor-parallel collective on rank " + std::to_string(rank_));
    close();
}

void TcpCommunicator::close() {
    for (TcpChannel& c : channels_)
        c.close();
}

void TcpCommunicator::all_reduce_sum(const Tensor& x) {
    check_contiguous_host(x, "tcp all_reduce_sum: contiguous host tensor");
    PAGODA_CHECK_MSG(x.dtype() == DType::F32, "tcp all_reduce_sum: F32 only");
    if (!status_.ok() || size_ == 1) return;
    if (rank_ != 0) {
        Status s = to(0).send(kAllReduceTag, bytes_of(x), timeout_);
        if (s.ok()) s = to(0).recv_into(kAllReduceTag, writable_bytes_of(x), timeout_);
        if (!s.ok()) fail(s);
        return;
    }
    const auto n = static_cast<size_t>(x.numel());
    scratch_.resize(n * static_cast<size_t>(size_ - 1));
    for (int r = 1; r < size_; ++r) {
        float* part = scratch_.data() + n * static_cast<size_t>(r - 1);
        if (Status s = to(r).recv_into(kAllReduceTag, std::as_writable_bytes(std::span<float>(part, n)), timeout_);
            !s.ok())
            return fail(s);
    }
    float* sum = x.data_as<float>();
    for (size_t i = 0; i < n; ++i) {
        float v = sum[i];  // rank 0's, then rank 1's, ...: the in-process group's order
        for (int r = 1; r < size_; ++r)
            v += scratch_[n * static_cast<size_t>(r - 1) + i];
        sum[i] = v;
    }
    for (int r = 1; r < size_; ++r)
        if (Status s = to(r).send(kAllReduceTag, bytes_of(x), timeout_); !s.ok()) return fail(s);
}

void TcpCommunicator::all_gather(const Tensor& in, const Tensor& out) {
    check_contiguous_host(in, "tcp all_gather: contiguous host tensors");
    check_contiguous_host(out, "tcp all_gather: contiguous host tensors");
    PAGODA_CHECK_MSG(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
                     "all_gather: out must hold size() times in");
    if (!status_.ok()) return;
    const size_t bytes = in.nbytes();
    auto* base = static_cast<std::byte*>(out.data());
    if (rank_ != 0) {
        Status s = to(0).send(kAllGatherTag, bytes_of(in), timeout_);
        if (s.ok()) s = to(0).recv_into(kAllGatherTag, writable_bytes_of(out), timeout_);
        if (!s.ok()) fail(s);
        return;
    }
    if (base != in.data()) std::memmove(base, in.data(), bytes);
    for (int r = 1; r < size_; ++r) {
        if (Status s = to(r).recv_into(kAllGatherTag, {base + bytes * static_cast<size_t>(r), bytes}, timeout_);
            !s.ok())
            return fail(s);
    }
    for (int r = 1; r < size_; ++r)
        if (Status s = to(r).send(kAllGatherTag, bytes_of(out), timeout_); !s.ok()) return fail(s);
}

void TcpCommunicator::broadcast(const Tensor& x, int root) {
    check_contiguous_host(x, "tcp broadcast: contiguous host tensor");
    PAGODA_CHECK_MSG(root >= 0 && root < size_, "broadcast: root outside group");
    if (!status_.ok() || size_ == 1) return;
    if (rank_ != 0) {
        // The root sends its tensor to rank 0, which passes it on; the others receive it from rank 0.
        Status s = rank_ == root ? to(0).send(kBroadcastTag, bytes_of(x), timeout_)
                                 : to(0).recv_into(kBroadcastTag, writable_bytes_of(x), timeout_);
        if (!s.ok()) fail(s);
        return;
    }
    if (root != 0) {
        if (Status s = to(root).recv_into(kBroadcastTag, writable_bytes_of(x), timeout_); !s.ok()) return fail(s);
    }
    for (int r = 1; r < size_; ++r) {
        if (r == root) continue;
        if (Status s = to(r).send(kBroadcastTag, bytes_of(x), timeout_); !s.ok()) return fail(s);
    }
}

}  // namespace pagoda
