#include "runtime/loop_journal.h"

#include <cstdio>

#include "runtime/loops.h"

namespace burst {

namespace {

std::string OrgPrefix(const std::string& org_id) { return "loops/" + org_id + "/"; }
std::string RunPrefix(const std::string& org_id, const std::string& run_id) {
  return OrgPrefix(org_id) + "runs/" + run_id + "/";
}
std::string Seq(int64_t seq_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012lld", static_cast<long long>(seq_id));
  return buf;
}

// The part of `key` after `prefix` up to the next '/', and what follows it.
bool Split(const std::string& key, const std::string& prefix, std::string* head, std::string* rest) {
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t slash = key.find('/', prefix.size());
  if (slash == std::string::npos) return false;
  *head = key.substr(prefix.size(), slash - prefix.size());
  *rest = key.substr(slash + 1);
  return true;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Json LoopRunInfoJson(const LoopRunInfo& r) {
  return {{"id", r.id},
          {"org_id", r.org_id},
          {"session_id", r.session_id},
          {"base_model", r.base_model},
          {"base_model_name", r.base_model_name},
          {"base_model_store", r.base_model_store},
          {"lora", r.lora},
          {"scope", std::string(ToString(r.scope))},
          {"vocab_size", r.vocab_size},
          {"max_seq_len", r.max_seq_len},
          {"created_ms", r.created_ms},
          {"active", r.active}};
}

LoopRunInfo LoopRunInfoOf(const Json& j) {
  LoopRunInfo r;
  r.id = j.at("id").get<std::string>();
  r.org_id = j.at("org_id").get<std::string>();
  r.session_id = j.at("session_id").get<std::string>();
  r.base_model = j.at("base_model").get<std::string>();
  r.base_model_name = j.at("base_model_name").get<std::string>();
  r.base_model_store = j.value("base_model_store", "");
  r.lora = j.value("lora", Json::object());
  auto scope = FromString<BillingScope>(j.value("scope", "dedicated"));
  if (!scope.ok()) throw Error(scope.status());
  r.scope = scope.value();
  r.vocab_size = j.value("vocab_size", int64_t{0});
  r.max_seq_len = j.value("max_seq_len", int64_t{0});
  r.created_ms = r.last_request_ms = j.value("created_ms", int64_t{0});
  r.active = j.value("active", true);
  return r;
}

Status LoopJournal::PutSession(const std::string& org_id, const std::string& id, int64_t created_ms,
                               const std::string& finished) {
  const Json j = {{"created_ms", created_ms}, {"finished", finished.empty() ? Json() : Json(finished)}};
  return store_.Put(OrgPrefix(org_id) + "sessions/" + id + ".json", j.dump());
}

Status LoopJournal::DeleteSession(const std::string& org_id, const std::string& id) {
  return store_.Delete(OrgPrefix(org_id) + "sessions/" + id + ".json");
}

Status LoopJournal::PutSampler(const std::string& org_id, const std::string& id, const Json& record) {
  return store_.Put(OrgPrefix(org_id) + "samplers/" + id + ".json", DumpJson(record));
}

Status LoopJournal::DeleteSampler(const std::string& org_id, const std::string& id) {
  return store_.Delete(OrgPrefix(org_id) + "samplers/" + id + ".json");
}

Status LoopJournal::PutRun(const LoopRunInfo& info) {
  return store_.Put(RunPrefix(info.org_id, info.id) + "run.json", DumpJson(LoopRunInfoJson(info)));
}

Status LoopJournal::DeleteRun(const std::string& org_id, const std::string& run_id) {
  return store_.DeletePrefix(RunPrefix(org_id, run_id));
}

Status LoopJournal::PutRestorePoint(const std::string& org_id, const std::string& run_id,
                                    const Json& snapshot, int64_t version) {
  const Json j = {{"snapshot", snapshot}, {"version", version}};
  return store_.Put(RunPrefix(org_id, run_id) + "state.json", DumpJson(j));
}

Status LoopJournal::PutRequest(const std::string& org_id, const std::string& run_id,
                               const JournalRequest& r) {
  Json j = {{"id", r.id},     {"type", r.type},           {"seq_id", r.seq_id}, {"created_ms", r.created_ms},
            {"meta", r.meta}, {"op", Json::binary(*r.op)}};
  const std::vector<uint8_t> bytes = Json::to_cbor(j);
  return store_.Put(RunPrefix(org_id, run_id) + "requests/" + Seq(r.seq_id) + ".cbor",
                    std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Status LoopJournal::PutOutcome(const std::string& org_id, const std::string& run_id, int64_t seq_id,
                               const Json& result, const Status& error, int64_t version) {
  Json j = {{"version", version}};
  if (error.ok())
    j["result"] = result;
  else
    j["error"] = StatusJson(error);
  return store_.Put(RunPrefix(org_id, run_id) + "results/" + Seq(seq_id) + ".json", DumpJson(j));
}

Status LoopJournal::DropRequest(const std::string& org_id, const std::string& run_id, int64_t seq_id) {
  const std::string run = RunPrefix(org_id, run_id);
  if (Status s = store_.Delete(run + "results/" + Seq(seq_id) + ".json"); !s.ok()) return s;
  return store_.Delete(run + "requests/" + Seq(seq_id) + ".cbor");
}

Result<JournalContents> LoopJournal::Load() const {
  auto listed = store_.List("loops/");
  if (!listed.ok()) return listed.status();
  JournalContents out;
  std::map<std::string, std::map<int64_t, JournalRequest>> requests;  // run -> seq -> request
  std::map<std::string, std::map<int64_t, Json>> outcomes;
  for (const ObjectInfo& o : listed.value()) {
    std::string org, rest;
    if (!Split(o.key, "loops/", &org, &rest)) continue;
    Status s = Try([&] {
      auto data = store_.Get(o.key);
      if (!data.ok()) throw Error(data.status());
      std::string kind, name, id, tail;
      if (!Split(o.key, OrgPrefix(org), &kind, &name)) return;
      if (kind == "sessions" && EndsWith(name, ".json")) {
        Json j = Json::parse(data.value());
        j["org_id"] = org;
        out.sessions[name.substr(0, name.size() - 5)] = std::move(j);
      } else if (kind == "samplers" && EndsWith(name, ".json")) {
        out.samplers[name.substr(0, name.size() - 5)] = Json::parse(data.value());
      } else if (kind == "runs" && Split(o.key, OrgPrefix(org) + "runs/", &id, &tail)) {
        JournalRun& run = out.runs[id];
        if (tail == "run.json") {
          run.info = Json::parse(data.value());
          if (run.info.value("org_id", "") != org || run.info.value("id", "") != id)
            throw Error(Code::kDataLoss, "names another run or organisation");
        } else if (tail == "state.json") {
          const Json j = Json::parse(data.value());
          run.snapshot = j.at("snapshot");
          run.version = j.at("version").get<int64_t>();
        } else if (tail.rfind("requests/", 0) == 0) {
          const std::string& bytes = data.value();
          const Json j = Json::from_cbor(std::vector<uint8_t>(bytes.begin(), bytes.end()));
          JournalRequest r;
          r.id = j.at("id").get<std::string>();
          r.type = j.at("type").get<std::string>();
          r.seq_id = j.at("seq_id").get<int64_t>();
          r.created_ms = j.value("created_ms", int64_t{0});
          r.meta = j.value("meta", Json::object());
          r.op = std::make_shared<const std::vector<uint8_t>>(j.at("op").get_binary());
          requests[id][r.seq_id] = std::move(r);
        } else if (tail.rfind("results/", 0) == 0) {
          outcomes[id][std::stoll(tail.substr(8))] = Json::parse(data.value());
        }
      }
    });
    if (!s.ok()) out.skipped.push_back(o.key + ": " + s.message());
  }
  for (auto it = out.runs.begin(); it != out.runs.end();) {
    if (it->second.info.is_null()) {  // requests of a run whose record went: not a run
      out.skipped.push_back("loops/.../runs/" + it->first + "/run.json: missing");
      it = out.runs.erase(it);
      continue;
    }
    for (auto& [seq, r] : requests[it->first]) {
      if (auto o = outcomes[it->first].find(seq); o != outcomes[it->first].end()) {
        r.done = true;
        r.version = o->second.value("version", int64_t{-1});
        if (o->second.contains("error"))
          r.error = StatusFromJson(o->second["error"]);
        else
          r.result = o->second.value("result", Json::object());
      }
      it->second.requests.push_back(std::move(r));
    }
    ++it;
  }
  return out;
}

}  // namespace burst
