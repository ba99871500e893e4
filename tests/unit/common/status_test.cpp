#include "common/status.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

Result<int> parse_positive(int v) {
    if (v <= 0) return Status::error("value must be positive, got " + std::to_string(v));
    return v;
}

Result<int> doubled(int v) {
    PAGODA_ASSIGN_OR_RETURN(int x, parse_positive(v));
    return 2 * x;
}

Status check_all(int a, int b) {
    PAGODA_RETURN_IF_ERROR(parse_positive(a));
    PAGODA_RETURN_IF_ERROR(parse_positive(b));
    return ok_status();
}

TEST(Status, ResultCarriesValueOrError) {
    auto good = doubled(4);
    ASSERT_TRUE(good.ok());
    EXPECT_EQ(*good, 8);
    auto bad = doubled(-1);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.message(), "value must be positive, got -1");
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
    EXPECT_TRUE(check_all(1, 2).ok());
    EXPECT_EQ(check_all(1, -5).message(), "value must be positive, got -5");
}

TEST(Status, WithContextPrefixesOnlyErrors) {
    EXPECT_TRUE(ok_status().with_context("reading x").ok());
    EXPECT_EQ(Status::error("bad").with_context("reading x").message(), "reading x: bad");
}

}  // namespace
}  // namespace pagoda
