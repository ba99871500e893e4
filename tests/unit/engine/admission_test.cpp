// The pieces of admission control: the output-length survival estimate and the projected KV demand.
#include <gtest/gtest.h>

#include "engine/kv_projection.h"
#include "engine/output_length_estimator.h"

namespace pagoda::engine {
namespace {

TEST(OutputLengthEstimator, WithoutDataEverySequenceRunsToItsLimit) {
    OutputLengthEstimator e;
    EXPECT_DOUBLE_EQ(e.expected_remaining(0, 100), 100.0);
    EXPECT_DOUBLE_EQ(e.expected_remaining(10, 100), 90.0);
    EXPECT_DOUBLE_EQ(e.expected_remaining(100, 100), 0.0);
}

TEST(OutputLengthEstimator, LearnsWhereTheModelStops) {
    OutputLengthEstimator e;
    for (int i = 0; i < 500; ++i)
        e.record(40, /*ended_by_model=*/true);
    e.end_pass();
    EXPECT_NEAR(e.expected_remaining(0, 1000), 40.0, 4.0);  // within the bin around 40
    EXPECT_LT(e.survival(48), 0.01);
    // A sequence past every length seen is expected to run to its limit: nothing is known about it.
    EXPECT_DOUBLE_EQ(e.expected_remaining(300, 1000), 700.0);
}

TEST(OutputLengthEstimator, CutSequencesAreLowerBoundsAndProgressCounts) {
    OutputLengthEstimator e;
    for (int i = 0; i < 500; ++i) {
        e.record(40, true);     // half end at 40
        e.record(1000, false);  // half reach max_tokens 1000: at least that long
    }
    e.end_pass();
    EXPECT_NEAR(e.survival(200), 0.5, 0.01);
    EXPECT_NEAR(e.expected_remaining(0, 1000), 0.5 * 40 + 0.5 * 1000, 10.0);
    // 200 tokens in, only the long ones are left.
    EXPECT_NEAR(e.expected_remaining(200, 1000), 800.0, 1.0);
}

TEST(OutputLengthEstimator, RunningSequencesAreEvidenceOfLongOutputs) {
    OutputLengthEstimator e;
    for (int i = 0; i < 100; ++i)
        e.record(40, true);
    e.end_pass();
    const double short_only = e.expected_remaining(0, 1000);
    // The short ones finished first; as many are still running at 300 tokens.
    e.begin_pass();
    for (int i = 0; i < 100; ++i)
        e.add_running(300);
    e.end_pass();
    EXPECT_GT(e.expected_remaining(0, 1000), short_only + 300.0);
    EXPECT_NEAR(e.survival(100), 0.5, 0.02);  // the bins are linear between their edges
}

TEST(OutputLengthEstimator, OldSamplesFade) {
    OutputLengthEstimator e;
    for (int i = 0; i < 2000; ++i)
        e.record(1000, true);
    for (int i = 0; i < 8000; ++i)
        e.record(40, true);
    e.end_pass();
    EXPECT_NEAR(e.expected_remaining(0, 2000), 40.0, 5.0);
}

TEST(KvProjection, ASequenceAboutToEndMakesRoom) {
    // Blocks of 4 tokens. `a` holds 8 tokens in 2 blocks of its own and ends after 2 more steps; `b` (8 tokens, none
    // held) runs 10 steps. Step 1: a wants 1 more block, b 3: 4. Step 9: a returned its 2, b wants 5: 3.
    KvProjection p(4);
    p.add({.tokens = 8, .held = 2, .exclusive = 2, .steps = 2});
    p.build();
    const KvProjection::Item b{.tokens = 8, .held = 0, .exclusive = 0, .steps = 10};
    EXPECT_EQ(p.peak_with(b), 4);
    // A longer b peaks at its own last step (29: 37 tokens, 10 blocks), a's 2 blocks back by then; had one of them
    // been shared with another holder, only one comes back.
    EXPECT_EQ(p.peak_with({.tokens = 8, .held = 0, .exclusive = 0, .steps = 30}), 10 - 2);
    KvProjection shared(4);
    shared.add({.tokens = 8, .held = 2, .exclusive = 1, .steps = 2});
    shared.build();
    EXPECT_EQ(shared.peak_with({.tokens = 8, .held = 0, .exclusive = 0, .steps = 30}), 10 - 1);
}

TEST(KvProjection, SequencesThatEndTogetherPeakTogether) {
    KvProjection p(16);
    for (int i = 0; i < 10; ++i)
        p.add({.tokens = 1000, .held = 63, .exclusive = 63, .steps = 1000});
    p.build();
    // All ten reach 1,999 tokens (125 blocks) at their last step: 62 more blocks each, with the newcomer's 125. The
    // running ones are summed before rounding up, which may count up to one block more per sequence (here 8).
    const int64_t exact = 10 * 62 + 125;
    const int64_t peak = p.peak_with({.tokens = 1000, .held = 0, .exclusive = 0, .steps = 1000});
    EXPECT_GE(peak, exact);
    EXPECT_LE(peak, exact + 10);
    // A prefix hit the newcomer shares with running sequences costs nothing.
    EXPECT_EQ(p.peak_with({.tokens = 1000, .held = 60, .exclusive = 0, .steps = 1000}), peak - 60);
}

}  // namespace
}  // namespace pagoda::engine
