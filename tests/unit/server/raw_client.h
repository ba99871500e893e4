// A blocking loopback HTTP client on plain sockets, for tests that need byte-level control (malformed requests,
// keep-alive, half-read streams, disconnects) that a library client would hide.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace pagoda::server::testing {

class RawClient {
  public:
    explicit RawClient(uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    }
    ~RawClient() { close(); }
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    bool connected() const { return connected_; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    bool send(const std::string& bytes) {
        size_t off = 0;
        while (off < bytes.size()) {
            const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += static_cast<size_t>(n);
        }
        return true;
    }
    // Reads until `needle` appears in what was received (or the peer closes, or `timeout_ms` passes without data).
    std::string read_until(const std::string& needle, int timeout_ms = 10000) {
        while (buf_.find(needle) == std::string::npos) {
            if (!read_some(timeout_ms)) break;
        }
        const size_t at = buf_.find(needle);
        std::string out;
        if (at == std::string::npos) {
            out.swap(buf_);
        } else {
            out = buf_.substr(0, at + needle.size());
            buf_.erase(0, at + needle.size());
        }
        return out;
    }
    // Reads one complete response with a Content-Length body.
    std::string read_response(int timeout_ms = 10000) {
        std::string head = read_until("\r\n\r\n", timeout_ms);
        const size_t cl = head.find("Content-Length: ");
        if (cl == std::string::npos) return head;
        const size_t len = std::stoul(head.substr(cl + 16));
        while (buf_.size() < len && read_some(timeout_ms)) {
        }
        std::string body = buf_.substr(0, len);
        buf_.erase(0, std::min(len, buf_.size()));
        return head + body;
    }
    // True when the server closed the connection (reads EOF) within `timeout_ms`.
    bool closed_by_peer(int timeout_ms = 10000) {
        while (read_some(timeout_ms)) {
        }
        return eof_;
    }

  private:
    bool read_some(int timeout_ms) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return false;
        char tmp[4096];
        const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
        if (n <= 0) {
            eof_ = true;
            return false;
        }
        buf_.append(tmp, static_cast<size_t>(n));
        return true;
    }
    int fd_ = -1;
    bool connected_ = false;
    bool eof_ = false;
    std::string buf_;
};

}  // namespace pagoda::server::testing
