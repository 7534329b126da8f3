#include "model/sampler.h"

#include <algorithm>

#include "core/status.h"

namespace burst {
namespace {

// Picks one token id from next-token logits (V) with temperature/top-k/top-p.
int64_t PickToken(const torch::Tensor& logits, const SampleParams& p, at::Generator& gen) {
  if (p.temperature <= 0.0) return logits.argmax().item<int64_t>();
  torch::Tensor scaled = logits / p.temperature;                         // (V)
  if (p.top_k > 0 && p.top_k < scaled.size(0)) {
    torch::Tensor kth = std::get<0>(scaled.topk(p.top_k)).min();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(scaled, -1);                      // (V)
  if (p.top_p < 1.0) {
    auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);  // (V), (V)
    torch::Tensor cum = sorted.cumsum(-1);
    // Keep tokens whose preceding mass is below top_p (the first is always kept).
    torch::Tensor drop = (cum - sorted) >= p.top_p;
    sorted = sorted.masked_fill(drop, 0.0);
    probs = torch::zeros_like(probs).scatter(0, order, sorted);
  }
  return probs.multinomial(1, /*replacement=*/false, gen).item<int64_t>();
}

// How much of `text`'s end to hold back from a stream: an incomplete UTF-8
// character, or a suffix that is the start of a stop string.
size_t HeldBack(const std::string& text, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (size_t k = 1; k <= std::min<size_t>(3, text.size()); ++k) {
    unsigned char c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t len = (c & 0x80) == 0 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (len > k) held = k;
    break;
  }
  for (const auto& s : stops) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > held; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

}  // namespace

std::vector<SampleOutput> Sample(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<int>& prompt, const SampleParams& p) {
  if (prompt.empty()) throw Error(Code::kInvalidArgument, "the prompt is empty", "prompt");
  if (p.n < 1) throw Error(Code::kInvalidArgument, "n must be at least 1", "n");
  if (p.max_tokens < 1) throw Error(Code::kInvalidArgument, "max_tokens must be at least 1", "max_tokens");
  if (p.temperature < 0.0) throw Error(Code::kInvalidArgument, "temperature must be >= 0 (0 = greedy)", "temperature");
  if (p.top_k < 0) throw Error(Code::kInvalidArgument, "top_k must be >= 0 (0 = off)", "top_k");
  if (p.top_p <= 0.0 || p.top_p > 1.0) throw Error(Code::kInvalidArgument, "top_p must be in (0, 1]", "top_p");
  const int64_t limit = model.config.max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) >= limit) {
    throw Error(Code::kInvalidArgument,
                "the prompt has " + std::to_string(prompt.size()) +
                    " tokens; the model's context is " + std::to_string(limit),
                "prompt");
  }
  torch::NoGradGuard no_grad;
  const int64_t n = p.n, plen = static_cast<int64_t>(prompt.size());
  const int64_t max_new = std::min(p.max_tokens, limit - plen);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(p.seed);
  KVCache cache = model.NewCache(n, plen + max_new);
  std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
  torch::Tensor ids = torch::tensor(prompt64).view({1, plen}).repeat({n, 1}).to(model.device);
  ForwardOptions opt;
  opt.last_only = true;
  torch::Tensor logits = model.Forward(ids, &cache, opt);                // (n, 1, V)
  std::vector<SampleOutput> out(static_cast<size_t>(n));
  std::vector<bool> done(static_cast<size_t>(n), false);
  std::vector<std::vector<int>> text_ids(static_cast<size_t>(n));
  // Set when a stop string cut the text (which may leave it empty).
  std::vector<bool> text_cut(static_cast<size_t>(n), false);
  std::vector<size_t> streamed(static_cast<size_t>(n), 0);  // bytes of text already sent to on_delta
  bool stopped = false;
  for (int64_t step = 0; step < max_new; ++step) {
    if (p.should_stop && p.should_stop()) {
      stopped = true;
      break;
    }
    torch::Tensor last = logits.select(1, 0).to(torch::kCPU);           // (n, V)
    torch::Tensor logp = torch::log_softmax(last, -1);                  // (n, V)
    std::vector<int64_t> next(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      int64_t tok = PickToken(last[i], p, gen);
      next[i] = tok;
      SampleOutput& o = out[i];
      o.token_ids.push_back(static_cast<int>(tok));
      o.logprobs.push_back(logp[i][tok].item<float>());
      if (std::find(tokenizer.stop_ids.begin(), tokenizer.stop_ids.end(), tok) != tokenizer.stop_ids.end() ||
          std::find(p.extra_stop_ids.begin(), p.extra_stop_ids.end(), tok) != p.extra_stop_ids.end()) {
        done[i] = true;
        o.finish_reason = "stop";
        if (p.on_delta) p.on_delta(i, "", static_cast<int>(tok), o.logprobs.back(), "");
        continue;
      }
      text_ids[i].push_back(static_cast<int>(tok));
      if (!p.stop.empty() || p.on_delta) {
        std::string text = tokenizer.Decode(text_ids[i], /*skip_special=*/true);
        for (const auto& s : p.stop) {
          if (s.empty()) continue;
          if (auto at = text.find(s); at != std::string::npos) {
            done[i] = true;
            o.finish_reason = "stop";
            o.text = text.substr(0, at);
            text_cut[i] = true;
            break;
          }
        }
        if (p.on_delta) {
          const std::string& visible = text_cut[i] ? o.text : text;
          size_t upto = text_cut[i] ? visible.size() : visible.size() - HeldBack(visible, p.stop);
          upto = std::max(upto, streamed[i]);
          p.on_delta(i, visible.substr(streamed[i], upto - streamed[i]), static_cast<int>(tok), o.logprobs.back(), "");
          streamed[i] = upto;
        }
      }
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (step + 1 == max_new) break;
    torch::Tensor feed = torch::tensor(next).view({n, 1}).to(model.device);
    logits = model.Forward(feed, &cache, opt);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (out[i].finish_reason.empty()) out[i].finish_reason = stopped ? "cancelled" : "length";
    if (!text_cut[i]) out[i].text = tokenizer.Decode(text_ids[i], /*skip_special=*/true);
    if (p.on_delta) {
      const std::string& t = out[i].text;
      p.on_delta(i, streamed[i] < t.size() ? t.substr(streamed[i]) : "", -1, 0.0f, out[i].finish_reason);
    }
  }
  return out;
}

std::vector<int> GreedyIds(const LlamaModel& model, const std::vector<int>& prompt,
                           const std::vector<int>& stop_ids, int64_t max_tokens) {
  torch::NoGradGuard no_grad;
  const int64_t plen = static_cast<int64_t>(prompt.size());
  KVCache cache = model.NewCache(1, plen + max_tokens);
  std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
  ForwardOptions opt;
  opt.last_only = true;
  torch::Tensor logits = model.Forward(torch::tensor(prompt64).view({1, plen}).to(model.device),
                                       &cache, opt);
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
