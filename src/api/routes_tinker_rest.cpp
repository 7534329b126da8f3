// The tinker SDK's REST calls on training runs and their checkpoints
// (RestClient; docs/tinker-protocol.md, section 3.19): list and get runs,
// list checkpoints (read from the store, so they outlive the control
// plane), delete one, set or clear its TTL, and download one as a tar of its
// files through a short-lived link.
//
// A checkpoint's TTL is kept beside it (orgs/ORG/loops/RUN/ttl/KIND/NAME.json);
// an expired checkpoint is deleted when its run's checkpoints are next read.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "api/context.h"
#include "api/tinker_wire.h"
#include "core/ids.h"
#include "core/utc.h"
#include "runtime/loops.h"
#include "store/keys.h"

namespace burst {
namespace {

constexpr int64_t kArchiveLinkS = 15 * 60;

std::string IsoTime(int64_t unix_s) { return FormatUtc(unix_s, kUtcIso8601); }

// The run's checkpoints in the store, oldest first; expired ones deleted.
Json Checkpoints(ApiContext& ctx, const LoopRunInfo& run) {
  const std::string base = LoopPrefix(run.org_id, run.id);
  Json out = Json::array();
  const int64_t now = ctx.NowS();
  for (const std::string kind : {"weights", "sampler_weights", "external_weights"}) {
    auto objects = ctx.store.List(base + kind + "/");
    if (!objects.ok()) throw Error(objects.status());
    std::map<std::string, int64_t> sizes;  // name -> bytes, only folders with a manifest count
    std::set<std::string> committed;
    for (const ObjectInfo& o : objects.value()) {
      const std::string rest = o.key.substr(base.size() + kind.size() + 1);
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) continue;
      const std::string name = rest.substr(0, slash);
      sizes[name] += o.size;
      if (rest.substr(slash + 1) == "manifest.json") committed.insert(name);
    }
    for (const std::string& name : committed) {
      const std::string prefix = LoopCheckpointPrefix(base, kind, name);
      int64_t time = 0;
      if (auto m = ctx.store.Get(prefix + "manifest.json"); m.ok()) {
        auto j = TryParseJson(m.value(), "manifest.json");
        if (j.ok() && j.value().is_object()) time = j.value().value("time", int64_t{0});
      }
      Json expires = nullptr;
      if (auto t = ctx.store.Get(LoopTtlKey(run.org_id, run.id, kind, name)); t.ok()) {
        auto j = TryParseJson(t.value(), "ttl");
        if (j.ok() && j.value().is_object() && j.value().value("expires_at", int64_t{0}) > 0) {
          const int64_t at = j.value()["expires_at"].get<int64_t>();
          if (at <= now) {
            Status d = ctx.store.DeletePrefix(prefix);
            if (d.ok()) d = ctx.store.Delete(LoopTtlKey(run.org_id, run.id, kind, name));
            if (!d.ok())
              std::fprintf(stderr, "cannot delete expired checkpoint %s: %s\n", prefix.c_str(),
                           d.ToString().c_str());
            continue;
          }
          expires = IsoTime(at);
        }
      }
      out.push_back({{"checkpoint_id", kind + "/" + name},
                     {"checkpoint_type", kind == "weights"           ? "training"
                                         : kind == "sampler_weights" ? "sampler"
                                                                     : "external"},
                     {"time", IsoTime(time)},
                     {"tinker_path", "tinker://" + run.id + "/" + kind + "/" + name},
                     {"size_bytes", sizes[name]},
                     {"public", false},
                     {"expires_at", expires}});
    }
  }
  return out;
}

// What the run has cost so far and how it ran: requests, cold starts (a
// worker started for it), restores (rebuilt on a worker), its version and
// the requests kept to replay since its restore point.
// The organisation's ledger by run (one query for a whole listing).
std::vector<UsageSum> UsageOf(ApiContext& ctx, const std::string& org_id) {
  auto usage = ctx.md.UsageByRun(org_id);
  if (!usage.ok()) throw Error(usage.status());
  return std::move(usage).value();
}

Json RunStats(const LoopRunInfo& run, const std::vector<UsageSum>& usage) {
  double cost = 0, seconds = 0;
  int64_t tokens = 0;
  for (const UsageSum& u : usage) {
    if (u.day != run.id) continue;  // UsageByRun keeps the run id in `day`
    cost += u.cost;
    seconds += u.seconds;
    tokens += u.tokens;
  }
  return {{"session_id", run.session_id},
          {"status", run.active ? "active" : "inactive"},
          {"scope", ToString(run.scope)},
          {"requests", run.requests},
          {"cold_starts", run.cold_starts},
          {"restores", run.restores},
          {"version", run.version},
          {"requests_kept_for_replay", run.replay},
          {"cost", cost},
          {"billed_seconds", seconds},
          {"tokens", tokens}};
}

Json TrainingRunJson(ApiContext& ctx, const LoopRunInfo& run, const std::vector<UsageSum>& usage) {
  const Json cps = Checkpoints(ctx, run);
  Json last = nullptr, last_sampler = nullptr;
  for (const Json& c : cps) (c["checkpoint_type"] == "training" ? last : last_sampler) = c;
  return {{"training_run_id", run.id},
          {"base_model", run.base_model_name},
          {"model_owner", run.org_id},
          {"is_lora", true},
          {"corrupted", false},
          {"lora_rank", run.lora.value("rank", int64_t{0})},
          {"last_request_time", IsoTime(run.last_request_ms / 1000)},
          {"last_checkpoint", last},
          {"last_sampler_checkpoint", last_sampler},
          {"user_metadata", nullptr},
          // Burst's own (the SDK ignores fields it does not know).
          {"burst", RunStats(run, usage)}};
}

LoopRunInfo RunNamed(ApiContext& ctx, const ApiKey& key, const std::string& id) {
  return ctx.loops->RunOrThrow(key.org_id, id);
}

// The checkpoint a path names ({run}/checkpoints/{kind}/{name}), checked to exist.
std::string CheckpointOf(ApiContext& ctx, const ApiKey& key, const http::Request& q, LoopRunInfo* run) {
  *run = RunNamed(ctx, key, q.matches.at(1));
  const std::string kind = q.matches.at(2), name = CheckCheckpointName(q.matches.at(3), "checkpoint_id");
  if (kind != "weights" && kind != "sampler_weights" && kind != "external_weights")
    BadField("checkpoint_id", "must be weights/NAME, sampler_weights/NAME or external_weights/NAME");
  std::string prefix = LoopCheckpointPrefix(LoopPrefix(run->org_id, run->id), kind, name);
  auto m = ctx.store.Stat(prefix + "manifest.json");
  if (!m.ok())
    throw Error(Code::kNotFound, "no checkpoint " + kind + "/" + name + " in " + run->id, "checkpoint_id");
  return prefix;
}

// A ustar archive of files (name, bytes).
std::string Tar(const std::vector<std::pair<std::string, std::string>>& files, int64_t mtime) {
  std::string out;
  for (const auto& [name, data] : files) {
    char h[512] = {};
    std::snprintf(h, 100, "%s", name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
    std::snprintf(h + 136, 12, "%011llo", static_cast<unsigned long long>(mtime));
    std::memset(h + 148, ' ', 8);
    h[156] = '0';
    // The magic and version fields: 8 bytes, no terminator of their own.
    std::memcpy(h + 257,  // NOLINT(bugprone-not-null-terminated-result)
                "ustar\0"
                "00",
                8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    out.append(h, 512);
    out += data;
    out.append((512 - data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace

void AddTinkerRestRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Get("/api/v1/training_runs", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    const int64_t limit =
        q.has_param("limit") ? std::clamp<int64_t>(std::atoll(q.param("limit").c_str()), 1, 1000) : 20;
    const int64_t offset = std::max<int64_t>(0, std::atoll(q.param("offset").c_str()));
    const std::vector<LoopRunInfo> runs = c->loops->Runs(k.org_id);
    const std::vector<UsageSum> usage = UsageOf(*c, k.org_id);
    Json list = Json::array();
    for (size_t i = static_cast<size_t>(offset); i < runs.size() && static_cast<int64_t>(list.size()) < limit;
         ++i) {
      list.push_back(TrainingRunJson(*c, runs[i], usage));
    }
    SendJson(r, 200,
             {{"training_runs", list},
              {"cursor", {{"offset", offset}, {"limit", limit}, {"total_count", runs.size()}}}});
  });
  // What a checkpoint is (create_training_client_from_state asks before create_model).
  routes.Post("/api/v1/weights_info", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    auto body = ReadBody(q, r);
    if (!body) return;
    FieldReader f(*body, "");
    const std::string path = f.String("tinker_path", "");
    f.RejectUnknown();
    const TinkerPath p = ParseTinkerPath(path, "tinker_path");
    const LoopRunInfo run = RunNamed(*c, k, p.run);
    const std::string prefix = LoopCheckpointPrefix(LoopPrefix(run.org_id, run.id), p.kind, p.name);
    if (!c->store.Stat(prefix + "manifest.json").ok())
      throw Error(Code::kNotFound, "no checkpoint " + path, "tinker_path");
    SendJson(r, 200,
             {{"base_model", run.base_model_name},
              {"is_lora", true},
              {"lora_rank", run.lora.value("rank", int64_t{0})},
              {"train_unembed", run.lora.value("train_unembed", true)},
              {"train_mlp", run.lora.value("train_mlp", true)},
              {"train_attn", run.lora.value("train_attn", true)}});
  });
  routes.Get("/api/v1/checkpoints", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    Json all = Json::array();
    for (const LoopRunInfo& run : c->loops->Runs(k.org_id))
      for (const Json& cp : Checkpoints(*c, run)) all.push_back(cp);
    const int64_t limit =
        q.has_param("limit") ? std::clamp<int64_t>(std::atoll(q.param("limit").c_str()), 1, 1000) : 100;
    const int64_t offset = std::max<int64_t>(0, std::atoll(q.param("offset").c_str()));
    Json page = Json::array();
    for (size_t i = static_cast<size_t>(offset); i < all.size() && static_cast<int64_t>(page.size()) < limit;
         ++i) {
      page.push_back(all[i]);
    }
    SendJson(r, 200,
             {{"checkpoints", page},
              {"cursor", {{"offset", offset}, {"limit", limit}, {"total_count", all.size()}}}});
  });
  // What the organisation's loop checkpoints take up now (RestClient and
  // AdminClient.get_current_checkpoint_storage_usage). Burst has no projects
  // and no storage price: one line for the organisation, its cost null.
  routes.Get("/api/v1/billing/usage/checkpoints/current", [c](const ApiKey& k, const http::Request& q,
                                                              http::Response& r) {
    if (!q.param("project_id").empty())
      BadField("project_id", "Burst has no projects: an API key's organisation owns its checkpoints");
    int64_t count = 0, bytes = 0;
    for (const LoopRunInfo& run : c->loops->Runs(k.org_id)) {
      for (const Json& cp : Checkpoints(*c, run)) {
        ++count;
        bytes += cp.value("size_bytes", int64_t{0});
      }
    }
    const Json line = {{"project_id", nullptr},
                       {"checkpoint_count", count},
                       {"size_bytes", bytes},
                       {"size_gigabytes", static_cast<double>(bytes) / 1e9},
                       {"estimated_monthly_cost_usd", nullptr}};
    SendJson(r, 200, {{"effective_rate_usd_per_gigabyte_month", nullptr}, {"data", Json::array({line})}});
  });
  routes.Get("/api/v1/sessions", [c](const ApiKey& k, const http::Request&, http::Response& r) {
    SendJson(r, 200, {{"sessions", c->loops->Sessions(k.org_id)}});
  });
  routes.Get("/api/v1/sessions/{}", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    auto s = c->loops->SessionContents(k.org_id, q.matches.at(1));
    if (!s.ok()) return SendStatus(r, s.status());
    SendJson(r, 200, {{"training_run_ids", s.value().first}, {"sampler_ids", s.value().second}});
  });
  routes.Get("/api/v1/training_runs/{}", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    SendJson(r, 200, TrainingRunJson(*c, RunNamed(*c, k, q.matches.at(1)), UsageOf(*c, k.org_id)));
  });
  // Ends a run, as Baseten's POST /v1/loops/runs/{id}/deactivate does: it
  // takes no more requests and holds no worker; its checkpoints stay.
  routes.Post("/api/v1/training_runs/{}/deactivate",
              [c](const ApiKey& k, const http::Request& q, http::Response& r) {
                const std::string id = CanonicalRunId(q.matches.at(1));
                if (Status s = c->loops->Deactivate(k.org_id, id); !s.ok()) return SendStatus(r, s);
                SendJson(r, 200, {{"training_run_id", id}, {"status", "inactive"}});
              });
  routes.Get("/api/v1/training_runs/{}/checkpoints", [c](const ApiKey& k, const http::Request& q,
                                                         http::Response& r) {
    SendJson(r, 200,
             {{"checkpoints", Checkpoints(*c, RunNamed(*c, k, q.matches.at(1)))}, {"cursor", nullptr}});
  });
  routes.Delete("/api/v1/training_runs/{}/checkpoints/{}/{}", [c](const ApiKey& k, const http::Request& q,
                                                                  http::Response& r) {
    LoopRunInfo run;
    const std::string prefix = CheckpointOf(*c, k, q, &run);
    if (Status s = c->store.DeletePrefix(prefix); !s.ok()) return SendStatus(r, s);
    Status t = c->store.Delete(LoopTtlKey(run.org_id, run.id, q.matches.at(2), q.matches.at(3)));
    if (!t.ok() && t.code() != Code::kNotFound) return SendStatus(r, t);
    SendJson(r, 200, {{"deleted", true}});
  });
  routes.Put("/api/v1/training_runs/{}/checkpoints/{}/{}/ttl", [c](const ApiKey& k, const http::Request& q,
                                                                   http::Response& r) {
    auto body = ReadBody(q, r);
    if (!body) return;
    LoopRunInfo run;
    CheckpointOf(*c, k, q, &run);
    FieldReader f(*body, "");
    const Json ttl = f.Raw("ttl_seconds");
    f.RejectUnknown();
    const std::string key = LoopTtlKey(run.org_id, run.id, q.matches.at(2), q.matches.at(3));
    if (ttl.is_null()) {
      Status s = c->store.Delete(key);
      if (!s.ok() && s.code() != Code::kNotFound) return SendStatus(r, s);
      return SendJson(r, 200, {{"expires_at", nullptr}});
    }
    if (!ttl.is_number_integer() || ttl.get<int64_t>() <= 0 || ttl.get<int64_t>() > kMaxCheckpointTtlS) {
      BadField("ttl_seconds", "must be a positive number of seconds (or null: never expire)");
    }
    const int64_t at = c->NowS() + ttl.get<int64_t>();
    if (Status s = c->store.Put(key, Json{{"expires_at", at}}.dump()); !s.ok()) return SendStatus(r, s);
    SendJson(r, 200, {{"expires_at", IsoTime(at)}});
  });
  routes.Get("/api/v1/training_runs/{}/checkpoints/{}/{}/archive", [c](const ApiKey& k,
                                                                       const http::Request& q,
                                                                       http::Response& r) {
    LoopRunInfo run;
    const std::string prefix = CheckpointOf(*c, k, q, &run);
    const int64_t expires = c->NowS() + kArchiveLinkS;
    const std::string token = c->loops->IssueArchive(prefix, q.matches.at(3), expires * 1000);
    // The server's own address, never the request's Host header: whoever
    // sends the request names any host there, and the link carries the token.
    SendJson(r, 200, {{"url", c->public_url + "/api/v1/archives/" + token}, {"expires", IsoTime(expires)}});
  });
  // SDK 0.37 and later download a checkpoint saved by save_weights_external:
  // a link per file, valid for kArchiveLinkS (the token is a signed URL's signature).
  routes.Get("/api/v1/training_runs/{}/checkpoints/{}/{}/external_weights_urls",
             [c](const ApiKey& k, const http::Request& q, http::Response& r) {
               if (q.matches.at(2) != "external_weights")
                 BadField("checkpoint_id", "must be external_weights/NAME (saved by save_weights_external)");
               LoopRunInfo run;
               const std::string prefix = CheckpointOf(*c, k, q, &run);
               auto objects = c->store.List(prefix);
               if (!objects.ok()) return SendStatus(r, objects.status());
               const int64_t expires = c->NowS() + kArchiveLinkS;
               const std::string token = c->loops->IssueArchive(prefix, q.matches.at(3), expires * 1000);
               Json urls = Json::object();
               for (const ObjectInfo& o : objects.value()) {
                 const std::string rel = o.key.substr(prefix.size());
                 if (rel == "manifest.json" || rel.find('/') != std::string::npos) continue;
                 urls[rel] = c->public_url + "/api/v1/archives/" + token + "/" + rel;
               }
               SendJson(r, 200, {{"urls", urls}, {"expires", IsoTime(expires)}});
             });
  routes.Public("GET", "/api/v1/archives/{}/{}", [c](http::Request& q, http::Response& r) {
    auto a = c->loops->Archive(q.matches.at(1));
    if (!a.ok()) return SendStatus(r, a.status());
    const std::string& rel = q.matches.at(2);
    if (rel == "manifest.json" || rel == "." || rel == "..")
      return SendStatus(r, Status(Code::kNotFound, "no file " + rel + " in this checkpoint", "file"));
    auto data = c->store.Get(a.value().first + rel);
    if (!data.ok()) {
      if (data.status().code() == Code::kNotFound)
        return SendStatus(r, Status(Code::kNotFound, "no file " + rel + " in this checkpoint", "file"));
      return SendStatus(r, data.status());
    }
    r.set_header("Content-Disposition", "attachment; filename=\"" + rel + "\"");
    r.set_content(std::move(data).value(), "application/octet-stream");
  });
  // The link is the credential (as a signed URL is): no API key.
  routes.Public("GET", "/api/v1/archives/{}", [c](http::Request& q, http::Response& r) {
    auto a = c->loops->Archive(q.matches.at(1));
    if (!a.ok()) return SendStatus(r, a.status());
    const auto& [prefix, name] = a.value();
    auto objects = c->store.List(prefix);
    if (!objects.ok()) return SendStatus(r, objects.status());
    std::vector<std::pair<std::string, std::string>> files;
    int64_t bytes = 0;
    for (const ObjectInfo& o : objects.value()) {
      const std::string rel = o.key.substr(prefix.size());
      if (rel == "manifest.json") continue;  // Burst's own; the archive holds the checkpoint's files
      bytes += o.size;
      if (bytes > (int64_t{2} << 30))
        return SendStatus(r, Status(Code::kResourceExhausted, "checkpoint too large to archive", ""));
      auto data = c->store.Get(o.key);
      if (!data.ok()) return SendStatus(r, data.status());
      files.emplace_back(rel, std::move(data).value());
    }
    r.set_header("Content-Disposition", "attachment; filename=\"" + name + ".tar\"");
    r.set_content(Tar(files, c->NowS()), "application/x-tar");
  });
}

}  // namespace burst
