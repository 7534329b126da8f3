#include "worker/samplers.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/sampler.h"
#include "train/chat_template.h"
#include "train/checkpoint.h"

namespace burst {

namespace fs = std::filesystem;

std::pair<const LlamaModel*, const Tokenizer*> Samplers::Model(const Json& task) {
  auto base = models_.Get(task);
  const std::string prefix = task.value("checkpoint_prefix", "");
  const LlamaModel* m = prefix.empty() ? &base->model : &Checkpoint(prefix, task.value("full", false), *base);
  return {m, base->tokenizer.get()};
}

void Samplers::Warm(const Json& task) {
  auto base = models_.Get(task);
  const std::string prefix = task.value("checkpoint_prefix", "");
  if (!prefix.empty()) Checkpoint(prefix, task.value("full", false), *base);
}

Json Samplers::Loaded() const {
  Json out = Json::array();
  for (const auto& entry : loaded_) out.push_back(entry.first);
  return out;
}

PreparedSample Samplers::Prepare(const Json& task) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t loads_before = models_.cache().loads(), fetches_before = fetches_;
  const bool loop = task.contains("op");
  Json where = task;  // a loop request names its sampler weights in the op
  if (loop) where["checkpoint_prefix"] = task["op"].value("checkpoint_prefix", "");
  auto base = models_.Get(where);
  const std::string prefix = where.value("checkpoint_prefix", "");
  PreparedSample out;
  out.loop = loop;
  out.model = prefix.empty() ? &base->model : &Checkpoint(prefix, where.value("full", false), *base);
  out.tokenizer = base->tokenizer.get();
  out.load_ms = SecondsSince(t0) * 1000.0;
  // Whether this call had to load the base model or the checkpoint.
  out.loaded = models_.cache().loads() > loads_before || fetches_ > fetches_before;
  SampleParams& p = out.params;
  if (loop) {
    // Tinker's sample op (api/tinker_wire.h ParseSampleOp checked it): token ids in, no text.
    const Json& op = task.at("op");
    for (const Json& id : op.at("prompt")) out.ids.push_back(id.get<int>());
    p.max_tokens = op.value("max_tokens", int64_t{16});
    p.temperature = op.value("temperature", 1.0);
    p.top_p = op.value("top_p", 1.0);
    p.top_k = std::max<int64_t>(0, op.value("top_k", int64_t{-1}));
    p.n = op.value("num_samples", int64_t{1});
    const Json seed = op.value("seed", Json());
    p.seed =
        seed.is_number_unsigned() || seed.is_number_integer() ? seed.get<uint64_t>() : std::random_device{}();
    for (const Json& x : op.value("stop", Json::array())) p.stop.push_back(x.get<std::string>());
    for (const Json& x : op.value("stop_token_ids", Json::array())) p.extra_stop_ids.push_back(x.get<int>());
    p.prompt_logprobs = op.value("prompt_logprobs", false);
    p.topk_prompt_logprobs = op.value("topk_prompt_logprobs", int64_t{0});
    return out;
  }
  const Tokenizer& tok = *out.tokenizer;
  const Json& req = task.at("request");
  p.max_tokens = req.value("max_tokens", int64_t{16});
  p.temperature = req.value("temperature", 1.0);
  p.top_p = req.value("top_p", 1.0);
  p.seed = req.value("seed", uint64_t{0});
  p.n = req.value("n", int64_t{1});
  p.top_logprobs = req.value("top_logprobs", int64_t{0});
  // echo: the prompt's own logprobs (and as many alternatives) come back too.
  if (req.value("echo", false) && req.value("logprobs", false)) {
    p.prompt_logprobs = true;
    p.topk_prompt_logprobs = p.top_logprobs;
  }
  for (const Json& s : req.value("stop", Json::array())) p.stop.push_back(s.get<std::string>());
  if (req.contains("messages")) {
    std::vector<ChatMessage> msgs;
    for (const Json& m : req["messages"])
      msgs.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    ChatTemplate t = ResolveChatTemplate("auto", tok, req.value("chat_template_kwargs", Json::object()));
    out.ids = RenderChat(msgs, t, tok, true, ChatDate::kToday).ids;  // as serving stacks render it
    p.extra_stop_ids.push_back(EndOfTurnId(t, tok));
  } else if (req.contains("prompt_ids")) {  // token ids, as given (the model checks their range)
    for (const Json& id : req["prompt_ids"]) out.ids.push_back(id.get<int>());
  } else {
    if (tok.bos_id) out.ids.push_back(*tok.bos_id);
    auto enc = tok.Encode(req.value("prompt", std::string()));
    out.ids.insert(out.ids.end(), enc.begin(), enc.end());
  }
  return out;
}

Json AlternativesJson(const Tokenizer& tok, const TokenAlternatives& top) {
  Json out = Json::array();
  for (const auto& [id, lp] : top) out.push_back(Json::array({tok.Decode({id}), lp}));
  return out;
}

Json SampleResultJson(const PreparedSample& prep, const FinishedRequest& done) {
  if (prep.loop) return LoopSampleResultJson(prep, done);
  const Tokenizer& tok = *prep.tokenizer;
  Json out = {{"prompt_tokens", prep.ids.size()},
              {"load_ms", prep.load_ms},
              {"loaded", prep.loaded},
              {"samples", Json::array()}};
  const auto alternatives = [&tok](const std::vector<TokenAlternatives>& positions) {
    Json all = Json::array();
    for (const TokenAlternatives& top : positions) all.push_back(AlternativesJson(tok, top));
    return all;
  };
  for (const auto& s : done.samples) {
    Json pieces = Json::array();
    for (int id : s.token_ids) pieces.push_back(tok.Decode({id}));
    Json sample = {{"text", s.text},
                   {"token_ids", s.token_ids},
                   {"tokens", pieces},
                   {"logprobs", s.logprobs},
                   {"finish_reason", s.finish_reason}};
    if (prep.params.top_logprobs > 0) sample["top_logprobs"] = alternatives(s.top_logprobs);
    out["samples"].push_back(std::move(sample));
  }
  if (prep.params.prompt_logprobs) {
    // Each prompt token's text (special tokens too: they are scored) and
    // logprob; the first has none.
    Json pieces = Json::array(), lps = Json::array({nullptr});
    for (int id : prep.ids) pieces.push_back(tok.Decode({id}));
    for (float v : done.prompt_logprobs) lps.push_back(v);
    Json prompt = {
        {"text", tok.Decode(prep.ids, /*skip_special=*/true)}, {"tokens", pieces}, {"logprobs", lps}};
    if (prep.params.topk_prompt_logprobs > 0) {
      Json top = alternatives(done.topk_prompt_logprobs);
      top.insert(top.begin(), nullptr);
      prompt["top_logprobs"] = top;
    }
    out["prompt"] = std::move(prompt);
  }
  return out;
}

Json LoopSampleResultJson(const PreparedSample& prep, const FinishedRequest& done) {
  Json seqs = Json::array();
  int64_t sampled = 0;
  for (const SampleOutput& o : done.samples) {
    seqs.push_back({{"tokens", o.token_ids},
                    {"logprobs", o.logprobs},
                    {"stop_reason", o.finish_reason == "stop" ? "stop" : "length"}});
    sampled += static_cast<int64_t>(o.token_ids.size());
  }
  Json result = {{"sequences", seqs}};
  // None for the first prompt token (null, not NaN: the SDK's JSON has no NaN).
  if (prep.params.prompt_logprobs) {
    Json lps = Json::array({nullptr});
    for (float v : done.prompt_logprobs) lps.push_back(v);
    result["prompt_logprobs"] = lps;
  }
  if (prep.params.topk_prompt_logprobs > 0) {
    Json topk = Json::array({nullptr});
    for (const auto& position : done.topk_prompt_logprobs) {
      Json row = Json::array();
      for (const auto& [id, lp] : position) row.push_back(Json::array({id, lp}));
      topk.push_back(row);
    }
    result["topk_prompt_logprobs"] = topk;
  }
  const int64_t prompt = static_cast<int64_t>(prep.ids.size());
  return {{"result", result},
          {"loaded", prep.loaded},
          {"usage", {{"prefill_tokens", prompt * prep.params.n}, {"sampled_tokens", sampled}}}};
}

const LlamaModel& Samplers::Checkpoint(const std::string& prefix, bool full, const BaseModel& base) {
  for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
    if (it->first != prefix) continue;
    loaded_.splice(loaded_.begin(), loaded_, it);  // most recent first
    return loaded_.front().second;
  }
  // Fetch the sampler folder and check it against its manifest.
  ++fetches_;
  fs::path dir = dir_ / "checkpoints" / Sha256Hex(prefix).substr(0, 16);
  fs::remove_all(dir);
  auto objects = store_.List(prefix);
  if (!objects.ok()) throw Error(objects.status());
  if (objects.value().empty())
    throw Error(Code::kNotFound, "checkpoint " + prefix + " is not in the store", "model");
  for (const ObjectInfo& o : objects.value()) {
    fs::path dst = dir / o.key.substr(prefix.size());
    fs::create_directories(dst.parent_path());
    if (Status s = store_.GetToFile(o.key, dst); !s.ok()) throw Error(s);
  }
  if (Status s = VerifyManifest(dir); !s.ok()) throw Error(s);
  LlamaModel m = full ? LoadModel(dir, models_.device(), FrozenDtypeOn(models_.device()))
                      : base.model;  // a copy sharing the frozen base tensors
  if (!full) LoadAdapter(m, dir);
  loaded_.emplace_front(prefix, std::move(m));
  while (loaded_.size() > (full ? 1u : 4u)) loaded_.pop_back();
  return loaded_.front().second;
}

}  // namespace burst
