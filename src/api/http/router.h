// Router: which handler serves a method and path, and what it may receive.
//
// A pattern is a path whose "{}" segments capture one path segment of
// [A-Za-z0-9._-] (at most 256 characters), e.g. "/v1/files/{}/content".
// Each route carries its body limit and its admission check: the check runs
// once the head has arrived and before any body byte is read, so a caller
// without a key never costs more than its headers.
//
// Thread-safety: built before the server starts; read-only afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/message.h"

namespace burst::http {

using Handler = std::function<void(Request&, Response&)>;
// Runs before the body is read; false when it has answered (the request is
// refused and its body is never read). It may set Request::principal.
using Admit = std::function<bool(Request&, Response&)>;

// Which pool of threads runs a route: the API's, or the workers' protocol's
// own (heartbeats and leases never queue behind API traffic).
enum class Lane { kApi = 0, kInternal = 1 };

// The share a request counts against once admitted (the caller's
// organisation, say); "" = its client address.
using TenantOf = std::function<std::string(const Request&)>;

struct RouteOptions {
  Lane lane = Lane::kApi;
  // The body goes to a temporary file (Request::body_file), not to memory.
  bool spool = false;
  TenantOf tenant;
};

struct Route {
  std::string method;
  std::string pattern;
  std::vector<std::string> segments;  // the pattern split at '/'
  int64_t max_body = 0;
  Admit admit;  // may be empty: anyone may call the route
  Handler handler;
  RouteOptions options;
};

class Router {
 public:
  void Add(std::string method, std::string pattern, int64_t max_body, Admit admit, Handler handler,
           RouteOptions options = {});

  struct Match {
    const Route* route = nullptr;  // null: status says why (404, or 405 with allow)
    int status = 404;
    std::string allow;  // the methods the path has, for 405
  };
  // Fills *captures with the path and each "{}" segment's value.
  Match Find(std::string_view method, std::string_view path, std::vector<std::string>* captures) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

}  // namespace burst::http
