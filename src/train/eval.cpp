#include "train/eval.h"

#include <algorithm>
#include <map>

#include "model/sampler.h"

namespace burst {

Batch MakeBatch(const std::vector<const Example*>& examples, torch::Device device) {
  size_t longest = 0;
  for (const Example* e : examples) longest = std::max(longest, e->ids.size());
  const int64_t b = static_cast<int64_t>(examples.size()), t = static_cast<int64_t>(longest);
  torch::Tensor ids = torch::zeros({b, t}, torch::kInt64);      // (B, T)
  torch::Tensor w = torch::zeros({b, t}, torch::kFloat32);      // (B, T)
  auto ids_a = ids.accessor<int64_t, 2>();
  auto w_a = w.accessor<float, 2>();
  Batch batch;
  for (int64_t i = 0; i < b; ++i) {
    const Example& e = *examples[i];
    for (size_t j = 0; j < e.ids.size(); ++j) {
      ids_a[i][j] = e.ids[j];
      w_a[i][j] = e.weights[j];
    }
    batch.tokens += static_cast<int64_t>(e.ids.size());
  }
  batch.inputs = ids.narrow(1, 0, t - 1).to(device);     // (B, T-1)
  batch.targets = ids.narrow(1, 1, t - 1).to(device);    // (B, T-1)
  batch.weights = w.narrow(1, 1, t - 1).to(device);      // (B, T-1)
  return batch;
}

PackedBatch MakePackedBatch(const std::vector<const Example*>& examples, torch::Device device) {
  PackedBatch batch;
  std::vector<int64_t> ids, targets;
  std::vector<float> weights;
  for (const Example* e : examples) {
    const size_t n = e->ids.size();
    batch.tokens += static_cast<int64_t>(n);
    if (n < 2) continue;
    batch.seq_lens.push_back(static_cast<int64_t>(n - 1));
    ids.insert(ids.end(), e->ids.begin(), e->ids.end() - 1);
    targets.insert(targets.end(), e->ids.begin() + 1, e->ids.end());
    weights.insert(weights.end(), e->weights.begin() + 1, e->weights.end());
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  batch.inputs = torch::tensor(ids, torch::kInt64).view({1, n}).to(device);        // (1, N)
  batch.targets = torch::tensor(targets, torch::kInt64).view({1, n}).to(device);   // (1, N)
  batch.weights = torch::tensor(weights, torch::kFloat32).view({1, n}).to(device); // (1, N)
  return batch;
}

torch::Tensor CompletionLogProbs(const LlamaModel& model, const std::vector<PromptCompletion>& seqs,
                                 int64_t* tokens) {
  std::vector<Example> examples(seqs.size());
  std::vector<const Example*> ptrs;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& [prompt, completion] = seqs[i];
    examples[i].ids = *prompt;
    examples[i].ids.insert(examples[i].ids.end(), completion->begin(), completion->end());
    examples[i].weights.assign(prompt->size(), 0.0f);
    examples[i].weights.resize(examples[i].ids.size(), 1.0f);
    ptrs.push_back(&examples[i]);
  }
  Batch b = MakeBatch(ptrs, model.device);
  if (tokens) *tokens += b.tokens;
  torch::Tensor hidden = model.Hidden(b.inputs);                                  // (N, T, C)
  TargetLogProbs t = SelectedLogProbs(model, hidden, b.targets, b.weights);
  return torch::zeros({b.inputs.size(0)}, t.logp.options())
      .index_add(0, t.rows.div(b.inputs.size(1), "floor"), t.logp * t.weights);   // (N)
}

Json EvalResult::ToJson() const {
  Json j = {{"eval_loss", loss}, {"eval_token_acc", token_acc}};
  j["eval_exact_match"] = exact_match ? Json(*exact_match) : Json();
  j["eval_label_acc"] = label_acc ? Json(*label_acc) : Json();
  return j;
}

namespace {

}  // namespace

EvalResult Evaluate(const LlamaModel& model, const Tokenizer& tokenizer, const Dataset& data,
                    const EvalOptions& options) {
  torch::NoGradGuard no_grad;
  auto check_stop = [&] {
    if (options.should_stop && options.should_stop()) throw Error(Code::kCancelled, "evaluation stopped", "");
  };
  EvalResult r;
  r.examples = static_cast<int64_t>(data.examples.size());
  double nll = 0.0, correct = 0.0, count = 0.0;
  for (size_t start = 0; start < data.examples.size(); start += options.batch_size) {
    check_stop();
    std::vector<const Example*> ptrs;
    for (size_t i = start; i < std::min(data.examples.size(), start + options.batch_size); ++i)
      ptrs.push_back(&data.examples[i]);
    // Packed end to end (no padding), as training packs.
    PackedBatch b = MakePackedBatch(ptrs, model.device);
    if (b.seq_lens.empty()) continue;
    ForwardOptions fo;
    fo.seq_lens = b.seq_lens;
    torch::Tensor hidden = model.Hidden(b.inputs, nullptr, fo);                   // (1, N, C)
    TargetLogProbs t = SelectedLogProbs(model, hidden, b.targets, b.weights, /*with_hits=*/true);
    nll -= (t.logp * t.weights).sum().item<double>();
    correct += (t.hit.to(torch::kFloat32) * t.weights).sum().item<double>();
    count += t.weights.sum().item<double>();
  }
  r.loss_tokens = static_cast<int64_t>(count);
  r.loss = count > 0 ? nll / count : 0.0;
  r.token_acc = count > 0 ? correct / count : 0.0;

  std::vector<const Example*> completions;
  for (const auto& e : data.examples)
    if (!e.completion_ids.empty() && !e.prompt_ids.empty()) completions.push_back(&e);
  if (completions.empty()) return r;

  std::vector<int> stops = tokenizer.stop_ids;
  stops.push_back(completions[0]->completion_ids.back());  // the format's end-of-turn token
  if (options.exact_match) {
    size_t longest = 0;
    for (const Example* e : completions) longest = std::max(longest, e->completion_ids.size());
    int64_t hits = 0;
    for (const Example* e : completions) {
      check_stop();
      std::vector<int> got = GreedyIds(model, e->prompt_ids, stops, static_cast<int64_t>(longest) + 4);
      std::vector<int> want(e->completion_ids.begin(), e->completion_ids.end() - 1);
      auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(" \t\n"));
        s.erase(s.find_last_not_of(" \t\n") + 1);
        return s;
      };
      hits += trim(tokenizer.Decode(got, true)) == trim(tokenizer.Decode(want, true));
    }
    r.exact_match = static_cast<double>(hits) / static_cast<double>(completions.size());
  }
  if (options.label_accuracy) {
    std::map<std::vector<int>, int> label_index;
    std::vector<std::vector<int>> labels;
    for (const Example* e : completions) {
      if (label_index.emplace(e->completion_ids, static_cast<int>(labels.size())).second)
        labels.push_back(e->completion_ids);
    }
    const auto k = static_cast<int64_t>(labels.size());
    if (k >= 2 && k <= options.max_labels && 2 * k <= static_cast<int64_t>(completions.size())) {
      int64_t hits = 0;
      for (const Example* e : completions) {
        check_stop();
        std::vector<PromptCompletion> seqs;
        for (const auto& label : labels) seqs.emplace_back(&e->prompt_ids, &label);
        int best = static_cast<int>(CompletionLogProbs(model, seqs).argmax().item<int64_t>());
        hits += best == label_index[e->completion_ids];
      }
      r.labels = k;
      r.label_acc = static_cast<double>(hits) / static_cast<double>(completions.size());
    }
  }
  return r;
}

}  // namespace burst
