#pragma once
/// @brief Shapes of common Llama-style models, so a job spec can say `preset = "llama-2-13b"`.
///
/// Values are the models' published config.json fields (hidden_size, num_hidden_layers,
/// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
/// tie_word_embeddings). Thread-safety: immutable static data.

#include <optional>
#include <string>
#include <string_view>

#include "plan/job_spec.h"

namespace fragscope::plan {

/// @brief The preset's shape with `preset` set, or nullopt. Case-insensitive.
std::optional<ModelShape> find_model_preset(std::string_view name);

/// @brief "llama-2-7b, llama-2-13b, …" for error messages.
std::string model_preset_names();

}  // namespace fragscope::plan
