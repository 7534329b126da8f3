// The web dashboard: `burst serve` answers `/` with its page and
// `/dashboard/NAME` with its scripts and styles, all compiled into the binary
// (web/, embedded by cmake/embed_assets.cmake; uPlot from npm). The page
// itself holds no data: it asks the API with the key the user enters once
// (kept in the browser's localStorage), so it sees what that key may see.
#pragma once

#include <string_view>
#include <vector>

namespace burst {

class Routes;
struct ApiContext;

struct DashboardAsset {
  std::string_view name;  // "app.js"
  std::string_view bytes;
};

// The embedded files (generated: dashboard_assets.cpp in the build folder).
const std::vector<DashboardAsset>& DashboardAssets();

// GET / and GET /dashboard/{name}: public, cached by ETag.
void AddDashboardRoutes(ApiContext& ctx, Routes& routes);

}  // namespace burst
