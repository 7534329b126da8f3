#include "store/keys.h"

#include <gtest/gtest.h>

#include "store/object_store.h"

namespace burst {
namespace {

// The layout written by every earlier version, spelt out: a data folder
// from before must still be found where these functions look.
TEST(Keys, TheLayoutIsTheOneExistingDataFoldersUse) {
  EXPECT_EQ(FileKey("org-a1", "file-b2"), "orgs/org-a1/files/file-b2");
  const std::string job = JobPrefix("org-a1", "ftjob-c3");
  EXPECT_EQ(job, "orgs/org-a1/jobs/ftjob-c3/");
  EXPECT_EQ(MetricsKey(job), "orgs/org-a1/jobs/ftjob-c3/metrics.jsonl");
  const std::string cp = CheckpointPrefix(job, 100);
  EXPECT_EQ(cp, "orgs/org-a1/jobs/ftjob-c3/checkpoints/step-00000100/");
  EXPECT_EQ(SamplerPrefix(cp), "orgs/org-a1/jobs/ftjob-c3/checkpoints/step-00000100/sampler/");
  EXPECT_EQ(StatePrefix(cp), "orgs/org-a1/jobs/ftjob-c3/checkpoints/step-00000100/state/");
}

TEST(Keys, StepFoldersSortByStep) {
  EXPECT_EQ(StepFolder(0), "step-00000000");
  EXPECT_EQ(StepFolder(7), "step-00000007");
  EXPECT_EQ(StepFolder(12345678), "step-12345678");
  EXPECT_EQ(StepFolder(123456789), "step-123456789") << "wider steps keep every digit";
  EXPECT_LT(StepFolder(99), StepFolder(100));
}

TEST(Keys, EveryBuiltKeyIsAValidStoreKey) {
  const std::string cp = CheckpointPrefix(JobPrefix("org-x", "ftjob-y"), 30);
  for (const std::string& k :
       {FileKey("org-x", "file-z"), MetricsKey(JobPrefix("org-x", "ftjob-y")),
        SamplerPrefix(cp) + "adapter_model.safetensors", StatePrefix(cp) + "manifest.json"}) {
    EXPECT_TRUE(ValidateKey(k).ok()) << k;
  }
}

TEST(Keys, JobOfKeyFindsTheJobWhoseFolderHoldsTheKey) {
  const std::string job = JobPrefix("org-a", "ftjob-b");
  EXPECT_EQ(JobOfKey(SamplerPrefix(CheckpointPrefix(job, 5))), "ftjob-b");
  EXPECT_EQ(JobOfKey(StatePrefix(CheckpointPrefix(job, 5)) + "state.json"), "ftjob-b");
  EXPECT_EQ(JobOfKey(MetricsKey(job)), "ftjob-b");
  EXPECT_EQ(JobOfKey(job), "ftjob-b");
  // Keys outside any job's folder belong to none.
  EXPECT_EQ(JobOfKey(""), "") << "a base model";
  EXPECT_EQ(JobOfKey(FileKey("org-a", "file-jobs")), "");
  EXPECT_EQ(JobOfKey("orgs/org-a/jobs/ftjob-b"), "") << "no folder without its '/'";
  EXPECT_EQ(JobOfKey("orgs/org-a/jobs//checkpoints/"), "");
  EXPECT_EQ(JobOfKey("orgs//jobs/ftjob-b/x"), "");
  EXPECT_EQ(JobOfKey("other/org-a/jobs/ftjob-b/x"), "");
  EXPECT_EQ(JobOfKey("orgs/org-a/files/jobs/ftjob-b/x"), "") << "only the job folder's own place counts";
  // A training loop run's checkpoints belong to the run.
  const std::string run = LoopPrefix("org-a", "sess-x-train-0");
  EXPECT_EQ(JobOfKey(LoopCheckpointPrefix(run, "sampler_weights", "s1")), "sess-x-train-0");
  EXPECT_EQ(JobOfKey("orgs/org-a/loops/sess-x"), "");
}

}  // namespace
}  // namespace burst
