// Framing of the step-channel messages: the tag is the NodeMessage, the payload its bytes.
#include "dist/node_messages.h"

#include <string>

namespace pagoda::dist {

const char* node_message_name(uint32_t tag) {
    switch (static_cast<NodeMessage>(tag)) {
        case NodeMessage::kNcclId:
            return "NCCL id";
        case NodeMessage::kPoolSizes:
            return "pool sizes";
        case NodeMessage::kStep:
            return "step";
        case NodeMessage::kShutdown:
            return "shutdown";
        case NodeMessage::kStatus:
            return "status";
        case NodeMessage::kLoraAdapter:
            return "LoRA adapter";
    }
    return "unknown message";
}

size_t max_message_bytes(NodeMessage type) {
    switch (type) {
        case NodeMessage::kNcclId:
            return 128;  // NCCL_UNIQUE_ID_BYTES
        case NodeMessage::kPoolSizes:
            return 64;
        case NodeMessage::kShutdown:
            return 0;
        case NodeMessage::kStatus:
            return size_t{64} << 10;  // an error message
        case NodeMessage::kLoraAdapter:
            return 8 + kMaxLoraPathBytes;  // the id, the path's length, the path
        case NodeMessage::kStep:
            break;
    }
    return size_t{1} << 20;
}

Status send_message(TcpChannel& channel, NodeMessage type, std::span<const std::byte> payload, Timeout timeout) {
    return channel.send(static_cast<uint32_t>(type), payload, timeout);
}

Status recv_message(TcpChannel& channel, NodeMessage expected, std::vector<std::byte>& payload, Timeout timeout) {
    uint32_t tag = 0;
    PAGODA_RETURN_IF_ERROR(channel.recv(tag, payload, max_message_bytes(expected), timeout));
    if (tag != static_cast<uint32_t>(expected)) {
        return Status::error("out of step with " + channel.peer() + ": expected a " +
                             node_message_name(static_cast<uint32_t>(expected)) + " message, got a " +
                             node_message_name(tag) + " message (tag " + std::to_string(tag) + ")");
    }
    return ok_status();
}

Status send_status(TcpChannel& channel, const Status& status, Timeout timeout) {
    std::string text;  // empty: ok; so an error without words must get some
    if (!status.ok()) text = status.message().empty() ? "unknown error" : status.message();
    return send_message(channel, NodeMessage::kStatus, std::as_bytes(std::span<const char>(text.data(), text.size())),
                        timeout);
}

Status recv_status(TcpChannel& channel, std::vector<std::byte>& payload, Timeout timeout) {
    PAGODA_RETURN_IF_ERROR(recv_message(channel, NodeMessage::kStatus, payload, timeout));
    if (payload.empty()) return ok_status();
    return Status::error(channel.peer() + ": " +
                         std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
}

}  // namespace pagoda::dist
