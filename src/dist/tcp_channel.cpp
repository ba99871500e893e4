// TcpChannel over non-blocking POSIX sockets: every read and write waits in poll() with the time left, so no call
// blocks past its timeout. Frame on the wire: tag (u32), payload length (u64), both little-endian, then the payload.
#include "dist/tcp_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/check.h"

namespace pagoda {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHeaderBytes = 12;

std::array<std::byte, kHeaderBytes> frame_header(uint32_t tag, uint64_t length) {
    std::array<std::byte, kHeaderBytes> h{};
    for (int i = 0; i < 4; ++i)
        h[static_cast<size_t>(i)] = static_cast<std::byte>((tag >> (8 * i)) & 0xff);
    for (int i = 0; i < 8; ++i)
        h[static_cast<size_t>(4 + i)] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
    return h;
}

void parse_header(const std::array<std::byte, kHeaderBytes>& h, uint32_t& tag, uint64_t& length) {
    tag = 0;
    length = 0;
    for (int i = 0; i < 4; ++i)
        tag |= static_cast<uint32_t>(h[static_cast<size_t>(i)]) << (8 * i);
    for (int i = 0; i < 8; ++i)
        length |= static_cast<uint64_t>(h[static_cast<size_t>(4 + i)]) << (8 * i);
}

std::string seconds_text(Timeout t) {
    const auto ms = t.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

// poll()'s timeout argument: -1 waits without end.
int poll_ms(Timeout wait) {
    return wait.count() < 0 ? -1 : static_cast<int>(std::min<int64_t>(wait.count(), 1 << 30));
}

// Keep-alive probes notice a peer whose host vanished without closing the connection (power loss, a cut link):
// the first probe after 10 s idle, then every 5 s, given up after 3 unanswered. They only probe an idle
// connection, though: while data we sent waits for its acknowledgement, TCP retransmits for a quarter of an hour
// before it gives up. TCP_USER_TIMEOUT bounds that wait by 2 minutes. It also ends a connection whose peer reads
// nothing for that long while our data fills its buffers: in the CPU all-reduce node 0 reads the ranks in order, so a
// rank may wait while an earlier one is late; 2 minutes of skew in one collective means a broken group anyway.
// TCP_NODELAY: the frames are request/response, and Nagle's algorithm would hold back the second of two small writes.
void tune_socket(int fd) {
    const int one = 1, idle = 10, interval = 5, count = 3;
    const int unacknowledged_ms = 120'000;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacknowledged_ms, sizeof(unacknowledged_ms));
}

bool set_nonblocking(int fd) {
    const int flags = fcntl(fd, F_GETFL, 0);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// An accept() error that only means the connection it would have returned is gone (reset before we took it, or its
// route went down: accept(2) says to retry these), not that accepting is broken.
bool pending_connection_failed(int error) {
    switch (error) {
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
        case ENETDOWN:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
            return true;
        default:
            return false;
    }
}

std::string address_text(const sockaddr* addr) {
    char host[NI_MAXHOST] = {0};
    char port[NI_MAXSERV] = {0};
    const socklen_t len = addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (getnameinfo(addr, len, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    std::string h = host;
    // An IPv4 peer of the dual-stack listener shows as ::ffff:a.b.c.d; the plain form is what people typed.
    if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
    return h.find(':') != std::string::npos ? "[" + h + "]:" + port : h + ":" + port;
}

}  // namespace

Deadline::Deadline(Timeout timeout)
    : timeout_(timeout), at_(timeout.count() < 0 ? Clock::time_point::max() : Clock::now() + timeout) {}

bool Deadline::passed() const {
    return timeout_.count() >= 0 && Clock::now() >= at_;
}

Timeout Deadline::left(Timeout cap) const {
    if (timeout_.count() < 0) return cap;
    const Timeout left = std::max(Timeout(0), std::chrono::ceil<Timeout>(at_ - Clock::now()));
    return cap.count() < 0 ? left : std::min(left, cap);
}

TcpChannel::TcpChannel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

TcpChannel::~TcpChannel() {
    close();
}

TcpChannel::TcpChannel(TcpChannel&& other) noexcept : fd_(other.fd_), peer_(std::move(other.peer_)) {
    other.fd_ = -1;
}

TcpChannel& TcpChannel::operator=(TcpChannel&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = other.fd_;
        peer_ = std::move(other.peer_);
        other.fd_ = -1;
    }
    return *this;
}

void TcpChannel::close() {
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_RDWR);  // wakes a thread of ours that polls this socket, and tells the peer at once
    ::close(fd_);
    fd_ = -1;
}

Status TcpChannel::broken(std::string_view what, int error) const {
    return Status::error("connection to " + peer_ + ": " + std::string(what) + ": " + std::strerror(error));
}

int TcpChannel::poll_once(short events, Timeout wait) const {
    if (fd_ < 0) return POLLNVAL;
    pollfd p{fd_, events, 0};
    int n = 0;
    do {
        n = ::poll(&p, 1, poll_ms(wait));
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : p.revents;
}

Status TcpChannel::wait(short events, const Deadline& deadline, const char* doing) {
    for (;;) {
        if (deadline.passed())
            return Status::error("timed out after " + seconds_text(deadline.timeout()) + " " + doing + " " + peer_);
        const int ready = poll_once(events, deadline.left());
        if (ready < 0) return broken("poll", errno);
        // Readable, writable, or an error/hang-up that the next read or write reports; 0: the check above words it.
        if (ready != 0) return ok_status();
    }
}

bool TcpChannel::readable(Timeout wait) const {
    return poll_once(POLLIN, wait) != 0;  // a failed poll too: the read that follows reports it
}

bool TcpChannel::peer_closed() const {
    const int ready = poll_once(POLLRDHUP, Timeout(0));  // RDHUP: the peer's FIN, even behind unread data
    return ready < 0 || (ready & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

Status TcpChannel::send_iov(std::span<iovec> iov, const Deadline& deadline) {
    if (fd_ < 0) return Status::error("connection to " + peer_ + " is closed");
    size_t first = 0;
    while (first < iov.size()) {
        msghdr msg{};
        msg.msg_iov = iov.data() + first;
        msg.msg_iovlen = iov.size() - first;
        const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);  // a closed peer is an error here, not SIGPIPE
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return broken(errno == EPIPE ? "the peer closed the connection" : "send", errno);
            PAGODA_RETURN_IF_ERROR(wait(POLLOUT, deadline, "sending to"));
            continue;
        }
        auto left = static_cast<size_t>(n);
        while (first < iov.size() && left >= iov[first].iov_len)
            left -= iov[first++].iov_len;
        if (left > 0) {
            iov[first].iov_base = static_cast<std::byte*>(iov[first].iov_base) + left;
            iov[first].iov_len -= left;
        }
    }
    return ok_status();
}

Status TcpChannel::recv_bytes(std::byte* data, size_t size, const Deadline& deadline) {
    if (fd_ < 0) return Status::error("connection to " + peer_ + " is closed");
    size_t got = 0;
    while (got < size) {
        const ssize_t n = ::recv(fd_, data + got, size - got, 0);
        if (n == 0) return Status::error(peer_ + " closed the connection (its process stopped or crashed)");
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return broken("receive", errno);
            PAGODA_RETURN_IF_ERROR(wait(POLLIN, deadline, "waiting for"));
            continue;
        }
        got += static_cast<size_t>(n);
    }
    return ok_status();
}

Status TcpChannel::send(uint32_t tag, std::initializer_list<std::span<const std::byte>> parts, Timeout timeout) {
    PAGODA_CHECK_MSG(parts.size() <= kMaxParts, "TcpChannel::send: too many parts");
    uint64_t length = 0;
    for (const auto& p : parts)
        length += p.size();
    auto header = frame_header(tag, length);
    std::array<iovec, kMaxParts + 1> iov{};
    size_t count = 0;
    iov[count++] = iovec{header.data(), header.size()};
    for (const auto& p : parts)
        if (!p.empty()) iov[count++] = iovec{const_cast<std::byte*>(p.data()), p.size()};
    return send_iov(std::span(iov.data(), count), Deadline(timeout));
}

Status TcpChannel::recv(uint32_t& tag, std::vector<std::byte>& payload, size_t max_bytes, Timeout timeout) {
    const Deadline deadline(timeout);  // for the header and the payload together
    std::array<std::byte, kHeaderBytes> header{};
    PAGODA_RETURN_IF_ERROR(recv_bytes(header.data(), header.size(), deadline));
    uint64_t length = 0;
    parse_header(header, tag, length);
    if (length > max_bytes) {
        return Status::error("message from " + peer_ + " is " + std::to_string(length) + " bytes, more than the " +
                             std::to_string(max_bytes) + " expected (a different program or version on that port?)");
    }
    payload.resize(static_cast<size_t>(length));
    return recv_bytes(payload.data(), payload.size(), deadline);
}

Status TcpChannel::recv_into(uint32_t tag, std::span<std::byte> out, Timeout timeout) {
    const Deadline deadline(timeout);  // for the header and the payload together
    std::array<std::byte, kHeaderBytes> header{};
    PAGODA_RETURN_IF_ERROR(recv_bytes(header.data(), header.size(), deadline));
    uint32_t got_tag = 0;
    uint64_t length = 0;
    parse_header(header, got_tag, length);
    if (got_tag != tag || length != out.size()) {
        return Status::error("out of step with " + peer_ + ": expected message " + std::to_string(tag) + " of " +
                             std::to_string(out.size()) + " bytes, got message " + std::to_string(got_tag) + " of " +
                             std::to_string(length) + " bytes");
    }
    return recv_bytes(out.data(), out.size(), deadline);
}

std::string HostPort::to_string() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HostPort> parse_host_port(std::string_view text, bool allow_port_zero) {
    auto bad = [&](std::string_view why) {
        return Status::error("'" + std::string(text) + "' is not HOST:PORT (" + std::string(why) +
                             "; e.g. node-a:29500, 10.0.0.1:29500 or [fd00::1]:29500)");
    };
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    std::string_view host = text.substr(0, colon);
    const std::string_view port = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string_view::npos) {
        return bad("an IPv6 address goes in brackets");
    }
    if (host.empty()) return bad("no host");
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return bad("the port is not a number");
    const int value = std::stoi(std::string(port));
    if (value > 65535 || (value == 0 && !allow_port_zero)) return bad("the port is outside 1..65535");
    return HostPort{std::string(host), static_cast<uint16_t>(value)};
}

TcpListener::~TcpListener() {
    if (fd_ >= 0) ::close(fd_);
}

TcpListener::TcpListener(TcpListener&& other) noexcept : fd_(other.fd_), port_(other.port_) {
    other.fd_ = -1;
}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.fd_;
        port_ = other.port_;
        other.fd_ = -1;
    }
    return *this;
}

Result<TcpListener> TcpListener::listen(uint16_t port) {
    // Dual-stack IPv6 first (it takes IPv4 connections too); IPv4 alone where the host has no IPv6.
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = fd >= 0;
    if (v6) {
        const int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    } else {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return Status::error(std::string("cannot create a socket: ") + std::strerror(errno));
    }
    TcpListener l;
    l.fd_ = fd;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // a restarted node 0 can listen again at once
    int rc = 0;
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(port);
        rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(port);
        rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    if (rc != 0 || ::listen(fd, 64) != 0 || !set_nonblocking(fd)) {
        return Status::error(
            "cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) +
            (errno == EADDRINUSE ? " (another process uses it; choose another --dist-init-addr port)" : ""));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
        return Status::error(std::string("getsockname: ") + std::strerror(errno));
    l.port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return l;
}

Result<std::optional<TcpChannel>> TcpListener::try_accept(Timeout wait) {
    const Deadline deadline(wait);
    for (;;) {
        sockaddr_storage peer{};
        socklen_t len = sizeof(peer);
        const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            tune_socket(fd);
            return std::optional<TcpChannel>(TcpChannel(fd, address_text(reinterpret_cast<sockaddr*>(&peer))));
        }
        if (pending_connection_failed(errno)) continue;
        // EMFILE and the like: the connection stays queued and keeps the socket readable, so waiting would spin.
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return Status::error("accepting a connection on port " + std::to_string(port_) + ": " +
                                 std::strerror(errno));
        if (deadline.passed()) return std::optional<TcpChannel>();
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, poll_ms(deadline.left())) < 0 && errno != EINTR)
            return Status::error(std::string("poll: ") + std::strerror(errno));
    }
}

Result<TcpChannel> TcpListener::accept(Timeout timeout) {
    PAGODA_ASSIGN_OR_RETURN(std::optional<TcpChannel> channel, try_accept(timeout));
    if (!channel)
        return Status::error("no connection on port " + std::to_string(port_) + " within " + seconds_text(timeout));
    return std::move(*channel);
}

namespace {

constexpr Timeout kConnectAttempt{2'000};  // per address: an address that does not answer leaves time for the next
constexpr Timeout kRetryPause{250};

// Connects the non-blocking socket `fd`, waiting at most `wait`: 0, or the errno of the failure.
int connect_within(int fd, const addrinfo& ai, Timeout wait) {
    if (::connect(fd, ai.ai_addr, ai.ai_addrlen) == 0) return 0;
    if (errno != EINPROGRESS) return errno;
    pollfd p{fd, POLLOUT, 0};
    int n = 0;
    do {
        n = ::poll(&p, 1, poll_ms(wait));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n == 0 ? ETIMEDOUT : errno;
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 ? errno : so_error;
}

// A connect to a port where nobody listens yet can connect the socket to itself, when the kernel happens to pick
// that port as the local one (TCP's simultaneous open): the node would then read its own hello as node 0's answer.
bool connected_to_itself(int fd) {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
        return false;  // not connected after all: the first read or write says so
    const std::string me = address_text(reinterpret_cast<sockaddr*>(&local));
    return me != "?" && me == address_text(reinterpret_cast<sockaddr*>(&peer));
}

// One non-blocking connect to one resolved address, waiting at most `wait`; -1 with `error` set when it failed.
int connect_once(const addrinfo& ai, Timeout wait, std::string& error) {
    const int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol);
    if (fd < 0) {
        error = std::strerror(errno);
        return -1;
    }
    const int failed = connect_within(fd, ai, wait);
    if (failed == 0 && !connected_to_itself(fd)) return fd;
    error = failed != 0 ? std::strerror(failed) : "the socket connected to itself (nobody listens there yet)";
    ::close(fd);
    return -1;
}

}  // namespace

Result<TcpChannel> connect_with_retry(const HostPort& address, Timeout timeout) {
    const Deadline deadline(timeout);
    std::string last_error = "no attempt";
    for (;;) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* list = nullptr;
        const int rc = ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &list);
        if (rc != 0) {
            last_error = std::string("cannot resolve the host: ") + gai_strerror(rc);  // DNS may not be ready yet
        } else {
            for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
                const int fd = connect_once(*ai, deadline.left(kConnectAttempt), last_error);
                if (fd >= 0) {
                    freeaddrinfo(list);
                    tune_socket(fd);
                    return TcpChannel(fd, address.to_string());
                }
            }
            freeaddrinfo(list);
        }
        const Timeout pause = deadline.left(kRetryPause);
        if (pause < kRetryPause) {  // no time left for another attempt after the pause
            return Status::error("could not connect to " + address.to_string() + " within " + seconds_text(timeout) +
                                 " (last error: " + last_error + ")");
        }
        std::this_thread::sleep_for(pause);
    }
}

}  // namespace pagoda
