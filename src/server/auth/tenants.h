// Tenants: API keys mapped to a name, the models the name may use, request and token rate limits and an admin flag
// (--api-keys-file, re-read on SIGHUP), plus the keys of --api-key as the tenant "default". Keys are compared in
// constant time and are never logged; usage is counted per tenant name and survives a reload.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/auth/token_bucket.h"

namespace pagoda::server::auth {

// One tenant as the key file describes it.
struct TenantSpec {
    std::string name;
    std::vector<std::string> keys;
    std::optional<std::vector<std::string>> models;  // absent: every served model
    int64_t requests_per_minute = 0;                 // 0: no limit
    int64_t tokens_per_minute = 0;                   // prompt + generated tokens; 0: no limit
    bool admin = false;
};

// The key file: {"tenants": [{"name": "acme", "keys": ["sk-..."], "models": ["qwen3-8b"], "requests_per_minute": 60,
// "tokens_per_minute": 100000, "admin": false}, ...]}. Unknown fields, duplicate names or keys and empty keys are
// errors that say where (a typo must not silently lift a limit).
Result<std::vector<TenantSpec>> parse_tenants_file(std::string_view json_text);

// What is counted for a tenant name; lives as long as the server, across reloads.
struct TenantUsage {
    explicit TenantUsage(std::string n) : name(std::move(n)) {}
    const std::string name;
    std::atomic<int64_t> requests{0};           // admitted past authentication and the request-rate limit
    std::atomic<int64_t> prompt_tokens{0};      // charged at admission
    std::atomic<int64_t> generation_tokens{0};  // charged as they stream
    std::atomic<int64_t> rate_limited{0};       // answered 429
    TokenBucket request_bucket, token_bucket;
};

// One tenant of the current table.
struct Tenant {
    TenantSpec spec;
    std::shared_ptr<TenantUsage> usage;

    bool may_use(std::string_view model) const;
    // The request-rate limit: 0 when admitted (counted), else the seconds to wait.
    double admit_request() const;
    // The token-rate limit at admission: `prompt_tokens` are charged when the bucket holds them (0 returned), else
    // the seconds to wait.
    double admit_prompt(int64_t prompt_tokens) const;
    // Generated tokens, charged as they are produced (never refused: the next request pays).
    void charge_generated(int64_t tokens) const;
};

class TenantRegistry {
  public:
    // Replaces the table: `api_keys` (--api-key) form the tenant "default" (every model, no limits, admin) unless a
    // tenant of the file has that name. Usage and bucket levels carry over by name.
    Status load(const std::vector<std::string>& api_keys, std::vector<TenantSpec> specs);

    // False when no key is configured at all: then nothing is authenticated.
    bool enabled() const;
    // The tenant of `key`, or null (the last match: the file's tenant over "default"). Every configured key is
    // compared, each in constant time.
    std::shared_ptr<const Tenant> find(std::string_view key) const;
    // Every tenant name seen since start (for /metrics), in first-seen order.
    std::vector<std::shared_ptr<TenantUsage>> usage() const;

  private:
    struct Table;
    mutable std::mutex mu_;  // guards the pointers below; lookups copy the table pointer and work unlocked
    std::shared_ptr<const Table> table_;
    std::vector<std::shared_ptr<TenantUsage>> usage_;
};

// Compares without an early exit, so the time does not say how much of a guess was right.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace pagoda::server::auth
