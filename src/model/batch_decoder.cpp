#include "model/batch_decoder.h"

#include <algorithm>
#include <limits>

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

void ValidateSampleRequest(const LlamaModel& model, const std::vector<int>& prompt, const SampleParams& p) {
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
}

// SplitMix64 of seed + k steps (sample 0 keeps the seed as given).
uint64_t BatchDecoder::SampleSeed(uint64_t seed, int64_t k) {
  if (k == 0) return seed;
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(k);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

BatchDecoder::BatchDecoder(const LlamaModel& model, const Tokenizer& tokenizer, BatchDecoderOptions options)
    : model_(model), tok_(tokenizer), opt_(options) {
  opt_.max_rows = std::max<int64_t>(1, opt_.max_rows);
}

int64_t BatchDecoder::Add(std::vector<int> prompt, SampleParams params) {
  ValidateSampleRequest(model_, prompt, params);
  Request req;
  req.max_new = std::min(params.max_tokens,
                         model_.config.max_position_embeddings - static_cast<int64_t>(prompt.size()));
  req.prompt = std::move(prompt);
  req.params = std::move(params);
  const int64_t id = next_id_++;
  queue_.emplace_back(id, std::move(req));
  return id;
}

int64_t BatchDecoder::live_rows() const {
  int64_t n = 0;
  for (const Row& r : rows_) n += r.request >= 0;
  return n;
}

void BatchDecoder::EnsureCache(int64_t rows, int64_t positions) {
  const int64_t have_rows = static_cast<int64_t>(cache_.lengths.size());
  if (rows <= have_rows && positions <= cache_.capacity) return;
  const int64_t limit = model_.config.max_position_embeddings;
  // Grow geometrically (within the context) so a stream of longer requests
  // does not copy the cache each time.
  const int64_t cap = std::max(positions, std::min(limit, cache_.capacity * 2));
  const int64_t n = std::max({rows, have_rows, std::min(opt_.max_rows, have_rows * 2)});
  KVCache grown = model_.NewCache(n, cap);
  for (size_t li = 0; li < grown.k.size() && have_rows > 0; ++li) {
    grown.k[li].narrow(0, 0, have_rows).narrow(2, 0, cache_.capacity).copy_(cache_.k[li]);
    grown.v[li].narrow(0, 0, have_rows).narrow(2, 0, cache_.capacity).copy_(cache_.v[li]);
  }
  grown.lengths = cache_.lengths;
  grown.lengths.resize(static_cast<size_t>(n), 0);
  cache_ = std::move(grown);
  rows_.resize(static_cast<size_t>(n));
}

void BatchDecoder::Admit() {
  torch::NoGradGuard no_grad;
  while (!queue_.empty()) {
    Request& req = queue_.front().second;
    const int64_t n = req.params.n;
    const int64_t free_rows = static_cast<int64_t>(rows_.size()) - live_rows();
    // It fits in free rows, or in rows the cache may grow to; a request
    // larger than max_rows runs alone.
    const int64_t live = live_rows();
    if (n > free_rows && live + n > opt_.max_rows && live > 0) return;
    const int64_t id = queue_.front().first;
    const int64_t plen = static_cast<int64_t>(req.prompt.size());
    EnsureCache(std::max(static_cast<int64_t>(rows_.size()), live + n), plen + req.max_new);
    std::vector<int64_t> picked;
    for (int64_t r = 0; r < static_cast<int64_t>(rows_.size()) && static_cast<int64_t>(picked.size()) < n; ++r) {
      if (rows_[static_cast<size_t>(r)].request < 0) picked.push_back(r);
    }
    // One prefill for the n samples, its keys and values copied to the rest.
    const int64_t first = picked[0];
    cache_.lengths[static_cast<size_t>(first)] = 0;
    std::vector<int64_t> prompt64(req.prompt.begin(), req.prompt.end());
    ForwardOptions fo;
    fo.last_only = true;
    fo.rows = {first};
    torch::Tensor logits =
        model_.Forward(torch::tensor(prompt64).view({1, plen}).to(model_.device), &cache_, fo)[0][0].to(torch::kCPU);
    torch::Tensor logp = torch::log_softmax(logits, -1);                 // (V)
    for (size_t k = 1; k < picked.size(); ++k) {
      for (size_t li = 0; li < cache_.k.size(); ++li) {
        cache_.k[li][picked[k]].narrow(1, 0, plen).copy_(cache_.k[li][first].narrow(1, 0, plen));
        cache_.v[li][picked[k]].narrow(1, 0, plen).copy_(cache_.v[li][first].narrow(1, 0, plen));
      }
      cache_.lengths[static_cast<size_t>(picked[k])] = plen;
    }
    req.seqs.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      req.seqs[static_cast<size_t>(k)].gen = at::make_generator<at::CPUGeneratorImpl>(BatchDecoder::SampleSeed(req.params.seed, k));
      Row& row = rows_[static_cast<size_t>(picked[static_cast<size_t>(k)])];
      row = Row{};
      row.request = id;
      row.index = k;
      row.logits = logits;
      row.logp = logp;
    }
    req.live = n;
    requests_.emplace(id, std::move(req));
    queue_.pop_front();
  }
}

void BatchDecoder::Pick(Row& row) {
  Request& req = requests_.at(row.request);
  const SampleParams& p = req.params;
  Seq& seq = req.seqs[static_cast<size_t>(row.index)];
  SampleOutput& o = seq.out;
  const int64_t tok = PickToken(row.logits, p, seq.gen);
  const float lp = row.logp.data_ptr<float>()[tok];
  o.token_ids.push_back(static_cast<int>(tok));
  o.logprobs.push_back(lp);
  row.fed = false;
  auto end_row = [&](const char* reason) {
    if (reason) o.finish_reason = reason;
    seq.done = true;
    --req.live;
    row.request = -1;
    row.logits = row.logp = torch::Tensor();
  };
  if (std::find(tok_.stop_ids.begin(), tok_.stop_ids.end(), tok) != tok_.stop_ids.end() ||
      std::find(p.extra_stop_ids.begin(), p.extra_stop_ids.end(), tok) != p.extra_stop_ids.end()) {
    if (p.on_delta) p.on_delta(row.index, "", static_cast<int>(tok), lp, "");
    return end_row("stop");
  }
  seq.text_ids.push_back(static_cast<int>(tok));
  if (!p.stop.empty() || p.on_delta) {
    std::string text = tok_.Decode(seq.text_ids, /*skip_special=*/true);
    for (const auto& s : p.stop) {
      if (s.empty()) continue;
      if (auto at = text.find(s); at != std::string::npos) {
        o.text = text.substr(0, at);
        seq.cut = true;
        break;
      }
    }
    if (p.on_delta) {
      const std::string& visible = seq.cut ? o.text : text;
      size_t upto = seq.cut ? visible.size() : visible.size() - HeldBack(visible, p.stop);
      upto = std::max(upto, seq.streamed);
      p.on_delta(row.index, visible.substr(seq.streamed, upto - seq.streamed), static_cast<int>(tok), lp, "");
      seq.streamed = upto;
    }
    if (seq.cut) return end_row("stop");
  }
  if (static_cast<int64_t>(o.token_ids.size()) >= req.max_new) return end_row(nullptr);  // "length"
  row.fed = true;
  row.token = tok;
}

void BatchDecoder::Finish(int64_t request_id) {
  auto it = requests_.find(request_id);
  Request& req = it->second;
  std::vector<SampleOutput> outs;
  for (size_t i = 0; i < req.seqs.size(); ++i) {
    Seq& seq = req.seqs[i];
    if (seq.out.finish_reason.empty()) seq.out.finish_reason = req.stopped ? "cancelled" : "length";
    if (!seq.cut) seq.out.text = tok_.Decode(seq.text_ids, /*skip_special=*/true);
    if (req.params.on_delta) {
      const std::string& t = seq.out.text;
      req.params.on_delta(static_cast<int64_t>(i), seq.streamed < t.size() ? t.substr(seq.streamed) : "", -1, 0.0f,
                          seq.out.finish_reason);
    }
    outs.push_back(std::move(seq.out));
  }
  finished_.emplace_back(request_id, std::move(outs));
  requests_.erase(it);
}

bool BatchDecoder::Step() {
  torch::NoGradGuard no_grad;
  Admit();
  // A request whose caller stopped it ends where it is, every sample.
  for (auto& [id, req] : requests_) {
    if (req.stopped || !req.params.should_stop || !req.params.should_stop()) continue;
    req.stopped = true;
    for (Row& row : rows_) {
      if (row.request != id) continue;
      req.seqs[static_cast<size_t>(row.index)].done = true;
      row = Row{};
    }
    req.live = 0;
  }
  for (Row& row : rows_) {
    if (row.request >= 0) Pick(row);
  }
  std::vector<int64_t> done;
  for (const auto& [id, req] : requests_) {
    if (req.live == 0) done.push_back(id);
  }
  for (int64_t id : done) Finish(id);
  // One forward for every row that goes on.
  std::vector<int64_t> fed_rows, tokens;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].request >= 0 && rows_[r].fed) {
      fed_rows.push_back(static_cast<int64_t>(r));
      tokens.push_back(rows_[r].token);
    }
  }
  if (!fed_rows.empty()) {
    const int64_t b = static_cast<int64_t>(fed_rows.size());
    ForwardOptions fo;
    fo.last_only = true;
    fo.rows = fed_rows;
    torch::Tensor logits =
        model_.Forward(torch::tensor(tokens).view({b, 1}).to(model_.device), &cache_, fo).select(1, 0).to(torch::kCPU);
    torch::Tensor logp = torch::log_softmax(logits, -1);                 // (b, V)
    for (int64_t i = 0; i < b; ++i) {
      Row& row = rows_[static_cast<size_t>(fed_rows[static_cast<size_t>(i)])];
      row.logits = logits[i];
      row.logp = logp[i];
    }
  }
  return !idle();
}

std::vector<std::pair<int64_t, std::vector<SampleOutput>>> BatchDecoder::TakeFinished() {
  return std::exchange(finished_, {});
}

}  // namespace burst
