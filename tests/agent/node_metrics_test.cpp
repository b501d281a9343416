#include "agent/node_metrics.h"

#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

namespace fragscope::agent {
namespace {

std::string render(const NodeView& view, const AgentStatus& status = {}) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, node_metric_families(view, status));
  return out.str();
}

NodeView sample_view() {
  NodeView view;
  RankView rank;
  rank.file_name = "1000/rank0-pid4242.fsr";
  rank.owner_uid = 1000;
  rank.in_user_folder = true;
  rank.gpu = 1;
  RankRecord& r = rank.record;
  r.pid = 4242;
  r.rank = 0;
  r.job = "llama";
  r.phase = JobPhase::kEval;
  // frag_oom_104's stats.json at the OOM.
  r.reserved_bytes = 41'487'958'016;
  r.allocated_bytes = 7'692'998'656;
  r.inactive_split_bytes = 2'396'399'616;
  r.alloc_retries = 2;
  r.ooms = 1;
  r.data_wait_ratio = 0.006;
  r.step_seconds = 0.42;
  r.loader_queue_depth = -1;
  view.ranks.push_back(rank);
  view.nvml.up = true;
  GpuSample gpu;
  gpu.index = 1;
  gpu.uuid = "GPU-b";
  gpu.used_bytes = 143'000'000'000;
  gpu.free_bytes = 7'754'820'096;
  gpu.total_bytes = 150'754'820'096;
  gpu.utilization_ratio = 0.87;
  gpu.processes.push_back({999, 140'000'000'000});
  view.nvml.gpus.push_back(gpu);
  view.files_by_state = {1, 2, 0, 1, 0};
  return view;
}

TEST(NodeMetricsTest, RankSeriesCarryTrainingJobRankGpuAndTheRecordValues) {
  const std::string text = render(sample_view());
  // Neither `job` (Prometheus' target label) nor `pid` (the container's PID namespace).
  const std::string labels = R"({training_job="llama",rank="0",gpu="1",uid="1000"})";
  EXPECT_NE(text.find("fragscope_reserved_bytes" + labels + " 41487958016\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fragscope_allocated_bytes" + labels + " 7692998656\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_reserved_unallocated_bytes" + labels + " 33794959360\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_inactive_split_bytes" + labels + " 2396399616\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_fragmentation_ratio" + labels + " 0.05776132956642067\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE fragscope_alloc_retries_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_alloc_retries_total" + labels + " 2\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_ooms_total" + labels + " 1\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_data_wait_ratio" + labels + " 0.006\n"), std::string::npos);
  EXPECT_NE(text.find("fragscope_step_seconds" + labels + " 0.42\n"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_rank_phase{training_job="llama",rank="0",gpu="1",uid="1000",phase="eval"} 1)"),
            std::string::npos);
  EXPECT_EQ(text.find("pid=\"4242\""), std::string::npos);
  // Unknown values are left out, not reported as zero.
  EXPECT_EQ(text.find("fragscope_largest_free_block_bytes{"), std::string::npos);
  EXPECT_EQ(text.find("fragscope_loader_queue_depth{"), std::string::npos);
  EXPECT_EQ(text.find("fragscope_samples_total{"), std::string::npos);  // a hook that writes no totals
  EXPECT_EQ(text.find("fragscope_tokens_total{"), std::string::npos);
}

TEST(NodeMetricsTest, ThroughputTotalsAreCountersWhenTheHookWritesThem) {
  NodeView view = sample_view();
  RankRecord& r = view.ranks[0].record;
  r.throughput_totals_known = true;
  r.samples_total = 128;
  r.tokens_total = 330'752;
  const std::string text = render(view);
  EXPECT_NE(text.find("# TYPE fragscope_samples_total counter\n"), std::string::npos);
  const std::string labels = R"({training_job="llama",rank="0",gpu="1",uid="1000"})";
  EXPECT_NE(text.find("fragscope_samples_total" + labels + " 128"), std::string::npos);
  EXPECT_NE(text.find("fragscope_tokens_total" + labels + " 330752"), std::string::npos);
}

TEST(NodeMetricsTest, CheckpointAcksAreTheAgentsCountNotTheRequestId) {
  NodeView view = sample_view();
  view.ranks[0].record.checkpoint_ack = 7;  // the id of the last request handled
  AgentStatus status;
  status.checkpoint_acks["1000/rank0-pid4242.fsr"] = 2;
  const std::string series = R"(fragscope_checkpoint_acks_total{training_job="llama",rank="0",gpu="1",uid="1000"})";
  EXPECT_NE(render(view, status).find(series + " 2"), std::string::npos);
  EXPECT_NE(render(view).find(series + " 0"), std::string::npos);
}

// Before: one series per training job and rank, the newest file winning whatever its owner, so
// a top-level file of uid 4242 (newer, other numbers) replaced uid 1000's rank.
TEST(NodeMetricsTest, AnotherUsersFileWithTheSameJobAndRankDoesNotReplaceTheRank) {
  NodeView view = sample_view();
  RankView forged = view.ranks[0];
  forged.file_name = "rank0-pid5000.fsr";
  forged.owner_uid = 4242;
  forged.in_user_folder = false;
  forged.record.update_unix_ns = view.ranks[0].record.update_unix_ns + 1;
  forged.record.reserved_bytes = 1'000;
  view.ranks.push_back(forged);
  const std::string text = render(view);
  EXPECT_NE(text.find(R"(fragscope_reserved_bytes{training_job="llama",rank="0",gpu="1",uid="1000"} 41487958016)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(fragscope_reserved_bytes{training_job="llama",rank="0",gpu="1",uid="4242"} 1000)"),
            std::string::npos);
}

TEST(NodeMetricsTest, RanksAndFilesLeftOutAreCounted) {
  NodeView view = sample_view();
  view.ranks_dropped = 3584;
  view.rank_files_unread = 904;
  const std::string text = render(view);
  EXPECT_NE(text.find("# TYPE fragscope_ranks_dropped gauge\nfragscope_ranks_dropped 3584\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("fragscope_rank_files_unread 904\n"), std::string::npos);
}

TEST(NodeMetricsTest, BuildInfoNamesTheVersionAndRevision) {
  const std::string text = render(NodeView{});
  const auto at = text.find(R"(fragscope_build_info{version="0.1.0",revision=")");
  ASSERT_NE(at, std::string::npos) << text;
  const auto line = text.substr(at, text.find('\n', at) - at);
  EXPECT_TRUE(line.ends_with("\"} 1")) << line;
  EXPECT_GT(line.size(), std::string(R"(fragscope_build_info{version="0.1.0",revision=""} 1)").size()) << line;
}

TEST(NodeMetricsTest, GpuSeriesAndAgentState) {
  AgentStatus status;
  status.alerts_by_rule[static_cast<std::size_t>(Rule::kHbmUsed)] = 1;
  status.actions[static_cast<std::size_t>(ActionKind::kCheckpoint)][static_cast<std::size_t>(ActionOutcome::kDryRun)] =
      3;
  const std::string text = render(sample_view(), status);
  EXPECT_NE(text.find("fragscope_nvml_up 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(fragscope_gpu_memory_used_bytes{gpu="1"} 143000000000)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_gpu_memory_total_bytes{gpu="1"} 150754820096)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_gpu_utilization_ratio{gpu="1"} 0.87)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_gpu_process_memory_bytes{gpu="1",pid="999"} 140000000000)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_rank_files{state="torn"} 2)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_rank_files{state="unsupported"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_agent_alerts{rule="hbm_used"} 1)"), std::string::npos);
  EXPECT_NE(text.find(R"(fragscope_agent_actions_total{action="checkpoint",outcome="dry_run"} 3)"), std::string::npos);
}

TEST(NodeMetricsTest, NamesFollowPrometheusConventions) {
  const auto families = node_metric_families(sample_view(), {});
  std::map<std::string, int> seen;
  for (const auto& family : families) {
    EXPECT_TRUE(prometheus::CheckMetricName(family.name)) << family.name;
    EXPECT_EQ(family.name.rfind("fragscope_", 0), 0u) << family.name;
    EXPECT_FALSE(family.help.empty()) << family.name;
    EXPECT_EQ(++seen[family.name], 1) << "duplicate " << family.name;
    const bool counter = family.type == prometheus::MetricType::Counter;
    EXPECT_EQ(counter, family.name.ends_with("_total")) << family.name;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        EXPECT_TRUE(prometheus::CheckLabelName(label.name)) << label.name;
      }
    }
  }
  EXPECT_EQ(families.size(), 48u);
}

TEST(NodeMetricsTest, PageHoldsTheLatestRendering) {
  MetricsPage page;
  EXPECT_EQ(*page.text(), "");  // nothing published yet
  const auto view = sample_view();
  page.publish(view, {});
  const auto first = page.text();
  EXPECT_EQ(*first, render(view));
  page.publish(NodeView{}, {});
  EXPECT_EQ(page.text()->find("fragscope_reserved_bytes{"), std::string::npos);
  EXPECT_NE(first->find("fragscope_reserved_bytes{"), std::string::npos);  // earlier readers keep theirs
}

}  // namespace
}  // namespace fragscope::agent
