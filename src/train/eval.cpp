#include "train/eval.h"

#include <algorithm>
#include <map>

#include "model/batch_decoder.h"
#include "model/sampler.h"
#include "train/loop_pack.h"

namespace burst {

Batch MakeBatch(const std::vector<const Example*>& examples, torch::Device device) {
  size_t longest = 0;
  for (const Example* e : examples) longest = std::max(longest, e->ids.size());
  const int64_t b = static_cast<int64_t>(examples.size()), t = static_cast<int64_t>(longest);
  torch::Tensor ids = torch::zeros({b, t}, torch::kInt64);  // (B, T)
  torch::Tensor w = torch::zeros({b, t}, torch::kFloat32);  // (B, T)
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
  batch.inputs = ids.narrow(1, 0, t - 1).to(device);   // (B, T-1)
  batch.targets = ids.narrow(1, 1, t - 1).to(device);  // (B, T-1)
  batch.weights = w.narrow(1, 1, t - 1).to(device);    // (B, T-1)
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
  batch.inputs = torch::tensor(ids, torch::kInt64).view({1, n}).to(device);         // (1, N)
  batch.targets = torch::tensor(targets, torch::kInt64).view({1, n}).to(device);    // (1, N)
  batch.weights = torch::tensor(weights, torch::kFloat32).view({1, n}).to(device);  // (1, N)
  return batch;
}

void SelectLossPositions(Batch* batch, ForwardOptions* options) {
  const torch::Tensor w = batch->weights.reshape({-1});  // (B*T)
  const torch::Tensor at = w.nonzero().reshape({-1});    // (M)
  batch->weights = w.index_select(0, at).view({1, -1});  // (1, M)
  batch->targets = batch->targets.reshape({-1}).index_select(0, at).view({1, -1});
  options->outputs = at;
}

torch::Tensor CompletionLogProbs(const LlamaModel& model, const std::vector<PromptCompletion>& seqs,
                                 int64_t* tokens, bool checkpoint_layers) {
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
  ForwardOptions fo;
  fo.checkpoint_layers = checkpoint_layers;
  torch::Tensor hidden = model.Hidden(b.inputs, nullptr, fo);  // (N, T, C)
  TargetLogProbs t = SelectedLogProbs(model, hidden, b.targets, b.weights);
  return torch::zeros({b.inputs.size(0)}, t.logp.options())
      .index_add(0, t.rows.div(b.inputs.size(1), "floor"), t.logp * t.weights);  // (N)
}

Json EvalResult::ToJson() const {
  Json j = {{"eval_loss", loss}, {"eval_token_acc", token_acc}};
  j["eval_exact_match"] = exact_match ? Json(*exact_match) : Json();
  j["eval_label_acc"] = label_acc ? Json(*label_acc) : Json();
  return j;
}

std::vector<std::vector<int>> GreedyCompletions(const LlamaModel& model, const Tokenizer& tokenizer,
                                                const std::vector<const Example*>& examples,
                                                const std::vector<int>& stops, int64_t max_tokens,
                                                const std::function<void()>& check_stop) {
  constexpr int64_t kRows = 32;  // rows decoded at once
  BatchDecoderOptions bo;
  bo.max_rows = kRows;
  BatchDecoder decoder(model, tokenizer, bo);
  SampleParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  params.extra_stop_ids = stops;
  for (const Example* e : examples) decoder.Add(e->prompt_ids, params);  // ids 0, 1, ... in order
  std::vector<std::vector<int>> out(examples.size());
  for (;;) {
    if (check_stop) check_stop();
    const bool more = decoder.Step();
    for (FinishedRequest& f : decoder.TakeFinished()) {
      std::vector<int>& ids = out.at(static_cast<size_t>(f.id));
      ids = std::move(f.samples.at(0).token_ids);
      if (!ids.empty() && std::find(stops.begin(), stops.end(), ids.back()) != stops.end()) ids.pop_back();
    }
    if (!more) break;
  }
  return out;
}

torch::Tensor LabelLogProbs(const LlamaModel& model, const std::vector<const Example*>& examples,
                            const std::vector<std::vector<int>>& labels) {
  std::vector<std::vector<int64_t>> seqs;
  int64_t widest = 0;
  for (const Example* e : examples) {
    int64_t width = static_cast<int64_t>(e->prompt_ids.size());
    for (const auto& label : labels) {
      std::vector<int64_t>& s = seqs.emplace_back(e->prompt_ids.begin(), e->prompt_ids.end());
      s.insert(s.end(), label.begin(), label.end());
      width += static_cast<int64_t>(label.size());
    }
    widest = std::max(widest, width);
  }
  const LoopPacking pk = PackLoopData(seqs, /*min_shared=*/1, widest);
  ForwardOptions fo;
  if (!pk.mask.empty()) {
    fo.positions = torch::tensor(pk.positions, torch::kInt64).view({pk.rows, pk.width});
    fo.attn_mask = torch::from_blob(const_cast<float*>(pk.mask.data()), {pk.rows, pk.width, pk.width},
                                    torch::kFloat32);  // a view of pk's mask, which outlives the forward
  }
  // Each label token's (packed position, id), and which (example, label) it scores.
  std::vector<int64_t> rows, targets, owner;
  size_t at = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const std::vector<int64_t>& x = seqs[s];
    const size_t plen = examples[s / labels.size()]->prompt_ids.size();
    for (size_t p = plen; p < x.size(); ++p) {  // position p - 1 predicts token p
      rows.push_back(pk.token_rows[at + p - 1]);
      targets.push_back(x[p]);
      owner.push_back(static_cast<int64_t>(s));
    }
    at += x.size();
  }
  torch::Tensor ids =
      torch::tensor(pk.ids, torch::kInt64).view({pk.rows, pk.width}).to(model.device);  // (G, T)
  torch::Tensor hidden = model.Hidden(ids, nullptr, fo);                                // (G, T, C)
  torch::Tensor logp = RowTargetLogProbs(model, hidden, torch::tensor(rows).to(model.device),
                                         torch::tensor(targets).to(model.device));  // (M)
  const auto e = static_cast<int64_t>(examples.size()), k = static_cast<int64_t>(labels.size());
  return torch::zeros({e * k}, logp.options())
      .index_add(0, torch::tensor(owner).to(model.device), logp)
      .view({e, k});  // (E, K)
}

EvalResult Evaluate(const LlamaModel& model, const Tokenizer& tokenizer, const Dataset& data,
                    const EvalOptions& options) {
  torch::NoGradGuard no_grad;
  auto check_stop = [&] {
    if (options.should_stop && options.should_stop()) throw Error(Code::kCancelled, "evaluation stopped", "");
  };
  if (options.batch_size < 1) BadField("batch_size", "must be at least 1");
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
    SelectLossPositions(&b, &fo);
    torch::Tensor hidden = model.Hidden(b.inputs, nullptr, fo);  // (1, M, C)
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
    const std::vector<std::vector<int>> got = GreedyCompletions(
        model, tokenizer, completions, stops, static_cast<int64_t>(longest) + 4, check_stop);
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\n"));
      s.erase(s.find_last_not_of(" \t\n") + 1);
      return s;
    };
    int64_t hits = 0;
    for (size_t i = 0; i < completions.size(); ++i) {
      const Example* e = completions[i];
      std::vector<int> want(e->completion_ids.begin(), e->completion_ids.end() - 1);
      hits += trim(tokenizer.Decode(got[i], true)) == trim(tokenizer.Decode(want, true));
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
      int64_t label_tokens = 0;
      for (const auto& label : labels) label_tokens += static_cast<int64_t>(label.size());
      // Up to batch_size examples a forward, fewer where long prompts would
      // make the packed rows' attention (rows x width^2) large.
      constexpr int64_t kAttentionBudget = int64_t{1} << 22;
      const auto per = static_cast<size_t>(options.batch_size);
      for (size_t start = 0; start < completions.size();) {
        check_stop();
        std::vector<const Example*> some;
        int64_t widest = 0;
        for (size_t i = start; i < completions.size() && some.size() < per; ++i) {
          const int64_t w =
              std::max(widest, static_cast<int64_t>(completions[i]->prompt_ids.size()) + label_tokens);
          if (!some.empty() && (static_cast<int64_t>(some.size()) + 1) * w * w > kAttentionBudget) break;
          widest = w;
          some.push_back(completions[i]);
        }
        start += some.size();
        const torch::Tensor scores = LabelLogProbs(model, some, labels);  // (E, K)
        const torch::Tensor best = scores.argmax(1).cpu();                // (E)
        for (size_t i = 0; i < some.size(); ++i)
          hits += best[static_cast<int64_t>(i)].item<int64_t>() == label_index[some[i]->completion_ids];
      }
      r.labels = k;
      r.label_acc = static_cast<double>(hits) / static_cast<double>(completions.size());
    }
  }
  return r;
}

}  // namespace burst
