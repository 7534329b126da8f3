// Checkpoint names (core/checkpoint_names.h): what is given out reads back,
// with and without a job's suffix, and nothing else reads as a name.
#include "core/checkpoint_names.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

TEST(CheckpointNames, GivenNamesReadBack) {
  EXPECT_EQ(CheckpointModelName("ftjob-abc1", 40), "ftjob-abc1:step-40");
  EXPECT_EQ(CheckpointModelName("ftjob-abc1", 40, "support-v1.2_x"), "ftjob-abc1:support-v1.2_x:step-40");
  EXPECT_EQ(CheckpointModelName("ftjob-abc1", 40, "has space"), "ftjob-abc1:step-40")
      << "not a name part: left out";
  EXPECT_EQ(CheckpointId("ftjob-abc1", 40), "ftckpt-abc1-40");
  for (const std::string suffix : {"", "support-v1"}) {
    auto n = ParseCheckpointName(CheckpointModelName("ftjob-abc1", 40, suffix));
    ASSERT_TRUE(n);
    EXPECT_EQ(n->job_id, "ftjob-abc1");
    EXPECT_EQ(n->step, 40);
    EXPECT_EQ(n->suffix, suffix);
  }
  auto id = ParseCheckpointName("ftckpt-abc1-40");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->job_id, "ftjob-abc1");
  EXPECT_EQ(id->step, 40);
}

TEST(CheckpointNames, AnythingElseIsNotAName) {
  for (const char* bad :
       {"", "ftjob-abc", "ftjob-abc:step-", "ftjob-abc:step-0", "ftjob-abc:step-07", "ftjob-abc:step-4x",
        "ftjob-abc:step--4", "ftjob-ABC:step-4", "ftjob-:step-4", "ftjob-abc:a:b:step-4", "ftjob-abc::step-4",
        "ftjob-abc:sp ace:step-4", "ftjob-abc:x:stop-4", "ftjob-abc:step-4:x", "ftckpt-abc", "ftckpt--4",
        "ftckpt-abc-0", "burst-small", "ftjob-abc:step-1234567890123456789"}) {
    EXPECT_FALSE(ParseCheckpointName(bad)) << bad;
  }
  EXPECT_FALSE(ValidSuffix(std::string(65, 'a')));
  EXPECT_TRUE(ValidSuffix(std::string(64, 'a')));
  EXPECT_FALSE(ValidSuffix("a:b"));
}

}  // namespace
}  // namespace burst
