// A token bucket for per-minute limits: it holds at most one minute's worth and refills continuously. Taking `n`
// needs `n` in the bucket (or a full bucket when `n` is more than a minute's worth, so that nothing is refused for
// good); take() charges without asking and may leave the bucket in debt, which the refill pays back first. That is
// how generated tokens are charged: they are produced before they can be refused, and the next request waits.
#pragma once

#include <chrono>
#include <mutex>

namespace pagoda::server::auth {

class TokenBucket {
  public:
    using Clock = std::chrono::steady_clock;

    // per_minute <= 0: no limit (every take is admitted, nothing is counted).
    explicit TokenBucket(double per_minute = 0.0);

    // Takes `n` if the bucket holds min(n, a minute's worth) and returns 0; otherwise takes nothing and returns the
    // seconds until it will (for Retry-After).
    double try_take(double n, Clock::time_point now = Clock::now());
    // Takes `n` whatever the level (tokens already generated must be paid for).
    void take(double n, Clock::time_point now = Clock::now());
    // A new rate (the key file was re-read): the level is kept, capped at the new capacity.
    void set_rate(double per_minute, Clock::time_point now = Clock::now());
    double level(Clock::time_point now = Clock::now());

  private:
    void refill(Clock::time_point now);  // under mu_

    std::mutex mu_;  // held for a few arithmetic operations; buckets are per tenant
    double per_minute_;
    double level_;
    Clock::time_point last_;
};

}  // namespace pagoda::server::auth
