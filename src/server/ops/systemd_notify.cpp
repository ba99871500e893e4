// SystemdNotifier and SystemdWatchdog (see systemd_notify.h).
#include "server/ops/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace pagoda::server::ops {

std::unique_ptr<SystemdNotifier> SystemdNotifier::from_environment() {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (!path || !*path) return nullptr;
    return std::make_unique<SystemdNotifier>(path);
}

SystemdNotifier::SystemdNotifier(std::string socket_path) : path_(std::move(socket_path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

SystemdNotifier::~SystemdNotifier() {
    if (fd_ >= 0) ::close(fd_);
}

bool SystemdNotifier::notify(std::string_view state) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof(addr.sun_path) || (path_[0] != '/' && path_[0] != '@')) {
        std::lock_guard lock(mu_);
        if (!warned_) PAGODA_LOG_WARNING("systemd: NOTIFY_SOCKET='" + path_ + "' is not a socket path; not notifying");
        warned_ = true;
        return false;
    }
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    if (path_[0] == '@') addr.sun_path[0] = '\0';  // Linux abstract namespace
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size());
    std::lock_guard lock(mu_);
    const ssize_t n =
        fd_ < 0 ? -1 : ::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
    if (n == static_cast<ssize_t>(state.size())) return true;
    if (!warned_) {
        PAGODA_LOG_WARNING("systemd: cannot notify " + path_ + ": " + std::strerror(errno));
        warned_ = true;
    }
    return false;
}

std::chrono::microseconds SystemdNotifier::watchdog_timeout_from_environment() {
    const char* usec = std::getenv("WATCHDOG_USEC");
    if (!usec || !*usec) return std::chrono::microseconds(0);
    if (const char* pid = std::getenv("WATCHDOG_PID"); pid && *pid && std::atoll(pid) != ::getpid())
        return std::chrono::microseconds(0);  // meant for another process (a wrapper that exec'd us, say)
    char* end = nullptr;
    const long long v = std::strtoll(usec, &end, 10);
    if (*end != '\0' || v <= 0) return std::chrono::microseconds(0);
    return std::chrono::microseconds(v);
}

SystemdWatchdog::SystemdWatchdog(SystemdNotifier& notifier, std::chrono::microseconds timeout,
                                 std::function<void()> probe)
    : pings_(
          [&notifier, probe = std::move(probe)] {
              probe();
              notifier.notify("WATCHDOG=1");
          },
          std::chrono::duration_cast<std::chrono::milliseconds>(timeout / 2)) {}

}  // namespace pagoda::server::ops
