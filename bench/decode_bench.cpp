// burst_decode_bench: continuous batching (model/batch_decoder.h) against
// the same work decoded one sequence at a time, in the same run.
//
//   burst_decode_bench [--model models/burst-small] [--data examples/support/valid.jsonl]
//                      [--requests 16] [--max-tokens 48] [--threads 1] [--max-rows 32]
//                      [--rounds 3] [--profile-batched N]
//
// Two cases, one JSON line each:
//   samples: one prompt, `requests` samples (temperature 1, seed 7): one
//            request with n = requests, against n = 1 requests one after
//            another with the seeds the batched samples draw from;
//   prompts: `requests` different prompts (the first tickets of --data,
//            system + user text), one sample each, temperature 0.8: all added
//            to one decoder at once, against Sample() on each in turn.
// Both sides sample the same requests with the same seeds, so they produce
// the same tokens but where a different batch shape rounds a near-tie the
// other way (identical_samples counts the samples that match); tokens/s is
// each side's own tokens over its own time. Time to first token (TTFT) per request:
// batched, from the start until its first token; one at a time, the wait
// for the requests before it plus its own first token, as a replica that
// answers calls in turn gives it.
//
// Each case runs --rounds times, the two sides alternating (batched first
// in even rounds, one at a time first in odd ones), so that a drift of the
// machine's speed (these VMs swing by up to 1.7x within a minute) falls on both;
// the line gives each side's median tokens/s, the speedup of the medians,
// each round's own speedup, and the median round's times to first token.
//
// --profile-batched N runs only the prompts case's batched side, N times,
// and prints each run's seconds: a workload for perf, with no peer.
//
// Errors: a message on stderr and exit status 1.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "model/batch_decoder.h"
#include "model/cpu_threads.h"
#include "model/hf_io.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Args {
  std::string model = std::string(BURST_SOURCE_DIR) + "/models/burst-small";
  std::string data = std::string(BURST_SOURCE_DIR) + "/examples/support/valid.jsonl";
  int64_t requests = 16, max_tokens = 48, max_rows = 32;
  int threads = 1;
  int64_t profile_batched = 0;
  int64_t rounds = 3;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

struct Work {
  std::vector<std::vector<int>> prompts;
  std::vector<SampleParams> params;
};

struct Timing {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<double> ttft;
  std::vector<std::vector<int>> ids;  // every sample's tokens, request by request
};

Timing Batched(const LlamaModel& model, const Tokenizer& tok, const Work& w, int64_t max_rows) {
  Timing t;
  std::vector<double> first(w.prompts.size(), -1.0);
  const auto t0 = Clock::now();
  BatchDecoderOptions opt;
  opt.max_rows = max_rows;
  BatchDecoder d(model, tok, opt);
  for (size_t k = 0; k < w.prompts.size(); ++k) {
    SampleParams p = w.params[k];
    p.on_delta = [&first, k, t0](int64_t, const std::string&, int token, float, const TokenAlternatives&,
                                 const std::string&) {
      if (token >= 0 && first[k] < 0) first[k] = Since(t0);
    };
    d.Add(w.prompts[k], p);
  }
  std::map<int64_t, std::vector<SampleOutput>> out;
  while (d.Step()) {
    for (auto& f : d.TakeFinished()) out[f.id] = std::move(f.samples);
  }
  for (auto& f : d.TakeFinished()) out[f.id] = std::move(f.samples);
  t.seconds = Since(t0);
  t.ttft = first;
  for (auto& [id, outs] : out) {
    for (auto& o : outs) {
      t.tokens += static_cast<int64_t>(o.token_ids.size());
      t.ids.push_back(o.token_ids);
    }
  }
  return t;
}

// Each sample alone: a request with n samples becomes n requests of one,
// seeded as the batched request's samples are.
Timing OneAtATime(const LlamaModel& model, const Tokenizer& tok, const Work& w,
                  const std::vector<uint64_t>& seeds) {
  Timing t;
  const auto t0 = Clock::now();
  size_t s = 0;
  for (size_t k = 0; k < w.prompts.size(); ++k) {
    double first = -1.0;
    for (int64_t i = 0; i < w.params[k].n; ++i, ++s) {
      SampleParams p = w.params[k];
      p.n = 1;
      p.seed = seeds[s];
      p.on_delta = [&](int64_t, const std::string&, int token, float, const TokenAlternatives&,
                       const std::string&) {
        if (token >= 0 && first < 0) first = Since(t0);
      };
      for (auto& o : Sample(model, tok, w.prompts[k], p)) {
        t.tokens += static_cast<int64_t>(o.token_ids.size());
        t.ids.push_back(o.token_ids);
      }
    }
    t.ttft.push_back(first);
  }
  t.seconds = Since(t0);
  return t;
}

double TokensPerSecond(const Timing& t) { return static_cast<double>(t.tokens) / t.seconds; }

// The round whose tokens/s is the median of `side`'s rounds.
const Timing& MedianRound(const std::vector<Timing>& side) {
  std::vector<size_t> order(side.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return TokensPerSecond(side[x]) < TokensPerSecond(side[y]); });
  return side[order[(order.size() - 1) / 2]];
}

Json Report(const std::string& name, const Args& a, const std::vector<Timing>& batched_rounds,
            const std::vector<Timing>& alone_rounds, int64_t samples) {
  const Timing& batched = MedianRound(batched_rounds);
  const Timing& alone = MedianRound(alone_rounds);
  const double bt = TokensPerSecond(batched), at = TokensPerSecond(alone);
  Json each = Json::array();
  for (size_t i = 0; i < batched_rounds.size(); ++i) {
    each.push_back(TokensPerSecond(batched_rounds[i]) / TokensPerSecond(alone_rounds[i]));
  }
  return Json{{"case", name},
              {"requests", name == "samples" ? 1 : a.requests},
              {"samples", samples},
              {"max_tokens", a.max_tokens},
              {"tokens", batched.tokens},
              {"rounds", a.rounds},
              {"batched_tokens_per_s", bt},
              {"one_at_a_time_tokens_per_s", at},
              {"speedup", bt / at},
              {"speedup_by_round", each},
              {"batched_s", batched.seconds},
              {"one_at_a_time_s", alone.seconds},
              {"ttft_p50_s",
               {{"batched", Percentile(batched.ttft, 0.5)}, {"one_at_a_time", Percentile(alone.ttft, 0.5)}}},
              {"ttft_max_s",
               {{"batched", Percentile(batched.ttft, 1.0)}, {"one_at_a_time", Percentile(alone.ttft, 1.0)}}},
              {"threads", a.threads},
              {"max_rows", a.max_rows}};
}

// `rounds` rounds of both sides, batched first in even rounds.
template <typename B, typename O>
void Alternate(int64_t rounds, B batched, O alone) {
  for (int64_t i = 0; i < rounds; ++i) {
    if (i % 2 == 0) {
      batched();
      alone();
    } else {
      alone();
      batched();
    }
  }
}

int Main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw Error(Code::kInvalidArgument, flag + " needs a value", flag);
    const std::string v = argv[++i];
    if (flag == "--model")
      a.model = v;
    else if (flag == "--data")
      a.data = v;
    else if (flag == "--requests")
      a.requests = std::stoll(v);
    else if (flag == "--max-tokens")
      a.max_tokens = std::stoll(v);
    else if (flag == "--max-rows")
      a.max_rows = std::stoll(v);
    else if (flag == "--threads")
      a.threads = std::stoi(v);
    else if (flag == "--profile-batched")
      a.profile_batched = std::stoll(v);
    else if (flag == "--rounds")
      a.rounds = std::stoll(v);
    else
      throw Error(Code::kInvalidArgument, "unknown flag " + flag, flag);
  }
  if (a.requests < 1 || a.max_tokens < 1)
    throw Error(Code::kInvalidArgument, "--requests and --max-tokens must be >= 1");
  if (a.rounds < 1) throw Error(Code::kInvalidArgument, "--rounds must be >= 1", "rounds");
  SetCpuThreads(a.threads);
  LlamaModel model = LoadModel(a.model);
  auto tok = LoadTokenizer(a.model);

  // Prompts: the system and user text of the first tickets.
  std::vector<std::vector<int>> tickets;
  std::ifstream in(a.data);
  for (std::string line; static_cast<int64_t>(tickets.size()) < a.requests && std::getline(in, line);) {
    Json row = Json::parse(line);
    std::string text;
    for (const Json& m : row.at("messages")) {
      if (m.value("role", "") != "assistant") text += m.value("content", "") + "\n";
    }
    tickets.push_back(tok->Encode(text));
  }
  if (static_cast<int64_t>(tickets.size()) < a.requests) {
    throw Error(Code::kInvalidArgument, a.data + " has fewer than --requests tickets", "data");
  }

  // Warm-up, untimed.
  SampleParams warm;
  warm.max_tokens = 4;
  Sample(model, *tok, tickets[0], warm);

  // Samples whose tokens are the same both ways: all of them but where a
  // batch's different shape rounded a near-tie the other way.
  auto same = [](const Timing& x, const Timing& y) {
    int64_t n = 0;
    for (size_t i = 0; i < x.ids.size() && i < y.ids.size(); ++i) n += x.ids[i] == y.ids[i];
    return n;
  };
  if (a.profile_batched == 0) {  // one prompt, `requests` samples
    Work w;
    SampleParams p;
    p.temperature = 1.0;
    p.seed = 7;
    p.n = a.requests;
    p.max_tokens = a.max_tokens;
    w.prompts = {tickets[0]};
    w.params = {p};
    // Alone, each sample gets the seed the batched request gives it.
    std::vector<uint64_t> seeds;
    for (int64_t k = 0; k < a.requests; ++k) seeds.push_back(BatchDecoder::SampleSeed(p.seed, k));
    std::vector<Timing> b, o;
    Alternate(
        a.rounds, [&] { b.push_back(Batched(model, *tok, w, a.max_rows)); },
        [&] { o.push_back(OneAtATime(model, *tok, w, seeds)); });
    Json r = Report("samples", a, b, o, a.requests);
    r["identical_samples"] = same(b[0], o[0]);
    std::printf("%s\n", r.dump().c_str());
  }
  {  // `requests` prompts, one sample each
    Work w;
    std::vector<uint64_t> seeds;
    for (int64_t k = 0; k < a.requests; ++k) {
      SampleParams p;
      p.temperature = 0.8;
      p.seed = 100 + static_cast<uint64_t>(k);
      p.max_tokens = a.max_tokens;
      w.prompts.push_back(tickets[static_cast<size_t>(k)]);
      w.params.push_back(p);
      seeds.push_back(p.seed);
    }
    if (a.profile_batched > 0) {
      for (int64_t i = 0; i < a.profile_batched; ++i) {
        Timing b = Batched(model, *tok, w, a.max_rows);
        std::printf("{\"case\":\"prompts\",\"batched_s\":%.4f,\"tokens\":%lld}\n", b.seconds,
                    static_cast<long long>(b.tokens));
      }
      return 0;
    }
    std::vector<Timing> b, o;
    Alternate(
        a.rounds, [&] { b.push_back(Batched(model, *tok, w, a.max_rows)); },
        [&] { o.push_back(OneAtATime(model, *tok, w, seeds)); });
    Json r = Report("prompts", a, b, o, a.requests);
    r["identical_samples"] = same(b[0], o[0]);
    std::printf("%s\n", r.dump().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) {
  burst::EnsureCpuEnvironment(argv);  // as the burst binary does for sample: measure the engine as shipped
  try {
    return burst::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "burst_decode_bench: %s\n", e.what());
    return 1;
  }
}
