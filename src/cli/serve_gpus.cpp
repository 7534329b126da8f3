#include "cli/serve_gpus.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <sstream>

#include "core/status.h"

namespace burst {

void AddGpuOptions(CLI::App& cmd, GpuArgs* a) {
  const std::string g = "GPUs";
  cmd.add_option(
         "--gpus", a->gpus,
         "GPUs workers may hold, each a slot of its type (h100, a100-80gb, l40s, ...): all (every one "
         "nvidia-smi lists, or on Slurm every GPU GRES of the partition), none, or indices such as 0,1")
      ->capture_default_str()
      ->envname("BURST_GPUS")
      ->group(g);
  cmd.add_option(
         "--price-per-hour", a->prices,
         "prices for the usage ledger, per hour of one CPU slot or one GPU: cpu=0.18,h100=3.95 (a GPU "
         "type left out takes its default: h100 3.95, h200 4.54, b200 6.25, a100-80gb 2.50, a100-40gb "
         "2.10, l40s 1.95, a10g 1.10, l4 0.80, t4 0.59; cpu= replaces --price-per-slot-hour)")
      ->envname("BURST_PRICE_PER_HOUR")
      ->group(g);
}

const std::map<std::string, double>& DefaultGpuHourPrices() {
  static const std::map<std::string, double> prices = {
      {"h100", 3.95}, {"h200", 4.54}, {"b200", 6.25}, {"a100-80gb", 2.50}, {"a100-40gb", 2.10},
      {"l40s", 1.95}, {"a10g", 1.10}, {"l4", 0.80},   {"t4", 0.59}};
  return prices;
}

std::map<std::string, double> ParseHourPrices(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t eq = item.find('=');
    const std::string type = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    double price = -1;
    size_t used = 0;
    try {
      price = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (type.empty() || type.size() > 32 || used == 0 || used != value.size() || !std::isfinite(price) ||
        price < 0) {
      throw Error(Code::kInvalidArgument,
                  "--price-per-hour: \"" + item.substr(0, 64) +
                      "\" is not TYPE=PRICE (a price per hour, >= 0), e.g. cpu=0.18,h100=3.95",
                  "price-per-hour");
    }
    if (!out.emplace(type, price).second) {
      throw Error(Code::kInvalidArgument, "--price-per-hour: " + type + " is priced twice", "price-per-hour");
    }
  }
  return out;
}

void ApplyGpus(const GpuArgs& a, const std::vector<GpuSlot>& available, bool slurm, RuntimeOptions& ro) {
  if (slurm && a.gpus != "all" && a.gpus != "none") {
    throw Error(Code::kInvalidArgument,
                "--gpus: on Slurm it is all (the partition's GPU GRES) or none; Slurm picks the devices",
                "gpus");
  }
  auto chosen = ChooseGpus(a.gpus, available);
  if (!chosen.ok()) throw Error(chosen.status());
  ro.gpus = chosen.value();
  const std::map<std::string, double> given = ParseHourPrices(a.prices);
  if (auto cpu = given.find("cpu"); cpu != given.end()) ro.price_per_slot_second = cpu->second / 3600.0;
  ro.price_per_gpu_second.clear();
  for (const auto& [type, n] : CountByType(ro.gpus)) {
    auto it = given.find(type);
    auto def = DefaultGpuHourPrices().find(type);
    if (it == given.end() && def == DefaultGpuHourPrices().end()) {
      throw Error(Code::kInvalidArgument,
                  "--price-per-hour: this server has " + std::to_string(n) + " GPU" + (n == 1 ? "" : "s") +
                      " of type " + type + " and no price for it; give one, e.g. --price-per-hour " + type +
                      "=1.00",
                  "price-per-hour");
    }
    ro.price_per_gpu_second[type] = (it != given.end() ? it->second : def->second) / 3600.0;
  }
}

}  // namespace burst
