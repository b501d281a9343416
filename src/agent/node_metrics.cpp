#include "agent/node_metrics.h"

#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include <prometheus/text_serializer.h>

#include "util/build_info.h"

namespace fragscope::agent {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// Appends series to one family, building label sets and values in one place.
class FamilyBuilder {
 public:
  FamilyBuilder(std::string name, std::string help, MetricType type) {
    family_.name = std::move(name);
    family_.help = std::move(help);
    family_.type = type;
  }

  void add(std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric metric;
    metric.label = std::move(labels);
    if (family_.type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family_.metric.push_back(std::move(metric));
  }

  MetricFamily take() { return std::move(family_); }
  bool empty() const { return family_.metric.empty(); }

 private:
  MetricFamily family_;
};

// No `job` (Prometheus' own target label) and no `pid` (the container's PID namespace, which
// joins with nothing on the host): a rank is its owner's training job and rank. `uid` keeps two
// users' ranks apart when their job names match (the default job name is empty).
std::vector<ClientMetric::Label> rank_labels(const RankView& rank) {
  return {{"training_job", rank.record.job},
          {"rank", std::to_string(rank.record.rank)},
          {"gpu", rank.gpu >= 0 ? std::to_string(rank.gpu) : ""},
          {"uid", std::to_string(rank.owner_uid)}};
}

std::vector<ClientMetric::Label> gpu_labels(const GpuSample& gpu) { return {{"gpu", std::to_string(gpu.index)}}; }

double seconds(std::uint64_t unix_ns) { return static_cast<double>(unix_ns) / 1e9; }

/// One per-rank metric: its name, help, type and how to read it off a record.
struct RankMetric {
  const char* name;
  const char* help;
  MetricType type;
  double (*value)(const RankRecord&);
  bool (*present)(const RankRecord&) = nullptr;
};

const RankMetric kRankMetrics[] = {
    {"fragscope_reserved_bytes", "Bytes the caching allocator holds from the driver (reserved_bytes.all.current).",
     MetricType::Gauge, [](const RankRecord& r) { return double(r.reserved_bytes); }},
    {"fragscope_allocated_bytes", "Bytes in live tensors (allocated_bytes.all.current).", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.allocated_bytes); }},
    {"fragscope_reserved_unallocated_bytes", "Reserved minus allocated: cached free memory, usable or stranded.",
     MetricType::Gauge,
     [](const RankRecord& r) {
       return r.reserved_bytes > r.allocated_bytes ? double(r.reserved_bytes - r.allocated_bytes) : 0.0;
     }},
    {"fragscope_inactive_split_bytes",
     "Free bytes inside split segments that cannot be released (inactive_split_bytes.all.current).", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.inactive_split_bytes); }},
    {"fragscope_largest_free_block_bytes", "Largest free block in the allocator's segments (sampled by the hook).",
     MetricType::Gauge, [](const RankRecord& r) { return double(r.largest_free_block_bytes); },
     [](const RankRecord& r) { return r.largest_free_known; }},
    {"fragscope_fragmentation_ratio",
     "inactive_split_bytes / reserved_bytes: reserved memory stranded in split segments.", MetricType::Gauge,
     [](const RankRecord& r) { return r.fragmentation_ratio(); }},
    {"fragscope_reserved_peak_bytes", "Peak reserved bytes since the process started or reset its peaks.",
     MetricType::Gauge, [](const RankRecord& r) { return double(r.reserved_peak_bytes); }},
    {"fragscope_allocated_peak_bytes", "Peak allocated bytes since the process started or reset its peaks.",
     MetricType::Gauge, [](const RankRecord& r) { return double(r.allocated_peak_bytes); }},
    {"fragscope_device_total_bytes", "Total device memory as the rank's CUDA context sees it.", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.device_total_bytes); }},
    {"fragscope_alloc_retries_total", "cudaMalloc retries after freeing cached blocks (num_alloc_retries).",
     MetricType::Counter, [](const RankRecord& r) { return double(r.alloc_retries); }},
    {"fragscope_ooms_total", "Out-of-memory errors the allocator raised (num_ooms).", MetricType::Counter,
     [](const RankRecord& r) { return double(r.ooms); }},
    {"fragscope_segments", "cudaMalloc segments the allocator holds (segment.all.current).", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.segments); }},
    {"fragscope_data_wait_ratio", "Share of recent step time spent waiting for the next batch (hook window).",
     MetricType::Gauge, [](const RankRecord& r) { return r.data_wait_ratio; }},
    {"fragscope_step_seconds", "Wall time of the last step, data wait included.", MetricType::Gauge,
     [](const RankRecord& r) { return r.step_seconds; }},
    {"fragscope_data_wait_seconds", "Time the last step waited for its batch.", MetricType::Gauge,
     [](const RankRecord& r) { return r.data_wait_seconds; }},
    {"fragscope_h2d_copy_seconds", "Host-to-device copy time of the last batch (CUDA events).", MetricType::Gauge,
     [](const RankRecord& r) { return r.h2d_seconds; }},
    {"fragscope_compute_seconds", "GPU time of the last step (CUDA events).", MetricType::Gauge,
     [](const RankRecord& r) { return r.compute_seconds; }},
    {"fragscope_step_seconds_total", "Sum of step wall time since the hook started.", MetricType::Counter,
     [](const RankRecord& r) { return r.step_seconds_total; }},
    {"fragscope_data_wait_seconds_total", "Sum of data-wait time since the hook started.", MetricType::Counter,
     [](const RankRecord& r) { return r.data_wait_seconds_total; }},
    {"fragscope_hook_seconds_total", "Time spent inside the fragscope hook itself since it started.",
     MetricType::Counter, [](const RankRecord& r) { return r.hook_seconds_total; }},
    {"fragscope_steps_total", "Steps the rank has completed.", MetricType::Counter,
     [](const RankRecord& r) { return double(r.step); }},
    {"fragscope_samples_per_second", "Training throughput over the hook's window.", MetricType::Gauge,
     [](const RankRecord& r) { return r.samples_per_second; }},
    {"fragscope_samples_total", "Samples the rank has trained on since the hook started.", MetricType::Counter,
     [](const RankRecord& r) { return double(r.samples_total); },
     [](const RankRecord& r) { return r.throughput_totals_known; }},
    {"fragscope_tokens_total", "Tokens the rank has trained on since the hook started.", MetricType::Counter,
     [](const RankRecord& r) { return double(r.tokens_total); },
     [](const RankRecord& r) { return r.throughput_totals_known; }},
    {"fragscope_batch_samples", "Samples in the last batch.", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.batch_samples); }},
    {"fragscope_batch_tokens", "Tokens in the last batch.", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.batch_tokens); }},
    {"fragscope_batch_longest_sequence_tokens", "Longest sequence in the last batch.", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.batch_longest_sequence); }},
    {"fragscope_loader_queue_depth", "Batches the data loader had ready ahead of the GPU.", MetricType::Gauge,
     [](const RankRecord& r) { return double(r.loader_queue_depth); },
     [](const RankRecord& r) { return r.loader_queue_depth >= 0; }},
    {"fragscope_last_step_timestamp_seconds", "Unix time the rank finished its last step.", MetricType::Gauge,
     [](const RankRecord& r) { return seconds(r.step_unix_ns); }},
    {"fragscope_last_update_timestamp_seconds", "Unix time of the rank's last write (steps and heartbeats).",
     MetricType::Gauge, [](const RankRecord& r) { return seconds(r.update_unix_ns); }},
};

}  // namespace

void for_each_metric_family(const NodeView& view, const AgentStatus& status,
                            const std::function<void(MetricFamily&&)>& sink) {
  auto keep = [&](FamilyBuilder& builder) { sink(builder.take()); };

  FamilyBuilder build("fragscope_build_info", "1, labelled with the agent's version and source revision.",
                      MetricType::Gauge);
  const BuildInfo info = build_info();
  build.add({{"version", std::string(info.version)}, {"revision", std::string(info.revision)}}, 1);
  keep(build);

  for (const RankMetric& metric : kRankMetrics) {
    FamilyBuilder family(metric.name, metric.help, metric.type);
    for (const RankView& rank : view.ranks) {
      if (metric.present != nullptr && !metric.present(rank.record)) continue;
      family.add(rank_labels(rank), metric.value(rank.record));
    }
    keep(family);
  }
  FamilyBuilder acks("fragscope_checkpoint_acks_total",
                     "Checkpoints the rank took on the agent's request, counted since the agent first saw it.",
                     MetricType::Counter);
  FamilyBuilder phase("fragscope_rank_phase", "1 for the phase the rank is in (train, eval, checkpoint).",
                      MetricType::Gauge);
  for (const RankView& rank : view.ranks) {
    const auto counted = status.checkpoint_acks.find(rank.file_name);
    acks.add(rank_labels(rank), counted != status.checkpoint_acks.end() ? double(counted->second) : 0.0);
    auto labels = rank_labels(rank);
    labels.push_back({"phase", std::string(phase_name(rank.record.phase))});
    phase.add(std::move(labels), 1);
  }
  keep(acks);
  keep(phase);

  FamilyBuilder nvml_up("fragscope_nvml_up", "1 when NVML answered at the last poll, else 0.", MetricType::Gauge);
  nvml_up.add({}, view.nvml.up ? 1 : 0);
  keep(nvml_up);
  FamilyBuilder used("fragscope_gpu_memory_used_bytes", "GPU memory in use by every process (NVML, nvidia-smi's view).",
                     MetricType::Gauge);
  FamilyBuilder free_bytes("fragscope_gpu_memory_free_bytes", "Free GPU memory (NVML).", MetricType::Gauge);
  FamilyBuilder total("fragscope_gpu_memory_total_bytes", "Total GPU memory (NVML).", MetricType::Gauge);
  FamilyBuilder utilization("fragscope_gpu_utilization_ratio",
                            "Share of the last sample period a kernel ran on the GPU (NVML).", MetricType::Gauge);
  FamilyBuilder process("fragscope_gpu_process_memory_bytes", "GPU memory of one compute process (NVML).",
                        MetricType::Gauge);
  FamilyBuilder mig_used("fragscope_mig_memory_used_bytes", "Memory in use in one MIG GPU instance (NVML).",
                         MetricType::Gauge);
  FamilyBuilder mig_total("fragscope_mig_memory_total_bytes", "Memory of one MIG GPU instance (NVML).",
                          MetricType::Gauge);
  for (const auto& gpu : view.nvml.gpus) {
    used.add(gpu_labels(gpu), double(gpu.used_bytes));
    free_bytes.add(gpu_labels(gpu), double(gpu.free_bytes));
    total.add(gpu_labels(gpu), double(gpu.total_bytes));
    if (gpu.utilization_ratio) utilization.add(gpu_labels(gpu), *gpu.utilization_ratio);
    for (const auto& p : gpu.processes) {
      if (p.used_bytes)
        process.add({{"gpu", std::to_string(gpu.index)}, {"pid", std::to_string(p.pid)}}, double(*p.used_bytes));
    }
    for (const auto& mig : gpu.mig_instances) {
      std::vector<ClientMetric::Label> labels{{"gpu", std::to_string(gpu.index)},
                                              {"gpu_instance", std::to_string(mig.gpu_instance_id)}};
      mig_used.add(labels, double(mig.used_bytes));
      mig_total.add(labels, double(mig.total_bytes));
    }
  }
  for (FamilyBuilder* family : {&used, &free_bytes, &total, &utilization, &process, &mig_used, &mig_total})
    keep(*family);

  FamilyBuilder files("fragscope_rank_files",
                      "Rank files found at the last poll, by state (only ok ones are reported).", MetricType::Gauge);
  for (RankFileState state : {RankFileState::kOk, RankFileState::kTorn, RankFileState::kInvalid,
                              RankFileState::kUnsupported, RankFileState::kStale}) {
    files.add({{"state", state_name(state)}}, double(view.files_by_state[static_cast<std::size_t>(state)]));
  }
  keep(files);
  FamilyBuilder unread("fragscope_rank_files_unread",
                       "Rank files the last poll left unread: over an owner's cap in a folder, or past a folder's "
                       "or the poll's budget.",
                       MetricType::Gauge);
  unread.add({}, double(view.rank_files_unread));
  keep(unread);
  FamilyBuilder dropped("fragscope_ranks_dropped",
                        "Live ranks the last poll did not track (no series, rules or actions): over the node's or "
                        "their owner's cap.",
                        MetricType::Gauge);
  dropped.add({}, double(view.ranks_dropped));
  keep(dropped);
  FamilyBuilder alerts("fragscope_agent_alerts", "Targets (ranks or GPUs) on which a rule fires, by rule.",
                       MetricType::Gauge);
  for (Rule rule : kAllRules)
    alerts.add({{"rule", rule_name(rule)}}, double(status.alerts_by_rule[static_cast<std::size_t>(rule)]));
  keep(alerts);
  FamilyBuilder actions("fragscope_agent_actions_total", "Action attempts, by action and outcome.",
                        MetricType::Counter);
  for (ActionKind kind : kAllActions) {
    for (ActionOutcome outcome : kAllOutcomes) {
      actions.add({{"action", action_name(kind)}, {"outcome", outcome_name(outcome)}},
                  double(status.actions[static_cast<std::size_t>(kind)][static_cast<std::size_t>(outcome)]));
    }
  }
  keep(actions);
  FamilyBuilder scan("fragscope_agent_poll_seconds", "Time the last poll took (rank files and NVML).",
                     MetricType::Gauge);
  scan.add({}, view.scan_seconds);
  keep(scan);
  FamilyBuilder polls("fragscope_agent_polls_total", "Polls since the agent started.", MetricType::Counter);
  polls.add({}, double(status.polls));
  keep(polls);
}

std::vector<MetricFamily> node_metric_families(const NodeView& view, const AgentStatus& status) {
  std::vector<MetricFamily> out;
  for_each_metric_family(view, status, [&out](MetricFamily&& family) { out.push_back(std::move(family)); });
  return out;
}

void MetricsPage::publish(const NodeView& view, const AgentStatus& status) {
  // Family by family into a buffer the size of the last page: at most one family's objects and
  // one page are held beside the published page (all families at once took 8 times the page).
  std::string text;
  const std::size_t last_size = this->text()->size();
  text.reserve(last_size + last_size / 8);
  const prometheus::TextSerializer serializer;
  std::vector<MetricFamily> one(1);
  for_each_metric_family(view, status, [&](MetricFamily&& family) {
    one[0] = std::move(family);
    std::ostringstream out;
    serializer.Serialize(out, one);
    text += std::move(out).str();
  });
  auto published = std::make_shared<const std::string>(std::move(text));
  std::lock_guard lock(mutex_);
  text_ = std::move(published);
}

std::shared_ptr<const std::string> MetricsPage::text() const {
  std::lock_guard lock(mutex_);
  return text_;
}

}  // namespace fragscope::agent
