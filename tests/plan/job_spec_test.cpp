#include "plan/job_spec.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::plan {
namespace {

const std::string kValid = R"(
[model]
hidden_size = 2048
num_layers = 16
num_attention_heads = 16
intermediate_size = 5632
vocab_size = 32000

[training]
seq_len = 2048
micro_batch_size = 4
grad_accum = 2

[hardware]
gpu = "h200"
)";

std::string error_of(const std::string& toml) {
  try {
    parse_job_spec(toml, "job.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(JobSpec, ParsesTheFixtureShapeWithDefaults) {
  const JobSpec spec = parse_job_spec(kValid, "job.toml");
  EXPECT_EQ(spec.model.num_kv_heads, 16u);         // defaults to the attention heads
  EXPECT_EQ(spec.model.parameters(), 953223168u);  // plan_p1's truth.json "params"
  EXPECT_EQ(spec.training.precision, Precision::kAmpBf16);
  EXPECT_EQ(spec.training.optimizer, Optimizer::kAdamW);
  EXPECT_EQ(spec.training.checkpointing, Checkpointing::kNone);
  EXPECT_EQ(spec.parallel.strategy, Strategy::kNone);
  EXPECT_EQ(spec.hardware.gpu, "H200");  // canonical name
  EXPECT_EQ(spec.global_batch(), 8u);
  // A MIG profile is matched loosely and kept as the catalogue spells it: 100,000 spaces are not echoed twice.
  const std::string mig = "gpu = \"a100-80gb\"\nmig = \"3G.40GB" + std::string(100000, ' ') + "\"";
  const JobSpec sliced = parse_job_spec(replace(kValid, "gpu = \"h200\"", mig), "job.toml");
  EXPECT_EQ(sliced.hardware.mig, "3g.40gb");
}

TEST(JobSpec, PresetGivesTheShapeAndKeysOverrideIt) {
  const JobSpec spec = parse_job_spec(R"(
[model]
preset = "llama-2-13b"
num_layers = 20
[training]
seq_len = 4096
micro_batch_size = 2
[parallel]
strategy = "fsdp"
world_size = 8
[hardware]
gpu = "A100-80GB"
mig = "3g.40gb"
)",
                                      "job.toml");
  EXPECT_EQ(spec.model.preset, "llama-2-13b");
  EXPECT_EQ(spec.model.hidden_size, 5120u);
  EXPECT_EQ(spec.model.num_layers, 20u);
  EXPECT_EQ(spec.hardware.mig, "3g.40gb");
  // Llama-2-13B has 13,015,864,320 parameters (its config, untied embeddings).
  JobSpec full = spec;
  full.model.num_layers = 40;
  EXPECT_EQ(full.model.parameters(), 13015864320u);
}

TEST(JobSpec, UnknownKeysAndTablesAreErrorsNamingThem) {
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_acum = 2")), "job.toml: unknown key [training].grad_acum");
  EXPECT_EQ(error_of(kValid + "[optimizer]\nlr = 1\n"), "job.toml: unknown table or key [optimizer]");
  EXPECT_EQ(error_of(kValid + "[parallel]\nstrategy = \"ddp\"\nranks = 2\n"), "job.toml: unknown key [parallel].ranks");
}

TEST(JobSpec, ImpossibleValuesNameTheKey) {
  EXPECT_EQ(error_of(replace(kValid, "num_attention_heads = 16", "num_attention_heads = 12")),
            "job.toml: [model].hidden_size (2048) is not divisible by num_attention_heads (12)");
  EXPECT_EQ(error_of(replace(kValid, "vocab_size = 32000", "vocab_size = 32000\nnum_kv_heads = 5")),
            "job.toml: [model].num_kv_heads (5) must divide num_attention_heads (16)");
  EXPECT_EQ(error_of(replace(kValid, "seq_len = 2048", "seq_len = 0")),
            "job.toml: [training].seq_len must be a positive integer");
  EXPECT_EQ(error_of(replace(kValid, "seq_len = 2048", "seq_len = \"long\"")),
            "job.toml: [training].seq_len must be a positive integer");
  EXPECT_EQ(error_of(kValid + "[parallel]\nworld_size = 4\n"),
            "job.toml: [parallel].world_size is 4 but strategy is \"none\" (one GPU); use ddp, fsdp or zero*");
  EXPECT_NE(error_of(replace(kValid, "gpu = \"h200\"", "gpu = \"V100\""))
                .find("[hardware].gpu is \"V100\"; known GPUs: A100-40GB"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValid, "gpu = \"h200\"", "gpu = \"h200\"\nmig = \"3g.40gb\""))
                .find("[hardware].mig \"3g.40gb\" is not a MIG profile of H200; its profiles: 1g.18gb"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\nprecision = \"fp8\""))
                .find("[training].precision is \"fp8\"; expected one of amp-bf16, amp-fp16, mixed-bf16, bf16, fp32"),
            std::string::npos);
  EXPECT_EQ(error_of(replace(kValid, "seq_len = 2048", "seq_len = 1099511627776")),
            "job.toml: [model]/[training] has a size beyond 16 Mi; not a real training job");
}

TEST(JobSpec, MissingPiecesAreErrors) {
  EXPECT_EQ(error_of(replace(kValid, "vocab_size = 32000", "")),
            "job.toml: [model].vocab_size is missing (or give preset = \"…\")");
  EXPECT_EQ(error_of(replace(kValid, "[hardware]\ngpu = \"h200\"", "")), "job.toml: [hardware] table is missing");
  EXPECT_EQ(error_of("model = 3\n"), "job.toml: [model] must be a table");
}

TEST(JobSpec, SyntaxErrorIsOneLineWithPosition) {
  const std::string message = error_of("[model]\nhidden_size = = 3\n");
  EXPECT_EQ(message.rfind("job.toml:2:", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

std::string override_error(const std::vector<std::string>& overrides) {
  try {
    parse_job_spec(kValid, "job.toml", overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JobSpec, NewKeysAndTheEvalTable) {
  const JobSpec spec = parse_job_spec(replace(kValid, "grad_accum = 2", R"(grad_accum = 2
optimizer_impl = "fused"
activation_checkpointing = "full"
checkpointed_layers = 6
variable_length = true
min_seq_len = 128
median_seq_len = 512
length_sigma = 0.8
loss = "chunked"
loss_chunk_tokens = 2048
use_cache = false)") + "[eval]\nmicro_batch_size = 16\nseq_len = 4096\nevery = 50\n[parallel]\nstrategy = \"fsdp\"\n"
                       "world_size = 8\n",
                                      "job.toml");
  EXPECT_EQ(spec.training.optimizer_impl, OptimizerImpl::kFused);
  EXPECT_EQ(spec.training.checkpointed_layers, 6u);
  EXPECT_EQ(spec.training.min_seq_len, 128u);
  EXPECT_EQ(spec.training.median_seq_len, 512u);
  EXPECT_DOUBLE_EQ(*spec.training.length_sigma, 0.8);
  EXPECT_EQ(spec.training.loss, Loss::kChunked);
  EXPECT_EQ(spec.training.loss_chunk_tokens, 2048u);
  ASSERT_TRUE(spec.eval);
  EXPECT_EQ(spec.eval->micro_batch_size, 16u);
  EXPECT_EQ(spec.eval->every, 50u);
  const JobSpec conf =
      parse_job_spec(replace(kValid, "gpu = \"h200\"",
                             "gpu = \"h200\"\nalloc_conf = \"expandable_segments:True,max_split_size_mb:512\""),
                     "job.toml");
  EXPECT_TRUE(conf.hardware.alloc_config.expandable_segments);
  EXPECT_EQ(conf.hardware.alloc_config.max_split_size, 512ull << 20);
}

TEST(JobSpec, ImpossibleCombinationsNameTheKey) {
  // The issue: a global batch the spec cannot reach used to be accepted.
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\nglobal_batch = 10")),
            "job.toml: [training].global_batch (10) cannot be reached: every optimizer step takes a multiple of "
            "micro_batch_size × world_size = 4 sequences; the nearest reachable are 8 and 12");
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\nprecision = \"mixed-bf16\"")),
            "job.toml: [training].precision \"mixed-bf16\" (bf16 compute copies of fp32 master weights) needs strategy "
            "fsdp or zero*; on one GPU or DDP use \"amp-bf16\" (autocast) or \"bf16\"");
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\ncheckpointed_layers = 4")),
            "job.toml: [training].checkpointed_layers needs activation_checkpointing = \"full\"");
  EXPECT_EQ(
      error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\nvariable_length = true\nmedian_seq_len = 4096")),
      "job.toml: [training].median_seq_len must satisfy min_seq_len (1) ≤ median_seq_len (4096) ≤ seq_len (2048)");
  EXPECT_NE(error_of(replace(kValid, "gpu = \"h200\"", "gpu = \"h200\"\nalloc_conf = \"expandable:1\""))
                .find("job.toml: [hardware].alloc_conf is not a PYTORCH_CUDA_ALLOC_CONF PyTorch accepts"),
            std::string::npos);
  EXPECT_EQ(error_of(replace(kValid, "gpu = \"h200\"",
                             "gpu = \"h200\"\nalloc_conf = \"expandable_segments:True\"\nexpandable_segments = false")),
            "job.toml: [hardware].expandable_segments contradicts [hardware].alloc_conf; say it in one place");
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\ncpu_offload = \"parameters\"")),
            "job.toml: [training].cpu_offload \"parameters\" is FSDP2's CPUOffloadPolicy: it needs strategy fsdp");
}

TEST(JobSpec, SetOverridesEditTheSpecBeforeValidation) {
  const std::vector<std::string> what_if = {"training.micro_batch_size=2", "training.precision=bf16",
                                            "hardware.alloc_conf=\"expandable_segments:True\"",
                                            "training.use_cache=false"};
  const JobSpec spec = parse_job_spec(kValid, "job.toml", what_if);
  EXPECT_EQ(spec.training.micro_batch_size, 2u);
  EXPECT_EQ(spec.training.precision, Precision::kBf16);  // a bare word is a string
  EXPECT_TRUE(spec.hardware.alloc_config.expandable_segments);
  EXPECT_FALSE(spec.training.use_cache);
  EXPECT_EQ(parse_job_spec(kValid, "job.toml", {{"parallel.strategy=ddp"}}).parallel.strategy, Strategy::kDdp);
  EXPECT_EQ(override_error({"training.micro_batch_size"}),
            "--set training.micro_batch_size: expected table.key=value (e.g. training.micro_batch_size=2)");
  EXPECT_EQ(
      override_error({"optimizer.lr=1"}),
      "--set optimizer.lr=1: expected table.key=value with table one of model, training, eval, parallel, hardware");
  EXPECT_EQ(override_error({"training.grad_acum=4"}), "job.toml: unknown key [training].grad_acum");  // validated
  EXPECT_EQ(override_error({"training.micro_batch_size=0"}),
            "job.toml: [training].micro_batch_size must be a positive integer");
}

TEST(JobSpec, ReadsTheShippedExamples) {
  const std::filesystem::path examples = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "examples";
  for (const char* name : {"seed-13b.toml", "plan_p1.toml", "plan_p2.toml", "llama3-8b-mig.toml", "llama2-7b-ddp.toml"})
    EXPECT_NO_THROW(read_job_spec(examples / name)) << name;
  const JobSpec seed = read_job_spec(examples / "seed-13b.toml");
  EXPECT_EQ(seed.parallel.world_size, 8u);
  EXPECT_EQ(seed.global_batch(), 256u);  // 2 × 16 × 8: half the target of 512
  EXPECT_EQ(seed.training.global_batch, 512u);
  EXPECT_THROW(read_job_spec(examples / "missing.toml"), InputError);
}

}  // namespace
}  // namespace fragscope::plan

namespace fragscope::plan {
namespace {

// Issue 16: `plan` arithmetic wrapped for grad_accum = 2^63 − 1. Counts and their products stay
// within a real job's range, so no figure of the model can pass 2^64.
TEST(JobSpec, CountsThatWouldWrapTheArithmeticAreOneLineErrors) {
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 9223372036854775807")),
            "job.toml: [training].grad_accum (9223372036854775807) is beyond 1 Mi micro-steps per optimizer step; "
            "not a real training job");
  EXPECT_EQ(error_of(replace(kValid, "[hardware]", "[parallel]\nstrategy = \"ddp\"\nworld_size = 4000000\n[hardware]")),
            "job.toml: [parallel].world_size (4000000) is beyond 1 Mi GPUs; not a real training job");
  EXPECT_EQ(error_of(replace(kValid, "grad_accum = 2", "grad_accum = 2\nglobal_batch = 2000000000000")),
            "job.toml: [training].global_batch (2000000000000) is beyond 2^40 sequences; not a real training job");
  // Each within its range, their product is not.
  EXPECT_EQ(error_of(replace(replace(kValid, "micro_batch_size = 4", "micro_batch_size = 16000000"), "grad_accum = 2",
                             "grad_accum = 1000000")),
            "job.toml: [training] micro_batch_size 16000000 × grad_accum 1000000 × world_size 1 is beyond 2^40 "
            "sequences per step");
  EXPECT_EQ(error_of(replace(replace(replace(kValid, "hidden_size = 2048", "hidden_size = 16777216"), "num_layers = 16",
                                     "num_layers = 16777216"), "num_attention_heads = 16", "num_attention_heads = 16")),
            "job.toml: [model]/[training] sizes give a job of more than 4 EiB; not a real training job");
}

TEST(JobSpec, ASpecialFileOrAHugeFileIsOneLine) {
  try {
    read_job_spec("/dev/zero");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/dev/zero: cannot read: is a character device, not a file");
  }
  const std::filesystem::path big = std::filesystem::path(::testing::TempDir()) / "job_spec_big.toml";
  std::ofstream(big) << kValid << "# " << std::string(kMaxJobSpecBytes, 'x') << "\n";
  try {
    read_job_spec(big);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), big.string() + ": larger than the 1.00 MiB a job spec may have");
  }
}

}  // namespace
}  // namespace fragscope::plan
