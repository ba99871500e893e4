// TokenBucket (see token_bucket.h).
#include "server/auth/token_bucket.h"

#include <algorithm>

namespace pagoda::server::auth {

TokenBucket::TokenBucket(double per_minute) : per_minute_(per_minute), level_(per_minute), last_(Clock::now()) {}

void TokenBucket::refill(Clock::time_point now) {
    if (now > last_) {
        const double seconds = std::chrono::duration<double>(now - last_).count();
        level_ = std::min(per_minute_, level_ + seconds * per_minute_ / 60.0);
    }
    last_ = std::max(last_, now);
}

double TokenBucket::try_take(double n, Clock::time_point now) {
    std::lock_guard lock(mu_);
    if (per_minute_ <= 0.0) return 0.0;
    refill(now);
    const double needed = std::min(n, per_minute_);
    if (level_ >= needed) {
        level_ -= n;
        return 0.0;
    }
    return (needed - level_) * 60.0 / per_minute_;
}

void TokenBucket::take(double n, Clock::time_point now) {
    std::lock_guard lock(mu_);
    if (per_minute_ <= 0.0) return;
    refill(now);
    level_ -= n;
}

void TokenBucket::set_rate(double per_minute, Clock::time_point now) {
    std::lock_guard lock(mu_);
    refill(now);
    if (per_minute_ <= 0.0) level_ = per_minute;  // a limit that starts now starts full
    per_minute_ = per_minute;
    level_ = std::min(level_, per_minute);
}

double TokenBucket::level(Clock::time_point now) {
    std::lock_guard lock(mu_);
    refill(now);
    return level_;
}

}  // namespace pagoda::server::auth
