// Tenants: the key file's parser, lookups (every key, constant-time comparison), reloads that keep usage, and the
// token bucket's admission and debt.
#include "server/auth/tenants.h"

#include <gtest/gtest.h>

namespace pagoda::server::auth {
namespace {

using std::chrono::seconds;

TEST(TokenBucket, AdmitsWhatItHoldsAndRefillsPerMinute) {
    TokenBucket b(60.0);                        // one a second
    const auto t0 = TokenBucket::Clock::now();  // after the bucket's own start: times before it are not refilled
    for (int i = 0; i < 60; ++i)
        EXPECT_EQ(b.try_take(1.0, t0), 0.0) << i;
    EXPECT_NEAR(b.try_take(1.0, t0), 1.0, 1e-9);  // empty: one second until the next
    EXPECT_EQ(b.try_take(1.0, t0 + seconds(1)), 0.0);
    // Never more than a minute's worth, however long it was idle.
    EXPECT_NEAR(b.level(t0 + seconds(3600)), 60.0, 1e-9);
}

TEST(TokenBucket, DebtIsPaidBackFirst) {
    TokenBucket b(0.0);
    const auto t0 = TokenBucket::Clock::now();
    b.set_rate(600.0, t0);  // ten a second, 600 at most
    EXPECT_EQ(b.try_take(100.0, t0), 0.0);
    b.take(700.0, t0);  // generated tokens: charged, never refused
    EXPECT_NEAR(b.level(t0), -200.0, 1e-9);
    // 50 more need the bucket at 50: (50 + 200) / 10 = 25 s.
    EXPECT_NEAR(b.try_take(50.0, t0), 25.0, 1e-9);
    EXPECT_EQ(b.try_take(50.0, t0 + seconds(25)), 0.0);
    // More than a minute's worth at once is admitted from a full bucket only.
    EXPECT_GT(b.try_take(5000.0, t0 + seconds(30)), 0.0);
    EXPECT_EQ(b.try_take(5000.0, t0 + seconds(3600)), 0.0);
}

TEST(TokenBucket, NoLimit) {
    TokenBucket b(0.0);
    for (int i = 0; i < 1000; ++i)
        EXPECT_EQ(b.try_take(1e9), 0.0);
}

TEST(ConstantTimeEqual, ComparesWholeStrings) {
    EXPECT_TRUE(constant_time_equal("sk-abc", "sk-abc"));
    EXPECT_FALSE(constant_time_equal("sk-abc", "sk-abd"));
    EXPECT_FALSE(constant_time_equal("sk-abc", "sk-ab"));
    EXPECT_FALSE(constant_time_equal("sk-ab", "sk-abc"));
    EXPECT_FALSE(constant_time_equal("", "x"));
    EXPECT_TRUE(constant_time_equal("", ""));
    EXPECT_FALSE(constant_time_equal("abcabc", "abc"));  // the shorter one read cyclically must not match
}

TEST(TenantsFile, ParsesEveryField) {
    auto specs = parse_tenants_file(R"({"tenants": [
        {"name": "a", "keys": ["k1", "k2"], "models": ["m"], "requests_per_minute": 5, "tokens_per_minute": 100,
         "admin": true},
        {"name": "b", "keys": ["k3"]}]})");
    ASSERT_TRUE(specs.ok()) << specs.message();
    ASSERT_EQ(specs->size(), 2u);
    const TenantSpec& a = (*specs)[0];
    EXPECT_EQ(a.keys, (std::vector<std::string>{"k1", "k2"}));
    ASSERT_TRUE(a.models);
    EXPECT_EQ(*a.models, std::vector<std::string>{"m"});
    EXPECT_EQ(a.requests_per_minute, 5);
    EXPECT_EQ(a.tokens_per_minute, 100);
    EXPECT_TRUE(a.admin);
    EXPECT_FALSE((*specs)[1].models);
}

TEST(TenantsFile, ErrorsSayWhere) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"tenants": [{"name": "a", "keys": ["k"], "model": ["m"]}]})", "tenants[0].model: unknown field"},
        {R"({"tenants": [{"name": "a", "keys": ["k"], "admin": "yes"}]})", "tenants[0].admin"},
        {R"({"tenants": [{"name": "a", "keys": "k"}]})", "tenants[0].keys must be a list"},
        {R"({"tenants": [{"keys": ["k"]}]})", "tenants[0] has no \"name\""},
        {R"({"tenants": [{"name": "a", "keys": ["k"]}], "x": 1})", "{\"tenants\": [...]}"},
        {R"({"tenants": [{"name": "a", "keys": ["k"], "requests_per_minute": 1.5}]})", "non-negative integer"},
    };
    for (const auto& [text, message] : cases) {
        auto specs = parse_tenants_file(text);
        ASSERT_FALSE(specs.ok()) << text;
        EXPECT_NE(specs.message().find(message), std::string::npos) << specs.message();
    }
}

TEST(TenantRegistry, FindsByKeyAndKeepsUsageOverReloads) {
    TenantRegistry r;
    EXPECT_FALSE(r.enabled());
    ASSERT_TRUE(r.load({}, {}).ok());
    EXPECT_FALSE(r.enabled());
    TenantSpec a{"a", {"ka"}, std::vector<std::string>{"m1"}, 2, 0, false};
    ASSERT_TRUE(r.load({"plain"}, {a}).ok());
    EXPECT_TRUE(r.enabled());
    auto t = r.find("ka");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->spec.name, "a");
    EXPECT_TRUE(t->may_use("m1"));
    EXPECT_FALSE(t->may_use("m2"));
    auto d = r.find("plain");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->spec.name, "default");
    EXPECT_TRUE(d->spec.admin && d->may_use("anything"));
    EXPECT_FALSE(r.find("k"));
    EXPECT_FALSE(r.find(""));

    EXPECT_EQ(t->admit_request(), 0.0);
    EXPECT_EQ(t->admit_request(), 0.0);
    EXPECT_GT(t->admit_request(), 0.0);  // 2 a minute
    // A reload with a rotated key: the old key is gone, the usage and the empty bucket stay with the name.
    a.keys = {"ka2"};
    ASSERT_TRUE(r.load({}, {a}).ok());
    EXPECT_FALSE(r.find("ka"));
    EXPECT_FALSE(r.find("plain"));
    auto t2 = r.find("ka2");
    ASSERT_TRUE(t2);
    EXPECT_EQ(t2->usage, t->usage);
    EXPECT_GT(t2->admit_request(), 0.0);
    EXPECT_EQ(t2->usage->requests.load(), 2);
    EXPECT_EQ(t2->usage->rate_limited.load(), 2);
    EXPECT_EQ(r.usage().size(), 2u);  // a and default: both still reported
}

}  // namespace
}  // namespace pagoda::server::auth
