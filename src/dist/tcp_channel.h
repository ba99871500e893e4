// TcpChannel: length-prefixed messages ("frames": a tag and a payload) over one TCP connection, for the links
// between the nodes of a multi-node tensor-parallel group (node_group.h). Every wait has a timeout, and every
// failure — the peer closed, reset, or went silent past the timeout — is a Status that names the peer, never a
// signal (no SIGPIPE) or a wait without end. POSIX sockets only: no third-party networking below server/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

struct iovec;

namespace pagoda {

// How long a call may wait; kForever waits until the peer sends or the connection breaks (TCP keep-alive notices a
// peer host that vanished within about half a minute).
using Timeout = std::chrono::milliseconds;
inline constexpr Timeout kForever{-1};

// One deadline for a whole call: its parts (a frame's header and payload, a connection's attempts, a handshake's
// hello and answer) each wait for the time left, so that the call as a whole ends within its timeout.
class Deadline {
  public:
    explicit Deadline(Timeout timeout);           // kForever: never passes
    Timeout timeout() const { return timeout_; }  // as given, for error messages
    bool passed() const;
    // The time left (rounded up, never negative), at most `cap`; `cap` itself (kForever unless given) when the
    // deadline never passes.
    Timeout left(Timeout cap = kForever) const;

  private:
    Timeout timeout_;
    std::chrono::steady_clock::time_point at_;
};

class TcpChannel {
  public:
    TcpChannel() = default;
    // Takes a connected socket; `peer` names the other end in error messages ("node 1 (10.0.0.2:41234)").
    TcpChannel(int fd, std::string peer);
    ~TcpChannel();
    TcpChannel(TcpChannel&& other) noexcept;
    TcpChannel& operator=(TcpChannel&& other) noexcept;
    TcpChannel(const TcpChannel&) = delete;
    TcpChannel& operator=(const TcpChannel&) = delete;

    bool is_open() const { return fd_ >= 0; }
    const std::string& peer() const { return peer_; }
    void set_peer(std::string peer) { peer_ = std::move(peer); }

    // Sends one frame whose payload is the concatenation of `parts` (at most kMaxParts; no copy into one buffer,
    // no allocation: collectives send one frame per all-reduce).
    static constexpr size_t kMaxParts = 7;
    Status send(uint32_t tag, std::initializer_list<std::span<const std::byte>> parts, Timeout timeout);
    Status send(uint32_t tag, std::span<const std::byte> payload, Timeout timeout) {
        return send(tag, {payload}, timeout);
    }
    // Receives one frame into `payload` (resized, its capacity kept across calls). A frame over `max_bytes` is an
    // error, so that garbage on the wire cannot ask for any amount of memory.
    Status recv(uint32_t& tag, std::vector<std::byte>& payload, size_t max_bytes, Timeout timeout);
    // Receives one frame that must carry `tag` and exactly out.size() bytes, straight into `out`.
    Status recv_into(uint32_t tag, std::span<std::byte> out, Timeout timeout);
    // Whether something (a frame's first bytes, or the end of the connection) waits to be read, waiting up to `wait`.
    bool readable(Timeout wait) const;
    // Whether the peer closed the connection or it broke, without reading or waiting: unread frames that the peer
    // sent before it closed do not hide the close.
    bool peer_closed() const;
    // Closes the connection; the peer's next receive sees it closed. Idempotent.
    void close();

  private:
    Status send_iov(std::span<struct iovec> iov, const Deadline& deadline);
    Status recv_bytes(std::byte* data, size_t size, const Deadline& deadline);
    // Waits until the socket is ready for `events` or the deadline passes; `doing` words the timeout's error.
    Status wait(short events, const Deadline& deadline, const char* doing);
    // One poll() of this socket: its revents (0 when `wait` passed first), or -1 with errno set.
    int poll_once(short events, Timeout wait) const;
    Status broken(std::string_view what, int error) const;

    int fd_ = -1;
    std::string peer_;
};

// HOST:PORT (HOST a name, an IPv4 address, or an IPv6 address in brackets: [::1]:29500).
struct HostPort {
    std::string host;
    uint16_t port = 0;
    std::string to_string() const;
};
// Errors say what a valid address looks like. `allow_port_zero`: port 0 (any free port) is accepted.
Result<HostPort> parse_host_port(std::string_view text, bool allow_port_zero = false);

// A listening socket on every interface (IPv6 and IPv4 when the host has IPv6, else IPv4).
class TcpListener {
  public:
    // Port 0 picks a free port (port() says which).
    static Result<TcpListener> listen(uint16_t port);
    TcpListener() = default;
    ~TcpListener();
    TcpListener(TcpListener&& other) noexcept;
    TcpListener& operator=(TcpListener&& other) noexcept;
    TcpListener(const TcpListener&) = delete;
    TcpListener& operator=(const TcpListener&) = delete;

    uint16_t port() const { return port_; }
    // The next connection; none when none came within `wait`; an error when accepting fails in a way that waiting
    // does not cure (out of file descriptors, ...).
    Result<std::optional<TcpChannel>> try_accept(Timeout wait);
    // The next connection, or an error when none came within `timeout`.
    Result<TcpChannel> accept(Timeout timeout);

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

// Connects to `address`, retrying (the other side may not listen yet) until `timeout`; the error names the address
// and the last reason.
Result<TcpChannel> connect_with_retry(const HostPort& address, Timeout timeout);

}  // namespace pagoda
