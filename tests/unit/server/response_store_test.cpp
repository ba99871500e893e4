// ResponseStore: the bounds (count and bytes) and least-recently-used eviction of stored /v1/responses.
#include "server/openai/response_store.h"

#include <gtest/gtest.h>

namespace pagoda::server::openai {
namespace {

std::shared_ptr<const StoredResponse> entry(const std::string& text) {
    auto e = std::make_shared<StoredResponse>();
    e->response = Json::object();
    e->response.set("text", Json(text));
    e->conversation = Json::array();
    return e;
}

TEST(ResponseStoreTest, KeepsAtMostMaxEntriesLeastRecentlyUsedOutFirst) {
    ResponseStore store(2, 1 << 20);
    store.put("a", entry("1"));
    store.put("b", entry("2"));
    ASSERT_TRUE(store.get("a"));  // a is now the most recent
    store.put("c", entry("3"));   // drops b
    EXPECT_TRUE(store.get("a"));
    EXPECT_FALSE(store.get("b"));
    EXPECT_TRUE(store.get("c"));
    EXPECT_EQ(store.size(), 2u);
    store.put("c", entry("4"));  // replacing counts once
    EXPECT_EQ(store.size(), 2u);
    EXPECT_EQ(store.get("c")->response.find("text")->as_string(), "4");
}

TEST(ResponseStoreTest, ByteBoundDropsOldEntriesAndRefusesHugeOnes) {
    ResponseStore store(100, 200);
    store.put("a", entry(std::string(60, 'x')));
    store.put("b", entry(std::string(60, 'y')));
    store.put("c", entry(std::string(60, 'z')));  // over 200 bytes with a: a goes
    EXPECT_FALSE(store.get("a"));
    EXPECT_TRUE(store.get("b") && store.get("c"));
    store.put("huge", entry(std::string(500, 'h')));  // larger than the whole store: not kept, nothing dropped
    EXPECT_FALSE(store.get("huge"));
    EXPECT_TRUE(store.get("b") && store.get("c"));
}

TEST(ResponseStoreTest, EraseAndZeroCapacity) {
    ResponseStore store(10, 1 << 20);
    store.put("a", entry("1"));
    EXPECT_TRUE(store.erase("a"));
    EXPECT_FALSE(store.erase("a"));
    EXPECT_FALSE(store.get("a"));
    ResponseStore none(0, 1 << 20);  // storing turned off
    none.put("a", entry("1"));
    EXPECT_FALSE(none.get("a"));
}

}  // namespace
}  // namespace pagoda::server::openai
