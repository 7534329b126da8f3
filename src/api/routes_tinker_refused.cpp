// The tinker SDK's routes (0.38) that Burst does not serve, each refused with
// 400 naming the feature and what to use instead, so a user who calls one
// learns why at once (a 404 reads as a wrong base URL; a 5xx is retried).
//
// Some are behind a flag of the server's client config that Burst leaves
// off (the SDK then never calls them): JWT auth (pjwt_auth_enabled), the
// sampling session's batched poller (sample_use_retrieve_futures), sample
// cancelling (sample_cancel_enabled), joining a sampling session
// (sample_join_sampling_session). docs/tinker-protocol.md, section 11.
#include <string>
#include <vector>

#include "api/context.h"
#include "api/respond.h"

namespace burst {
namespace {

struct Refusal {
  const char* method;
  const char* pattern;
  const char* feature;
  const char* instead;
};

const std::vector<Refusal>& Refusals() {
  static const std::vector<Refusal> all = {
      {"POST", "/api/v1/copy_weights", "copy_weights",
       "load the checkpoint into a run (create_training_client_from_state) and save it there"},
      {"POST", "/api/v1/training_runs/{}/checkpoints/{}/{}/publish", "publish",
       "a checkpoint belongs to its organisation; share it with an API key of that organisation"},
      {"DELETE", "/api/v1/training_runs/{}/checkpoints/{}/{}/publish", "publish",
       "a checkpoint belongs to its organisation and is never public"},
      {"POST", "/api/v1/create_custom_loss", "create_custom_loss",
       "the losses are cross_entropy, importance_sampling, ppo, cispo and dro; a loss of your own runs in "
       "the client (forward_backward_custom)"},
      {"POST", "/api/v1/join_sampling_session", "join_sampling_session",
       "each SamplingClient makes its own sampling session"},
      {"POST", "/api/v1/retrieve_futures", "retrieve_futures", "poll each future (retrieve_future)"},
      {"POST", "/api/v1/cancel_future", "cancel_future", "a sample runs to its end; ask for fewer tokens"},
      {"POST", "/api/v1/auth/token", "auth/token", "send the API key itself (X-API-Key: tml-<Burst key>)"},
      {"GET", "/api/v1/auth/apikey/me", "auth/apikey/me", "GET /v1/usage tells whether a key works"},
      {"DELETE", "/api/v1/auth/apikey/me", "auth/apikey/me", "keys are revoked with `burst keys revoke`"},
      {"PUT", "/api/v1/sessions/{}/project", "projects", "an API key's organisation owns its sessions"},
      {"GET", "/api/v1/sessions/{}/trace_export", "trace_export",
       "each run's requests are listed by GET /api/v1/training_runs/{id}"},
      {"POST", "/api/v1/sessions/search", "sessions/search", "list them with GET /api/v1/sessions"},
      {"GET", "/api/v1/audit", "audit", "the server's log and /v1/usage record who ran what"},
      {"GET", "/api/v1/billing/usage/events", "billing/usage/events",
       "Burst bills device-seconds, not tokens: GET /v1/usage"},
  };
  return all;
}

}  // namespace

void AddTinkerRefusedRoutes(Routes& routes) {
  for (const Refusal& f : Refusals()) {
    const std::string message = std::string(f.feature) + " is not available in Burst: " + f.instead;
    const std::string feature = f.feature;
    auto refuse = [message, feature](const ApiKey&, const http::Request&, http::Response& r) {
      SendStatus(r, Status(Code::kInvalidArgument, message, feature));
    };
    const std::string method = f.method;
    if (method == "GET")
      routes.Get(f.pattern, refuse);
    else if (method == "POST")
      routes.Post(f.pattern, refuse);
    else if (method == "PUT")
      routes.Put(f.pattern, refuse);
    else
      routes.Delete(f.pattern, refuse);
  }
}

}  // namespace burst
