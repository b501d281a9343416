// Model presets: each shape must give the parameter count its model is published with
// (sum(p.numel()) of the Hugging Face model: 6,738,415,616 for Llama-2-7B, ...), which checks
// every field of the preset (hidden, layers, heads, KV heads, MLP, vocab, tied embeddings).
#include "plan/model_presets.h"

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

TEST(ModelPresets, ParameterCountsAreThePublishedOnes) {
  const std::pair<const char*, std::uint64_t> published[] = {
      {"llama-2-7b", 6'738'415'616},    {"llama-2-13b", 13'015'864'320}, {"llama-2-70b", 68'976'648'192},
      {"llama-3-8b", 8'030'261'248},    {"llama-3-70b", 70'553'706'496}, {"llama-3.2-1b", 1'235'814'400},
      {"llama-3.2-3b", 3'212'749'824},  {"mistral-7b", 7'241'732'096},   {"tinyllama-1.1b", 1'100'048'384},
  };
  for (const auto& [name, parameters] : published) {
    const auto shape = find_model_preset(name);
    ASSERT_TRUE(shape.has_value()) << name;
    EXPECT_EQ(shape->parameters(), parameters) << name;
    EXPECT_EQ(shape->preset, name);
    EXPECT_NE(model_preset_names().find(name), std::string::npos) << name;
  }
}

TEST(ModelPresets, LookupIgnoresCaseAndRefusesUnknownNames) {
  ASSERT_TRUE(find_model_preset("Llama-3-8B").has_value());
  EXPECT_EQ(find_model_preset("Llama-3-8B")->preset, "llama-3-8b");
  EXPECT_EQ(find_model_preset("LLAMA-3.2-1B")->tied_embeddings, true);
  for (const char* name : {"", "llama", "llama-3-8", "llama-3-8b ", "gpt-2"})
    EXPECT_FALSE(find_model_preset(name).has_value()) << name;
}

}  // namespace
}  // namespace fragscope::plan
