#include "agent/node_view.h"

#include <string_view>

#include "agent/rank_selection.h"

namespace fragscope::agent {
namespace {

// torch reports device UUIDs with or without NVML's "GPU-" prefix; compare without it.
std::string_view bare_uuid(std::string_view uuid) {
  constexpr std::string_view kPrefix = "GPU-";
  if (uuid.starts_with(kPrefix)) uuid.remove_prefix(kPrefix.size());
  return uuid;
}

}  // namespace

const GpuSample* NodeView::gpu(std::int32_t index) const {
  for (const auto& sample : nvml.gpus) {
    if (static_cast<std::int32_t>(sample.index) == index) return &sample;
  }
  return nullptr;
}

NodeView make_node_view(std::uint64_t unix_ns, std::vector<RankFileReading> readings, NvmlSample nvml) {
  NodeView view;
  view.unix_ns = unix_ns;
  view.nvml = std::move(nvml);
  std::vector<RankView> ranks;
  for (auto& reading : readings) {
    ++view.files_by_state[static_cast<std::size_t>(reading.state)];
    if (reading.state != RankFileState::kOk) continue;
    RankView rank;
    rank.gpu = reading.record.gpu;
    if (!reading.record.gpu_uuid.empty()) {
      for (const auto& gpu : view.nvml.gpus) {
        if (bare_uuid(gpu.uuid) == bare_uuid(reading.record.gpu_uuid)) rank.gpu = static_cast<std::int32_t>(gpu.index);
      }
    }
    rank.file_name = reading.name;
    rank.owner_uid = reading.owner_uid;
    rank.owner_gid = reading.owner_gid;
    rank.in_user_folder = reading.in_user_folder;
    rank.record = std::move(reading.record);
    ranks.push_back(std::move(rank));
  }
  RankSelection selection = select_ranks(std::move(ranks));
  view.ranks = std::move(selection.kept);
  view.ranks_dropped = selection.dropped;
  view.owners_dropped = std::move(selection.owners_dropped);
  return view;
}

}  // namespace fragscope::agent
