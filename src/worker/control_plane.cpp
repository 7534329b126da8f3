#include "worker/control_plane.h"

#include <httplib.h>

#include <algorithm>
#include <thread>

#include "core/utc.h"

namespace burst {

std::string LogStamp() { return UtcNow(kUtcSql); }

ControlPlane::ControlPlane(const std::string& urls, const std::string& token)
    : authorization_("Bearer " + token) {
  size_t pos = 0;
  while (pos <= urls.size()) {
    size_t comma = urls.find(',', pos);
    if (comma == std::string::npos) comma = urls.size();
    std::string u = urls.substr(pos, comma - pos);
    if (!u.empty()) urls_.push_back(u);
    pos = comma + 1;
  }
  if (urls_.empty()) urls_.push_back(urls);
  for (const std::string& u : urls_) {
    auto c = std::make_unique<httplib::Client>(u);
    c->set_connection_timeout(5, 0);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(60, 0);
    c->set_write_timeout(60, 0);
    http_.push_back(std::move(c));
  }
}

ControlPlane::~ControlPlane() = default;

Reply ControlPlane::Post(const std::string& what, const Json& body) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& url = urls_[cur_];
  auto r = http_[cur_]->Post("/internal/v1/" + what, httplib::Headers{{"Authorization", authorization_}},
                             body.dump(), "application/json");
  Reply out;
  if (!r) {
    out.error = "cannot reach " + url + ": " + httplib::to_string(r.error());
    cur_ = (cur_ + 1) % urls_.size();
    return out;
  }
  out.status = r->status;
  out.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (out.status >= 400) {
    const bool shaped = out.body.is_object() && out.body.contains("error") && out.body["error"].is_object();
    out.error = shaped ? out.body["error"].value("message", "") : "HTTP " + std::to_string(out.status);
    const bool standby = out.status == 503 && shaped && out.body["error"].value("code", "") == "standby";
    if (standby) cur_ = (cur_ + 1) % urls_.size();
  }
  return out;
}

Reply ControlPlane::PostRetrying(const std::string& what, const Json& body, double patience_s) {
  const auto start = std::chrono::steady_clock::now();
  double wait = 0.2;
  for (;;) {
    Reply r = Post(what, body);
    if ((r.status != 0 && r.status < 500) || SecondsSince(start) > patience_s) return r;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    wait = std::min(wait * 2, 5.0);
  }
}

}  // namespace burst
