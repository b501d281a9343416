// Myers' alignment of two sequences: a longest common subsequence, or nothing beyond max_edits.
#include "diagnose/sequence_alignment.h"

#include <gtest/gtest.h>

#include <string>

namespace fragscope::diagnose {
namespace {

std::optional<AlignedPairs> align(const std::string& a, const std::string& b, std::size_t max_edits = 100) {
  return align_sequences(
      a.size(), b.size(), [&](std::size_t i, std::size_t j) { return a[i] == b[j]; }, max_edits);
}

std::string common(const std::string& a, const AlignedPairs& pairs) {
  std::string out;
  for (const auto& [i, j] : pairs) out += a[i];
  return out;
}

TEST(SequenceAlignment, FindsALongestCommonSubsequence) {
  const auto pairs = align("ABCABBA", "CBABAC");  // Myers' own example: LCS length 4
  ASSERT_TRUE(pairs.has_value());
  EXPECT_EQ(pairs->size(), 4u);
  for (std::size_t k = 1; k < pairs->size(); ++k) {
    EXPECT_LT((*pairs)[k - 1].first, (*pairs)[k].first);
    EXPECT_LT((*pairs)[k - 1].second, (*pairs)[k].second);
  }
  for (const auto& [i, j] : *pairs) EXPECT_EQ(std::string("ABCABBA")[i], std::string("CBABAC")[j]);
}

TEST(SequenceAlignment, MatchesAStepWithAnInsertedAllocationAroundIt) {
  const auto pairs = align("emb.attn.mlp.attn.mlp.loss", "emb.attn.mlp.WS.attn.mlp.loss");
  ASSERT_TRUE(pairs.has_value());
  EXPECT_EQ(common("emb.attn.mlp.attn.mlp.loss", *pairs), "emb.attn.mlp.attn.mlp.loss");
}

TEST(SequenceAlignment, IdenticalAndEmptySequences) {
  EXPECT_EQ(align("abc", "abc")->size(), 3u);
  EXPECT_TRUE(align("", "")->empty());
  EXPECT_TRUE(align("abc", "")->empty());
}

TEST(SequenceAlignment, GivesUpBeyondTheEditBudget) {
  EXPECT_FALSE(align("aaaaaaaa", "bbbbbbbb", 15).has_value());  // 16 edits needed
  EXPECT_TRUE(align("aaaaaaaa", "bbbbbbbb", 16).has_value());
}

}  // namespace
}  // namespace fragscope::diagnose
