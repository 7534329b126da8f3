#include "api/dashboard.h"

#include <map>
#include <string>

#include "api/context.h"
#include "api/respond.h"
#include "core/fs.h"

namespace burst {
namespace {

std::string TypeOf(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "text/plain; charset=utf-8";
}

struct Served {
  std::string_view bytes;
  std::string type;
  std::string etag;
};

// name -> what is served, built once: the assets never change while the
// binary runs, so each one's ETag is its sha256.
const std::map<std::string, Served, std::less<>>& Table() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, Served, std::less<>>();
    for (const DashboardAsset& a : DashboardAssets()) {
      (*t)[std::string(a.name)] = {a.bytes, TypeOf(a.name), "\"" + Sha256Hex(a.bytes).substr(0, 32) + "\""};
    }
    return t;
  }();
  return *table;
}

void Serve(const http::Request& req, http::Response& res, std::string_view name) {
  const auto& table = Table();
  auto it = table.find(name);
  if (it == table.end()) {
    return SendStatus(res, Status(Code::kNotFound,
                                  "no dashboard file " + std::string(name) +
                                      (name == "index.html" ? " (this binary was built without web/)" : "")));
  }
  const Served& s = it->second;
  // The page runs only its own scripts and talks only to this server.
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  // Revalidated each time (a new binary may serve new files), answered 304
  // when unchanged.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", s.etag);
  if (req.header("if-none-match") == s.etag) {
    res.status = 304;
    res.set_content("", s.type);
    return;
  }
  res.status = 200;
  res.set_content(std::string(s.bytes), s.type);
}

}  // namespace

void AddDashboardRoutes(ApiContext&, Routes& routes) {
  routes.Public("GET", "/", [](http::Request& req, http::Response& res) { Serve(req, res, "index.html"); });
  routes.Public("GET", "/dashboard/{}",
                [](http::Request& req, http::Response& res) { Serve(req, res, req.matches.at(1)); });
}

}  // namespace burst
