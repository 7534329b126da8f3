#include "model/batch_decoder.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/status.h"

namespace burst {
namespace {

// Prompts that share at least this many leading tokens prefill them once.
constexpr int64_t kMinSharedPrefix = 16;

// The next token of each of G rows sampled alike: logits (G, V) on the CPU,
// one generator per row. Temperature, then top-k (ties with the k-th
// value kept), then top-p (tokens whose preceding mass is below top_p; the
// first is always kept), then one uniform draw per row against the
// cumulative probabilities (greedy: the argmax).
std::vector<int64_t> PickTokens(const torch::Tensor& logits, const SampleParams& p,
                                const std::vector<at::Generator*>& gens) {
  const int64_t g = logits.size(0), v = logits.size(1);
  std::vector<int64_t> out(static_cast<size_t>(g));
  if (p.temperature <= 0.0) {
    torch::Tensor best = logits.argmax(-1).contiguous();  // (G)
    std::copy(best.data_ptr<int64_t>(), best.data_ptr<int64_t>() + g, out.begin());
    return out;
  }
  torch::Tensor scaled = logits / p.temperature;  // (G, V)
  if (p.top_k > 0 && p.top_k < v) {
    torch::Tensor kth = std::get<0>(scaled.topk(p.top_k, -1)).amin(-1, /*keepdim=*/true);  // (G, 1)
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(scaled, -1);  // (G, V)
  if (p.top_p < 1.0) {
    auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);  // (G, V), (G, V)
    torch::Tensor drop = (sorted.cumsum(-1) - sorted) >= p.top_p;
    probs = torch::zeros_like(probs).scatter(1, order, sorted.masked_fill(drop, 0.0));
  }
  probs = probs.to(torch::kFloat64).contiguous();
  for (int64_t i = 0; i < g; ++i) {
    const double* row = probs.data_ptr<double>() + i * v;
    double total = 0;
    for (int64_t j = 0; j < v; ++j) total += row[j];
    at::CPUGeneratorImpl* gen = gens[static_cast<size_t>(i)]->get<at::CPUGeneratorImpl>();
    const double u = static_cast<double>(gen->random64() >> 11) * 0x1.0p-53 * total;  // [0, total)
    int64_t pick = -1;
    double cum = 0;
    for (int64_t j = 0; j < v; ++j) {
      if (row[j] <= 0) continue;
      pick = j;  // the last token with mass, should rounding leave u past the end
      cum += row[j];
      if (u < cum) break;
    }
    out[static_cast<size_t>(i)] = pick;
  }
  return out;
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
  const bool scored = p.prompt_logprobs || p.topk_prompt_logprobs > 0;
  if (p.max_tokens < (scored ? 0 : 1)) {
    throw Error(
        Code::kInvalidArgument,
        scored ? "max_tokens must be >= 0" : "max_tokens must be at least 1 (0 only with prompt logprobs)",
        "max_tokens");
  }
  if (p.topk_prompt_logprobs < 0) {
    throw Error(Code::kInvalidArgument, "topk_prompt_logprobs must be >= 0", "topk_prompt_logprobs");
  }
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs) {
    throw Error(Code::kInvalidArgument, "top_logprobs must be in 0.." + std::to_string(kMaxTopLogprobs),
                "top_logprobs");
  }
  const int64_t vocab = model.config.vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      throw Error(Code::kInvalidArgument,
                  "prompt[" + std::to_string(i) + "]: token id " + std::to_string(prompt[i]) +
                      " is outside the model's vocabulary (0.." + std::to_string(vocab - 1) + ")",
                  "prompt");
    }
  }
  if (p.temperature < 0.0)
    throw Error(Code::kInvalidArgument, "temperature must be >= 0 (0 = greedy)", "temperature");
  if (p.top_k < 0) throw Error(Code::kInvalidArgument, "top_k must be >= 0 (0 = off)", "top_k");
  if (p.top_p <= 0.0 || p.top_p > 1.0)
    throw Error(Code::kInvalidArgument, "top_p must be in (0, 1]", "top_p");
  const int64_t limit = model.config.max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) >= limit) {
    throw Error(Code::kInvalidArgument,
                "the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                    std::to_string(limit),
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
  // The queued requests that fit, in order: in free rows or rows the cache
  // may grow to (max_rows); one larger than that runs alone.
  std::vector<std::pair<int64_t, Request>> admitted;
  int64_t rows_after = live_rows(), positions = 0;
  const int64_t room = std::max(opt_.max_rows, static_cast<int64_t>(rows_.size()));
  while (!queue_.empty()) {
    const Request& req = queue_.front().second;
    if (rows_after + req.params.n > room && rows_after > 0) break;
    rows_after += req.params.n;
    positions = std::max(positions, static_cast<int64_t>(req.prompt.size()) + req.max_new);
    admitted.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (admitted.empty()) return;
  EnsureCache(std::max(static_cast<int64_t>(rows_.size()), rows_after), positions);
  // Rows for each: the lowest free ones.
  std::vector<std::vector<int64_t>> picked(admitted.size());
  size_t next_free = 0;
  for (size_t i = 0; i < admitted.size(); ++i) {
    while (static_cast<int64_t>(picked[i].size()) < admitted[i].second.params.n) {
      if (rows_[next_free].request < 0) picked[i].push_back(static_cast<int64_t>(next_free));
      ++next_free;
    }
  }
  for (size_t i = 0; i < admitted.size(); ++i) {  // claimed before the prefills
    for (int64_t r : picked[i]) rows_[static_cast<size_t>(r)].request = admitted[i].first;
  }
  // Prefills into each request's first row. Requests whose prompts share a
  // long prefix (a step's label-scoring calls, an RL group sent as several
  // requests) compute it once: the prefix into one row, its keys and values
  // copied to the others' rows, then each one's own rest.
  auto full = [&](size_t i) {
    const SampleParams& p = admitted[i].second.params;
    return p.prompt_logprobs || p.topk_prompt_logprobs > 0;
  };
  std::vector<size_t> by_prompt(admitted.size());
  for (size_t i = 0; i < by_prompt.size(); ++i) by_prompt[i] = i;
  std::stable_sort(by_prompt.begin(), by_prompt.end(),
                   [&](size_t x, size_t y) { return admitted[x].second.prompt < admitted[y].second.prompt; });
  std::vector<int64_t> shared(admitted.size(), 0);       // prefix tokens taken from another request's prefill
  std::vector<int64_t> prefix_row(admitted.size(), -1);  // the row that prefilled them
  std::vector<PrefillPiece> heads, tails;
  std::vector<std::vector<size_t>> groups;  // of requests sharing a prefix, the first prefilling it
  for (size_t g = 0; g < by_prompt.size();) {
    const std::vector<int>& first = admitted[by_prompt[g]].second.prompt;
    int64_t common = static_cast<int64_t>(first.size()) - 1;
    size_t end = g + 1;
    for (; end < by_prompt.size(); ++end) {
      const std::vector<int>& next = admitted[by_prompt[end]].second.prompt;
      const auto diff =
          std::mismatch(first.begin(), first.end(), next.begin(), next.end()).first - first.begin();
      const int64_t c =
          std::min<int64_t>({common, static_cast<int64_t>(diff), static_cast<int64_t>(next.size()) - 1});
      if (c < kMinSharedPrefix) break;
      common = c;
    }
    std::vector<size_t> members(by_prompt.begin() + static_cast<std::ptrdiff_t>(g),
                                by_prompt.begin() + static_cast<std::ptrdiff_t>(end));
    if (members.size() > 1) {
      bool any_full = false;
      for (size_t i : members) any_full = any_full || full(i);
      heads.emplace_back(picked[members[0]][0], first.data(), common, 0, any_full);
      for (size_t i : members) {
        shared[i] = common;
        prefix_row[i] = picked[members[0]][0];
      }
      groups.push_back(members);
    } else {
      heads.emplace_back(picked[members[0]][0], first.data(), static_cast<int64_t>(first.size()), 0,
                         full(members[0]));
    }
    g = end;
  }
  Prefill(heads);
  for (const auto& members : groups) {
    const int64_t from = picked[members[0]][0], len = shared[members[0]];
    for (size_t m = 0; m < members.size(); ++m) {
      const int64_t row = picked[members[m]][0];
      if (row != from) {
        for (size_t li = 0; li < cache_.k.size(); ++li) {
          cache_.k[li][row].narrow(1, 0, len).copy_(cache_.k[li][from].narrow(1, 0, len));
          cache_.v[li][row].narrow(1, 0, len).copy_(cache_.v[li][from].narrow(1, 0, len));
        }
      }
      const std::vector<int>& prompt = admitted[members[m]].second.prompt;
      tails.emplace_back(row, prompt.data() + len, static_cast<int64_t>(prompt.size()) - len, len,
                         full(members[m]));
    }
  }
  Prefill(tails);
  // Each request's last logits, and the prompt's logprobs from its pieces.
  std::map<int64_t, const PrefillPiece*> head_of, tail_of;  // by first row
  for (const PrefillPiece& p : heads) head_of[p.row] = &p;
  for (const PrefillPiece& p : tails) tail_of[p.row] = &p;
  std::vector<torch::Tensor> logits(admitted.size()), logp(admitted.size());
  for (size_t i = 0; i < admitted.size(); ++i) {
    const int64_t row = picked[i][0];
    const PrefillPiece* last = shared[i] > 0 ? tail_of.at(row) : head_of.at(row);
    logits[i] = last->last;
    logp[i] = torch::log_softmax(logits[i], -1);
    if (!full(i)) continue;
    // Position j's logits predict prompt[j + 1]: the prefix's, then the rest's.
    const PrefillPiece* head = shared[i] > 0 ? head_of.at(prefix_row[i]) : nullptr;
    torch::Tensor all = head ? torch::cat({head->all, last->all}) : last->all;  // (len, V)
    PromptLogprobs(admitted[i].second, all.narrow(0, 0, all.size(0) - 1));
  }
  for (size_t i = 0; i < admitted.size(); ++i) {
    auto& [id, req] = admitted[i];
    const int64_t n = req.params.n, plen = static_cast<int64_t>(req.prompt.size());
    const int64_t first = picked[i][0];
    // The other samples' rows get the prompt's keys and values.
    for (size_t k = 1; k < picked[i].size(); ++k) {
      for (size_t li = 0; li < cache_.k.size(); ++li) {
        cache_.k[li][picked[i][k]].narrow(1, 0, plen).copy_(cache_.k[li][first].narrow(1, 0, plen));
        cache_.v[li][picked[i][k]].narrow(1, 0, plen).copy_(cache_.v[li][first].narrow(1, 0, plen));
      }
      cache_.lengths[static_cast<size_t>(picked[i][k])] = plen;
    }
    req.seqs.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      req.seqs[static_cast<size_t>(k)].gen =
          at::make_generator<at::CPUGeneratorImpl>(SampleSeed(req.params.seed, k));
      Row& row = rows_[static_cast<size_t>(picked[i][static_cast<size_t>(k)])];
      row = Row{};
      row.request = id;
      row.index = k;
      row.logits = logits[i];
      row.logp = logp[i];
    }
    req.live = n;
    if (req.max_new == 0) {  // the prompt scored, nothing to sample
      for (int64_t r : picked[i]) rows_[static_cast<size_t>(r)] = Row{};
      for (Seq& seq : req.seqs) seq.done = true;
      req.live = 0;
    }
    requests_.emplace(id, std::move(req));
  }
}

void BatchDecoder::Prefill(std::vector<PrefillPiece>& pieces) {
  // Shortest pieces together, a few thousand tokens a forward (padded to the
  // longest of each group). Pieces that need every position's logits go in
  // groups of their own, fewer tokens each (the logits within ~64 MiB). A
  // forward takes pieces of one start position only: its keys span the
  // latest start plus the longest piece, which must stay within the cache
  // (and the attention within what the pieces need).
  constexpr int64_t kPrefillTokens = 4096, kFullLogits = int64_t{1} << 24;
  const int64_t full_tokens = std::max<int64_t>(1, kFullLogits / model_.config.vocab_size);
  std::vector<size_t> order(pieces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::make_tuple(pieces[x].full, pieces[x].start, pieces[x].len) <
           std::make_tuple(pieces[y].full, pieces[y].start, pieces[y].len);
  });
  for (size_t g = 0; g < order.size();) {
    const bool all = pieces[order[g]].full;
    const int64_t start = pieces[order[g]].start;
    const int64_t budget = all ? full_tokens : kPrefillTokens;
    size_t end = g + 1;
    while (end < order.size() && pieces[order[end]].full == all && pieces[order[end]].start == start &&
           static_cast<int64_t>(end - g + 1) * pieces[order[end]].len <= budget) {
      ++end;
    }
    const int64_t k = static_cast<int64_t>(end - g);
    int64_t t = 0;  // the longest piece's (the last, as sorted: taken as the max all the same)
    for (size_t j = g; j < end; ++j) t = std::max(t, pieces[order[j]].len);
    std::vector<int64_t> ids(static_cast<size_t>(k * t), 0);
    ForwardOptions fo;
    fo.last_only = !all;
    for (int64_t j = 0; j < k; ++j) {
      const PrefillPiece& p = pieces[order[g + static_cast<size_t>(j)]];
      std::copy(p.tokens, p.tokens + p.len, ids.begin() + j * t);
      fo.rows.push_back(p.row);
      fo.valid.push_back(p.len);
      cache_.lengths[static_cast<size_t>(p.row)] = p.start;
    }
    torch::Tensor out =
        model_.Forward(torch::tensor(ids).view({k, t}).to(model_.device), &cache_, fo).to(torch::kCPU);
    for (int64_t j = 0; j < k; ++j) {
      PrefillPiece& p = pieces[order[g + static_cast<size_t>(j)]];
      p.last = all ? out[j][p.len - 1] : out[j][0];
      if (all) p.all = out[j].narrow(0, 0, p.len);
    }
    g = end;
  }
}

void BatchDecoder::PromptLogprobs(Request& req, const torch::Tensor& logits) {
  // logits: (len - 1, V), position i predicting prompt[i + 1].
  if (logits.size(0) == 0) return;
  torch::Tensor lp = torch::log_softmax(logits.to(torch::kFloat32), -1);
  if (req.params.prompt_logprobs) {
    std::vector<int64_t> next(req.prompt.begin() + 1, req.prompt.end());
    torch::Tensor got = lp.gather(1, torch::tensor(next).view({-1, 1})).view({-1}).contiguous();
    req.prompt_logprobs.assign(got.data_ptr<float>(), got.data_ptr<float>() + got.numel());
  }
  const int64_t k = std::min(req.params.topk_prompt_logprobs, lp.size(1));
  if (k > 0) {
    auto [values, index] = lp.topk(k, -1);  // (len - 1, k), sorted
    values = values.contiguous();
    index = index.contiguous();
    const float* v = values.data_ptr<float>();
    const int64_t* x = index.data_ptr<int64_t>();
    req.topk_prompt_logprobs.resize(static_cast<size_t>(lp.size(0)));
    for (int64_t i = 0; i < lp.size(0); ++i) {
      auto& row = req.topk_prompt_logprobs[static_cast<size_t>(i)];
      for (int64_t j = 0; j < k; ++j) row.emplace_back(static_cast<int>(x[i * k + j]), v[i * k + j]);
    }
  }
}

void BatchDecoder::PickAll() {
  // Rows grouped by how they sample: one set of tensor ops per group.
  std::map<std::tuple<double, int64_t, double>, std::vector<size_t>> groups;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].request < 0) continue;
    const SampleParams& p = requests_.at(rows_[r].request).params;
    groups[{p.temperature <= 0.0 ? 0.0 : p.temperature, p.top_k, p.top_p}].push_back(r);
  }
  for (const auto& [key, members] : groups) {
    std::vector<torch::Tensor> logits;
    std::vector<at::Generator*> gens;
    for (size_t r : members) {
      Request& req = requests_.at(rows_[r].request);
      logits.push_back(rows_[r].logits);
      gens.push_back(&req.seqs[static_cast<size_t>(rows_[r].index)].gen);
    }
    const SampleParams& p = requests_.at(rows_[members[0]].request).params;
    const std::vector<int64_t> toks = PickTokens(torch::stack(logits), p, gens);
    for (size_t i = 0; i < members.size(); ++i) Accept(rows_[members[i]], toks[i]);
  }
}

void BatchDecoder::Accept(Row& row, int64_t tok) {
  Request& req = requests_.at(row.request);
  const SampleParams& p = req.params;
  Seq& seq = req.seqs[static_cast<size_t>(row.index)];
  SampleOutput& o = seq.out;
  const float lp = row.logp.data_ptr<float>()[tok];
  o.token_ids.push_back(static_cast<int>(tok));
  o.logprobs.push_back(lp);
  TokenAlternatives top;
  if (p.top_logprobs > 0) {
    auto [values, index] = row.logp.topk(std::min(p.top_logprobs, row.logp.size(0)));
    values = values.contiguous();
    index = index.contiguous();
    for (int64_t j = 0; j < values.size(0); ++j) {
      top.emplace_back(static_cast<int>(index.data_ptr<int64_t>()[j]), values.data_ptr<float>()[j]);
    }
    o.top_logprobs.push_back(top);
  }
  auto end_row = [&](const char* reason) {
    if (reason) o.finish_reason = reason;
    seq.done = true;
    --req.live;
    row.request = -1;
    row.logits = row.logp = torch::Tensor();
  };
  if (std::find(tok_.stop_ids.begin(), tok_.stop_ids.end(), tok) != tok_.stop_ids.end() ||
      std::find(p.extra_stop_ids.begin(), p.extra_stop_ids.end(), tok) != p.extra_stop_ids.end()) {
    if (p.on_delta) p.on_delta(row.index, "", static_cast<int>(tok), lp, top, "");
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
      p.on_delta(row.index, visible.substr(seq.streamed, upto - seq.streamed), static_cast<int>(tok), lp, top,
                 "");
      seq.streamed = upto;
    }
    if (seq.cut) return end_row("stop");
  }
  if (static_cast<int64_t>(o.token_ids.size()) >= req.max_new) return end_row(nullptr);  // "length"
  row.token = tok;
}

void BatchDecoder::Finish(int64_t request_id) {
  auto it = requests_.find(request_id);
  Request& req = it->second;
  FinishedRequest done;
  done.id = request_id;
  done.prompt_logprobs = std::move(req.prompt_logprobs);
  done.topk_prompt_logprobs = std::move(req.topk_prompt_logprobs);
  for (size_t i = 0; i < req.seqs.size(); ++i) {
    Seq& seq = req.seqs[i];
    if (seq.out.finish_reason.empty()) seq.out.finish_reason = req.stopped ? "cancelled" : "length";
    if (!seq.cut) seq.out.text = tok_.Decode(seq.text_ids, /*skip_special=*/true);
    if (req.params.on_delta) {
      const std::string& t = seq.out.text;
      req.params.on_delta(static_cast<int64_t>(i), seq.streamed < t.size() ? t.substr(seq.streamed) : "", -1,
                          0.0f, TokenAlternatives(), seq.out.finish_reason);
    }
    done.samples.push_back(std::move(seq.out));
  }
  finished_.push_back(std::move(done));
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
  PickAll();
  std::vector<int64_t> done;
  for (const auto& [id, req] : requests_) {
    if (req.live == 0) done.push_back(id);
  }
  for (int64_t id : done) Finish(id);
  // One forward for every row that goes on (after PickAll, every row still held).
  std::vector<int64_t> fed_rows, tokens;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].request >= 0) {
      fed_rows.push_back(static_cast<int64_t>(r));
      tokens.push_back(rows_[r].token);
    }
  }
  if (!fed_rows.empty()) {
    const int64_t b = static_cast<int64_t>(fed_rows.size());
    ForwardOptions fo;
    fo.last_only = true;
    fo.rows = fed_rows;
    torch::Tensor logits = model_.Forward(torch::tensor(tokens).view({b, 1}).to(model_.device), &cache_, fo)
                               .select(1, 0)
                               .to(torch::kCPU);
    torch::Tensor logp = torch::log_softmax(logits, -1);  // (b, V)
    for (int64_t i = 0; i < b; ++i) {
      Row& row = rows_[static_cast<size_t>(fed_rows[static_cast<size_t>(i)])];
      row.logits = logits[i];
      row.logp = logp[i];
    }
  }
  return !idle();
}

std::vector<FinishedRequest> BatchDecoder::TakeFinished() { return std::exchange(finished_, {}); }

}  // namespace burst
