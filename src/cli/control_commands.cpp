#include "cli/control_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/admin.h"
#include "cli/checkpoints.h"
#include "cli/cost.h"
#include "cli/deployments.h"
#include "cli/evals.h"
#include "cli/files.h"
#include "cli/jobs.h"
#include "cli/serve.h"
#include "cli/sweeps.h"
#include "core/status.h"

namespace burst {

void AddControlCommands(CLI::App& app, int* rc) {
  AddServeCommand(app, rc);
  AddAdminCommands(app, rc);
  AddFilesCommand(app, rc);
  AddJobsCommands(app, rc);
  AddCheckpointsCommand(app, rc);
  AddSweepCommands(app, rc);
  AddDeploymentCommands(app, rc);
  AddEvalsCommands(app, rc);
  AddCostCommands(app, rc);
}

int ParseAndRun(CLI::App& app, int argc, char** argv, const int& rc) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (...) {
    Status s = CurrentExceptionToStatus();
    std::fprintf(stderr, "burst: error: %s\n", s.message().c_str());
    return 1;
  }
  return rc;
}

}  // namespace burst
