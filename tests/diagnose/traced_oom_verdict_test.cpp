// The verdict on a traced OOM, on the field recordings of tests/data/field (third-party training
// code, the user's files only). Each OOM's label came from a rerun at the same budget under
// expandable_segments:True (truth.json "label": completed → fragmentation, OOM → capacity;
// docs/VALIDATION.md, field checks). The doctor may leave one undetermined; it may never
// contradict the label.
#include "diagnose/traced_oom_verdict.h"

#include <algorithm>
#include <fstream>
#include <ostream>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/doctor.h"
#include "field_recordings.h"
#include "../doctor_options.h"
#include "util/bytes.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::field_dir;
using fragscope::testing::field_user_files;

/// The doctor on `inputs`, with the two threads CI has.
Diagnosis run_on_two_threads(DoctorInputs inputs) {
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  return run_doctor(std::move(inputs), options);
}

Diagnosis diagnose(const std::string& name) {
  return run_on_two_threads(collect_doctor_inputs(field_user_files(name)));
}

std::string label_of(const std::string& name) {
  std::ifstream in(field_dir(name) / "truth.json");
  return nlohmann::json::parse(in).value("label", "");
}

bool has_evidence(const Diagnosis& d, const std::string& key, const std::string& text) {
  return std::any_of(d.evidence.begin(), d.evidence.end(),
                     [&](const Evidence& e) { return e.key == key && e.text.find(text) != std::string::npos; });
}

struct Expected {
  std::string name;
  Verdict verdict;
  std::string phase;
};

/// How gtest shows a row in its output: the recording and what it expects, not the struct's bytes.
void PrintTo(const Expected& e, std::ostream* os) { *os << e.name << " (" << e.phase << ")"; }

class FieldVerdicts : public ::testing::TestWithParam<Expected> {};

TEST_P(FieldVerdicts, MatchTheLabelOrStayUndetermined) {
  const Diagnosis d = diagnose(GetParam().name);
  EXPECT_EQ(d.verdict, GetParam().verdict) << d.headline;
  EXPECT_EQ(d.phase, GetParam().phase);
  const std::string label = label_of(GetParam().name);
  ASSERT_FALSE(label.empty());
  if (d.verdict != Verdict::kUndetermined) {
    EXPECT_EQ(to_string(d.verdict), label);
  }
  // A doubt is a few bytes to a few GiB, never a wrapped-around difference (llava_lo: 2^64 - 2 bytes once).
  EXPECT_LT(d.trace_projection.over_bytes, 1ull << 50);
  EXPECT_LT(d.trace_projection.under_bytes, 1ull << 50);
}

// Rows marked "unchecked: 1-2% spare < 4%" were fragmentation, their label, while an unchecked projection near its
// reference kept 0.5%; field cnxe_* showed such a projection 3.62% low (kUncheckedNearReference).
INSTANTIATE_TEST_SUITE_P(
    Field, FieldVerdicts,
    ::testing::Values(Expected{"acc_edge", Verdict::kFragmentation, "train"},
                      Expected{"cmp_edge", Verdict::kUndetermined, "train"},
                      Expected{"ec_edge", Verdict::kFragmentation, "train"},
                      Expected{"fs2_edge", Verdict::kUndetermined, "train"},
                      Expected{"fsdp_edge", Verdict::kUndetermined, "train"},
                      Expected{"hfc_lo", Verdict::kCapacity, "eval"},
                      Expected{"hfn_edge", Verdict::kFragmentation, "eval"},
                      Expected{"hft_edge", Verdict::kUndetermined, "train"},
                      Expected{"hft_lo", Verdict::kCapacity, "train"},
                      Expected{"lit_edge", Verdict::kFragmentation, "train"},
                      Expected{"ring_edge", Verdict::kUndetermined, "train"},
                      Expected{"rn_lo", Verdict::kCapacity, "train"},
                      Expected{"seg_edge", Verdict::kFragmentation, "train"},
                      Expected{"tut_edge", Verdict::kFragmentation, "train"},
                      Expected{"tut_lo", Verdict::kCapacity, "train"},
                      // Batches 6-8: jobs and budgets no rule was tuned on (predictions before the labels).
                      Expected{"acc_lo", Verdict::kCapacity, "train"},
                      Expected{"cmp_lo", Verdict::kUndetermined, "train"},
                      Expected{"fs2_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"hfn_lo", Verdict::kCapacity, "eval"},
                      Expected{"mlm0_lo", Verdict::kCapacity, "train"},
                      Expected{"mlm_edge", Verdict::kUndetermined, "train"},  // unchecked: 1-2% spare < 4%
                      Expected{"mlm_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"ring_lo", Verdict::kUndetermined, "train"},
                      Expected{"s2a_lo", Verdict::kCapacity, "unknown"},
                      Expected{"s2s_e1005", Verdict::kCapacity, "train"},
                      Expected{"s2s_lo", Verdict::kCapacity, "unknown"},
                      Expected{"seg_lo", Verdict::kCapacity, "train"},
                      Expected{"vit_edge", Verdict::kCapacity, "train"},
                      Expected{"vit_lo", Verdict::kCapacity, "unknown"},
                      // Batch 9, recorded after the expandable-at-OOM rule was written.
                      Expected{"cro_lo", Verdict::kCapacity, "optimizer"},
                      Expected{"mlm0_edge", Verdict::kUndetermined, "train"},
                      Expected{"rn101_edge", Verdict::kCapacity, "train"},  // undetermined from batch 30 (its 453 MiB
                      // of cuDNN workspaces at the projected peak weigh nothing); capacity since no setting runs it
                      Expected{"rn101_lo", Verdict::kCapacity, "train"},
                      Expected{"s2a_95", Verdict::kCapacity, "unknown"},
                      Expected{"vit192_edge", Verdict::kCapacity, "train"},
                      Expected{"vit192_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 10-11 (predictions at 325ec21, before the labels): det_lo was wrong
                      // (fragmentation) until the rule on one smaller batch seen (UnseenBatches below);
                      // det_edge, right, is undetermined since that rule asks for four (fcn_lo).
                      Expected{"cnx_edge", Verdict::kCapacity, "train"},
                      Expected{"cnx_lo", Verdict::kCapacity, "train"},
                      Expected{"det_edge", Verdict::kUndetermined, "train"},
                      Expected{"det_lo", Verdict::kUndetermined, "train"},
                      Expected{"hfe_edge", Verdict::kUndetermined, "train"},
                      Expected{"hfe_lo", Verdict::kCapacity, "train"},
                      Expected{"swin_edge", Verdict::kUndetermined, "train"},
                      Expected{"swin_lo", Verdict::kUndetermined, "train"},
                      // Batch 12, recorded after that rule (predictions before the labels): ret_lo is the
                      // rule's case again, and its rerun failed at a later batch too.
                      Expected{"acc4_edge", Verdict::kCapacity, "train"},
                      Expected{"acc4_lo", Verdict::kCapacity, "train"},
                      Expected{"hfg_edge", Verdict::kUndetermined, "train"},
                      Expected{"hfg_lo", Verdict::kCapacity, "train"},
                      Expected{"ret_edge", Verdict::kFragmentation, "train"},
                      Expected{"ret_lo", Verdict::kUndetermined, "train"},
                      // Batch 13 (predictions at 58d01a6, before the labels; tut2_edge and wrn_edge
                      // decided since: CheckedFitKeepsItsOwnErrorBothWays, OnlyLongLivedBlocks...).
                      Expected{"lit2_edge", Verdict::kCapacity, "train"},
                      Expected{"lit2_lo", Verdict::kCapacity, "train"},
                      Expected{"tut2_edge", Verdict::kFragmentation, "train"},
                      Expected{"tut2_lo", Verdict::kCapacity, "train"},
                      // Capacity by 2.9% until the step before's blocks the first step never held (65 MiB
                      // outside the optimizer) joined the doubt on that side: 5.0% asked. Capacity again since no
                      // setting runs it at the capacity.
                      Expected{"wrn_edge", Verdict::kCapacity, "train"},
                      Expected{"wrn_lo", Verdict::kCapacity, "train"},
                      // Batches 14-16 (predictions at 6801286, before the labels): fcn_lo was wrong
                      // (fragmentation) until the rule on batches seen asked for four (UnseenBatches below);
                      // vitl_lo, right, is undetermined since a projection from the first step keeps 12%.
                      Expected{"bml_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"bml_lo", Verdict::kCapacity, "unknown"},
                      Expected{"cmp2_edge", Verdict::kCapacity, "train"},
                      Expected{"cmp2_lo", Verdict::kUndetermined, "train"},
                      Expected{"fcn_edge", Verdict::kUndetermined, "train"},
                      Expected{"fcn_lo", Verdict::kUndetermined, "train"},
                      Expected{"hfp_edge", Verdict::kUndetermined, "train"},
                      Expected{"hfp_lo", Verdict::kCapacity, "train"},
                      Expected{"hfq_edge", Verdict::kUndetermined, "eval"},
                      Expected{"hfq_lo", Verdict::kCapacity, "eval"},
                      Expected{"rx_lo", Verdict::kUndetermined, "train"},
                      Expected{"s2m_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"tut3_edge", Verdict::kFragmentation, "train"},
                      Expected{"tut3_lo", Verdict::kCapacity, "train"},
                      Expected{"vitl_edge", Verdict::kCapacity, "train"},
                      Expected{"vitl_lo", Verdict::kCapacity, "train"},
                      // Batch 17 (predictions at dd612f6, before the labels): gan_lo was wrong (capacity)
                      // until OOMs with only frees before the next were caught too (CuDNNsRefused...).
                      Expected{"gan_edge", Verdict::kUndetermined, "train"},
                      Expected{"gan_lo", Verdict::kUndetermined, "train"},
                      Expected{"lora_edge", Verdict::kUndetermined, "train"},
                      Expected{"lora_lo", Verdict::kCapacity, "train"},
                      // Batches 18-21 (predictions at d13ce93, before the labels; crs_* ran as hfc_*). The
                      // undetermined ones: the longest batch with one alike before it (crs_edge), an eval
                      // within 0.7% of the capacity (hfg2_edge), and a first step or a recompiled graph
                      // whose reruns ran the failing step and failed later (lstm_edge, hfcmp_*).
                      Expected{"crs_edge", Verdict::kUndetermined, "train"},
                      Expected{"crs_lo", Verdict::kCapacity, "train"},
                      Expected{"hfcmp_edge", Verdict::kUndetermined, "train"},
                      Expected{"hfcmp_lo", Verdict::kUndetermined, "train"},
                      Expected{"hfg2_edge", Verdict::kUndetermined, "eval"},
                      Expected{"hfg2_lo", Verdict::kCapacity, "eval"},
                      Expected{"lstm_edge", Verdict::kUndetermined, "train"},
                      Expected{"lstm_lo", Verdict::kCapacity, "train"},
                      // Batch 22 (predictions at 7a32b06, before the labels): gradient accumulation.
                      Expected{"hfga_edge", Verdict::kFragmentation, "train"},
                      Expected{"hfga_lo", Verdict::kUndetermined, "train"},
                      Expected{"ngpt_edge", Verdict::kFragmentation, "train"},
                      Expected{"ngpt_lo", Verdict::kUndetermined, "train"},
                      // Batch 24 (predictions at 5206ee5, before the labels): whs_edge was wrong (fragmentation)
                      // until the rule on few batches seen took smaller failing batches and batches that vary in a
                      // part (AJobWhoseBatchesVaryInAPart below); clip_edge, hfe_edge and hft_edge, right, are
                      // undetermined since.
                      Expected{"clip_edge", Verdict::kUndetermined, "train"},
                      Expected{"clip_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"whs_edge", Verdict::kUndetermined, "train"},
                      Expected{"whs_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 25 (predictions at 6955aae, before the labels): s2g_edge was undetermined (its fit
                      // rejected) until the residuals kept their sign (AFitNeverBelowItsHistory below).
                      Expected{"mae_edge", Verdict::kUndetermined, "train"},
                      Expected{"mae_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"s2g_edge", Verdict::kFragmentation, "train"},
                      Expected{"s2g_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"trn_edge", Verdict::kFragmentation, "train"},
                      Expected{"trn_lo", Verdict::kUndetermined, "train"},
                      // Batch 26 (predictions at 4297cc6, before the labels): 3 right, 1 undetermined.
                      Expected{"ares_edge", Verdict::kUndetermined, "train"},
                      Expected{"ares_lo", Verdict::kCapacity, "train"},
                      Expected{"clm_edge", Verdict::kUndetermined, "train"},  // unchecked: 1-2% spare < 4%
                      Expected{"clm_lo", Verdict::kCapacity, "train"},
                      // Batch 27 (predictions at 4297cc6, before the labels): 3 right, 1 undetermined.
                      Expected{"ner_edge", Verdict::kFragmentation, "train"},
                      Expected{"ner_lo", Verdict::kCapacity, "unknown"},
                      Expected{"vcls_edge", Verdict::kUndetermined, "train"},  // unchecked: 1-2% spare < 4%
                      Expected{"vcls_lo", Verdict::kCapacity, "train"},
                      // Batch 28 (predictions at 6f9a172, before the labels): 2 right, 2 undetermined.
                      Expected{"swag_edge", Verdict::kFragmentation, "train"},
                      Expected{"swag_lo", Verdict::kUndetermined, "train"},
                      Expected{"nst_edge", Verdict::kUndetermined, "train"},
                      Expected{"nst_lo", Verdict::kUndetermined, "train"},
                      // Batch 29 (predictions at 6f9a172, before the labels): 1 right, 1 undetermined.
                      Expected{"w2v_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"w2v_lo", Verdict::kCapacity, "unknown"},
                      // Batch 30 (predictions at b54814b, before the labels): 2 right, 3 undetermined, 1 wrong
                      // (mrc2_edge: capacity by 0.1% with 595 MiB of cuDNN workspaces at the projected peak; the
                      // workspaces weigh nothing in a capacity verdict since).
                      Expected{"ddpm_edge", Verdict::kUndetermined, "train"},  // unchecked: 1-2% spare < 4%
                      Expected{"ddpm_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"mrc2_edge", Verdict::kUndetermined, "train"},
                      Expected{"mrc2_lo", Verdict::kUndetermined, "train"},
                      Expected{"qa_edge", Verdict::kUndetermined, "train"},
                      Expected{"qa_lo", Verdict::kCapacity, "train"},
                      // Batch 31 (predictions at cba6503, before the labels): 4 undetermined.
                      Expected{"ngc_edge", Verdict::kUndetermined, "train"},
                      Expected{"ngc_lo", Verdict::kUndetermined, "train"},
                      Expected{"sgf_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"sgf_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 32-33 (predictions at f6873e8, before the labels): 3 right.
                      Expected{"kpr_lo", Verdict::kCapacity, "train"},
                      Expected{"glue_edge", Verdict::kFragmentation, "train"},
                      Expected{"glue_lo", Verdict::kCapacity, "train"},
                      // Batch 34 (predictions at f6873e8's src, before the labels): 2 undetermined.
                      Expected{"raft_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"raft_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 35-36 (predictions at e2e0c11's src, before the labels): 2 right, 4 undetermined.
                      Expected{"moe_edge", Verdict::kUndetermined, "train"},
                      Expected{"moe_lo", Verdict::kCapacity, "train"},
                      Expected{"kd_edge", Verdict::kCapacity, "train"},
                      Expected{"kd_lo", Verdict::kCapacity, "train"},
                      Expected{"dpo_edge", Verdict::kUndetermined, "train"},
                      Expected{"dpo_lo", Verdict::kUndetermined, "train"},
                      // Batches 37-38 (predictions at e3332a5's src, before the labels): 2 right, 7 undetermined
                      // (five OOMs came before the jobs turned history on: blocks, no trace).
                      Expected{"simclr_edge", Verdict::kUndetermined, "train"},
                      Expected{"simclr_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"simclr2_edge", Verdict::kUndetermined, "train"},
                      Expected{"simclr2_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"gnn_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"gnn_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"gnn2_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"dlrm_lo", Verdict::kCapacity, "optimizer"},
                      Expected{"dlrm2_edge", Verdict::kCapacity, "optimizer"},
                      // Batch 39 (predictions at e3332a5's src, before the labels): 4 undetermined.
                      Expected{"dino_edge", Verdict::kUndetermined, "train"},
                      Expected{"dino_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"tst_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"tst_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 40-41 (predictions at 2bc416d's src, before the labels): 5 undetermined.
                      Expected{"sb_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"dit_edge", Verdict::kUndetermined, "train"},
                      Expected{"dit_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"ditn_edge", Verdict::kUndetermined, "train"},
                      Expected{"ditn_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 42 (predictions at 2bc416d's src, before the labels): 1 right, 2 undetermined.
                      Expected{"ditro_edge", Verdict::kUndetermined, "optimizer"},
                      Expected{"ditro_lo", Verdict::kCapacity, "unknown"},
                      Expected{"sb0_lo", Verdict::kUndetermined, "train"},
                      // Batch 43 (predictions at 86fcc25's src, before the labels): 2 undetermined.
                      Expected{"ppo_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"ppo_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 44 (predictions at 036c06f's src, before the labels): 4 undetermined.
                      Expected{"lf_edge", Verdict::kUndetermined, "train"},
                      Expected{"lf_lo", Verdict::kUndetermined, "train"},
                      Expected{"mamba_edge", Verdict::kUndetermined, "train"},
                      Expected{"mamba_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 45 (predictions at 3cb266e's src, before the labels): 4 undetermined.
                      Expected{"bb_edge", Verdict::kUndetermined, "train"},
                      Expected{"bb_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"off_edge", Verdict::kUndetermined, "train"},
                      Expected{"off_lo", Verdict::kUndetermined, "train"},
                      // Batch 46 (predictions at f945744's src, before the labels): 2 right, 2 undetermined.
                      Expected{"llava_edge", Verdict::kFragmentation, "train"},
                      Expected{"llava_lo", Verdict::kUndetermined, "train"},
                      Expected{"bart_edge", Verdict::kUndetermined, "train"},
                      // Capacity by 7.1% until the gradients it held from the micro-step before (1.51 GiB, which
                      // it may free where its reference had none) joined the doubt on that side. Capacity again since
                      // no setting runs it at the capacity.
                      Expected{"bart_lo", Verdict::kCapacity, "train"},
                      // Batches 47-48 (predictions at e381ef2's src, before the labels): 4 right, 1 undetermined.
                      Expected{"cnxe_edge", Verdict::kCapacity, "train"},
                      Expected{"cnxe_lo", Verdict::kCapacity, "train"},
                      Expected{"t5_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"gem_edge", Verdict::kFragmentation, "eval"},
                      Expected{"gem_lo", Verdict::kCapacity, "eval"},
                      // Batch 49 (predictions at a340079's src, before the labels): 3 right, 1 undetermined.
                      Expected{"deb_edge", Verdict::kUndetermined, "train"},
                      Expected{"deb_lo", Verdict::kCapacity, "train"},
                      Expected{"u3d_edge", Verdict::kFragmentation, "train"},
                      Expected{"u3d_lo", Verdict::kCapacity, "train"},
                      // Batch 50 (predictions at a340079's src, before the labels): 1 right, 3 undetermined. The
                      // t5g_ steps were called "eval" then, for the script's name (hf_t5_generate_eval.py).
                      Expected{"t5g_edge", Verdict::kUndetermined, "train"},
                      Expected{"t5g_lo", Verdict::kUndetermined, "train"},
                      Expected{"vq_edge", Verdict::kUndetermined, "train"},
                      Expected{"vq_lo", Verdict::kCapacity, "unknown"},
                      // Batch 51 (predictions at 899e6c7's src, before the labels): 1 right, 2 undetermined and
                      // blm_edge WRONG (capacity; its rerun completed). Its scale, by bytes L² where the fit's votes
                      // were cast in L, now in the fit's terms: projected to its real peak; the step after it, with
                      // the gradients back, may not fit.
                      Expected{"blm_edge", Verdict::kUndetermined, "train"},
                      Expected{"blm_lo", Verdict::kCapacity, "train"},
                      Expected{"dg_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"dg_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 52-53 (predictions at 5eea038's src, before the labels): 2 right, 4 undetermined
                      // (a first step's backward, and an OOM before history began).
                      Expected{"dps_edge", Verdict::kUndetermined, "train"},
                      Expected{"dps_lo", Verdict::kUndetermined, "train"},
                      Expected{"twt_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"twt_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"slw_edge", Verdict::kFragmentation, "train"},
                      Expected{"slw_lo", Verdict::kCapacity, "train"},
                      // Batch 54 (predictions at e0746ca's src, before the labels): 1 right, 3 undetermined.
                      Expected{"gcr_edge", Verdict::kUndetermined, "train"},
                      Expected{"gcr_lo", Verdict::kCapacity, "train"},
                      // fcos_edge: fragmentation since its first step's cuDNN workspaces (plan search) pair with the
                      // later steps' (plan cache): the fit is checked on 6 units.
                      Expected{"fcos_edge", Verdict::kFragmentation, "train"},
                      Expected{"fcos_lo", Verdict::kUndetermined, "train"},
                      // Batch 55 (predictions at d21e733's src, before the labels): 1 right, 3 undetermined.
                      Expected{"nerf_edge", Verdict::kUndetermined, "train"},
                      Expected{"nerf_lo", Verdict::kCapacity, "train"},
                      Expected{"gmt_edge", Verdict::kUndetermined, "train"},
                      Expected{"gmt_lo", Verdict::kUndetermined, "train"},
                      // Batches 56-57 (predictions at 21ab0ca's src, before the labels): 1 right, 4 undetermined.
                      // tpf_*: batches made on a second CUDA stream and record_stream()ed on the main one.
                      Expected{"moco_lo", Verdict::kUndetermined, "train"},
                      Expected{"moco_mid", Verdict::kUndetermined, "unknown"},
                      Expected{"tpf_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"tpf0_edge", Verdict::kUndetermined, "train"},
                      Expected{"tpf0_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 58-59 (predictions at 21ab0ca's src, before the labels): 1 right, 2 undetermined.
                      Expected{"timm_edge", Verdict::kCapacity, "train"},
                      Expected{"timm_lo", Verdict::kCapacity, "unknown"},
                      Expected{"rnnt_lo", Verdict::kUndetermined, "train"},
                      // Batch 60 (predictions at 113b5de's src, before the labels): 2 undetermined.
                      Expected{"moco_hi", Verdict::kUndetermined, "unknown"},
                      Expected{"rnnt_mid", Verdict::kUndetermined, "train"},
                      // Batches 61-62 (predictions at d9eedc7's src, before the labels): 2 right, 2 undetermined.
                      // fab_* are batch 62's, with a seeded shuffle: batch 61's rerun met another order.
                      Expected{"fab_edge", Verdict::kUndetermined, "train"},
                      Expected{"fab_lo", Verdict::kCapacity, "unknown"},
                      Expected{"flex_edge", Verdict::kUndetermined, "train"},
                      Expected{"flex_lo", Verdict::kCapacity, "train"},
                      // Batch 63: runs that grow. HF's Trainer concatenating eval logits on the GPU, and a loop
                      // keeping each step's logits for the epoch's accuracy (its reruns failed a step later at most).
                      Expected{"hel_edge", Verdict::kCapacity, "eval"},
                      Expected{"hel_lo", Verdict::kUndetermined, "eval"},
                      Expected{"leak_edge", Verdict::kUndetermined, "train"},
                      Expected{"leak_lo", Verdict::kUndetermined, "train"},
                      // Batch 64: fairseq's --max-tokens batches; the growing loop from step 3, the OOM observer's.
                      Expected{"leak_obs", Verdict::kCapacity, "train"},
                      Expected{"mtk_edge", Verdict::kUndetermined, "train"},
                      Expected{"mtk_lo", Verdict::kCapacity, "train"},
                      // Batch 65: Lightning's validation_step_outputs kept on the GPU; the growing loop again.
                      Expected{"leak_mid", Verdict::kUndetermined, "train"},
                      Expected{"lvo_edge", Verdict::kUndetermined, "eval"},
                      Expected{"lvo_lo", Verdict::kUndetermined, "train"},
                      // Batch 66: validate() without no_grad, summing the loss as a tensor (vng_edge failed in the
                      // validation's last batch: fragmentation).
                      Expected{"vng_edge", Verdict::kUndetermined, "eval"},
                      Expected{"vng_lo", Verdict::kUndetermined, "eval"},
                      Expected{"vng_mid", Verdict::kCapacity, "eval"},
                      // Batches 67-68 (predictions at e4fcecf's src, before the labels): 3 right, 5 undetermined.
                      // Progressive resizing, multi-scale training, whole-network CUDA graph capture, round-robin
                      // multi-task training.
                      Expected{"prz_edge", Verdict::kCapacity, "train"},
                      Expected{"prz_lo", Verdict::kCapacity, "train"},
                      Expected{"msd_edge", Verdict::kUndetermined, "train"},
                      Expected{"msd_lo", Verdict::kCapacity, "train"},
                      Expected{"cgw_edge", Verdict::kUndetermined, "eval"},
                      Expected{"cgw_lo", Verdict::kUndetermined, "train"},
                      Expected{"mta_edge", Verdict::kUndetermined, "train"},
                      Expected{"mta_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 69 (predictions at 818f9f2's src, before the labels): 3 undetermined. WGAN-GP (its
                      // generator's graph lives into the next critic step), multi-scale with cudnn.benchmark.
                      Expected{"wgp_edge", Verdict::kUndetermined, "train"},
                      Expected{"wgp_lo", Verdict::kUndetermined, "train"},
                      Expected{"msb_edge", Verdict::kUndetermined, "train"},
                      // Batch 70 (predictions at 818f9f2's src, before the labels): 2 undetermined, 2 wrong. A
                      // checkpointed ViT with accumulation and empty_cache(); a GPT loop sampling with a torch.cat KV
                      // cache (gsl_edge was fragmentation, wrong, before a cache remade larger each token counted
                      // as growth).
                      Expected{"cav_edge", Verdict::kCapacity, "train"},
                      Expected{"cav_lo", Verdict::kUndetermined, "train"},
                      Expected{"gsl_edge", Verdict::kUndetermined, "train"},
                      // gsl_lo was fragmentation (wrong: its step fits, the sampling after it does not) until batch
                      // 87: its ring's first unit lost its head, so the failing unit's forward is not shown alike.
                      Expected{"gsl_lo", Verdict::kUndetermined, "train"},
                      // Batches 71-72 (predictions at 83ac5b1, before the labels): 1 capacity, 11 undetermined. MAML
                      // through torch.func (inner steps as units, mid-run margins); SAM and a latent-diffusion UNet
                      // whose OOM came before their history began, or in the step it began in; EfficientNetV2's
                      // recipe from mid-run; L-BFGS at step 21 of a loop whose body is one statement
                      // (optimizer.step(closure)): its steps fit, but each keeps its history's growth; nanoGPT
                      // offloading its activations with save_on_cpu, lengths varying (soc_lo: expandable segments
                      // fail from the job's start).
                      Expected{"maml_edge", Verdict::kUndetermined, "train"},
                      Expected{"maml_lo", Verdict::kUndetermined, "train"},
                      Expected{"sam_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"sam_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"tve_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"tve_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"lbfgs_edge", Verdict::kUndetermined, "train"},
                      Expected{"lbfgs_lo", Verdict::kUndetermined, "train"},
                      Expected{"soc_edge", Verdict::kUndetermined, "train"},
                      Expected{"soc_lo", Verdict::kCapacity, "train"},
                      Expected{"ldm_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"ldm_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 73-74 (predictions at 57beff6, before the labels; an H100): 3 capacity, 3
                      // undetermined. SWA's final update_bn/eval pass after the training steps (expandable segments
                      // replayed from the start fail); a hard-negative refresh (no_grad encode of 100,000 passages)
                      // the trace never ran before; a 2B Llama's first AdamW step (the expandable replay keeps 0.86
                      // GiB of partly used pages mapped: its rerun failed too); GRPO from a ring that wrapped.
                      Expected{"swa_edge", Verdict::kCapacity, "eval"},
                      Expected{"swa_lo", Verdict::kCapacity, "eval"},
                      Expected{"hnr_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"hnr_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"lfs_edge", Verdict::kCapacity, "optimizer"},
                      Expected{"grpo_edge", Verdict::kUndetermined, "train"},
                      // Batches 75-77 (predictions at b3c74b1, before the labels; an H100): 5 right, 3 undetermined, 1
                      // wrong (mrm_lo, fragmentation, before a batch warm-up left the step that fits open). Muon with a
                      // batch warm-up from mid-run; an LLM distilled with a fp32 KL over 128,256 classes; a pairwise
                      // reward model in a Trainer subclass (its OOM before history began); ModernBERT up to 8,192
                      // tokens; ESM-2 in an Accelerate loop with accumulation from mid-run.
                      Expected{"mrm_edge", Verdict::kUndetermined, "train"},
                      Expected{"mrm_lo", Verdict::kUndetermined, "train"},
                      Expected{"lkd_edge", Verdict::kFragmentation, "train"},
                      Expected{"lkd_lo", Verdict::kCapacity, "train"},
                      Expected{"rwm_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"mbc_edge", Verdict::kUndetermined, "train"},
                      Expected{"mbc_lo", Verdict::kCapacity, "train"},
                      Expected{"esm_edge", Verdict::kFragmentation, "train"},
                      Expected{"esm_lo", Verdict::kCapacity, "train"},
                      // Batches 78-79 (predictions at 025e6a4, before the labels): 3 capacity, 1 undetermined, all
                      // right. A Fourier neural operator (torch.fft) at a resolution drawn per batch; its first eval
                      // at 640 × 48 the peak in fnoe_*. fno_edge: no setting runs step 2 projected from the first
                      // step (18.78 of 18.02 GiB, up to 1.08 GiB high); its rerun failed too, at 16.92 allocated.
                      Expected{"fno_edge", Verdict::kCapacity, "train"},
                      Expected{"fno_lo", Verdict::kCapacity, "train"},
                      Expected{"fnoe_edge", Verdict::kUndetermined, "eval"},
                      Expected{"fnoe_lo", Verdict::kCapacity, "eval"},
                      // Batch 80 (predictions at ec40ff2, the warm-up rule in; labels fragmentation, capacity): a
                      // sequence-length warm-up at every step. Both steps fit; one more step of the warm-up would not.
                      // Without the rule both were fragmentation (slin_lo's rerun failed at the next length).
                      Expected{"slin_edge", Verdict::kUndetermined, "train"},
                      Expected{"slin_lo", Verdict::kUndetermined, "train"},
                      // Batches 81-82 (predictions at 8f972ac, before the labels; an H200): 3 right, 5 undetermined.
                      // A tabular FT-Transformer; a DQN whose GPU replay buffer grows by torch.cat (history from
                      // mid-run: the run grows, how long it goes on is not in the trace); Cluster-GCN, batches of
                      // changing size; torchvision's Swin-V2 recipe (swcm_lo's OOM came before history began).
                      Expected{"ftt_edge", Verdict::kCapacity, "train"},
                      Expected{"ftt_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"dqn_edge", Verdict::kUndetermined, "train"},
                      Expected{"dqn_lo", Verdict::kUndetermined, "train"},
                      Expected{"cgcn_edge", Verdict::kFragmentation, "train"},
                      Expected{"cgcn_lo", Verdict::kCapacity, "train"},
                      Expected{"swcm_edge", Verdict::kUndetermined, "train"},
                      Expected{"swcm_lo", Verdict::kUndetermined, "unknown"},
                      // Batch 83 (predictions at 8f972ac, before the labels; an H100): 3 right, 1 undetermined. A
                      // convolutional VAE (vae_edge's rerun died in cublasCreate, out of memory: capacity, as mta_lo);
                      // Qwen2 SFT with the HF Trainer, its first eval projected from the training call came to the
                      // rerun's peak allocated to the byte (50.94 GiB).
                      Expected{"vae_edge", Verdict::kCapacity, "train"},
                      Expected{"vae_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"qsft_edge", Verdict::kFragmentation, "eval"},
                      Expected{"qsft_lo", Verdict::kCapacity, "eval"},
                      // Batch 84 (predictions at 8f972ac, before the labels; an H100): 2 right, 1 undetermined, 1
                      // wrong then: bt_edge, capacity, as a projection no setting runs; its loop calls zero_grad()
                      // between the forward and the backward, which frees the step before's gradients that the
                      // projection held (undetermined now). Barlow Twins with a hand-written LARS; a SchNet-style
                      // potential with forces by autograd.grad(create_graph=True).
                      Expected{"bt_edge", Verdict::kUndetermined, "train"},
                      Expected{"bt_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"schn_edge", Verdict::kCapacity, "train"},
                      Expected{"schn_lo", Verdict::kCapacity, "train"},
                      // Batches 85 and 86 (predictions at 609f2f3, before the labels; an H100): 2 right, 6
                      // undetermined, none wrong. A CRNN (cuDNN LSTM, CTC) over lines of changing width; a Perceiver
                      // IO over up to 16,384 bytes (pio_lo's OOM came before history began); an ODE-Net through a
                      // hand-written Dormand-Prince solver (node_edge's rerun died in cublasCreate: capacity); ComplEx
                      // with 1-N scoring, its second evaluation projected from the first (same sizes, fit unchecked).
                      Expected{"crnn_edge", Verdict::kUndetermined, "train"},
                      Expected{"crnn_lo", Verdict::kCapacity, "train"},
                      Expected{"pio_edge", Verdict::kCapacity, "train"},
                      Expected{"pio_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"node_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"node_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"kge_edge", Verdict::kUndetermined, "eval"},
                      Expected{"kge_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 87 to 90 (predictions at c4cee65, before the labels; an H100): 5 right, 2 wrong, 8
                      // undetermined then; 5 right, 10 undetermined now. txl_edge (a Transformer-XL, its memories
                      // growing a segment a step, the failing unit's prefix one logits block of every step's size) was
                      // fragmentation: its rerun ran the step and failed at the next; its forward, 18% larger than the
                      // step before's, now counts as a batch of another size. qat_lo (a QAT ResNet-50 projected from
                      // its first step to 0.2% under the capacity) was capacity: its rerun completed; a capacity
                      // verdict now needs every setting to fail at 0.5% above the capacity too. VideoMAE (HF Trainer),
                      // a sliding-window 3D U-Net, a Graphormer, a PINN with residual-based refinement, a GPT under
                      // selective activation checkpointing, StyleGAN2 with lazy R1.
                      Expected{"txl_edge", Verdict::kUndetermined, "train"},
                      Expected{"txl_lo", Verdict::kUndetermined, "train"},
                      Expected{"vmae_edge", Verdict::kCapacity, "train"},
                      Expected{"vmae_lo", Verdict::kUndetermined, "train"},
                      Expected{"swseg_edge", Verdict::kUndetermined, "train"},
                      Expected{"swseg_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"gfm_edge", Verdict::kUndetermined, "train"},
                      Expected{"gfm_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"pinn_edge", Verdict::kCapacity, "train"},
                      Expected{"pinn_lo", Verdict::kCapacity, "train"},
                      Expected{"sac_edge", Verdict::kUndetermined, "train"},
                      Expected{"sac_lo", Verdict::kCapacity, "train"},
                      Expected{"sg2_edge", Verdict::kFragmentation, "train"},
                      Expected{"sg2_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"qat_lo", Verdict::kUndetermined, "train"},
                      // Batch 91 (predictions at 0dce0f9, before the labels): 4 undetermined. A TransformerEncoder
                      // classifier whose second step fits inside an unchecked fit's margins (its rerun completed) and
                      // whose first failed; deformable convolutions whose OOMs came before history began at step 3.
                      Expected{"nenc_edge", Verdict::kUndetermined, "train"},
                      Expected{"nenc_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"dcn_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"dcn_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 92-97 (predictions at 8ab8ef7, before the labels): 7 decided, all right; 12
                      // undetermined. hyena_edge's capacity rests on expandable segments replayed from the start
                      // failing at 26.08 GiB reserved, where its rerun failed (26.08 GiB reserved).
                      Expected{"hyena_edge", Verdict::kCapacity, "train"},
                      Expected{"hyena_lo", Verdict::kCapacity, "train"},
                      Expected{"hyena_mid", Verdict::kFragmentation, "train"},
                      Expected{"electra_edge", Verdict::kUndetermined, "train"},
                      Expected{"electra_lo", Verdict::kCapacity, "unknown"},
                      Expected{"clstm_edge", Verdict::kUndetermined, "train"},
                      Expected{"clstm_lo", Verdict::kUndetermined, "train"},
                      Expected{"taco_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"taco_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"taco_mid", Verdict::kUndetermined, "unknown"},
                      Expected{"sage_edge", Verdict::kCapacity, "eval"},
                      Expected{"sage_lo", Verdict::kUndetermined, "eval"},
                      Expected{"sgns_edge", Verdict::kUndetermined, "optimizer"},
                      Expected{"sgns_lo", Verdict::kCapacity, "optimizer"},
                      Expected{"wnet_edge", Verdict::kUndetermined, "train"},
                      Expected{"wnet_lo", Verdict::kUndetermined, "train"},
                      Expected{"wnet_mid", Verdict::kFragmentation, "train"},
                      Expected{"flip_edge", Verdict::kUndetermined, "train"},
                      Expected{"flip_lo", Verdict::kUndetermined, "unknown"},
                      // Batches 98-99 (predictions at 91d905a, before the labels): a full-batch GAT, 3 decided, all
                      // right; gat_q's rerun failed at 27.07 GiB reserved, where expandable segments replayed fail.
                      Expected{"gat_lo", Verdict::kCapacity, "train"},
                      Expected{"gat_q", Verdict::kCapacity, "train"},
                      Expected{"gat_r", Verdict::kCapacity, "train"},
                      // Batches 100-103 (predictions at d120cea, before the labels): PGD adversarial training, a
                      // vmapped ensemble, the HF Trainer padding-free; 3 decided, all right. The ensemble's first
                      // eval fails in its first layer: its lower bound (22.28 GiB) was its peak, what it frees in
                      // the layers it has not reached is in no trace.
                      Expected{"pgd_edge", Verdict::kCapacity, "train"},
                      Expected{"pgd_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"ens_edge", Verdict::kUndetermined, "eval"},
                      Expected{"ens_lo", Verdict::kUndetermined, "eval"},
                      Expected{"ens_r", Verdict::kUndetermined, "eval"},
                      Expected{"ens_s", Verdict::kUndetermined, "eval"},
                      Expected{"pff_edge", Verdict::kFragmentation, "train"},
                      Expected{"pff_lo", Verdict::kUndetermined, "train"},
                      Expected{"pff_mid", Verdict::kFragmentation, "train"},
                      // Batches 104-106 (predictions at 9c302d0, before the labels): a super-resolution GAN and
                      // Conv-TasNet; 3 decided, all right.
                      Expected{"esr_edge", Verdict::kFragmentation, "train"},
                      Expected{"esr_lo", Verdict::kCapacity, "train"},
                      Expected{"esr_q", Verdict::kFragmentation, "train"},
                      Expected{"tasnet_edge", Verdict::kUndetermined, "train"},
                      Expected{"tasnet_lo", Verdict::kUndetermined, "train"},
                      // Batches 107-108 (predictions at 8a331d3, before the labels): HiFi-GAN and Glow, none decided.
                      // glow_edge and glow_mid were "eval" before 8a331d3: a statement over two lines looked like
                      // a loop that had repeated (OomCallPath.AStatementOverSeveralLinesIsNoEarlierStep).
                      Expected{"hifi_edge", Verdict::kUndetermined, "train"},
                      Expected{"hifi_lo", Verdict::kUndetermined, "train"},
                      Expected{"hifi_mid", Verdict::kUndetermined, "train"},
                      Expected{"glow_edge", Verdict::kUndetermined, "unknown"},
                      Expected{"glow_lo", Verdict::kUndetermined, "unknown"},
                      Expected{"glow_mid", Verdict::kUndetermined, "unknown"}),
    [](const auto& info) { return info.param.name; });

// torchvision's detection reference with images of random sizes, at 0.92 × its peak allocated: the
// OOM is in the second step, ×1.28 the first, the only one the trace holds before it. Projected
// from it, the failing step fits (its rerun under expandable segments ran it) but the rerun failed
// three steps later at a larger batch: one earlier batch does not tell how large they get. The
// fixtures frag_oom_104 and frag_oom_observer have the same structure and the opposite label.
// RetinaNet at the same budget (batch 12, recorded after the rule) is its case too: capacity.
// FCN (batch 14) is it with two earlier batches (three recorded with Python frames only): the
// failing step, the largest of three, fits with 2.3% to spare and its rerun failed at the next,
// larger batch.
// The HF Trainer compiled (torch_compile=True) with dynamic padding: the fifth step runs a graph
// compiled for its sequence length, which the four before it never ran. The trigger names that
// graph, not the program's outermost statement (`trainer.train()`) nor "a training step"; its rerun
// under expandable segments ran the step and failed in the eval after it (label capacity).
TEST(FieldVerdicts, AStepThatRunsAGraphCompiledForItNamesTheGraph) {
  const Diagnosis d = diagnose("hfcmp_edge");
  ASSERT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_EQ(d.trigger, "a graph torch.compile generated for the failing step "
                       "(che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py)");
  EXPECT_TRUE(has_evidence(d, "undecidable", "code no allocation before that step ran (its first at event 8040)"));
  // llama_loop.py compiled (torch.compile default): its second step's graph first runs at event 7037.
  const Diagnosis loop = diagnose("cmp_lo");
  ASSERT_EQ(loop.verdict, Verdict::kUndetermined);
  EXPECT_EQ(loop.trigger, "a graph torch.compile generated for the failing step "
                          "(ctf3xzcj2sa4wog6c3pcq6kap7pggif5olgedcdixihsguds6tve.py)");
  EXPECT_TRUE(has_evidence(loop, "compiled_anew", "(its first at event 7037)"));
  EXPECT_TRUE(has_evidence(loop, "trace_projection", "no earlier unit allocates like the failing one"));
}

// torch.compile(mode="reduce-overhead"): the CUDA graphs' private pool keeps the most it had live, idle between
// replays, and lends none of it to AdamW's first step, which allocates in the default pools. Counted as live
// (what the ideal packer holds for a private pool), cro_lo's list op needs 8.14 GiB of its 8.06 GiB: capacity,
// as its rerun under expandable segments failed. ditro_edge's graphs hold 33.45 GiB idle: the floor is the
// pool's peak, not the 5.31 GiB live at the OOM, and its last list result fits, so the rest of the step decides.
TEST(FieldVerdicts, CudaGraphPoolsHoldTheMostTheyHadLive) {
  const Diagnosis d = diagnose("cro_lo");
  ASSERT_EQ(label_of("cro_lo"), "capacity");
  EXPECT_EQ(d.verdict, Verdict::kCapacity);
  EXPECT_TRUE(has_evidence(d, "list_op", "so the op needs at least 8.14 GiB, 3.15 GiB of it held idle by CUDA "
                                         "graphs' private pools"));
  EXPECT_TRUE(has_evidence(d, "projection_vs_capacity", "short by 87.09 MiB"));
  const Diagnosis ro = diagnose("ditro_edge");
  EXPECT_EQ(ro.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(has_evidence(ro, "ideal_packer", "5.31 GiB live + 33.45 GiB CUDA graphs' private pools hold idle"));
  ASSERT_TRUE(ro.ideal_peak_bytes.has_value());
  EXPECT_GT(*ro.ideal_peak_bytes, 38ull << 30);
}

TEST(FieldVerdicts, UnseenBatchesLeaveAStepLargerThanTheFewEarlierOnesUndetermined) {
  const Diagnosis retinanet = diagnose("ret_lo");
  ASSERT_EQ(label_of("ret_lo"), "capacity");
  EXPECT_EQ(retinanet.verdict, Verdict::kUndetermined);
  // RetinaNet's images vary in height and width apart: 9.5% of the paired bytes follow neither ×1.28 nor its
  // square, and no unit checks the fit, so a projection by one scale decides nothing before the batches seen do.
  EXPECT_TRUE(has_evidence(retinanet, "several_scales", "9.5% of the paired bytes are at none of ×1, ×1.28"));
  const Diagnosis d = diagnose("det_lo");
  ASSERT_EQ(label_of("det_lo"), "capacity");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.aligned_units, 1u);
  EXPECT_EQ(p.smaller_units, 1u);
  EXPECT_LE(p.projected_peak_bytes, *d.capacity_bytes);
  // Projected from the one earlier batch alone, it fits with less than the 4% an unchecked projection keeps.
  EXPECT_TRUE(has_evidence(d, "too_close", ""));
  EXPECT_TRUE(d.recommended_conf.empty() || d.verdict == Verdict::kFragmentation);
  const Diagnosis fcn = diagnose("fcn_lo");
  ASSERT_EQ(label_of("fcn_lo"), "capacity");
  EXPECT_EQ(fcn.verdict, Verdict::kUndetermined);
  // Its three earlier batches all align, the first too (its cuDNN workspaces came from the plan search).
  EXPECT_EQ(fcn.trace_projection.aligned_units, 3u);
  EXPECT_EQ(fcn.trace_projection.smaller_units, 3u);
  EXPECT_LE(fcn.trace_projection.projected_peak_bytes, *fcn.capacity_bytes);
  EXPECT_TRUE(has_evidence(fcn, "unseen_batches", "3 earlier batches"));
  EXPECT_TRUE(has_evidence(fcn, "unseen_batches", "beat the largest of 4 one time in 5"));
  EXPECT_TRUE(fcn.recommended_conf.empty());
}

/// True when the projection's replays ran under no setting of the sweep at the capacity.
bool no_setting_runs(const TraceStepProjection& p) {
  return !p.runs.empty() && std::none_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.runs; });
}

// Mask R-CNN (field batch 30): the failing batch, ×1.20 step 7, projects to 11.70 GiB live against 11.73 GiB, and
// 595 MiB of that peak are cuDNN workspaces (allocated inside ATen's plan loop, which catches a refusal and runs a
// plan asking for less). Counted as recorded, no setting ran the step even at 0.1% over the capacity: capacity. The
// rerun under expandable segments went on with smaller plans and peaked at 11.13 GiB allocated: it completed. Without
// its workspaces the step needs 11.11 GiB, which decides nothing against 11.73.
TEST(FieldVerdicts, CudnnWorkspacesAtTheProjectedPeakWeighNothingInACapacityVerdict) {
  const Diagnosis d = diagnose("mrc2_edge");
  ASSERT_EQ(label_of("mrc2_edge"), "fragmentation");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  const std::uint64_t workspaces = p.projected_peak_bytes - p.inelastic_peak_bytes;
  EXPECT_GT(workspaces, 500ull << 20);
  EXPECT_LT(workspaces, 700ull << 20);
  EXPECT_LT(p.inelastic_peak_bytes, *d.capacity_bytes);
  EXPECT_GT(static_cast<double>(p.projected_peak_bytes), 0.99 * static_cast<double>(*d.capacity_bytes));
  // Refused where they do not fit, some setting runs the step at the capacity plus the margin.
  EXPECT_FALSE(std::all_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.fails_with_margin; }));
  EXPECT_TRUE(has_evidence(d, "workspaces", "of the projected peak are cuDNN workspaces"));
  EXPECT_TRUE(d.recommended_conf.empty());
  // A step with no workspace at its peak needs its projection in full (nanoGPT: no convolution).
  const Diagnosis gpt = diagnose("ngpt_edge");
  EXPECT_EQ(gpt.trace_projection.inelastic_peak_bytes, gpt.trace_projection.projected_peak_bytes);
  // Served as recorded, no setting runs it at the capacity: without its workspaces it fits, so that decides nothing.
  EXPECT_TRUE(no_setting_runs(p));
}

// Fragmentation needs the failing step and every later one to run under a setting; capacity one step that fails.
// A projection that no setting runs at the capacity is capacity within its margin to fail: ViT-B/16's second step,
// projected from its first (unchecked, 9% to fail), needs 99.99% of the capacity with perfect packing, less than the
// device but more than any setting; BART's step 4 from step 3 (checked on one step within 3.2%), 7% over. Both
// reruns under expandable segments failed. Not with doubts beyond any error measured (torch.compile's recompiled
// step, 64 GiB of its reference's rest unfitted: they may be 103% of the capacity too much). From a trace that
// starts mid-run, only a step that perfect packing cannot hold either: the settings replay a re-laid start there
// (cut mid-run, recordings whose reruns completed had no setting run one). timm's training loop, its second step
// from its first, needs 102.3%: capacity; GPT-2 with offloaded activations, history from step 1, 99.9%: not.
TEST(FieldVerdicts, AProjectionThatNoSettingRunsAtTheCapacityIsCapacityWithinItsMargin) {
  for (const std::string name : {"vit_edge", "bart_lo", "timm_edge"}) {
    const Diagnosis d = diagnose(name);
    ASSERT_EQ(label_of(name), "capacity");
    EXPECT_EQ(d.verdict, Verdict::kCapacity) << name << ": " << d.headline;
    const TraceStepProjection& p = d.trace_projection;
    ASSERT_TRUE(p.available) << p.unavailable_reason;
    EXPECT_TRUE(no_setting_runs(p)) << name;
    const auto cap = static_cast<double>(*d.capacity_bytes);
    EXPECT_LT(static_cast<double>(p.projected_peak_bytes), cap * (1 + p.margin_to_fail)) << name;
    EXPECT_TRUE(has_evidence(d, "projection_vs_capacity", "a step that much smaller might run")) << name;
    EXPECT_TRUE(d.recommended_conf.empty()) << name;
  }
  const Diagnosis vit = diagnose("vit_edge");
  EXPECT_LT(vit.trace_projection.projected_peak_bytes, *vit.capacity_bytes);
  // Its "do not" says so, never that perfect packing needs more than the device.
  EXPECT_TRUE(std::any_of(vit.do_not.begin(), vit.do_not.end(), [](const Action& a) {
    return a.evidence.find("no setting of the sweep runs them") != std::string::npos;
  }));
  const Diagnosis compiled = diagnose("cmp_edge");
  const Diagnosis mid_run = diagnose("off_edge");
  for (const Diagnosis* d : {&compiled, &mid_run}) {
    EXPECT_EQ(d->verdict, Verdict::kUndetermined) << d->headline;
    EXPECT_TRUE(no_setting_runs(d->trace_projection));
    EXPECT_TRUE(has_evidence(*d, "too_close", ""));
  }
  EXPECT_GT(compiled.trace_projection.over_bytes, *compiled.capacity_bytes);
  EXPECT_LT(mid_run.trace_projection.projected_peak_bytes, *mid_run.capacity_bytes);
  EXPECT_TRUE(has_evidence(mid_run, "too_close", "the trace starts mid-run"));
}

// A DQN whose replay buffer grows by torch.cat at every collection (history from step 20, collection 320; 960 in
// all): how many more collections the room holds is what decides, and the trace cannot tell how many the run has
// left. Counted by the rise of the collections' peaks (the old buffer and its copy live at once), the room holds
// fewer than dqn_lo had left (it failed at collection 662 of 960; its rerun failed too) and at least as many as
// dqn_edge had (729; its rerun completed): the number the words give the user to decide with is the right one.
TEST(FieldVerdicts, AGrowingRunsRoomIsCountedByThePeaksRise) {
  const auto room = [](const Diagnosis& d) {
    const auto e = std::find_if(d.evidence.begin(), d.evidence.end(), [](const Evidence& x) {
      return x.key == "run_grows";
    });
    std::smatch m;
    if (e == d.evidence.end() || !std::regex_search(e->text, m, std::regex("holds about (\\d+) more"))) return -1;
    return std::stoi(m[1]);
  };
  const Diagnosis edge = diagnose("dqn_edge");
  const Diagnosis lo = diagnose("dqn_lo");
  EXPECT_EQ(edge.verdict, Verdict::kUndetermined);
  EXPECT_EQ(lo.verdict, Verdict::kUndetermined);
  EXPECT_GE(room(edge), 960 - 729);
  EXPECT_GE(room(lo), 0);
  EXPECT_LT(room(lo), 960 - 662);
  ASSERT_EQ(label_of("dqn_edge"), "fragmentation");
  ASSERT_EQ(label_of("dqn_lo"), "capacity");
}

// The step before's gradients, held where the failing step's forward failed, are freed where its backward begins
// when the loop calls zero_grad() between the two (Barlow Twins' loop): the projection, which holds them to its end,
// was 3.4% high, and the rerun under expandable segments completed. So freed, the step needs what the rerun's peak
// allocated was, to 0.1%: within 1% of the capacity a setting may run it, so no capacity verdict. Steps that leave
// less than 1% so freed stay capacity (expandable segments reserved 0.7% to 1.0% above the live bytes in the
// reruns), and so does a ViT accumulating gradients over micro-steps: its earlier micro-steps began their backwards
// holding them, so the trace says they are not freed there.
TEST(FieldVerdicts, AStepThatFitsWithTheStepBeforesGradientsFreedAtItsBackwardIsNotCapacity) {
  for (const std::string name : {"bt_edge"}) {
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kUndetermined) << name << ": " << d.headline;
    const TraceStepProjection& p = d.trace_projection;
    ASSERT_TRUE(p.available) << p.unavailable_reason;
    EXPECT_TRUE(no_setting_runs(p)) << name;
    ASSERT_GT(p.held_freed_saving_bytes, 0u) << name;
    std::ifstream in(field_dir(name) / "truth.json");
    const auto rerun_peak = nlohmann::json::parse(in)["rerun"]["max_memory_allocated"].get<double>();
    const auto freed = static_cast<double>(p.projected_peak_bytes - p.held_freed_saving_bytes);
    EXPECT_NEAR(freed / rerun_peak, 1.0, 0.001) << name;
    EXPECT_GT(static_cast<double>(p.projected_peak_bytes), static_cast<double>(*d.capacity_bytes)) << name;
    EXPECT_LT(freed, static_cast<double>(*d.capacity_bytes) * 0.99) << name;
    EXPECT_TRUE(has_evidence(d, "too_close", "freed where its backward begins")) << name;
    // What decides it is in the user's own loop: where it calls zero_grad().
    ASSERT_FALSE(d.decide_with.empty());
    EXPECT_NE(d.decide_with.front().find("where the loop calls `zero_grad()`"), std::string::npos)
        << d.decide_with.front();
  }
  ASSERT_EQ(label_of("bt_edge"), "fragmentation");
  for (const std::string name : {"fno_edge", "vit_edge"}) {
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kCapacity) << name << ": " << d.headline;
    EXPECT_GT(d.trace_projection.held_freed_saving_bytes, 0u) << name;
  }
  const Diagnosis accumulating = diagnose("cav_edge");
  EXPECT_EQ(accumulating.verdict, Verdict::kCapacity) << accumulating.headline;
  EXPECT_GT(accumulating.trace_projection.held_freeable_bytes, 0u);
  EXPECT_EQ(accumulating.trace_projection.held_freed_saving_bytes, 0u);
}

// A projection from the job's first step keeps 12% to call capacity only when that step allocated what the failing
// prefix lacks (cudnn.benchmark's trials): ViT-L's first step did not (0.8% of the capacity unmatched), and its second
// step, 11.0% over, is capacity; GPT-NeoX with gradient checkpointing (hfg_edge) made 13% more in its first step,
// and keeps 12%.
TEST(FieldVerdicts, AFirstStepAlikeTheFailingOneKeepsTheLaterStepsMargin) {
  const Diagnosis vitl = diagnose("vitl_lo");
  ASSERT_EQ(label_of("vitl_lo"), "capacity");
  const TraceStepProjection& p = vitl.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.reference_unit, 1u);
  EXPECT_FALSE(p.fit_error);
  EXPECT_LT(p.reference_unmatched_bytes, *vitl.capacity_bytes / 100);
  EXPECT_DOUBLE_EQ(p.fit_margin, 0.09);
  EXPECT_EQ(vitl.verdict, Verdict::kCapacity);
  const Diagnosis unlike = diagnose("hfg_edge");
  EXPECT_EQ(unlike.trace_projection.reference_unit, 1u);
  EXPECT_GT(unlike.trace_projection.reference_unmatched_bytes, *unlike.capacity_bytes / 10);
  EXPECT_DOUBLE_EQ(unlike.trace_projection.fit_margin, 0.12);
  // Within that margin, 0.5% under the capacity with perfect packing: no setting runs it at the capacity, but one
  // does at the projection's floor above it, so nothing decides it (capacity, its label, before that floor).
  EXPECT_EQ(unlike.verdict, Verdict::kUndetermined);
}

// Whisper fine-tuned with the Seq2SeqTrainer (field batch 24): every step encodes 30 s of audio, a fixed size, and
// decodes a transcript of the batch's longest length. By bytes the failing step is ×1.00 the two before it, but 28%
// of its paired bytes are at other sizes: transcripts of 284 tokens against 316 and 362. Its step fits under
// expandable segments with 11.6% to spare; the rerun ran it and failed three steps later at 441 tokens. Three
// batches do not tell how long they get, the failing one the smallest of them or not; and no unit checks how each
// allocation follows two sizes, so the projection by one scale decides nothing already.
TEST(FieldVerdicts, AJobWhoseBatchesVaryInAPartIsJudgedOnTheBatchesSeen) {
  const Diagnosis d = diagnose("whs_edge");
  ASSERT_EQ(label_of("whs_edge"), "capacity");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_NEAR(p.scale, 1.0, 0.001);
  EXPECT_EQ(p.aligned_units, 2u);
  EXPECT_EQ(p.smaller_units, 0u);
  EXPECT_EQ(p.varying_units, 2u);
  EXPECT_NEAR(p.off_scale_share, 0.277, 0.005);
  EXPECT_NEAR(p.reference_off_scale_share, 0.262, 0.005);
  EXPECT_FALSE(p.follows_one_scale);
  EXPECT_LE(p.projected_peak_bytes, *d.capacity_bytes);
  EXPECT_TRUE(has_evidence(d, "several_scales", "26.2% of the paired bytes are at none of ×1, ×1.00"));
  EXPECT_TRUE(d.recommended_conf.empty());
  // CLIP with the HF Trainer: fixed images, captions padded to the batch's longest; its rerun completed.
  const Diagnosis clip = diagnose("clip_edge");
  ASSERT_EQ(label_of("clip_edge"), "fragmentation");
  EXPECT_EQ(clip.verdict, Verdict::kUndetermined);
  EXPECT_EQ(clip.trace_projection.varying_units, 2u);
  // Fixed shapes pair at one size: nanoGPT's block of 1024 tokens stays decided.
  const Diagnosis fixed = diagnose("ngpt_edge");
  EXPECT_EQ(fixed.trace_projection.varying_units, 0u);
  EXPECT_EQ(fixed.trace_projection.off_scale_share, 0.0);
  EXPECT_EQ(fixed.verdict, Verdict::kFragmentation);
}

// T5 with the Seq2SeqTrainer evaluating with generate (field batch 25): the failing step projected from the step
// before it came out exact on four of the six earlier steps and above the other two (1.9%, 6.9%: their peaks came
// lower), never below. Checked on three units or more a fit keeps its residuals' signs: it bounds the step from
// above, so it decides that the step fits with the checked floor, and would decide capacity only beyond 6.9%.
// The rerun under expandable segments completed, its peak allocated the projection's to the byte.
TEST(FieldVerdicts, AFitNeverBelowItsHistoryDecidesThatTheStepFits) {
  const Diagnosis d = diagnose("s2g_edge");
  ASSERT_EQ(label_of("s2g_edge"), "fragmentation");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.checked_units, 6u);
  ASSERT_TRUE(p.fit_error.has_value());
  EXPECT_NEAR(*p.fit_error, 0.0688, 0.0005);
  EXPECT_EQ(p.fit_error_below, 0.0);
  EXPECT_NEAR(p.fit_error_above, *p.fit_error, 1e-12);
  EXPECT_NEAR(p.margin_to_fit, 0.001, 1e-9);
  EXPECT_NEAR(p.margin_to_fail, *p.fit_error, 1e-9);
  EXPECT_EQ(p.projected_peak_bytes, 68625482752u) << "the rerun's peak allocated";
  EXPECT_EQ(d.verdict, Verdict::kFragmentation);
  EXPECT_TRUE(has_evidence(d, "fit", "(at most 0.0% below, 6.9% above)"));
  // A fit checked on fewer units keeps its larger error on both sides: lora_lo's, on one.
  const TraceStepProjection& one = diagnose("lora_lo").trace_projection;
  ASSERT_EQ(one.checked_units, 1u);
  ASSERT_TRUE(one.fit_error.has_value());
  EXPECT_GE(one.margin_to_fit, *one.fit_error);
  EXPECT_GE(one.margin_to_fail, *one.fit_error);
}

// The DCGAN tutorial at 0.92 × its peak allocated (batch 17): with cudnn.benchmark off, cuDNN asks for
// workspace after workspace for each convolution of the discriminator's backward and catches every
// refusal: 99 `oom` entries before the fatal one (1 GiB for LeakyReLU's gradient), the last 14 with
// only frees after them. The ideal packer serves the fatal one: 6.07 GiB live + 1 GiB of 7.53 GiB.
// Taken for the run's failure, the first of the 14 (a 1.51 GiB workspace) made it "capacity"; the
// rerun under expandable segments completed.
TEST(FieldVerdicts, CuDNNsRefusedWorkspacesAreCaughtOomsNotTheFailure) {
  const Diagnosis d = diagnose("gan_lo");
  ASSERT_EQ(label_of("gan_lo"), "fragmentation");
  EXPECT_NE(d.verdict, Verdict::kCapacity);
  EXPECT_TRUE(has_evidence(d, "ideal_packer", "the ideal packer serves the failing 1.00 GiB request"));
  EXPECT_FALSE(has_evidence(d, "ideal_packer", "cannot serve"));
  EXPECT_NE(d.capacity_source.find("recorded OOM at event 253, one the run caught"), std::string::npos)
      << d.capacity_source;
}

// Autograd's thread dispatches node after node: the DCGAN's LeakyReluBackward ran 7 times before the
// OOM, all in the first iteration, and its frames named no step. The program's last allocation with
// Python frames (dcgan.py:81, errD_fake.backward()) stands for the failing malloc: no statement ran
// twice, the first step, in its backward pass: training.
TEST(FieldVerdicts, AnOomOnAutogradsThreadTakesTheStatementThatCalledBackward) {
  for (const char* name : {"gan_lo", "hft_lo"}) {
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.phase, "train") << name;
    EXPECT_NE(d.phase_source.find("failed in its first step"), std::string::npos) << d.phase_source;
    EXPECT_NE(d.phase_source.find("in its backward pass on autograd's thread"), std::string::npos) << d.phase_source;
    EXPECT_EQ(d.phase_source.find("Backward1::apply"), std::string::npos) << d.phase_source;
  }
  EXPECT_NE(diagnose("gan_lo").phase_source.find("dcgan.py:81 in <module>"), std::string::npos);
}

// The nn.Transformer tutorial at the edge (batch 13): its sixth step, larger than the five before,
// projected from them with the fit checked on 4 to 0.003%, to 38471977984 bytes: its rerun's peak
// allocated to the byte. Expandable segments run it with 0.1% of the capacity to spare (the rerun
// reserved 0.42% less than the capacity): fragmentation, its label. With the 0.5% the side that
// decides fragmentation kept before, undetermined.
TEST(FieldVerdicts, CheckedFitKeepsItsOwnErrorBothWays) {
  const Diagnosis d = diagnose("tut2_edge");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_GE(p.checked_units, 3u);
  EXPECT_EQ(p.projected_peak_bytes, 38471977984u);
  EXPECT_DOUBLE_EQ(p.margin_to_fit, 0.001);
  EXPECT_DOUBLE_EQ(p.margin_to_fail, 0.001);
  EXPECT_EQ(d.verdict, Verdict::kFragmentation);
  EXPECT_EQ(d.recommended_conf, "expandable_segments:True");
}

// A reference that began holding less than the failing unit (the first step, before the optimizer made
// its state) may make blocks the failing unit already holds; those are long-lived, and only the ones it
// made before the projected peak can raise it. The failing unit may also free what the step before left
// it, which the reference never held: only the optimizer's state (made in torch/optim/) is sure to stay.
// ViT-L (vitl_lo): AdamW's state, 2.3 GiB of the difference, stays; 32 MiB made before the peak and
// 65 MiB outside the optimizer count, and 12.12 GiB projected against 10.92 is capacity. The seq2seq
// tutorial (gmt_edge, a plain loop): step 1 holds step 0's log-probabilities (1.47 GB, until `logp` is
// rebound) and gradients (until `zero_grad()` before the backward); projected from step 0 to 11.53 GiB,
// 13% above the whole run's peak allocated (10.20 GiB), it may be that high, and the doubt says so.
TEST(FieldVerdicts, WhatTheStepBeforeLeftIsDoubtUnlessTheOptimizerMadeIt) {
  const Diagnosis vitl = diagnose("vitl_lo");
  const TraceStepProjection& p = vitl.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  ASSERT_TRUE(p.reference_began_lower);
  EXPECT_LT((p.kept_before_peak_bytes + p.held_freeable_bytes) * 10, p.kind_difference_bytes);
  EXPECT_EQ(p.over_bytes, p.kept_before_peak_bytes + p.held_freeable_bytes);
  EXPECT_EQ(vitl.verdict, Verdict::kCapacity);
  EXPECT_TRUE(has_evidence(vitl, "reference_kind", "came before the projected peak"));

  const Diagnosis gmt = diagnose("gmt_edge");
  const TraceStepProjection& q = gmt.trace_projection;
  ASSERT_TRUE(q.reference_began_lower);
  EXPECT_GT(q.held_freeable_bytes, 1'470'000'000u);
  EXPECT_TRUE(has_evidence(gmt, "reference_kind", "that the step before left it outside an optimizer's code"));
  const std::uint64_t run_peak = 10'949'952'000;  // the calibration run's max_memory_allocated
  EXPECT_GT(q.projected_peak_bytes - q.over_bytes, 0u);
  EXPECT_LE(q.projected_peak_bytes - q.over_bytes, run_peak) << "the doubt reaches below the truth";
  EXPECT_EQ(gmt.verdict, Verdict::kUndetermined);
}

// HF Trainer (GPT-NeoX), history from step 3: the OOM is in the first eval pass of the trace,
// below trainer.train(), which repeats (its steps). The phase is the eval's; the batch is
// projected from the training's compute_loss call (eval_projection.h): it peaks at the failing
// malloc, and expandable segments, replayed from the re-laid start of this mid-run trace, run it
// with the margins to spare, 0.5% and 1.3% for the re-laid start (its rerun completed). Before:
// undetermined, "an eval pass the trace never ran".
TEST(FieldVerdicts, AFirstEvalPassIsProjectedFromTheTrainingCall) {
  const Diagnosis d = diagnose("hfn_edge");
  EXPECT_EQ(d.phase, "eval");
  EXPECT_NE(d.phase_source.find("_run_epoch"), std::string::npos) << d.phase_source;
  EXPECT_EQ(d.verdict, Verdict::kFragmentation);
  EXPECT_EQ(d.recommended_conf, "expandable_segments:True");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_TRUE(p.from_training_call);
  EXPECT_EQ(p.shared_function, "trainer.py in compute_loss");
  EXPECT_TRUE(has_evidence(d, "projection_vs_capacity", "must leave 1.3% more than the fit's margin"));
}

// The nn.Transformer tutorial failed in loss.backward() of its longest step. Its units are the
// backward statements, each ending where the next step begins: projected from the step before,
// the failing step peaks at what the same job reached without a budget (43540715520 bytes),
// and expandable segments run it with 1% to spare, as its rerun did.
TEST(FieldVerdicts, AStepThatFailedInItsBackwardIsProjectedFromTheStepBefore) {
  const Diagnosis d = diagnose("tut_edge");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  ASSERT_TRUE(p.fit_error.has_value());
  EXPECT_LT(*p.fit_error, 0.01);
  EXPECT_NEAR(static_cast<double>(p.projected_peak_bytes), 43540715520.0, 0.01 * 43540715520.0);
  EXPECT_EQ(d.verdict, Verdict::kFragmentation);
  EXPECT_EQ(d.recommended_conf, "expandable_segments:True");
}

// The tutorial's OOM at 0.9 × its peak is in loss.backward(), on autograd's thread: the failing
// malloc has only C++ frames. Its phase is told by the program's repeating statement, not by
// the C++ frame that repeats per op.
TEST(FieldVerdicts, ABackwardOomsPhaseNamesTheProgramsStatement) {
  const Diagnosis d = diagnose("tut_lo");
  EXPECT_EQ(d.verdict, Verdict::kCapacity);
  EXPECT_EQ(d.phase, "train");
  EXPECT_NE(d.phase_source.find("tutorial_transformer.py:108 in <module>"), std::string::npos) << d.phase_source;
  EXPECT_EQ(d.phase_source.find("operator()"), std::string::npos) << d.phase_source;
}

// A ring of 6,000 entries holds the failing step and the end of the one before: nothing to
// project from. The phase names the program's forward line, not the launcher's frame (the job
// ran under runpy, as `python -m` runs one), and a longer history is what would decide it.
/// The doctor on `name`'s user files with the trace's first `share` of events dropped, as a ring
/// or a late history start leaves it (scripts/doctor_ring_cuts.py).
Diagnosis diagnose_cut(const std::string& name, double share) {
  DoctorInputs inputs = collect_doctor_inputs(field_user_files(name));
  SnapshotInput& s = inputs.snapshots.at(0);
  auto& events = s.snapshot.device_traces.at(static_cast<std::size_t>(s.device));
  const auto cut = static_cast<std::size_t>(share * static_cast<double>(events.size()));
  events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(cut));
  s.oom_index = *s.oom_index - cut;
  return run_on_two_threads(std::move(inputs));
}

/// The doctor on `name`'s user files with the stacks a recording option leaves out: every stack
/// (context=None), or those of the frees and releases only (context="alloc").
Diagnosis diagnose_without_stacks(const std::string& name, bool frees_only) {
  DoctorInputs inputs = collect_doctor_inputs(field_user_files(name));
  snapshot::Snapshot& snap = inputs.snapshots.at(0).snapshot;
  using snapshot::TraceAction;
  for (auto& trace : snap.device_traces)
    for (snapshot::TraceEvent& e : trace) {
      const bool in_a_malloc = e.action == TraceAction::kAlloc || e.action == TraceAction::kOom ||
                               e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap;
      if (!frees_only || !in_a_malloc) e.stack = 0;
    }
  if (!frees_only)
    for (snapshot::Block& b : snap.blocks) b.stack = 0;
  return run_on_two_threads(std::move(inputs));
}

/// The doctor on `name`'s user files as `_record_memory_history(stacks="python")` records them: the
/// frames of Python files only, as scripts/doctor_without_stacks.py strips them.
Diagnosis diagnose_with_python_frames_only(const std::string& name) {
  DoctorInputs inputs = collect_doctor_inputs(field_user_files(name));
  snapshot::Snapshot& snap = inputs.snapshots.at(0).snapshot;
  std::vector<snapshot::StackId> python_stack(snap.stacks.stack_count());
  for (snapshot::StackId id = 0; id < python_stack.size(); ++id) {
    std::vector<snapshot::FrameId> kept;
    for (const snapshot::FrameId frame : snap.stacks.stack(id))
      if (snap.strings.view(snap.stacks.frame(frame).filename).ends_with(".py")) kept.push_back(frame);
    python_stack[id] = snap.stacks.intern_stack(kept);
  }
  for (auto& trace : snap.device_traces)
    for (snapshot::TraceEvent& e : trace) e.stack = python_stack[e.stack];
  for (snapshot::Block& b : snap.blocks) b.stack = python_stack[b.stack];
  return run_on_two_threads(std::move(inputs));
}

// Recorded with Python frames only, three earlier batches align with fcn_lo's failing one (two with
// every frame): the largest of four still fits, and its rerun failed at the next, larger batch. The
// rule on batches seen asks for four earlier ones.
TEST(FieldVerdicts, WithPythonFramesOnlyTheLargestOfFourBatchesIsUndetermined) {
  const Diagnosis d = diagnose_with_python_frames_only("fcn_lo");
  ASSERT_EQ(label_of("fcn_lo"), "capacity");
  EXPECT_EQ(d.trace_projection.aligned_units, 3u);
  EXPECT_EQ(d.trace_projection.smaller_units, 3u);
  EXPECT_EQ(d.verdict, Verdict::kUndetermined) << d.headline;
  EXPECT_TRUE(has_evidence(d, "unseen_batches", "3 earlier batches"));
}

// Recorded without stacks, Lightning's flush of the cache at setup (field lit_edge) was taken for a
// refused cudaMalloc: a 312 MB capacity, and capacity for an OOM whose label is fragmentation. Releases no
// stack explains are a flush when the trace holds more elsewhere. Without any stack the trace's units
// cannot be found (undetermined); with the allocations' stacks only, the verdict is the one with all.
TEST(FieldVerdicts, WithoutStacksTheVerdictIsTheLabelOrUndetermined) {
  for (const std::string name : {"lit_edge", "wrn_edge", "hfe_lo", "tut2_edge"}) {
    const Diagnosis all = diagnose(name);
    const Diagnosis none = diagnose_without_stacks(name, false);
    EXPECT_TRUE(none.verdict == Verdict::kUndetermined || to_string(none.verdict) == label_of(name))
        << name << ": " << none.headline;
    EXPECT_EQ(diagnose_without_stacks(name, true).verdict, all.verdict) << name;
  }
  EXPECT_EQ(diagnose_without_stacks("lit_edge", false).capacity_bytes, diagnose("lit_edge").capacity_bytes);
}

// Lightning (field lit_edge) with its trace's first half dropped: the trace's first unit lost its
// head, and the unit the failing step is projected from ran Lightning's validation in its
// iteration. Checked on that headless tail, and with the validation in the step, the fit missed
// its own history by 40.6% (undetermined); the tail is not checked, the validation ends the step,
// the fit matches 3 units to 0.0%, and expandable segments ran the step with the 1% a re-laid start
// kept (fragmentation, its label, until the rule on batches seen asked for four earlier ones: the
// cut leaves three smaller); with the 1.3% it kept from batch 17 (2.25% from batch 36, 4.3% from batch 87), the step
// is too close.
TEST(FieldVerdicts, AHeadlessFirstUnitIsNotCheckedAndAValidationEndsTheStep) {
  const Diagnosis d = diagnose_cut("lit_edge", 0.5);
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(has_evidence(d, "too_close", "must leave 4.3% more"));
  EXPECT_EQ(d.trace_projection.smaller_units, 3u);
  ASSERT_TRUE(d.trace_projection.fit_error.has_value());
  EXPECT_LT(*d.trace_projection.fit_error, 0.005);
  EXPECT_GE(d.trace_projection.checked_units, 2u);
}

// torch.compile (field cmp_edge) with its trace's first half dropped: the trace holds the end of
// the step before (its backward pass, its optimizer step) and the failing step's head, and no
// statement of the loop ran twice. The phase said "the run failed in its first step", which is
// not so, and what would decide it was a snapshot "across the whole unknown phase"; it says the
// trace starts mid-run and asks for a history of three times its 2802 events.
TEST(FieldVerdicts, AMidRunTraceWithoutAnEarlierStepAsksForAHistoryThreeTimesAsLong) {
  const Diagnosis d = diagnose_cut("cmp_edge", 0.5);
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_EQ(d.phase_source.find("first step"), std::string::npos) << d.phase_source;
  EXPECT_NE(d.phase_source.find("starts mid-run"), std::string::npos) << d.phase_source;
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("this trace holds 2802 events"), std::string::npos) << d.decide_with.front();
  EXPECT_NE(d.decide_with.front().find("max_entries=9000"), std::string::npos) << d.decide_with.front();
}

// FSDP2 from mid-run (field fs2_edge, label capacity: its rerun under expandable segments passed
// the failing step 4 and failed in step 5). Step 4 is the largest the trace holds (×1.2 step 3)
// and projects to 22.62 GiB of the 23.08 the device gives, which the rerun reached to the byte
// (max_memory_allocated 24291063808): the trace cannot show capacity. What would decide it is
// named first: a batch ×1.03 as large needs more than the device (the calibration run, the same
// batches without a budget, peaked 0.4% above the capacity), ×1.18 beyond the fit's margins.
TEST(FieldVerdicts, AStepThatFitsSaysHowMuchLargerABatchMustBeToNotFit) {
  const Diagnosis d = diagnose("fs2_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("a batch ×1.03 its size would need more, and one ×1.18"), std::string::npos)
      << d.decide_with.front();
}

TEST(FieldVerdicts, ARingShorterThanTwoStepsAsksForALongerHistory) {
  const Diagnosis d = diagnose("ring_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_NE(d.phase_source.find("llama_loop.py:44 in <module>"), std::string::npos) << d.phase_source;
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("max_entries"), std::string::npos) << d.decide_with.front();
}

// FSDP2 from mid-run: expandable segments replay from the trace's live blocks re-laid and run the
// failing step with 1.25% of the capacity to spare. A re-laid start was optimistic by up to 3.43%
// of the capacity in a training step (field vmae_edge cut at 80%; 1.80% before batch 87, 0.49% before
// batch 10), so such a start keeps 4.3% on top of the fit's 0.5%, and the step stays undetermined,
// saying so. (With 0.5% for the re-laid start it was decided fragmentation, its label.)
TEST(FieldVerdicts, AMidRunTrainingStepKeepsTheMeasuredReLaidMargin) {
  const Diagnosis d = diagnose("fsdp_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(d.recommended_conf.empty());
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available);
  EXPECT_DOUBLE_EQ(p.relaid_start_margin, 0.043);
  EXPECT_DOUBLE_EQ(p.margin_to_fit, 0.005);
  const auto expandable = std::find_if(p.runs.begin(), p.runs.end(),
                                       [](const ProjectedRun& r) { return r.conf == "expandable_segments:True"; });
  ASSERT_NE(expandable, p.runs.end());
  EXPECT_TRUE(expandable->relaid_start);
  EXPECT_TRUE(expandable->runs);
  EXPECT_FALSE(expandable->runs_with_margin);
  EXPECT_TRUE(has_evidence(d, "too_close", "re-laid"));
}

// The label's own experiment, replayed: from the job's start, expandable segments at the same memory
// cannot serve the failing malloc either, though perfect packing could. The ViT-B/16 recipe in its first
// step, the T5 Seq2SeqTrainer in its first forward (max_split_size_mb:512 passes the OOM point: only
// the rest of the pass would tell) and in its second step; every rerun under expandable segments failed
// on the same request. Before: undetermined.
TEST(FieldVerdicts, ExpandableSegmentsFailingAtTheOomFromTheJobsStartIsCapacity) {
  for (const std::string name : {"vit_lo", "s2s_lo", "s2s_e1005"}) {
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kCapacity) << name;
    EXPECT_TRUE(d.expandable_fails_at_oom) << name;
    EXPECT_TRUE(has_evidence(d, "expandable_fails", "expandable_segments:True at the same")) << name;
    EXPECT_NE(d.headline.find("expandable segments fail at the same malloc"), std::string::npos) << d.headline;
    EXPECT_TRUE(d.recommended_conf.empty()) << name;
    ASSERT_FALSE(d.do_not.empty());
    EXPECT_NE(d.do_not.front().evidence.find("expandable segments fail at the same malloc"), std::string::npos);
  }
  // Where expandable segments pass the OOM point the rule says nothing (the projection decides).
  const Diagnosis frag = diagnose("mlm_edge");
  EXPECT_FALSE(frag.expandable_fails_at_oom);
  EXPECT_FALSE(has_evidence(frag, "expandable_fails", ""));
}

// BERT MLM with history from step 2 (and FSDP2 from step 3): the OOM came first, so the snapshot
// holds the allocator's blocks but no trace. Undetermined, and the report says why the trace is missing.
TEST(FieldVerdicts, ASnapshotWhoseHistoryBeganAfterTheOomSaysSo) {
  for (const std::string name : {"mlm_lo", "fs2_lo"}) {
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kUndetermined) << name;
    EXPECT_TRUE(has_evidence(d, "no_trace", "no trace entries: history was not recording when the OOM came"))
        << name;
  }
  EXPECT_FALSE(has_evidence(diagnose("vit_lo"), "no_trace", ""));
}


// The longest batch seen must fit with the margins the failing step's run kept. Field batch 61's Fabric job
// (fab61_edge: its rerun met the batches in another order, so it has no label) was called fragmentation: its
// failing batch fit, and a batch ×1.034 as long, seen earlier, projected to 27.47 of 27.80 GiB with perfect
// packing, inside the fit's 0.1% but not the re-laid start's 4.3% that the failing step's run kept. The same job
// with a seeded shuffle (fab_edge, batch 62) failed under expandable segments at the run's longest batch.
TEST(FieldVerdicts, TheLongestBatchSeenKeepsTheFailingStepsMargins) {
  for (const char* name : {"fab61_edge", "fab_edge"}) {
    SCOPED_TRACE(name);
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kUndetermined);
    const TraceStepProjection& p = d.trace_projection;
    ASSERT_TRUE(p.available);
    ASSERT_TRUE(p.longest_unit.has_value());
    const auto cap = static_cast<double>(*d.capacity_bytes);
    EXPECT_LT(static_cast<double>(p.longest_peak_bytes), cap * (1 - p.margin_to_fit));
    EXPECT_GT(static_cast<double>(p.longest_peak_bytes), cap * (1 - p.margin_to_fit - p.relaid_start_margin));
    EXPECT_TRUE(has_evidence(d, "longest_batch", "the margins the failing step's run kept"));
  }
  // The translation tutorial's longest batch (unit 3, label fragmentation) fits with the room the setting took
  // above perfect packing in the failing step: its trace starts at the job's start, no re-laid margin.
  const Diagnosis trn = diagnose("trn_edge");
  EXPECT_EQ(trn.verdict, Verdict::kFragmentation);
  const TraceStepProjection& p = trn.trace_projection;
  ASSERT_TRUE(p.longest_unit.has_value());
  const auto best = std::find_if(p.runs.begin(), p.runs.end(), [&](const ProjectedRun& r) {
    return r.conf == trn.recommended_conf;
  });
  ASSERT_NE(best, p.runs.end());
  ASSERT_GT(best->peak_reserved_bytes, p.projected_peak_bytes);
  EXPECT_LT(static_cast<double>(p.longest_peak_bytes + best->peak_reserved_bytes - p.projected_peak_bytes),
            static_cast<double>(*trn.capacity_bytes) * (1 - p.margin_to_fit));
}

// The hard-negative refresh (field hnr_edge) fails in a pass the trace never ran; the training step after it in the
// loop's body ran before it: the phase says the loop came back around, not that no statement ran more than once.
TEST(FieldVerdicts, APassTheLoopHadNotRunIsNotCalledTheFirstStep) {
  const Diagnosis d = diagnose("hnr_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_NE(d.phase_source.find("the failing pass (hard_negative_refresh.py:158 in <module>, at "
                                "hard_negative_refresh.py:97 in encode) did not run before in the trace"),
            std::string::npos)
      << d.phase_source;
  EXPECT_NE(d.phase_source.find("but hard_negative_refresh.py:163 in <module>, which comes after it, ran and finished: "
                                "the loop came back around"),
            std::string::npos)
      << d.phase_source;
  EXPECT_EQ(d.phase_source.find("no statement of the program's loop ran more than once"), std::string::npos);
}

// A Muon GPT under a batch warm-up (field batch 75), history from step 2: at 0.92 × its peak (mrm_lo) the step at
// batch 10 projects to 28.07 GiB of 29.28 and expandable segments run it, but batches 4 to 9 before it each grew on
// the one before, and one more step grown as much needs more than the device: its rerun ran batch 10 and failed at
// 11 (since batch 87 a mid-run start keeps 4.3%, and the step, 4.1% under the capacity, is too close already). At
// the edge (mrm_edge) the warm-up's last batch, 12, fits by less than a longer batch needs; it completed.
// Variable lengths in random order (lkd_edge, the LLM distillation) are no warm-up: fragmentation, right.
TEST(FieldVerdicts, ABatchWarmUpLeavesTheStepThatFitsOpen) {
  const Diagnosis d = diagnose("mrm_lo");
  ASSERT_EQ(label_of("mrm_lo"), "capacity");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available);
  EXPECT_EQ(p.growing_units, 6u);
  EXPECT_NEAR(p.last_growth, 10.0 / 9.0, 0.01);
  EXPECT_LT(p.projected_peak_bytes, *d.capacity_bytes);
  EXPECT_TRUE(d.recommended_conf.empty());
  const Diagnosis edge = diagnose("mrm_edge");
  EXPECT_EQ(edge.verdict, Verdict::kUndetermined);
  EXPECT_GE(edge.trace_projection.growing_units, 4u);
  // A sequence-length warm-up (batch 80, recorded after the rule was made): slin_lo at 1,792 tokens fits by 0.33 GiB,
  // and its rerun failed at 2,048.
  const Diagnosis seq = diagnose("slin_lo");
  ASSERT_EQ(label_of("slin_lo"), "capacity");
  EXPECT_EQ(seq.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(has_evidence(seq, "batches_grow", "the 7 before it in the trace each smaller than the one after it"));
  const Diagnosis kd = diagnose("lkd_edge");
  EXPECT_EQ(kd.verdict, Verdict::kFragmentation);
  EXPECT_LT(kd.trace_projection.growing_units, 4u);
}

// A unit that begins at the backward statement (Fabric's `fabric.backward`, field fab_edge) starts holding its own
// forward's activations: a longer batch makes them larger too. The headroom counted only the backward's growth and
// read "a batch ×1.59 its size would need more"; the seeded rerun failed at the run's longest batch, 1,019 tokens
// against the failing micro-step's 941-979.
TEST(FieldVerdicts, ABatchsHeadroomGrowsTheForwardThatCameBeforeItsUnit) {
  const Diagnosis d = diagnose("fab_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("a batch ×1.08 its size would need more"), std::string::npos)
      << d.decide_with.front();
}


// A run that grows needs its growth at every step after the failing one. A loop keeping each step's logits (field
// leak_*, 500 MiB a step) failed in steps that a setting runs; the step after each needs more than the device, and
// the reruns under expandable segments failed a step later or at the same step: capacity. validate() without
// no_grad (field vng_edge, 2.56 GiB a batch) failed in the validation's last batch, which a setting runs too; its
// rerun ran it and the job ended: fragmentation. The trace cannot tell a last step from the others: undetermined,
// asking whether the run has another step before it frees what it keeps (vng_edge is undetermined before that: no
// setting runs its batch with the margin a trace starting mid-run keeps).
TEST(FieldVerdicts, ARunThatGrowsIsDecidedByTheStepsItHasLeft) {
  for (const char* name : {"leak_edge", "leak_lo", "leak_mid"}) {
    SCOPED_TRACE(name);
    const Diagnosis d = diagnose(name);
    EXPECT_EQ(d.verdict, Verdict::kUndetermined);
    ASSERT_TRUE(d.run_growth.grows());
    const TraceStepProjection& p = d.trace_projection;
    ASSERT_TRUE(p.available);
    EXPECT_LT(static_cast<double>(p.projected_peak_bytes), static_cast<double>(*d.capacity_bytes));
    EXPECT_GT(p.projected_peak_bytes + d.run_growth.per_step_bytes, *d.capacity_bytes);
    EXPECT_TRUE(has_evidence(d, "run_grows", "the run grows"));
    ASSERT_FALSE(d.decide_with.empty());
    EXPECT_NE(d.decide_with.front().find("before it frees what it keeps"), std::string::npos) << d.decide_with.front();
    EXPECT_TRUE(d.recommended_conf.empty());
    ASSERT_FALSE(d.memory_advice.empty());
    EXPECT_EQ(d.memory_advice.front().key, "kept_per_step");
  }
  EXPECT_EQ(diagnose("leak_lo").run_growth.per_step_bytes / kMiB, 16ull * 512 * 32000 * 2 / kMiB);
  const Diagnosis vng = diagnose("vng_edge");
  EXPECT_EQ(vng.verdict, Verdict::kUndetermined);
  EXPECT_TRUE(vng.run_growth.eval_batches);
  EXPECT_GT(vng.trace_projection.projected_peak_bytes + vng.run_growth.per_step_bytes, *vng.capacity_bytes);
  ASSERT_FALSE(vng.memory_advice.empty());
  EXPECT_EQ(vng.memory_advice.front().key, "kept_per_step");
  EXPECT_EQ(vng.memory_advice.front().title, "Stop keeping each eval batch's outputs on the GPU");
}

// Lightning's validation_step_outputs keeping each validation batch's per-pixel probabilities (field lvo_edge: 368 MiB
// a batch): the eleventh of twelve fits with 365 MiB to spare and a setting runs it — fragmentation, had the growth
// not been counted; the rerun under expandable segments failed. Whether another batch comes decides it.
TEST(FieldVerdicts, AValidationThatKeepsEachBatchsOutputsIsNotFragmentation) {
  const Diagnosis d = diagnose("lvo_edge");
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_EQ(d.phase, "eval");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available);
  EXPECT_TRUE(p.eval_units);
  EXPECT_GE(d.run_growth.per_step_bytes, 16ull * 21 * 512 * 512 * 4);
  EXPECT_TRUE(has_evidence(d, "run_grows", "eval batches left"));
  ASSERT_FALSE(d.decide_with.empty());
  EXPECT_NE(d.decide_with.front().find("whether the run has another eval batch"), std::string::npos)
      << d.decide_with.front();
  EXPECT_TRUE(d.recommended_conf.empty());
}

// A Transformer-XL whose memories grow a segment a step (field txl_edge): the failing unit begins at the loss, and
// its prefix, one fp32 logits block, is the same size in every step, while its forward, made before it, was 18%
// larger than the step before's. The step fits under expandable segments (its rerun ran it) and the next, larger
// still, did not: at the failing unit's scale, a head of another size is a batch of another size, and three such
// batches do not tell how large they get.
TEST(FieldVerdicts, AForwardOfAnotherSizeBeforeTheUnitIsABatchOfAnotherSize) {
  const Diagnosis d = diagnose("txl_edge");
  ASSERT_EQ(label_of("txl_edge"), "capacity");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_EQ(p.prefix_allocations, 1u);
  EXPECT_NEAR(p.scale, 1.0, 0.001);
  EXPECT_GT(static_cast<double>(p.head_bytes), 1.15 * static_cast<double>(p.reference_head_bytes));
  EXPECT_GE(p.varying_units, 2u);  // the trace's first unit has no head of its own to compare
  EXPECT_LT(p.aligned_units, 4u);
  EXPECT_EQ(d.verdict, Verdict::kUndetermined) << d.headline;
  EXPECT_TRUE(d.recommended_conf.empty());
}

// A capacity verdict needs every setting to fail at the capacity plus the projection's floor, as fragmentation needs
// one to run with that much to spare. Field qat_lo (a QAT ResNet-50, projected from its first step to 0.2% under the
// capacity with perfect packing; its trace needs two capacities over time, which scale with the replay's margin as
// the one capacity does) completed under expandable segments at 17.27 of 17.31 GiB, where no setting ran the
// projection at the capacity itself.
TEST(FieldVerdicts, NoSettingRunningTheStepAtTheCapacityIsNotEnoughForCapacity) {
  const Diagnosis d = diagnose("qat_lo");
  ASSERT_EQ(label_of("qat_lo"), "fragmentation");
  const TraceStepProjection& p = d.trace_projection;
  ASSERT_TRUE(p.available) << p.unavailable_reason;
  EXPECT_TRUE(p.reference_is_first_step);
  EXPECT_LT(p.projected_peak_bytes, *d.capacity_bytes);
  EXPECT_GT(static_cast<double>(p.projected_peak_bytes), 0.995 * static_cast<double>(*d.capacity_bytes));
  EXPECT_TRUE(std::none_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) { return r.runs; }));
  EXPECT_TRUE(std::any_of(p.runs.begin(), p.runs.end(), [](const ProjectedRun& r) {
    return r.runs_above_capacity && r.conf == "expandable_segments:True";
  }));
  EXPECT_EQ(d.verdict, Verdict::kUndetermined) << d.headline;
}

}  // namespace
}  // namespace fragscope::diagnose
