// Words of a name: where they begin, and that a stem must begin one (field lf_edge: Longformer's
// _mask_invalid_locations, in every training forward, once named a validation by substring).
#include "diagnose/name_words.h"

#include <gtest/gtest.h>

namespace fragscope::diagnose {
namespace {

TEST(NameWords, AWordBeginsAtTheStartAfterANonLetterOrAtALowerToUpperChange) {
  for (const std::string_view name : {"eval", "run_eval", "step2eval", "model.eval", "[Trainer]Eval", "isEval",
                                      "_EvaluationLoop", "EVAL_STEP", "eval.py", "trainer/evaluate", "HFEval"})
    EXPECT_TRUE(has_word_beginning_with(name, {"eval"})) << name;
}

TEST(NameWords, AStemInsideAWordIsNoMatch) {
  for (const std::string_view name : {"retrieval", "interval", "medieval", "RETRIEVAL", "", "eva", "ev_al"})
    EXPECT_FALSE(has_word_beginning_with(name, {"eval"})) << name;
  EXPECT_FALSE(has_word_beginning_with("_mask_invalid_locations", {"valid"}));
  EXPECT_FALSE(has_word_beginning_with("INVALID", {"valid"}));
  EXPECT_TRUE(has_word_beginning_with("validation_step", {"valid"}));
}

TEST(NameWords, AnyOfTheStemsAndStemsWithAnUnderscore) {
  EXPECT_TRUE(has_word_beginning_with("load_state_dict", {"checkpoint", "state_dict"}));
  EXPECT_TRUE(has_word_beginning_with("ModelCheckpoint.on_train_batch_end", {"save", "checkpoint"}));
  EXPECT_FALSE(has_word_beginning_with("unsaved", {"save", "checkpoint"}));
}

}  // namespace
}  // namespace fragscope::diagnose
