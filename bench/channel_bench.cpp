// burst_channel_bench: what one gradient exchange costs among N members on
// this machine, for the cost model's inputs (docs/cost-model.md): c10d Gloo
// over loopback TCP and the storage channel on an object store, same run,
// members as threads of this process (one machine; a cluster's network and
// store are measured there the same way).
//
//   burst_channel_bench [--members 2] [--rounds 20] [--store file:///tmp/...]
//                       [--kib 64,1024,16384]
//
// For each size and channel: `rounds` all-reduces after one untimed, each
// member timing its own; one JSON line with the median over rounds of the
// slowest member's time, then a fit of time = latency + bytes / bandwidth
// over the sizes (least squares), per channel.
//
// Errors: a message on stderr and exit status 1.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "core/ids.h"
#include "core/json.h"
#include "parallel/gloo_group.h"
#include "parallel/store_channel.h"
#include "store/object_store.h"

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Runs `exchange(rank, round)` on `members` threads for rounds + 1 rounds;
// returns each timed round's slowest member, in seconds.
template <typename F>
std::vector<double> Rounds(int members, int rounds, F exchange) {
  std::vector<std::vector<double>> t(static_cast<size_t>(members));
  std::vector<std::thread> threads;
  std::vector<Status> status(static_cast<size_t>(members));
  for (int r = 0; r < members; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i <= rounds && status[static_cast<size_t>(r)].ok(); ++i) {
        const auto t0 = Clock::now();
        status[static_cast<size_t>(r)] = exchange(r, i);
        if (i > 0)
          t[static_cast<size_t>(r)].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const Status& s : status) {
    if (!s.ok()) throw Error(s);
  }
  std::vector<double> slowest(static_cast<size_t>(rounds), 0.0);
  for (const auto& mine : t) {
    for (size_t i = 0; i < mine.size(); ++i) slowest[i] = std::max(slowest[i], mine[i]);
  }
  return slowest;
}

std::vector<double> Gloo(int members, int rounds, size_t floats) {
  GlooOptions o;
  o.size = members;
  o.timeout_ms = 120'000;
  auto root = GlooGroup::Listen(o);
  if (!root.ok()) throw Error(root.status());
  std::vector<std::unique_ptr<GlooGroup>> groups(static_cast<size_t>(members));
  std::vector<torch::Tensor> data(static_cast<size_t>(members));
  std::vector<std::thread> connect;
  std::vector<Status> status(static_cast<size_t>(members));
  for (int r = 0; r < members; ++r) {
    connect.emplace_back([&, r] {
      GlooGroup* g = root.value().get();
      if (r > 0) {
        GlooOptions mine = o;
        mine.rank = r;
        auto j = GlooGroup::Join(root.value()->address(), mine);
        if (!j.ok()) {
          status[static_cast<size_t>(r)] = j.status();
          return;
        }
        groups[static_cast<size_t>(r)] = std::move(j.value());
        g = groups[static_cast<size_t>(r)].get();
      }
      status[static_cast<size_t>(r)] = g->Connect();
    });
  }
  for (auto& th : connect) th.join();
  for (const Status& s : status) {
    if (!s.ok()) throw Error(s);
  }
  for (int r = 0; r < members; ++r)
    data[static_cast<size_t>(r)] = torch::randn({static_cast<int64_t>(floats)});
  return Rounds(members, rounds, [&](int r, int) {
    GlooGroup* g = r == 0 ? root.value().get() : groups[static_cast<size_t>(r)].get();
    return g->AllReduceSum(data[static_cast<size_t>(r)]);
  });
}

std::vector<double> Store(ObjectStore* store, int members, int rounds, size_t floats) {
  const std::string prefix = "bench/" + NewId("ch") + "/";
  std::vector<StoreChannel> channels;
  for (int r = 0; r < members; ++r) {
    auto c = StoreChannel::Open(store, {prefix, r, members, 120'000});
    if (!c.ok()) throw Error(c.status());
    channels.push_back(std::move(c.value()));
  }
  std::vector<std::vector<float>> data(static_cast<size_t>(members), std::vector<float>(floats, 1.0f));
  auto t = Rounds(members, rounds, [&](int r, int) {
    return channels[static_cast<size_t>(r)].AllReduceSum(data[static_cast<size_t>(r)]);
  });
  Status s = store->DeletePrefix(prefix);
  if (!s.ok()) throw Error(s);
  return t;
}

// Least squares t = a + b x.
std::pair<double, double> Fit(const std::vector<double>& x, const std::vector<double>& t) {
  const double n = static_cast<double>(x.size());
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    st += t[i];
    sxx += x[i] * x[i];
    sxt += x[i] * t[i];
  }
  const double b = (n * sxt - sx * st) / (n * sxx - sx * sx);
  return {(st - b * sx) / n, b};
}

int Main(int argc, char** argv) {
  CLI::App app{
      "burst_channel_bench: one gradient exchange among N members, c10d Gloo and the storage channel"};
  int members = 2, rounds = 20;
  std::string store_url, kib_list = "64,1024,16384";
  app.add_option("--members", members, "members (threads)")->check(CLI::Range(2, 64));
  app.add_option("--rounds", rounds, "timed exchanges per size and channel")->check(CLI::Range(1, 10000));
  app.add_option("--store", store_url, "the storage channel's store (default: a temporary folder, file://)");
  app.add_option("--kib", kib_list, "vector sizes in KiB, comma-separated");
  CLI11_PARSE(app, argc, argv);
  std::vector<size_t> kib;
  std::stringstream ss(kib_list);
  for (std::string item; std::getline(ss, item, ',');) kib.push_back(static_cast<size_t>(std::stoul(item)));
  std::filesystem::path tmp;
  if (store_url.empty()) {
    tmp = std::filesystem::temp_directory_path() / NewId("burst-channel-bench");
    store_url = "file://" + tmp.string();
  }
  auto store = OpenObjectStore(store_url);
  if (!store.ok()) throw Error(store.status());
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>
      points;  // channel: bytes, seconds
  for (size_t k : kib) {
    const size_t floats = k * 1024 / sizeof(float);
    for (const std::string channel : {"gloo", "store"}) {
      const std::vector<double> t = channel == "gloo" ? Gloo(members, rounds, floats)
                                                      : Store(store.value().get(), members, rounds, floats);
      const double med = Median(t), bytes = static_cast<double>(floats * sizeof(float));
      points[channel].first.push_back(bytes);
      points[channel].second.push_back(med);
      Json line{{"channel", channel},
                {"members", members},
                {"bytes", bytes},
                {"rounds", rounds},
                {"median_ms", med * 1e3},
                {"max_ms", *std::max_element(t.begin(), t.end()) * 1e3},
                {"gb_per_s", bytes / med / 1e9}};
      if (channel == "store") line["store"] = store.value()->Url();
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  }
  for (auto& [channel, p] : points) {
    if (p.first.size() < 2) continue;
    auto [a, b] = Fit(p.first, p.second);
    Json fit{{"fit", channel}, {"members", members}, {"latency_ms", a * 1e3}, {"gb_per_s", nullptr}};
    if (b > 0) {
      fit["gb_per_s"] = 1.0 / b / 1e9;
    } else {
      fit["note"] = "the time did not grow with the size: more --rounds or sizes further apart";
    }
    std::printf("%s\n", fit.dump().c_str());
  }
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  return 0;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) {
  try {
    return burst::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "burst_channel_bench: %s\n", e.what());
    return 1;
  }
}
