#include "worker/batch_run.h"

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "core/fs.h"
#include "core/ids.h"
#include "core/status.h"
#include "model/batch_decoder.h"
#include "model/sample_render.h"
#include "store/keys.h"

namespace burst {

namespace {

int64_t BatchUnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// OpenAI's output line for one request, answered with `status` and `body`.
Json BatchOutputLine(const std::string& custom_id, int status, Json body) {
  return {{"id", NewId("batch_req")},
          {"custom_id", custom_id},
          {"response", {{"status_code", status}, {"request_id", NewId("req")}, {"body", std::move(body)}}},
          {"error", nullptr}};
}

// An error line: what the control plane or the decoder found wrong with it.
Json BatchErrorLine(const std::string& custom_id, int status, const std::string& message,
                    const std::string& param, const std::string& code) {
  return BatchOutputLine(custom_id, status,
                         {{"error",
                           {{"message", message},
                            {"type", "invalid_request_error"},
                            {"param", param.empty() ? Json() : Json(param)},
                            {"code", code.empty() ? Json() : Json(code)}}}});
}

std::vector<Json> ReadBatchLines(const std::string& text, const std::string& what) {
  std::vector<Json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw Error(Code::kDataLoss,
                  what + " line " + std::to_string(out.size() + 1) + " is not a JSON object");
    out.push_back(std::move(j));
  }
  return out;
}

// The answered lines, in the input's order: what goes to the output file
// and to the error file, and their counts.
struct BatchAnswers {
  std::vector<std::string> output, errors;  // by part: its lines' text
  int64_t completed = 0, failed = 0, input_tokens = 0, output_tokens = 0;
  explicit BatchAnswers(int64_t parts)
      : output(static_cast<size_t>(parts)), errors(static_cast<size_t>(parts)) {}
  int64_t answered() const { return completed + failed; }
  // Part k's lines, as they are written.
  void Add(int64_t k, const std::vector<Json>& lines) {
    for (const Json& line : lines) {
      const Json& r = line.at("response");
      const bool ok = r.value("status_code", 0) == 200;
      (ok ? output : errors)[static_cast<size_t>(k)] += line.dump() + "\n";
      if (!ok) {
        ++failed;
        continue;
      }
      ++completed;
      const Json u = r.at("body").value("usage", Json::object());
      input_tokens += u.value("prompt_tokens", int64_t{0});
      output_tokens += u.value("completion_tokens", int64_t{0});
    }
  }
  Json Counts(int64_t total) const {
    return {{"total", total}, {"completed", completed}, {"failed", failed}};
  }
};

// One part's lines, answered as they finish.
struct BatchPart {
  std::vector<Json> lines;
  int64_t left = 0;
};

}  // namespace

Json RunBatch(const Json& task, ObjectStore& store, Samplers& samplers, const BatchHooks& hooks) {
  const Json& b = task.at("batch");
  const std::string prefix = task.at("store_prefix").get<std::string>();
  const std::string model_name = b.value("model", task.value("model_name", ""));
  auto text = store.Get(b.at("requests_key").get<std::string>());
  if (!text.ok()) throw Error(text.status());
  const std::vector<Json> requests = ReadBatchLines(text.value(), "the batch's requests");
  const int64_t n = static_cast<int64_t>(requests.size());
  const int64_t c = std::max<int64_t>(1, b.value("chunk_lines", int64_t{64}));
  const int64_t parts = (n + c - 1) / c;

  // The parts an earlier attempt wrote: their lines are answered.
  auto listed = store.List(BatchPartsPrefix(prefix));
  if (!listed.ok()) throw Error(listed.status());
  std::set<std::string> written;
  for (const ObjectInfo& o : listed.value()) written.insert(o.key);
  std::set<int64_t> done;
  BatchAnswers answers(parts);
  for (int64_t k = 0; k < parts; ++k) {
    if (!written.count(BatchPartKey(prefix, k))) continue;
    auto part = store.Get(BatchPartKey(prefix, k));
    if (!part.ok()) throw Error(part.status());
    answers.Add(k, ReadBatchLines(part.value(), "part " + std::to_string(k)));
    done.insert(k);
  }
  auto report = [&](bool finalizing) {
    Json p = {{"step", answers.answered()}, {"total_steps", n}, {"request_counts", answers.Counts(n)}};
    if (finalizing) p["finalizing"] = true;
    hooks.progress(p);
  };
  if (!done.empty() && hooks.log) {
    hooks.log("resuming: " + std::to_string(answers.answered()) + " of " + std::to_string(n) +
              " lines were answered by an earlier attempt");
  }

  std::map<int64_t, BatchPart> open;  // parts being answered
  auto finish_line = [&](int64_t line, Json out) {
    const int64_t k = line / c;
    BatchPart& p = open[k];
    p.lines[static_cast<size_t>(line % c)] = std::move(out);
    if (--p.left > 0) return;
    std::string bytes;
    for (const Json& l : p.lines) bytes += l.dump() + "\n";
    if (Status s = store.Put(BatchPartKey(prefix, k), bytes); !s.ok()) throw Error(s);
    answers.Add(k, p.lines);
    open.erase(k);
    report(false);
  };

  if (static_cast<int64_t>(done.size()) < parts) {
    auto [model, tok] = samplers.Model(task);
    BatchDecoderOptions opts;
    BatchDecoder dec(*model, *tok, opts);
    struct Pending {
      int64_t line;
      PreparedSample prep;
    };
    std::map<int64_t, Pending> running;  // by the decoder's id
    Json where = {{"model", task.value("model", "")},
                  {"model_store", task.value("model_store", "")},
                  {"checkpoint_prefix", task.value("checkpoint_prefix", "")},
                  {"full", task.value("full", false)}};
    int64_t next = 0;  // the next line to feed
    auto feed = [&] {
      while (next < n && dec.waiting() < opts.max_rows) {
        const int64_t line = next++;
        const int64_t k = line / c;
        if (done.count(k)) {
          next = std::min(n, (k + 1) * c);  // the whole part is answered
          continue;
        }
        if (!open.count(k)) {
          BatchPart& p = open[k];
          p.left = std::min(c, n - k * c);
          p.lines.resize(static_cast<size_t>(p.left));
        }
        const Json& r = requests[static_cast<size_t>(line)];
        const std::string id = r.value("custom_id", "");
        if (r.contains("error")) {  // the control plane found it bad
          const Json& e = r["error"];
          finish_line(line, BatchErrorLine(id, e.value("status_code", 400), e.value("message", ""),
                                           e.value("param", ""), e.value("code", "")));
          continue;
        }
        where["request"] = r.at("request");
        try {
          PreparedSample prep = samplers.Prepare(where);
          const int64_t got = dec.Add(prep.ids, prep.params);
          running.emplace(got, Pending{line, std::move(prep)});
        } catch (const Error& e) {  // its messages, its parameters or its prompt's length
          finish_line(line,
                      BatchErrorLine(id, 400, e.status().message(), e.status().param(), "invalid_request"));
        }
      }
    };
    feed();
    while (!dec.idle()) {
      if (hooks.should_stop && hooks.should_stop())
        throw Error(Code::kCancelled, "the batch's attempt was stopped");
      dec.Step();
      for (FinishedRequest& f : dec.TakeFinished()) {
        auto it = running.find(f.id);
        if (it == running.end()) continue;
        const Pending& p = it->second;
        const Json& r = requests[static_cast<size_t>(p.line)];
        const Json& req = r.at("request");
        const Json result = SampleResultJson(p.prep, f);
        const bool chat = r.value("chat", false);
        const std::string rid = NewId(chat ? "chatcmpl" : "cmpl");
        Json body = chat ? RenderChatCompletion(rid, model_name, req, result, BatchUnixSeconds(), Json())
                         : RenderCompletion(rid, model_name, req, result, BatchUnixSeconds(), Json());
        body.erase("burst");
        const int64_t line = p.line;
        const std::string id = r.value("custom_id", "");
        running.erase(it);
        finish_line(line, BatchOutputLine(id, 200, std::move(body)));
      }
      feed();
    }
  }
  if (!open.empty()) throw Error(Code::kInternal, "a part of the batch was left unanswered");

  // Every part is in the store: the files, in the input's order.
  report(true);
  const int64_t attempt = task.value("attempt", int64_t{1});
  auto put = [&](const std::string& name, const std::vector<std::string>& by_part, int64_t lines) {
    std::string bytes;
    for (const std::string& t : by_part) bytes += t;
    const std::string key = BatchFileKey(prefix, attempt, name);
    if (Status s = store.Put(key, bytes); !s.ok()) throw Error(s);
    return Json{{"key", key}, {"bytes", bytes.size()}, {"sha256", Sha256Hex(bytes)}, {"lines", lines}};
  };
  Json out = {{"output", put("output", answers.output, answers.completed)},
              {"errors", put("errors", answers.errors, answers.failed)},
              {"request_counts", answers.Counts(n)},
              {"usage",
               {{"input_tokens", answers.input_tokens},
                {"output_tokens", answers.output_tokens},
                {"total_tokens", answers.input_tokens + answers.output_tokens}}}};
  if (hooks.log) {
    hooks.log("batch answered: " + std::to_string(answers.completed) + " completed, " +
              std::to_string(answers.failed) + " failed of " + std::to_string(n) + " lines");
  }
  return out;
}

}  // namespace burst
