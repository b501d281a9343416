#include "agent/checkpoint_acks.h"

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

NodeView view_with_ack(const std::string& file, std::uint64_t ack) {
  NodeView view;
  RankView rank;
  rank.file_name = file;
  rank.record.checkpoint_ack = ack;
  view.ranks.push_back(rank);
  return view;
}

TEST(CheckpointAckCounterTest, EachRiseOfTheAckIsOneCheckpoint) {
  CheckpointAckCounter counter;
  counter.observe(view_with_ack("rank1-pid7.fsr", 4));  // acks from before the agent: not counted
  EXPECT_EQ(counter.counts().at("rank1-pid7.fsr"), 0u);
  counter.observe(view_with_ack("rank1-pid7.fsr", 5));
  counter.observe(view_with_ack("rank1-pid7.fsr", 5));  // the same ack seen again
  EXPECT_EQ(counter.counts().at("rank1-pid7.fsr"), 1u);
  // Requests 6 and 7 were written before the rank looked: one checkpoint handled both.
  counter.observe(view_with_ack("rank1-pid7.fsr", 7));
  EXPECT_EQ(counter.counts().at("rank1-pid7.fsr"), 2u);
}

TEST(CheckpointAckCounterTest, GoneRanksAreForgotten) {
  CheckpointAckCounter counter;
  counter.observe(view_with_ack("rank1-pid7.fsr", 0));
  counter.observe(view_with_ack("rank1-pid7.fsr", 1));
  counter.observe(NodeView{});
  EXPECT_TRUE(counter.counts().empty());
  counter.observe(view_with_ack("rank1-pid7.fsr", 1));  // back (same name): counted afresh
  EXPECT_EQ(counter.counts().at("rank1-pid7.fsr"), 0u);
}

}  // namespace
}  // namespace fragscope::agent
