#include "model/sampler.h"

#include <algorithm>

#include "core/status.h"
#include "model/batch_decoder.h"

namespace burst {
std::vector<SampleOutput> Sample(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<int>& prompt, const SampleParams& p) {
  BatchDecoderOptions opt;
  opt.max_rows = std::max<int64_t>(1, p.n);
  BatchDecoder decoder(model, tokenizer, opt);
  decoder.Add(prompt, p);
  while (decoder.Step()) {
  }
  return std::move(decoder.TakeFinished().at(0).samples);
}

std::vector<int> GreedyIds(const LlamaModel& model, const std::vector<int>& prompt,
                           const std::vector<int>& stop_ids, int64_t max_tokens) {
  torch::NoGradGuard no_grad;
  const int64_t plen = static_cast<int64_t>(prompt.size());
  KVCache cache = model.NewCache(1, plen + max_tokens);
  std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
  ForwardOptions opt;
  opt.last_only = true;
  torch::Tensor logits = model.Forward(torch::tensor(prompt64).view({1, plen}).to(model.device), &cache, opt);
  std::vector<int> out;
  for (int64_t step = 0; step < max_tokens; ++step) {
    int64_t tok = logits.reshape({-1}).argmax().item<int64_t>();
    if (std::find(stop_ids.begin(), stop_ids.end(), tok) != stop_ids.end()) break;
    out.push_back(static_cast<int>(tok));
    if (step + 1 == max_tokens) break;
    logits = model.Forward(torch::tensor({tok}).view({1, 1}).to(model.device), &cache, opt);
  }
  return out;
}

}  // namespace burst
