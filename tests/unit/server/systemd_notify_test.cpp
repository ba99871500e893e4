// SystemdNotifier against a real unix datagram socket (the manager's end), and the watchdog's pings, which stop
// while its probe is blocked (a wedged engine).
#include "server/ops/systemd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>

namespace pagoda::server::ops {
namespace {

class Manager {
  public:
    Manager() {
        path_ = (std::filesystem::temp_directory_path() / ("pagoda-notify-" + std::to_string(::getpid()))).string();
        ::unlink(path_.c_str());
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
        EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        timeval tv{0, 100000};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    ~Manager() {
        ::close(fd_);
        ::unlink(path_.c_str());
    }
    const std::string& path() const { return path_; }
    std::string receive() {  // empty after 100 ms of silence
        char buf[256];
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
    }

  private:
    std::string path_;
    int fd_ = -1;
};

TEST(SystemdNotifier, SendsDatagrams) {
    Manager m;
    SystemdNotifier n(m.path());
    EXPECT_TRUE(n.notify("READY=1\nSTATUS=serving"));
    EXPECT_EQ(m.receive(), "READY=1\nSTATUS=serving");
    EXPECT_TRUE(n.notify("STOPPING=1"));
    EXPECT_EQ(m.receive(), "STOPPING=1");
}

TEST(SystemdNotifier, BadPathsFailWithoutThrowing) {
    EXPECT_FALSE(SystemdNotifier("relative/path").notify("READY=1"));
    EXPECT_FALSE(SystemdNotifier("/nonexistent/dir/sock").notify("READY=1"));
}

TEST(SystemdWatchdog, PingsWhileTheProbeReturnsAndStopsWhileItHangs) {
    Manager m;
    SystemdNotifier n(m.path());
    std::atomic<bool> wedged{false};
    {
        SystemdWatchdog w(n, std::chrono::milliseconds(40), [&] {
            while (wedged.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
        });
        for (int i = 0; i < 3; ++i)
            EXPECT_EQ(m.receive(), "WATCHDOG=1");
        wedged.store(true);
        (void)m.receive();  // one ping may be on its way
        EXPECT_EQ(m.receive(), "");
        EXPECT_EQ(m.receive(), "");
        wedged.store(false);
        EXPECT_EQ(m.receive(), "WATCHDOG=1");
    }
}

// /health's view: the silence grows while the probe hangs (an engine inside a step) and drops once it returns.
TEST(EngineLiveness, SilenceGrowsWhileTheProbeHangs) {
    std::atomic<bool> wedged{false};
    EngineLiveness live(
        [&] {
            while (wedged.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
        },
        std::chrono::milliseconds(10));
    // Bounds far from the 10 ms period, so that a busy machine delaying the thread does not fail the test.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LT(live.seconds_silent(), 0.2);
    wedged.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_GT(live.seconds_silent(), 0.4);
    wedged.store(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_LT(live.seconds_silent(), 0.2);
}

TEST(SystemdNotifier, WatchdogTimeoutFromTheEnvironment) {
    ::setenv("WATCHDOG_USEC", "30000000", 1);
    ::unsetenv("WATCHDOG_PID");
    EXPECT_EQ(SystemdNotifier::watchdog_timeout_from_environment(), std::chrono::seconds(30));
    ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
    EXPECT_EQ(SystemdNotifier::watchdog_timeout_from_environment(), std::chrono::seconds(30));
    ::setenv("WATCHDOG_PID", "1", 1);
    EXPECT_EQ(SystemdNotifier::watchdog_timeout_from_environment().count(), 0);
    ::unsetenv("WATCHDOG_PID");
    ::setenv("WATCHDOG_USEC", "abc", 1);
    EXPECT_EQ(SystemdNotifier::watchdog_timeout_from_environment().count(), 0);
    ::unsetenv("WATCHDOG_USEC");
    EXPECT_EQ(SystemdNotifier::watchdog_timeout_from_environment().count(), 0);
}

}  // namespace
}  // namespace pagoda::server::ops
