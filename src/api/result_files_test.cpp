// A job's result file (api/result_files.h): its id both ways, and the CSV
// of its metrics.jsonl as OpenAI's result files lay it out.
#include "api/result_files.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

TEST(ResultFiles, IdsRoundTripAndOtherIdsAreNotResultFiles) {
  EXPECT_EQ(ResultFileId("ftjob-abc123"), "file-abc123-metrics");
  EXPECT_EQ(ResultFileJob("file-abc123-metrics"), "ftjob-abc123");
  for (const char* other : {"file-abc123", "file--metrics", "file-ABC-metrics", "file-a/b-metrics",
                            "ftjob-abc", "file-abc-metrics-metrics"}) {
    EXPECT_EQ(ResultFileJob(other), std::nullopt) << other;
  }
}

TEST(ResultFiles, OneRowPerStepWithItsEvaluationBeside) {
  const std::string jsonl =
      R"({"type":"eval","step":0,"eval_loss":2.5,"eval_token_acc":0.25})"
      "\n"
      R"({"type":"train","step":1,"train_loss":2.25,"lr":0.001})"
      "\n"
      "not json\n"
      R"({"type":"train","step":2,"train_loss":1.5})"
      "\n"
      R"({"type":"eval","step":2,"eval_loss":1.75,"eval_token_acc":0.5,"eval_label_acc":null})"
      "\n"
      R"({"type":"train","train_loss":9})"
      "\n";
  EXPECT_EQ(MetricsCsv(jsonl),
            "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n"
            "0,,,2.5,0.25\n"
            "1,2.25,,,\n"
            "2,1.5,,1.75,0.5\n");
  EXPECT_EQ(MetricsCsv(""), "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n");
}

}  // namespace
}  // namespace burst
