// burst_bench batches: the micro-batches a recipe's run trains on, for the
// peers of the real-data benchmark (bench/train_real.sh, docs/bench.md).
//
//   burst_bench batches --recipe FILE --out FILE [--steps N] [--eval-out FILE]
//
// Loads the recipe's training file with Burst's own tokenizer and chat
// template (data.h) and writes, for each step of the run (or the first N),
// one JSON line per micro-batch:
//   {"step": S, "ids": [[...], ...], "weights": [[...], ...]}
// weights[t] being the loss weight of predicting ids[t] (0 for the prompt),
// in the order trainer.cpp trains them (schedule.h). A peer that reads this
// file trains on exactly the tokens, batches and order Burst does.
// With --eval-out, also the recipe's held-out examples (valid_file), what
// Burst evaluates on (train/eval.h): a first line {"stop_ids": [...]} (the
// tokenizer's), then one line per example:
//   {"ids": [...], "weights": [...], "prompt": [...], "completion": [...]}
// (prompt and completion empty where the example has none).
// Then prints one JSON line: steps, micro-batches, examples, tokens.
#include "train_batches.h"

#include <cstdio>
#include <fstream>

#include "core/json.h"
#include "core/status.h"
#include "model/tokenizer.h"
#include "train/data.h"
#include "train/recipe.h"
#include "train/schedule.h"

namespace burst {
namespace {

void WriteEvalExamples(const Recipe& r, const Tokenizer& tok, const std::string& out) {
  if (r.valid_file.empty())
    throw Error(Code::kInvalidArgument, "--eval-out: the recipe has no valid_file", "eval-out");
  const Dataset valid =
      LoadSupervised(r.valid_file, tok, DataOptions{r.max_seq_len, r.truncate, r.chat_template});
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(Code::kInvalidArgument, "cannot write " + out, "eval-out");
  f << Json{{"stop_ids", tok.stop_ids}}.dump() << "\n";
  for (const Example& e : valid.examples) {
    f << Json{{"ids", e.ids},
              {"weights", e.weights},
              {"prompt", e.prompt_ids},
              {"completion", e.completion_ids}}
             .dump()
      << "\n";
  }
  f.close();
  if (!f) throw Error(Code::kDataLoss, "writing " + out + " failed", "eval-out");
}

int BatchesBench(const std::string& recipe_path, const std::string& out, int64_t steps,
                 const std::string& eval_out) {
  const Recipe r = Recipe::FromFile(recipe_path);
  if (r.loss == "dpo") throw Error(Code::kInvalidArgument, "batches: supervised recipes only", "loss");
  auto tok = LoadTokenizer(ResolveModelPath(r.model));
  const Dataset data =
      LoadSupervised(r.train_file, *tok, DataOptions{r.max_seq_len, r.truncate, r.chat_template});
  StepSchedule sched{static_cast<int64_t>(data.examples.size()), r.batch_size, r.grad_accum, r.seed};
  int64_t total = sched.StepsPerEpoch() * r.epochs;
  if (r.max_steps) total = std::min(total, *r.max_steps);
  if (steps > 0) total = std::min(total, steps);
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(Code::kInvalidArgument, "cannot write " + out, "out");
  int64_t micro = 0, examples = 0, tokens = 0;
  for (int64_t s = 1; s <= total; ++s) {
    for (const auto& batch : sched.MicroBatches(s)) {
      Json ids = Json::array(), weights = Json::array();
      for (size_t i : batch) {
        const Example& e = data.examples[i];
        ids.push_back(e.ids);
        weights.push_back(e.weights);
        tokens += static_cast<int64_t>(e.ids.size());
      }
      examples += static_cast<int64_t>(batch.size());
      ++micro;
      f << Json{{"step", s}, {"ids", ids}, {"weights", weights}}.dump() << "\n";
    }
  }
  f.close();
  if (!f) throw Error(Code::kDataLoss, "writing " + out + " failed", "out");
  if (!eval_out.empty()) WriteEvalExamples(r, *tok, eval_out);
  OrderedJson res = {{"impl", "burst"},
                     {"method", "batches"},
                     {"steps", total},
                     {"micro_batches", micro},
                     {"examples", examples},
                     {"tokens", tokens},
                     {"max_len", data.stats.max_len}};
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

}  // namespace

void AddBatchesCommand(CLI::App& app, int* rc) {
  static std::string recipe, out, eval_out;
  static int64_t steps = 0;
  auto* cmd =
      app.add_subcommand("batches", "the micro-batches a recipe's run trains on, as JSON lines (for peers)");
  cmd->add_option("--recipe", recipe)->required();
  cmd->add_option("--out", out)->required();
  cmd->add_option("--steps", steps, "only the first N steps (0: the whole run)")->capture_default_str();
  cmd->add_option("--eval-out", eval_out, "also the recipe's held-out examples (valid_file), as JSON lines");
  cmd->callback([rc] { *rc = BatchesBench(recipe, out, steps, eval_out); });
}

}  // namespace burst
