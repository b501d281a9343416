#include "plan/model_presets.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace fragscope::plan {
namespace {

struct Preset {
  std::string_view name;
  std::uint64_t hidden, layers, heads, kv_heads, intermediate, vocab;
  bool tied;
};

// From each model's config.json on the Hugging Face hub.
constexpr std::array<Preset, 9> kPresets{{
    {"llama-2-7b", 4096, 32, 32, 32, 11008, 32000, false},
    {"llama-2-13b", 5120, 40, 40, 40, 13824, 32000, false},
    {"llama-2-70b", 8192, 80, 64, 8, 28672, 32000, false},
    {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, false},
    {"llama-3-70b", 8192, 80, 64, 8, 28672, 128256, false},
    {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, true},
    {"llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, true},
    {"mistral-7b", 4096, 32, 32, 8, 14336, 32000, false},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, false},
}};

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::optional<ModelShape> find_model_preset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (!iequals(p.name, name)) continue;
    ModelShape shape;
    shape.preset = std::string(p.name);
    shape.hidden_size = p.hidden;
    shape.num_layers = p.layers;
    shape.num_attention_heads = p.heads;
    shape.num_kv_heads = p.kv_heads;
    shape.intermediate_size = p.intermediate;
    shape.vocab_size = p.vocab;
    shape.tied_embeddings = p.tied;
    return shape;
  }
  return std::nullopt;
}

std::string model_preset_names() {
  std::string names;
  for (const auto& p : kPresets) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

}  // namespace fragscope::plan
