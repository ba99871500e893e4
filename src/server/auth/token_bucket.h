// A token bucket for per-minute limits: it holds at most one minute's worth and refills continuously. A request is
// admitted while the bucket is above zero and may take it below (a debt the refill pays back first), so a request
// larger than the whole minute's budget is still served once, and the tenant then waits; nothing is ever refused
// for good.
#pragma once

#include <chrono>
#include <mutex>

namespace pagoda::server::auth {

class TokenBucket {
  public:
    using Clock = std::chrono::steady_clock;

    // per_minute <= 0: no limit (every take is admitted, nothing is counted).
    explicit TokenBucket(double per_minute = 0.0);

    // Takes `n` if the bucket is above zero and returns 0; otherwise takes nothing and returns the seconds until it
    // will be above zero again (for Retry-After).
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
