// The actions never contradict the verdict, on every fixture, held-out and field recording:
// an allocator setting is recommended, or an action, only under fragmentation (or, with no
// OOM, to lower the reserved peak); no setting is both an action and a "do not"; no MIG line
// on an input-bound run; an undetermined verdict presents no action as enough.
#include "diagnose/doctor_actions.h"

#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "diagnose/doctor.h"
#include "doctor_fixture_files.h"
#include "field_recordings.h"
#include "../doctor_options.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::doctor_scenarios;
using fragscope::testing::doctor_user_files;
using fragscope::testing::doctor_user_files_in;
using fragscope::testing::field_user_files;
using fragscope::format_bytes;

std::vector<std::pair<std::string, std::vector<std::string>>> recordings() {
  std::vector<std::pair<std::string, std::vector<std::string>>> all;
  for (const std::string& s : doctor_scenarios()) all.emplace_back(s, doctor_user_files(s));
  const auto heldout = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data" / "heldout";
  for (const auto& entry : std::filesystem::directory_iterator(heldout)) {
    const std::string name = entry.path().filename().string();
    auto files = doctor_user_files_in(entry.path(), "actions-" + name);
    all.emplace_back(name, files);
    std::erase_if(files, [](const std::string& f) { return f.ends_with("steps.jsonl"); });
    all.emplace_back(name + " without telemetry", files);
  }
  for (const char* name :
       {"acc_edge", "ec_edge", "ec_lo", "fsdp_edge", "hfc_lo", "hft_edge", "hft_lo", "leak_lo", "leak_obs", "lit_edge",
        "rn_edge", "rn_lo", "vng_edge"})
    all.emplace_back(name, field_user_files(name));
  return all;
}

TEST(DoctorActions, NeverContradictTheVerdict) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  for (const auto& [name, files] : recordings()) {
    SCOPED_TRACE(name);
    const Diagnosis d = run_doctor(collect_doctor_inputs(files), options);
    const bool setting_may_help = d.verdict == Verdict::kFragmentation || d.verdict == Verdict::kOk;
    if (!setting_may_help) {
      EXPECT_TRUE(d.recommended_conf.empty()) << d.recommended_conf;
      for (const Action& a : d.actions)
        EXPECT_EQ(a.setting.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << a.title;
    }
    for (const Action& dont : d.do_not) {
      for (const Action& a : d.actions) {
        if (!a.setting.empty()) {
          EXPECT_EQ(dont.title.find(a.setting), std::string::npos) << dont.title << " vs " << a.setting;
        }
      }
      if (!d.recommended_conf.empty()) {
        EXPECT_EQ(dont.title.find(d.recommended_conf), std::string::npos) << dont.title;
      }
      if (d.verdict == Verdict::kInputBound) {
        EXPECT_EQ(dont.title.find("MIG"), std::string::npos);
      }
    }
    if (d.verdict == Verdict::kCapacity) {
      const bool says_no_setting = std::any_of(d.do_not.begin(), d.do_not.end(), [](const Action& a) {
        return a.title.find("allocator setting") != std::string::npos;
      });
      EXPECT_TRUE(says_no_setting);
    }
    if (d.verdict == Verdict::kUndetermined) {
      for (const Action& a : d.actions) EXPECT_FALSE(a.sufficient) << a.title;
    }
    for (const WhatIfLine& w : d.whatif) {
      if (w.conf == d.recommended_conf && d.verdict == Verdict::kFragmentation && w.runs_projected_step) {
        EXPECT_TRUE(*w.runs_projected_step) << w.conf;
      }
    }
  }
}

}  // namespace
// The setting a projected step recommends says what the replay showed: it runs the step at the
// capacity less the projection's margin, and what the step needs with perfect packing (field
// tut3_edge, label fragmentation: checked on five units, a margin of 0.1%). It once read "with 0%
// to spare" there, while 460 MiB were left.
TEST(DoctorActions, AProjectedStepsSettingStatesTheMarginItWasRunWith) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis d = run_doctor(collect_doctor_inputs(field_user_files("tut3_edge")), options);
  ASSERT_EQ(d.verdict, Verdict::kFragmentation) << d.headline;
  ASSERT_FALSE(d.actions.empty());
  const Action& setting = d.actions.front();
  EXPECT_EQ(setting.setting, "PYTORCH_CUDA_ALLOC_CONF=" + d.recommended_conf);
  EXPECT_TRUE(setting.sufficient);
  const std::string margin =
      fmt::format("less the projection's margin of {:.1f}%", 100 * d.trace_projection.margin_to_fit);
  EXPECT_NE(setting.evidence.find(margin), std::string::npos) << setting.evidence;
  EXPECT_NE(setting.evidence.find(format_bytes(*d.capacity_bytes)), std::string::npos) << setting.evidence;
  EXPECT_EQ(setting.evidence.find("0% to spare"), std::string::npos) << setting.evidence;
}

}  // namespace fragscope::diagnose

namespace fragscope::diagnose {
namespace {

bool has_action(const Diagnosis& d, const std::string& title) {
  return std::any_of(d.actions.begin(), d.actions.end(), [&](const Action& a) { return a.title == title; });
}

// A margin "for longer batches" is advice only where batches vary: field moco_lo (MoCo v2, fixed images, every
// earlier step the failing one's size) was told to cap max_seq_len; nanoGPT's fixed blocks (ngpt_edge) are not;
// slw_edge (sequence-length warmup, its failing step ×2 the one before) keeps it.
TEST(DoctorActions, AMarginForLongerBatchesOnlyWhereBatchesVary) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis fixed = run_doctor(collect_doctor_inputs(field_user_files("ngpt_edge")), options);
  ASSERT_EQ(fixed.verdict, Verdict::kFragmentation) << fixed.headline;
  EXPECT_EQ(fixed.trace_projection.varying_units, 0u);
  EXPECT_FALSE(has_action(fixed, "Keep a margin for longer batches"));
  const Diagnosis varying = run_doctor(collect_doctor_inputs(field_user_files("slw_edge")), options);
  ASSERT_EQ(varying.verdict, Verdict::kFragmentation) << varying.headline;
  EXPECT_GT(varying.trace_projection.varying_units, 0u);
  EXPECT_TRUE(has_action(varying, "Keep a margin for longer batches"));
}

// "Release the cache only at phase boundaries" is for a job seen emptying it: field ec_edge (a Llama loop calling
// torch.cuda.empty_cache() every 3 steps) is told how often it did and where; nanoGPT (ngpt_edge), which never calls
// it, is not told to stop.
TEST(DoctorActions, OnlyAJobThatEmptiesTheCacheIsToldWhenTo) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis empties = run_doctor(collect_doctor_inputs(field_user_files("ec_edge")), options);
  ASSERT_EQ(empties.verdict, Verdict::kFragmentation) << empties.headline;
  EXPECT_EQ(empties.cache_empties.calls, 3u);
  const auto action = std::find_if(empties.actions.begin(), empties.actions.end(), [](const Action& a) {
    return a.title == "Release the cache only at phase boundaries";
  });
  ASSERT_NE(action, empties.actions.end());
  EXPECT_NE(action->evidence.find("called torch.cuda.empty_cache() 3 times"), std::string::npos) << action->evidence;
  const Diagnosis never = run_doctor(collect_doctor_inputs(field_user_files("ngpt_edge")), options);
  ASSERT_EQ(never.verdict, Verdict::kFragmentation) << never.headline;
  EXPECT_EQ(never.cache_empties.calls, 0u);
  EXPECT_FALSE(has_action(never, "Release the cache only at phase boundaries"));
}

// A run that grows (field leak_obs, 500 MiB of logits kept per step; its failing malloc beyond perfect packing):
// smaller steps or checkpointing only move the OOM a few steps on, and keeping less per step comes first.
TEST(DoctorActions, ARunThatGrowsIsToldFirstToKeepLessPerStep) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis d = run_doctor(collect_doctor_inputs(field_user_files("leak_obs")), options);
  ASSERT_EQ(d.verdict, Verdict::kCapacity) << d.headline;
  ASSERT_TRUE(d.run_growth.grows());
  EXPECT_NE(d.headline.find("more at every step"), std::string::npos) << d.headline;
  ASSERT_FALSE(d.actions.empty());
  EXPECT_EQ(d.actions.front().title, "Stop keeping each step's tensors on the GPU");
  for (const Action& a : d.actions) {
    if (a.title != d.actions.front().title) {
      EXPECT_FALSE(a.sufficient) << a.title;
    }
  }
  EXPECT_TRUE(has_action(d, "Keep the global batch: halve the micro-batch and double gradient accumulation"));
}

}  // namespace
}  // namespace fragscope::diagnose
