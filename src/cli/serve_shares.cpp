#include "cli/serve_shares.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <climits>

#include "core/status.h"

namespace burst {

int64_t ParseBytes(const std::string& text, const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() == 3 && unit[1] == 'I' && unit[2] == 'B') unit = unit.substr(0, 1);  // GiB = G
  if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);                    // GB = G (powers of 2)
  int shift = -1;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  if (digits == 0 || digits > 15 || shift < 0) {
    throw Error(Code::kInvalidArgument,
                "--" + flag + " \"" + text +
                    "\": give a number of bytes with an optional unit K, M, G or T (e.g. 500G)",
                flag);
  }
  const int64_t n = std::stoll(text.substr(0, digits));
  if (n > (INT64_MAX >> shift))
    throw Error(Code::kInvalidArgument, "--" + flag + " \"" + text + "\" is too large", flag);
  return n << shift;
}

void AddShareOptions(CLI::App& cmd, ShareArgs* a) {
  const std::string g = "Per-organisation shares";
  cmd.add_option("--org-max-requests", a->requests,
                 "API requests of one organisation running at once (more wait their turn, others' go first)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_REQUESTS")
      ->group(g);
  cmd.add_option("--org-max-body-mb", a->body_mb,
                 "MiB of request bodies one organisation may have in memory at once (uploads go to disk); "
                 "more is 429")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_BODY_MB")
      ->group(g);
  cmd.add_option("--org-max-storage", a->storage,
                 "bytes of files and checkpoints one organisation may store, e.g. 500G (0: no quota; over "
                 "it, uploads "
                 "and new jobs are 429 org_cap)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_STORAGE")
      ->group(g);
  cmd.add_option("--org-max-loop-runs", a->loop_runs,
                 "live training loop runs of one organisation (idle an hour: not live); more is 429 org_cap")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_LOOP_RUNS")
      ->group(g);
  cmd.add_option("--org-max-loop-sessions", a->loop_sessions,
                 "live training loop sessions of one organisation; more is 429 org_cap")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_LOOP_SESSIONS")
      ->group(g);
  cmd.add_option(
         "--org-max-loop-mb", a->loop_mb,
         "MiB of training loop requests and unfetched results the control plane holds for one organisation "
         "(half of it per run); more is refused")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_LOOP_MB")
      ->group(g);
  cmd.add_option("--org-max-sampling-workers", a->sampling_workers,
                 "pool workers one organisation's sampling calls may hold at once while another organisation "
                 "samples (-1: half "
                 "the slots, at least one; 0: no cap)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_SAMPLING_WORKERS")
      ->group(g);
  cmd.add_option(
         "--org-max-min-replicas", a->min_replicas,
         "slots one organisation's deployments may hold live through min_replicas (-1: half the slots)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_MIN_REPLICAS")
      ->group(g);
  cmd.add_option("--key-max-rps", a->key_max_rps,
                 "API requests a second one API key may send on average (bursts of twice that pass); more is "
                 "429 rate_limit (0: no limit)")
      ->capture_default_str()
      ->envname("BURST_KEY_MAX_RPS")
      ->group(g);
  cmd.add_option(
         "--max-idle-per-address", a->max_idle_per_address,
         "connections of one client address waiting between requests; past it its oldest idle one closes")
      ->capture_default_str()
      ->envname("BURST_MAX_IDLE_PER_ADDRESS");
}

void ApplyShares(const ShareArgs& a, ServerOptions& opt, RuntimeOptions& ro) {
  auto at_least = [](int64_t v, int64_t min, const char* flag) {
    if (v < min) {
      throw Error(Code::kInvalidArgument,
                  std::string("--") + flag + " must be at least " + std::to_string(min), flag);
    }
  };
  at_least(a.requests, 1, "org-max-requests");
  at_least(a.body_mb, 1, "org-max-body-mb");
  at_least(a.loop_runs, 1, "org-max-loop-runs");
  at_least(a.loop_sessions, 1, "org-max-loop-sessions");
  at_least(a.loop_mb, 1, "org-max-loop-mb");
  at_least(a.sampling_workers, -1, "org-max-sampling-workers");
  at_least(a.min_replicas, -1, "org-max-min-replicas");
  at_least(a.max_idle_per_address, 1, "max-idle-per-address");
  if (!(a.key_max_rps >= 0) || a.key_max_rps > 1e6)
    throw Error(Code::kInvalidArgument, "--key-max-rps must be between 0 (no limit) and 1000000",
                "key-max-rps");
  opt.key_max_rps = a.key_max_rps;
  opt.http.max_threads_per_tenant = std::min(a.requests, opt.http.max_threads);
  opt.http.max_body_memory_per_tenant = a.body_mb << 20;
  opt.http.max_idle_per_address = a.max_idle_per_address;
  opt.max_storage_per_org = ParseBytes(a.storage, "org-max-storage");
  opt.loops.max_runs_per_org = a.loop_runs;
  opt.loops.max_sessions_per_org = a.loop_sessions;
  opt.loops.max_bytes_per_org = a.loop_mb << 20;
  opt.loops.max_bytes_per_run = std::max<int64_t>(1 << 20, (a.loop_mb << 20) / 2);
  // By default half the pool: another organisation's calls, its job
  // beside them, still find a slot.
  ro.max_sampling_workers_per_org = a.sampling_workers >= 0 ? a.sampling_workers : std::max(1, ro.slots / 2);
  ro.max_min_replicas_per_org = a.min_replicas;
}

}  // namespace burst
