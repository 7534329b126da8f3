// For the e2e tests on real services (Slurm, radosgw): Slurm workers blind
// to the control plane's folders and which worker holds a job. The test
// Slurm itself is in e2e_slurm.h, the test bucket's objects in e2e_s3.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/subprocess.h"
#include "e2e_http.h"
#include "e2e_s3.h"
#include "e2e_slurm.h"
#include "e2e_util.h"

namespace burst::e2e {

// A --worker-exe for Slurm workers that see none of this machine's test
// folders, as on a cluster node: in a mount namespace of its own, each
// burst-e2e-* folder under the temp folder (every control plane's data
// folder among them) and the shipped models are empty tmpfs, so the worker
// has its work over HTTP and its base model, data and checkpoints from the
// store, or fails. The script is written into `dir`.
inline std::string BlindWorkerExe(const fs::path& dir) {
  const fs::path script = dir / "blind-worker.sh";
  WriteText(
      script,
      "#!/bin/sh\n"
      "# A burst worker blind to the control plane's folders (tests/e2e/e2e_cluster.h).\n"
      "exec unshare --mount -- sh -c '\n"
      "  for d in \"$1\"/burst-e2e-*; do [ -d \"$d\" ] && { mount -t tmpfs blind \"$d\" || exit 97; }; done\n"
      "  mount -t tmpfs blind \"$2\" || exit 97\n"
      "  shift 2; exec \"$@\"' sh '" +
          fs::temp_directory_path().string() + "' '" + (SourceDir() / "models").string() + "' '" +
          BurstBinary() + "' \"$@\"\n");
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

// The worker the pool shows busy with job `id`, or null.
inline Json WorkerOf(const ServeProcess& s, const std::string& id) {
  for (const Json& w : s.Send("GET", "/v1/workers").body.value("data", Json::array()))
    if (w.value("job", Json()) == id) return w;
  return Json();
}

}  // namespace burst::e2e
