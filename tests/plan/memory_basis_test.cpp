#include "plan/memory_basis.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = FRAGSCOPE_SOURCE_DIR;

TEST(MemoryBasis, EveryRecordedJobIsMeasured) {
  // tests/data/plan: the shapes p3–p10 and the levers' runs, each as the job.toml it ran
  std::size_t jobs = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "tests/data/plan")) {
    if (!fs::exists(entry.path() / "job.toml")) continue;
    ++jobs;
    const JobSpec spec = read_job_spec(entry.path() / "job.toml");
    EXPECT_TRUE(derived_parts(spec).empty()) << entry.path().filename() << ": " << derived_parts(spec).front();
    EXPECT_EQ(memory_basis(spec), "measured") << entry.path().filename();
  }
  EXPECT_EQ(jobs, 22u);
  EXPECT_EQ(memory_basis(read_job_spec(kSource / "examples/plan_p1.toml")), "measured");
}

TEST(MemoryBasis, WhatNoRecordingExercisesIsDerivedAndNamed) {
  const JobSpec p1 = read_job_spec(kSource / "examples/plan_p1.toml");
  auto parts = [&](auto edit) {
    JobSpec s = p1;
    edit(s);
    return derived_parts(s);
  };
  using Parts = std::vector<std::string>;
  EXPECT_EQ(parts([](JobSpec& s) { s.training.optimizer = Optimizer::kAdamW8bit; }), Parts{"adamw-8bit"});
  EXPECT_EQ(parts([](JobSpec& s) { s.training.loss = Loss::kFused; }), Parts{"fused linear cross-entropy"});
  EXPECT_EQ(parts([](JobSpec& s) { s.training.checkpointing = Checkpointing::kSelective; }),
            Parts{"selective checkpointing"});
  EXPECT_EQ(parts([](JobSpec& s) {
              s.parallel.strategy = Strategy::kFsdp;
              s.parallel.world_size = 4;
            }),
            Parts{"FSDP over more than one rank"});
  EXPECT_EQ(parts([](JobSpec& s) { s.parallel.strategy = Strategy::kDdp; }), Parts{"ddp"});
  EXPECT_EQ(parts([](JobSpec& s) { s.hardware.mig = "3g.71gb"; }), Parts{"a MIG slice"});
  EXPECT_EQ(parts([](JobSpec& s) { s.hardware.gpu = "H100-80GB"; }), Parts{"a GPU other than the H200"});
  EXPECT_EQ(parts([](JobSpec& s) { s.hardware.alloc_config.garbage_collection_threshold = 0.8; }),
            Parts{"allocator options other than the recorded ones"});
  // recorded: one-rank FSDP2, the optimizers' implementations, partial checkpointing, the chunked
  // loss, bf16 and fp32, use_cache off, variable lengths, expandable segments
  EXPECT_TRUE(parts([](JobSpec& s) {
                s.parallel.strategy = Strategy::kFsdp;
                s.training.precision = Precision::kMixedBf16;
              }).empty());
  EXPECT_TRUE(parts([](JobSpec& s) {
                s.training.optimizer_impl = OptimizerImpl::kFused;
                s.training.checkpointing = Checkpointing::kFull;
                s.training.checkpointed_layers = 3;
                s.training.loss = Loss::kChunked;
                s.training.precision = Precision::kBf16;
                s.training.use_cache = false;
                s.training.variable_length = true;
                s.hardware.alloc_config.expandable_segments = true;
              }).empty());
  const JobSpec ddp = read_job_spec(kSource / "examples/llama2-7b-ddp.toml");
  EXPECT_EQ(derived_parts(ddp), (Parts{"ddp", "a GPU other than the H200"}));
  EXPECT_EQ(memory_basis(ddp), "derived");
}

}  // namespace
}  // namespace fragscope::plan
