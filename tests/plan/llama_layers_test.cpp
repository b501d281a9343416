// The layers around the attention core (llama_layers.cpp), op by op on a built tiny model:
// autocast's casts in F.linear, what LlamaRMSNorm keeps for its backward, the embedding
// backward's sort above 3072 tokens, one cuBLAS workspace per thread.
#include <vector>

#include <gtest/gtest.h>

#include "plan/llama_program_impl.h"
#include "tape_probe.h"
#include "util/bytes.h"

namespace fragscope::plan {
namespace {

using testing::probe_phase;
using testing::TapeProbe;
using testing::tiny_llama;
using Tensor = AllocationTape::Tensor;
using V = std::vector<std::uint64_t>;

/// The tiny model built under `precision`, at `tokens` tokens (batch 2); mark() starts the
/// stretch that probe() reports.
struct BuiltModel {
  explicit BuiltModel(Precision precision, std::uint64_t tokens = 128) : spec(with(precision)), m(spec, tape) {
    tape.mark(ProgramPhase::kSetup, 0);
    m.construct();
    m.tokens = tokens;
    m.seq = tokens / 2;
  }
  static JobSpec with(Precision precision) {
    JobSpec s = tiny_llama();
    s.training.precision = precision;
    return s;
  }
  void mark() { tape.mark(ProgramPhase::kForward, 0); }
  TapeProbe probe() { return probe_phase(tape.take(), 1); }

  JobSpec spec;
  AllocationTape tape;
  LlamaProgram::Impl m;
};

TEST(LlamaLayers, LinearUnderAutocastCastsEachWeightOnceAndEachFp32InputPerCall) {
  BuiltModel amp(Precision::kAmpBf16);
  const std::uint64_t t = amp.m.tokens, h = amp.m.h;
  const Tensor x = amp.m.alloc(4 * t * h, MemoryRole::kActivations);
  amp.mark();
  amp.m.linear(x, h, h, amp.m.block_param(0, kQ), true);
  amp.m.linear(x, h, h, amp.m.block_param(0, kQ), true);
  const TapeProbe cast = amp.probe();
  EXPECT_EQ(cast.sizes(MemoryRole::kWeightCopies), V{2 * h * h});                                    // the cached cast
  EXPECT_EQ(cast.sizes(MemoryRole::kActivations), (V{2 * t * h, 2 * t * h, 2 * t * h, 2 * t * h}));  // input, output
  // bf16 parameters: the weight and the input are multiplied as they are
  BuiltModel bf16(Precision::kBf16);
  const Tensor y = bf16.m.alloc(2 * t * h, MemoryRole::kActivations);
  bf16.mark();
  bf16.m.linear(y, h, h, bf16.m.block_param(0, kQ), false);
  const TapeProbe plain = bf16.probe();
  EXPECT_TRUE(plain.sizes(MemoryRole::kWeightCopies).empty());
  EXPECT_EQ(plain.sizes(MemoryRole::kActivations), V{2 * t * h});
}

TEST(LlamaLayers, RmsNormKeepsItsFp32InputRstdAndNormedForTheBackward) {
  for (const bool saving : {true, false}) {
    BuiltModel b(Precision::kMixedBf16);  // a bf16 residual stream
    const std::uint64_t t = b.m.tokens, h = b.m.h;
    const Tensor x = b.m.alloc(2 * t * h, MemoryRole::kActivations);
    b.m.saving = saving;
    b.mark();
    b.m.rms_norm(x, 2);
    // the input, then x.to(fp32), rstd, the normed bf16 product weight * (…) keeps, the output;
    // without autograd recording only the output stays
    const std::uint64_t kept = saving ? 4 * t * h + 4 * t + 2 * t * h + 2 * t * h : 2 * t * h;
    EXPECT_EQ(b.probe().live(MemoryRole::kActivations), 2 * t * h + kept) << saving;
  }
}

TEST(LlamaLayers, EmbeddingBackwardSortsTheIndicesAbove3072Tokens) {
  for (const std::uint64_t tokens : {3072, 3074}) {
    BuiltModel b(Precision::kAmpBf16, tokens);
    const std::uint64_t table = 4 * b.m.vocab * b.m.h;  // the weight's dtype, fp32
    const Tensor grad = b.m.alloc(4 * tokens * b.m.h, MemoryRole::kTransients);
    b.mark();
    b.m.embedding_backward(grad);
    const TapeProbe p = b.probe();
    EXPECT_EQ(p.live(MemoryRole::kGradients), table) << tokens;  // it becomes .grad
    EXPECT_EQ(p.live(MemoryRole::kTransients), 0u) << tokens;
    if (tokens <= 3072) {
      EXPECT_EQ(p.sizes(MemoryRole::kTransients), V{table});
    } else {
      EXPECT_EQ(p.count(MemoryRole::kTransients, 8 * tokens), 6u);   // sorted, original, keys, offsets…
      EXPECT_EQ(p.count(MemoryRole::kTransients, 19 * tokens), 1u);  // cub's radix-sort storage
    }
  }
}

TEST(LlamaLayers, EachThreadsCublasHandleGetsOneWorkspaceForTheProcess) {
  BuiltModel b(Precision::kAmpBf16);
  b.mark();
  b.m.rotary_tables();  // the forward's first GEMM
  b.m.rotary_tables();
  b.m.gemm_workspace();  // still the Python thread
  b.m.backward_thread = true;
  b.m.gemm_workspace();
  b.m.gemm_workspace();
  EXPECT_EQ(b.probe().sizes(MemoryRole::kWorkspaces), (V{32 * kMiB, 32 * kMiB}));
}

}  // namespace
}  // namespace fragscope::plan
