// `burst deployments create|list|get|delete`: serve a checkpoint behind a
// name (docs/api.md, "Deployments").
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddDeploymentCommands(CLI::App& app, int* rc);

}  // namespace burst
