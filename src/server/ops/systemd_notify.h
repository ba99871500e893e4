// systemd's readiness and watchdog protocol (sd_notify(3)), spoken directly: one datagram per message to the unix
// socket in $NOTIFY_SOCKET, so no libsystemd is needed. READY=1 once /health answers 200, STOPPING=1 when a drain
// begins, WATCHDOG=1 from SystemdWatchdog while the engine loop keeps turning.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/ops/engine_liveness.h"

namespace pagoda::server::ops {

class SystemdNotifier {
  public:
    // Null when $NOTIFY_SOCKET is unset or empty (not started by systemd as Type=notify): nothing to tell.
    static std::unique_ptr<SystemdNotifier> from_environment();
    explicit SystemdNotifier(std::string socket_path);  // "/run/..." or "@abstract"
    ~SystemdNotifier();
    SystemdNotifier(const SystemdNotifier&) = delete;
    SystemdNotifier& operator=(const SystemdNotifier&) = delete;

    // Any thread. "READY=1", "STOPPING=1", "STATUS=...", "WATCHDOG=1"; false (logged once) when the send failed.
    bool notify(std::string_view state);

    // $WATCHDOG_USEC when set and meant for this process ($WATCHDOG_PID absent or ours), else zero.
    static std::chrono::microseconds watchdog_timeout_from_environment();

  private:
    std::string path_;
    int fd_ = -1;
    std::mutex mu_;  // one datagram at a time; the warning once
    bool warned_ = false;
};

// Sends WATCHDOG=1 every timeout / 2 for as long as `probe` keeps returning: probe blocks until the engine thread
// has answered between two steps (engine::Engine::stats()), so a wedged engine stops the keep-alives and systemd
// restarts the service after WatchdogSec.
class SystemdWatchdog {
  public:
    SystemdWatchdog(SystemdNotifier& notifier, std::chrono::microseconds timeout, std::function<void()> probe);

  private:
    EngineLiveness pings_;  // its probe is `probe`, then the keep-alive; stops (and waits for a probe) when destroyed
};

}  // namespace pagoda::server::ops
