// Allocation sites: live bytes by the model line that allocated them. By hand: which frame a
// block is attributed to, what counts, the order and the limit. On the recorded runs: the sites
// add up to memory_stats()' live bytes and allocations, and the model's weights appear at their
// modeling_llama.py lines with the sizes the workload's shape gives (truth.json "workload").
#include "metrics/allocation_sites.h"

#include <algorithm>
#include <limits>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"

namespace fragscope::metrics {
namespace {

using testing::EndStateFixture;
using testing::HandBuiltSnapshot;
using testing::hole;
using testing::live;
using testing::pending;

constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();

TEST(AllocationSites, BlockIsAttributedToTheInnermostFrameOutsidePyTorchAndPython) {
  HandBuiltSnapshot h;
  const auto stack = h.stack({{"/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 125, "forward"},
                              {"/usr/lib/python3.12/contextlib.py", 81, "inner"},
                              {"/home/me/model.py", 10, "forward"},
                              {"/home/me/train.py", 5, "main"}});
  h.segment(0x200000, {live(4096, 4000, stack)});
  const auto sites = top_allocation_sites(h.snap, 0, 10);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].location, "/home/me/model.py:10 in forward");
  EXPECT_EQ(sites[0].bytes, 4096u);  // the rounded size the block holds
  EXPECT_EQ(sites[0].blocks, 1u);
}

TEST(AllocationSites, FramesOfAPyTorchSourceTreeAreInternalToo) {
  HandBuiltSnapshot h;
  for (const char* file : {"/src/pytorch/torch/nn/modules/linear.py", "/src/pytorch/torch/autograd/function.py",
                           "/src/pytorch/torch/utils/checkpoint.py", "/src/pytorch/torch/optim/adamw.py",
                           "/src/pytorch/torch/_tensor.py"}) {
    const auto stack = h.stack({{file, 1, "internal"}, {"/home/me/model.py", 10, "forward"}});
    h.segment(0x200000 + (h.snap.segments.size() << 21), {live(512, 512, stack)});
  }
  const auto sites = top_allocation_sites(h.snap, 0, 10);
  ASSERT_EQ(sites.size(), 1u) << sites[0].location;
  EXPECT_EQ(sites[0].location, "/home/me/model.py:10 in forward");
  EXPECT_EQ(sites[0].blocks, 5u);
}

TEST(AllocationSites, ThirdPartyPackagesCountAsModelCode) {
  HandBuiltSnapshot h;
  const auto stack =
      h.stack({{"/usr/lib/python3/dist-packages/torch/_tensor.py", 40, "__torch_function__"},
               {"/usr/lib/python3/dist-packages/transformers/models/llama/modeling_llama.py", 169, "__init__"},
               {"/home/me/train.py", 5, "main"}});
  h.segment(0x200000, {live(512, 512, stack)});
  EXPECT_EQ(top_allocation_sites(h.snap, 0, 1).at(0).location,
            "/usr/lib/python3/dist-packages/transformers/models/llama/modeling_llama.py:169 in __init__");
}

TEST(AllocationSites, OnlyInternalFramesFallBackToTheInnermostAndNoStackIsNamed) {
  HandBuiltSnapshot h;
  const auto internal =
      h.stack({{"/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 300, "_multi_tensor_adamw"},
               {"<frozen runpy>", 88, "_run_code"}});
  h.segment(0x200000, {live(1024, 1024, internal), live(2048, 2048, 0)});
  const auto sites = top_allocation_sites(h.snap, 0, 10);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].location, "(no stack recorded)");
  EXPECT_EQ(sites[0].bytes, 2048u);
  EXPECT_EQ(sites[1].location, "/venv/lib/python3.12/site-packages/torch/optim/adamw.py:300 in _multi_tensor_adamw");
}

TEST(AllocationSites, DifferentStacksThroughOneModelLineAreOneSite) {
  HandBuiltSnapshot h;
  const auto via_linear =
      h.stack({{"/x/site-packages/torch/nn/functional.py", 1, "linear"}, {"/m/model.py", 7, "fwd"}});
  const auto via_matmul = h.stack({{"/x/site-packages/torch/_refs.py", 2, "matmul"}, {"/m/model.py", 7, "fwd"}});
  h.segment(0x200000, {live(1000, 1000, via_linear), hole(24), live(3000, 2900, via_matmul)});
  const auto sites = top_allocation_sites(h.snap, 0, 10);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].bytes, 4000u);
  EXPECT_EQ(sites[0].blocks, 2u);
}

TEST(AllocationSites, OnlyLiveBlocksOfTheDeviceCountOrderedByBytesThenName) {
  HandBuiltSnapshot h;
  const auto a = h.stack({{"/m/a.py", 1, "f"}});
  const auto b = h.stack({{"/m/b.py", 1, "f"}});
  const auto c = h.stack({{"/m/c.py", 1, "f"}});
  testing::HandBlock freed_a = hole(1 << 20);
  freed_a.stack = a;  // an inactive block keeps the stack of its last allocation: not live
  testing::HandBlock pending_a = pending(1 << 20);
  pending_a.stack = a;
  h.segment(0x200000, {live(512, 512, b), freed_a, pending_a, live(512, 512, a), live(2048, 2048, c)})
      .segment(0x9000000, {live(1 << 30, 1 << 30, a)}, {.device = 1});
  const auto sites = top_allocation_sites(h.snap, 0, 10);
  ASSERT_EQ(sites.size(), 3u);
  EXPECT_EQ(sites[0].location, "/m/c.py:1 in f");
  EXPECT_EQ(sites[1].location, "/m/a.py:1 in f");  // a tie on bytes: by name
  EXPECT_EQ(sites[1].bytes, 512u);
  EXPECT_EQ(sites[2].location, "/m/b.py:1 in f");
  const auto top2 = top_allocation_sites(h.snap, 0, 2);
  ASSERT_EQ(top2.size(), 2u);
  EXPECT_EQ(top2[1].location, sites[1].location);
  EXPECT_TRUE(top_allocation_sites(h.snap, 0, 0).empty());
  EXPECT_EQ(top_allocation_sites(h.snap, 1, 10).at(0).bytes, 1u << 30);
  EXPECT_TRUE(top_allocation_sites(HandBuiltSnapshot().snap, 0, 10).empty());
}

class RecordedSites : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedSites, SitesAddUpToPyTorchsLiveBytesAndAllocations) {
  const auto& f = GetParam();
  const auto sites = top_allocation_sites(f.read(), 0, kAll);
  std::uint64_t bytes = 0, blocks = 0;
  for (const auto& s : sites) {
    bytes += s.bytes;
    blocks += s.blocks;
  }
  EXPECT_EQ(bytes, f.stats.at("allocated_bytes.all.current").get<std::uint64_t>());
  EXPECT_EQ(blocks, f.stats.at("allocation.all.current").get<std::uint64_t>());
  EXPECT_TRUE(
      std::is_sorted(sites.begin(), sites.end(), [](const auto& x, const auto& y) { return x.bytes > y.bytes; }));
  const auto top = top_allocation_sites(f.read(), 0, 5);
  ASSERT_EQ(top.size(), std::min<std::size_t>(5, sites.size()));
  for (std::size_t i = 0; i < top.size(); ++i) EXPECT_EQ(top[i].location, sites[i].location);
}

/// Runs whose blocks carry the stacks of the model's construction: history recorded from the
/// start (not midrun_default), and weights that are the model's own tensors (not FSDP's flat buffers).
std::vector<EndStateFixture> model_built_while_recording() {
  std::vector<EndStateFixture> result;
  for (auto& f : testing::end_state_fixtures())
    if (f.truth["trace_complete"].get<bool>() && !f.truth["workload"].value("fsdp", false))
      result.push_back(std::move(f));
  return result;
}

class RecordedWeights : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedWeights, AreAttributedToTheModelLinesThatCreateThem) {
  const auto& f = GetParam();
  const auto& w = f.truth["workload"];
  const std::uint64_t hidden = w["hidden"], layers = w["layers"], inter = w["inter"], vocab = w["vocab"];
  const std::uint64_t fp32 = 4;
  const auto sites = top_allocation_sites(f.read(), 0, kAll);
  std::size_t mlp = 0, attention = 0, embedding = 0;
  for (const auto& s : sites) {
    if (s.location.find("modeling_llama.py:") == std::string::npos) continue;
    mlp += s.bytes == layers * hidden * inter * fp32 && s.blocks == layers;        // gate, up, down
    attention += s.bytes == layers * hidden * hidden * fp32 && s.blocks == layers;  // q, k, v, o
    embedding += s.bytes == vocab * hidden * fp32 && s.blocks == 1;                // embed_tokens, lm_head
  }
  EXPECT_EQ(mlp, 3u) << f.name;
  EXPECT_EQ(attention, 4u) << f.name;
  EXPECT_EQ(embedding, 2u) << f.name;
  for (const auto& s : sites) {
    EXPECT_EQ(s.location.find("site-packages/torch/"), std::string::npos) << s.location;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedSites, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedWeights, ::testing::ValuesIn(model_built_while_recording()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::metrics
