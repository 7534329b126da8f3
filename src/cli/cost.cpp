#include "cli/cost.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/print.h"

namespace burst {
namespace {

struct CrossoverArgs {
  ApiTarget target;
  double hours_per_week = 6;  // slot-hours of work a week
  int64_t burst_size = 3;     // runs at once (slots a reserved machine needs)
  int64_t bursts_per_week = 1;
  double reserved_per_hour = -1;  // per slot-hour; -1: the on-demand slot price
  double window_s = 60;           // idle time billed after each burst, per slot
  double tokens_per_second = 0;   // 0: measured on the server for --model
  std::string model = "burst-small";
  std::string device = "cpu";  // cpu, or a GPU type of the server's pool (priced per GPU)
  bool json = false;
};

std::string Money(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f", v);
  return buf;
}

}  // namespace

void AddCostCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<CrossoverArgs>();
  auto* cost = app.add_subcommand("cost", "Plan costs: serverless or a reserved machine");
  cost->require_subcommand(1);
  auto* cross = cost->add_subcommand(
      "crossover",
      "Weekly cost of a usage pattern on demand (dedicated scope: slot-seconds used, idle windows included), "
      "serverless (per token) and on a reserved machine with enough slots for a burst, and where the lines "
      "cross");
  cross->add_option("--hours-per-week", a->hours_per_week, "slot-hours of training a week")
      ->capture_default_str();
  cross->add_option("--burst-size", a->burst_size, "runs at once (a reserved machine needs that many slots)")
      ->capture_default_str();
  cross
      ->add_option("--bursts-per-week", a->bursts_per_week,
                   "bursts a week (each leaves its slots idle for --window)")
      ->capture_default_str();
  cross->add_option("--reserved-per-hour", a->reserved_per_hour,
                    "a reserved slot's price per hour (default: the server's on-demand slot price)");
  cross->add_option("--window", a->window_s, "scaledown window billed after each burst, seconds")
      ->capture_default_str();
  cross->add_option("--model", a->model, "model whose measured throughput prices the serverless line")
      ->capture_default_str();
  cross->add_option("--tokens-per-second", a->tokens_per_second,
                    "trained tokens per slot-second (default: what the server measured for --model)");
  cross
      ->add_option("--device", a->device,
                   "cpu, or a GPU type of the server (h100, ...): a slot is then one GPU at its price")
      ->capture_default_str();
  cross->add_flag("--json", a->json, "print JSON");
  AddApiTargetArgs(cross, a->target);
  cross->callback([a, rc] {
    Json p = OrThrow(ApiClient(a->target).Get("/v1/prices"));
    const Json& prices = Field(p, "prices");
    const Json& ded = Field(prices, "dedicated");
    // The CPU slot's entry is per slot, a GPU type's per GPU.
    const std::string slot_type = a->device;
    if (!ded.contains(slot_type)) {
      std::string have;
      for (auto it = ded.begin(); it != ded.end(); ++it) have += (have.empty() ? "" : ", ") + it.key();
      throw Error(Code::kInvalidArgument, "--device: this server prices " + have + ", not " + slot_type,
                  "device");
    }
    const Json& entry = ded[slot_type];
    const double per_hour =
        entry.contains("per_gpu_hour") ? Num(entry, "per_gpu_hour") : Num(entry, "per_slot_hour");
    const double reserved = a->reserved_per_hour >= 0 ? a->reserved_per_hour : per_hour;
    double tps = a->tokens_per_second;
    std::string tps_source = "given";
    if (tps <= 0 && slot_type == "cpu") {  // measured on CPU slots only
      const Json& m = Field(Field(p, "throughput"), a->model.c_str());
      tps = Num(m, "tokens_per_slot_second");
      tps_source = tps > 0 ? "measured on this server (" + Str(m, "jobs") + " job(s))" : "";
    }
    const double per_mtok = Num(Field(prices, "serverless"), "train_per_mtok");
    const double n = static_cast<double>(std::max<int64_t>(1, a->burst_size));
    const double overhead_h = static_cast<double>(a->bursts_per_week) * n * a->window_s / 3600.0;
    auto on_demand = [&](double h) { return (h + overhead_h) * per_hour; };
    auto serverless = [&](double h) { return h * 3600.0 * tps / 1e6 * per_mtok; };
    const double reserved_week = n * 168.0 * reserved;
    const double max_h = n * 168.0;
    const double cross_on_demand = per_hour > 0 ? reserved_week / per_hour - overhead_h : -1;
    const double serverless_per_h = 3600.0 * tps / 1e6 * per_mtok;
    const double cross_serverless = serverless_per_h > 0 ? reserved_week / serverless_per_h : -1;
    std::vector<double> hours = {1, 2, 5, 10, 20, 50, 100, 200, 500};
    hours.push_back(a->hours_per_week);
    hours.erase(std::remove_if(hours.begin(), hours.end(), [&](double h) { return h > max_h; }), hours.end());
    hours.push_back(max_h);
    std::sort(hours.begin(), hours.end());
    hours.erase(std::unique(hours.begin(), hours.end()), hours.end());
    if (a->json) {
      Json rows = Json::array();
      for (double h : hours) {
        rows.push_back({{"hours_per_week", h},
                        {"on_demand", on_demand(h)},
                        {"serverless", tps > 0 ? Json(serverless(h)) : Json()},
                        {"reserved", reserved_week}});
      }
      PrintJson({{"slot_type", slot_type},
                 {"on_demand_per_slot_hour", per_hour},
                 {"reserved_per_slot_hour", reserved},
                 {"serverless_train_per_mtok", per_mtok},
                 {"tokens_per_slot_second", tps > 0 ? Json(tps) : Json()},
                 {"burst_size", a->burst_size},
                 {"rows", rows},
                 {"on_demand_crosses_reserved_at_hours",
                  cross_on_demand >= 0 && cross_on_demand <= max_h ? Json(cross_on_demand) : Json()},
                 {"serverless_crosses_reserved_at_hours",
                  cross_serverless >= 0 && cross_serverless <= max_h ? Json(cross_serverless) : Json()}});
      return;
    }
    std::printf(
        "prices: on demand $%.4f per %s slot-hour; reserved $%.4f per slot-hour (%d slots, 168 h a week)\n",
        per_hour, slot_type.c_str(), reserved, static_cast<int>(n));
    if (tps > 0) {
      std::printf("        serverless $%.4f per million trained tokens at %.0f tokens per slot-second (%s)\n",
                  per_mtok, tps, tps_source.c_str());
    } else {
      std::printf(slot_type == "cpu"
                      ? "        serverless: no throughput measured for %s yet (finish a job, or pass "
                        "--tokens-per-second)\n"
                      : "        serverless: pass --tokens-per-second for %s on this GPU type\n",
                  a->model.c_str());
    }
    std::printf(
        "each burst leaves %d slot(s) idle for %.0f s before they scale to zero (billed on demand)\n\n",
        static_cast<int>(n), a->window_s);
    std::printf("%16s %14s %14s %14s  %s\n", "slot-hours/week", "on demand", "serverless", "reserved",
                "cheapest");
    for (double h : hours) {
      const double od = on_demand(h), sv = tps > 0 ? serverless(h) : -1;
      std::string best = "on demand";
      double low = od;
      if (sv >= 0 && sv < low) best = "serverless", low = sv;
      if (reserved_week < low) best = "reserved";
      std::printf("%16.1f %14s %14s %14s  %s%s\n", h, Money(od).c_str(), sv >= 0 ? Money(sv).c_str() : "-",
                  Money(reserved_week).c_str(), best.c_str(),
                  h == a->hours_per_week ? "   <- your pattern" : "");
    }
    std::printf("\n");
    if (cross_on_demand >= 0 && cross_on_demand <= max_h) {
      std::printf(
          "on demand costs more than a reserved machine above %.1f slot-hours a week (%.0f%% of its %d "
          "slots)\n",
          cross_on_demand, 100.0 * cross_on_demand / max_h, static_cast<int>(n));
    } else {
      std::printf("on demand stays cheaper than a reserved machine even at full use\n");
    }
    if (cross_serverless >= 0 && cross_serverless <= max_h) {
      std::printf("serverless costs more than a reserved machine above %.1f slot-hours a week\n",
                  cross_serverless);
    } else if (tps > 0) {
      std::printf("serverless stays cheaper than a reserved machine even at full use\n");
    }
    *rc = 0;
  });
}

}  // namespace burst
