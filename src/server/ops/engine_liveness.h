// Whether the engine loop still turns, for /health: a thread calls `probe` (which returns once the engine thread has
// answered between two steps, as the systemd watchdog's does) every `period`, and the time since it last returned is
// how long the engine has been inside one step. A wedged engine (a hung kernel, a deadlock) makes /health fail, so
// that a Kubernetes liveness probe restarts the pod as systemd's watchdog restarts the unit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pagoda::server::ops {

class EngineLiveness {
  public:
    EngineLiveness(std::function<void()> probe, std::chrono::milliseconds period);
    // Stops probing; waits for a probe in progress (the engine must still exist).
    ~EngineLiveness();
    EngineLiveness(const EngineLiveness&) = delete;
    EngineLiveness& operator=(const EngineLiveness&) = delete;

    // Seconds since the engine last answered (about `period` at most while it turns).
    double seconds_silent() const;

  private:
    void run();

    std::function<void()> probe_;
    std::chrono::milliseconds period_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::chrono::steady_clock::time_point last_answer_;
    std::thread thread_;
};

}  // namespace pagoda::server::ops
