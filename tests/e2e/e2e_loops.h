// Training loop calls as the tinker SDK's JSON variant sends them
// (docs/tinker-protocol.md), for end-to-end tests that drive a real
// `burst serve` over /api/v1: the key as "X-API-Key: tml-<key>", futures
// polled with retrieve_future.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "e2e_http.h"

namespace burst::e2e {

// A POST as the SDK sends it: X-API-Key with the tml- prefix, no Authorization.
inline Resp TinkerPost(const ServeProcess& s, const std::string& path, const Json& body) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  return RespOf(c.Post(path,
                       {{"X-API-Key", "tml-" + s.key()}, {"X-Idempotency-Key", "stainless-python-retry-1"}},
                       body.dump(), "application/json"));
}

// Polls a future until it is no longer try_again (the server long-polls).
inline Json TinkerResultWithTiming(const ServeProcess& s, const Resp& submitted) {
  EXPECT_EQ(submitted.status, 200) << submitted.Describe();
  const std::string id = submitted.body.value("request_id", "");
  for (int i = 0; i < 20; ++i) {
    Resp r = TinkerPost(s, "/api/v1/retrieve_future", {{"request_id", id}, {"allow_metadata_only", true}});
    EXPECT_EQ(r.status, 200) << r.Describe();
    if (r.status != 200) return Json();
    if (r.body.value("type", "") != "try_again") return r.body;
  }
  ADD_FAILURE() << "future " << id << " never finished";
  return Json();
}
// The same without Burst's timing ("burst": where and how long it ran), so
// answers compare bit for bit.
inline Json TinkerResult(const ServeProcess& s, const Resp& submitted) {
  Json r = TinkerResultWithTiming(s, submitted);
  if (r.is_object()) r.erase("burst");
  return r;
}

inline std::string TinkerSession(const ServeProcess& s) {
  Resp r = TinkerPost(s, "/api/v1/create_session",
                      {{"tags", Json::array()},
                       {"user_metadata", Json::object()},
                       {"sdk_version", "0.24.1"},
                       {"type", "create_session"}});
  EXPECT_EQ(r.status, 200) << r.Describe();
  return r.body.value("session_id", "");
}

inline std::string TinkerModel(const ServeProcess& s, const std::string& session, int64_t seq, int64_t seed) {
  Json r = TinkerResult(s, TinkerPost(s, "/api/v1/create_model",
                                      {{"session_id", session},
                                       {"model_seq_id", seq},
                                       {"base_model", "burst-small"},
                                       {"lora_config",
                                        {{"rank", 8},
                                         {"seed", seed},
                                         {"train_unembed", true},
                                         {"train_mlp", true},
                                         {"train_attn", true}}},
                                       {"type", "create_model"}}));
  return r.value("model_id", "");
}

// A datum as the SDK's JSON variant sends it: tokens, next-token targets, weights.
inline Json TinkerDatum(const std::vector<int64_t>& seq, bool weighted_tail = true) {
  std::vector<int64_t> in(seq.begin(), seq.end() - 1), tgt(seq.begin() + 1, seq.end());
  std::vector<float> w(in.size(), 1.0f);
  if (weighted_tail)
    for (size_t i = 0; i < w.size() / 2; ++i) w[i] = 0.0f;
  return {{"model_input", {{"chunks", {{{"tokens", in}, {"type", "encoded_text"}}}}}},
          {"loss_fn_inputs",
           {{"target_tokens", {{"data", tgt}, {"dtype", "int64"}, {"shape", {tgt.size()}}}},
            {"weights", {{"data", w}, {"dtype", "float32"}, {"shape", {w.size()}}}}}}};
}

inline Resp TinkerForwardBackward(const ServeProcess& s, const std::string& model, int64_t seq_id,
                                  const Json& data, bool forward_only = false) {
  const char* input = forward_only ? "forward_input" : "forward_backward_input";
  return TinkerPost(
      s, forward_only ? "/api/v1/forward" : "/api/v1/forward_backward",
      {{input, {{"data", data}, {"loss_fn", "cross_entropy"}}}, {"model_id", model}, {"seq_id", seq_id}});
}

inline Resp TinkerOptimStep(const ServeProcess& s, const std::string& model, int64_t seq_id, double lr) {
  return TinkerPost(s, "/api/v1/optim_step",
                    {{"adam_params",
                      {{"learning_rate", lr},
                       {"beta1", 0.9},
                       {"beta2", 0.95},
                       {"eps", 1e-12},
                       {"weight_decay", 0.0},
                       {"grad_clip_norm", 0.0}}},
                     {"model_id", model},
                     {"seq_id", seq_id},
                     {"type", "optim_step"}});
}

}  // namespace burst::e2e
