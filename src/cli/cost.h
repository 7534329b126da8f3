// `burst cost crossover`: serverless or a reserved machine, for a usage
// pattern, from the server's price table (GET /v1/prices).
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddCostCommands(CLI::App& app, int* rc);

}  // namespace burst
