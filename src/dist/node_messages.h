// The messages on a multi-node group's step channels (dist/node_group.h), after the handshake: node 0 sends the
// NCCL id (GPUs), the pool sizes, the steps and the shutdown; every other node answers each of them but the id and
// the shutdown with its status (ok, or its error); with LoRA, each adapter before the first step that uses it.
// Payload formats are in step_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "dist/tcp_channel.h"

namespace pagoda::dist {

// The longest adapter directory a kLoraAdapter message carries (PATH_MAX).
inline constexpr size_t kMaxLoraPathBytes = 4096;

enum class NodeMessage : uint32_t {
    kNcclId = 1,     // node 0 -> node: the 128-byte NCCL unique id
    kPoolSizes = 2,  // node 0 -> node: PoolSizes (step_codec.h), once
    kStep = 3,       // node 0 -> node: a StepInput (step_codec.h)
    kShutdown = 4,   // node 0 -> node: the engine stopped; exit 0
    kStatus = 5,     // node -> node 0: empty when ok, else the error message
    // node 0 -> node: a LoRA adapter the next step uses for the first time: its id and the directory every node reads
    // it from (step_codec.h: encode_lora_adapter); answered with a status (the node could read and check it, or why
    // not).
    kLoraAdapter = 6,
};
const char* node_message_name(uint32_t tag);

// The largest payload a node accepts for a message of `type`, so that a confused peer cannot make it reserve much
// memory: the id, the sizes and a status are small; a step is bounded by max_step_bytes of the pool sizes
// (step_codec.h), which the worker uses instead of this (1 MiB here: a step before the sizes is out of step anyway).
size_t max_message_bytes(NodeMessage type);

Status send_message(TcpChannel& channel, NodeMessage type, std::span<const std::byte> payload, Timeout timeout);
// Receives one message that must be `expected` (another type is an error naming both) into `payload`, of at most
// max_message_bytes(expected).
Status recv_message(TcpChannel& channel, NodeMessage expected, std::vector<std::byte>& payload, Timeout timeout);

Status send_status(TcpChannel& channel, const Status& status, Timeout timeout);
// The peer's status: ok, its error (prefixed with the peer's name), or the error of the channel itself. `scratch`
// receives the message (reused across steps).
Status recv_status(TcpChannel& channel, std::vector<std::byte>& scratch, Timeout timeout);

}  // namespace pagoda::dist
