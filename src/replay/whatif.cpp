#include "replay/whatif.h"

#include <algorithm>
#include <bit>
#include <functional>

#include <fmt/format.h>


namespace fragscope::replay {
namespace {

constexpr std::uint64_t kStep = 2ull << 20;  // cudaMalloc granularity

ReplayOptions options_for(const Capacity& capacity, std::optional<std::uint64_t> bytes,
                          bool use_recorded_addresses) {
  ReplayOptions options = replay_options_for(capacity);
  options.capacity = bytes;
  if (!bytes) options.capacity_steps.clear();  // demand: no limit at any time
  options.use_recorded_addresses = use_recorded_addresses;
  return options;
}

std::string limits_task(std::size_t configs, bool at_capacity, bool min_capacity) {
  if (at_capacity && min_capacity) return fmt::format("what-if: {} configs at the capacity, least capacity", configs);
  if (min_capacity) return fmt::format("what-if: least capacity of {} configs", configs);
  return fmt::format("what-if: {} configs at the capacity", configs);
}

}  // namespace

std::vector<WhatIfConfig> standard_sweep(const PreparedTrace& trace, bool fraction_known) {
  std::vector<std::string> confs = {
      "",
      "expandable_segments:True",
      "max_split_size_mb:64",
      "max_split_size_mb:128",
      "max_split_size_mb:256",
      "max_split_size_mb:512",
      "max_split_size_mb:1024",
      "roundup_power2_divisions:2",
      "roundup_power2_divisions:4",
      "roundup_power2_divisions:8",
      "roundup_power2_divisions:16",
      "expandable_segments:True,roundup_power2_divisions:4",
      "max_split_size_mb:256,roundup_power2_divisions:4",
      "max_split_size_mb:512,roundup_power2_divisions:8",
  };
  if (fraction_known) {
    confs.insert(confs.end(), {"garbage_collection_threshold:0.6",
                               "garbage_collection_threshold:0.8",
                               "max_split_size_mb:256,garbage_collection_threshold:0.8"});
  }
  std::vector<WhatIfConfig> sweep;
  sweep.push_back({alloc::to_alloc_conf(trace.recorded_config), trace.recorded_config, true});
  for (const std::string& conf : confs) {
    const alloc::AllocConfig config = alloc::parse_alloc_conf(conf);
    const bool seen = std::any_of(sweep.begin(), sweep.end(),
                                  [&](const WhatIfConfig& c) { return c.config == config; });
    if (!seen) sweep.push_back({conf, config, false});
  }
  return sweep;
}

namespace {

std::uint64_t bisection_low(std::uint64_t floor) { return floor / kStep * kStep; }

std::uint64_t bisection_high(std::uint64_t floor, std::uint64_t ceiling) {
  return std::max(bisection_low(floor), (ceiling + kStep - 1) / kStep * kStep);
}

}  // namespace

std::uint64_t max_bisection_replays(std::uint64_t floor, std::uint64_t ceiling) {
  // One replay at the floor, then one per halving of the steps between: ceil(log2(steps)).
  const std::uint64_t steps = (bisection_high(floor, ceiling) - bisection_low(floor)) / kStep;
  return 1 + (steps > 1 ? std::bit_width(steps - 1) : 0);
}

std::uint64_t find_min_capacity(const PreparedTrace& trace, ModelKind kind,
                                const alloc::AllocConfig& config, const ReplayOptions& base,
                                std::uint64_t floor, std::uint64_t ceiling) {
  ReplayOptions options = base;
  options.timeline_points = 0;
  options.capacity_steps.clear();  // one capacity for the whole run
  std::uint64_t replays = 0;
  auto survives = [&](std::uint64_t capacity) {
    options.capacity = capacity;
    ++replays;
    return !run_replay(trace, kind, config, options).oom;
  };
  auto done = [&](std::uint64_t capacity) {
    if (base.progress) base.progress->add((max_bisection_replays(floor, ceiling) - replays) * trace.ops.size());
    return capacity;
  };
  std::uint64_t lo = bisection_low(floor);
  std::uint64_t hi = bisection_high(floor, ceiling);  // survives
  if (survives(lo)) return done(lo);
  while (hi - lo > kStep) {  // invariant: lo fails, hi survives
    const std::uint64_t mid = lo + (hi - lo) / kStep / 2 * kStep;
    if (survives(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return done(hi);
}

WhatIfConfig user_config(const std::string& conf) {
  const alloc::AllocConfig config = alloc::parse_alloc_conf(conf);
  return {alloc::to_alloc_conf(config), config, false};
}

WhatIfReport sweep_at_capacity(const PreparedTrace& trace, const Capacity& capacity, const WhatIfOptions& options,
                               std::vector<WhatIfConfig> extra) {
  std::vector<WhatIfConfig> configs = standard_sweep(trace, capacity.allowed_maximum.has_value());
  for (WhatIfConfig& c : extra) {
    const bool known =
        std::any_of(configs.begin(), configs.end(), [&](const WhatIfConfig& k) { return k.config == c.config; });
    if (!known) configs.push_back(std::move(c));
  }
  return run_whatif(trace, configs, capacity, options);
}

WhatIfReport run_whatif(const PreparedTrace& trace, const std::vector<WhatIfConfig>& configs,
                        const Capacity& capacity, const WhatIfOptions& options) {
  WhatIfReport report;
  report.capacity = capacity;
  report.rows.resize(configs.size());
  const std::uint64_t budget = replay_memory_budget(trace);
  ReplayOptions unlimited = options_for(capacity, std::nullopt, options.use_recorded_addresses);
  ReplayOptions limited = options_for(capacity, capacity.bytes, options.use_recorded_addresses);
  const std::uint64_t events = trace.ops.size();

  // Demand first (the ideal packer's peak is every bisection's floor), then the rest. A config's
  // replay comes first: it runs alone, and what it holds sets how many run at once (replay_memory.h).
  ProgressCounter demand(options.progress, fmt::format("what-if: {} configs, no memory limit", configs.size()),
                         "events", (configs.size() + 1) * events);
  unlimited.progress = &demand;
  std::vector<std::function<std::uint64_t()>> tasks;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    tasks.emplace_back([&, i] {
      report.rows[i].config = configs[i];
      report.rows[i].unlimited = run_replay(trace, ModelKind::kCaching, configs[i].config, unlimited);
      return report.rows[i].unlimited.memory_bytes;
    });
  }
  tasks.emplace_back([&] {
    report.ideal = run_replay(trace, ModelKind::kIdeal, trace.recorded_config, unlimited);
    return report.ideal.memory_bytes;
  });
  report.concurrency = run_replays(tasks, options.threads, budget);
  std::uint64_t measured = report.ideal.memory_bytes;  // what each config's replays hold, measured
  for (const WhatIfRow& row : report.rows) measured = std::max(measured, row.unlimited.memory_bytes);

  std::uint64_t replays = capacity.bytes ? configs.size() : 0;
  if (options.min_capacity) {
    for (const WhatIfRow& row : report.rows)
      replays += max_bisection_replays(report.ideal.stats.peak_reserved_bytes, row.unlimited.stats.peak_reserved_bytes);
  }
  ProgressCounter limits(options.progress,
                         limits_task(configs.size(), capacity.bytes.has_value(), options.min_capacity), "events",
                         replays * events);
  unlimited.progress = &limits;
  limited.progress = &limits;
  tasks.clear();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    WhatIfRow& row = report.rows[i];
    if (capacity.bytes) {
      tasks.emplace_back([&, i] {
        row.at_capacity = run_replay(trace, ModelKind::kCaching, configs[i].config, limited);
        return row.at_capacity->memory_bytes;
      });
    }
    if (options.min_capacity) {
      tasks.emplace_back([&, i] {
        row.min_capacity = find_min_capacity(trace, ModelKind::kCaching, configs[i].config,
                                             unlimited, report.ideal.stats.peak_reserved_bytes,
                                             row.unlimited.stats.peak_reserved_bytes);
        return row.unlimited.memory_bytes;  // a replay under a limit holds no more than without
      });
    }
  }
  const ReplayConcurrency limits_run =
      run_replays(tasks, options.threads, budget, std::max<std::uint64_t>(1, measured));
  report.concurrency.threads = std::max(report.concurrency.threads, limits_run.threads);
  report.concurrency.memory_limited = report.concurrency.memory_limited || limits_run.memory_limited;

  std::stable_sort(report.rows.begin(), report.rows.end(), [](const WhatIfRow& a, const WhatIfRow& b) {
    return a.unlimited.stats.peak_reserved_bytes < b.unlimited.stats.peak_reserved_bytes;
  });
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const WhatIfRow& row = report.rows[i];
    if (!row.fits()) continue;
    if (!report.recommended) {
      report.recommended = i;
      continue;
    }
    // Equal demand: prefer the simpler setting (fewer keys to explain).
    const WhatIfRow& best = report.rows[*report.recommended];
    if (row.unlimited.stats.peak_reserved_bytes == best.unlimited.stats.peak_reserved_bytes &&
        row.config.conf.size() < best.config.conf.size()) {
      report.recommended = i;
    }
  }
  return report;
}

}  // namespace fragscope::replay
