// TcpCommunicator: the collectives between tensor-parallel ranks in different processes on the CPU backend, one rank
// per node, over the node group's collective channels (node_group.h). Rank 0 is the hub: it gathers every rank's
// data, reduces it in rank order (rank 0's values, plus rank 1's, plus rank 2's, ...: the order of the in-process
// CPU group, so both give the same bits) and sends the result back. Fine for tests and small models; GPUs use NCCL.
// A collective cannot return an error through the Communicator interface, so a failure (a peer closed, fell silent
// past the timeout, or disagreed on a shape) is kept in status(): the collective and every later one return at once
// with their tensors left as they are, the channels are closed so the peers fail too, and the caller checks
// status() after the step.
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "runtime/communicator.h"
#include "dist/tcp_channel.h"

namespace pagoda {

class TcpCommunicator final : public Communicator {
  public:
    // `channels`: on rank 0 one per other rank (element r - 1 is rank r), elsewhere one, to rank 0. `timeout`: the
    // longest wait for a peer inside one collective.
    TcpCommunicator(std::vector<TcpChannel> channels, int rank, int size, Timeout timeout);

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string name() const override { return "tcp"; }

    // Host F32 tensors for all_reduce_sum; host tensors of any dtype for all_gather and broadcast; contiguous.
    void all_reduce_sum(const Tensor& x) override;
    void all_gather(const Tensor& in, const Tensor& out) override;
    void broadcast(const Tensor& x, int root) override;

    // Ok, or the first failure. Read it on the thread that ran the collectives, or after joining it.
    const Status& status() const { return status_; }
    // Closes the channels: the peers' collectives fail at once. Not while a collective runs on another thread.
    void close();

  private:
    void fail(const Status& s);
    TcpChannel& to(int peer) { return channels_[static_cast<size_t>(rank_ == 0 ? peer - 1 : 0)]; }

    std::vector<TcpChannel> channels_;
    int rank_, size_;
    Timeout timeout_;
    Status status_;
    std::vector<float> scratch_;  // rank 0: the other ranks' parts of an all-reduce, reused
};

}  // namespace pagoda
