#include "plan/job_spec.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "plan/model_presets.h"
#include "util/error.h"
#include "util/gpu_catalog.h"
#include "util/input_file.h"

namespace fragscope::plan {

std::uint64_t ModelShape::layer_matmul_parameters() const {
  // q and o are hidden×hidden; k and v project to the key/value heads only (GQA).
  return 2 * hidden_size * hidden_size + 2 * hidden_size * kv_dim() + 3 * hidden_size * intermediate_size;
}

std::uint64_t ModelShape::layer_parameters() const { return layer_matmul_parameters() + 2 * hidden_size; }

std::uint64_t ModelShape::outer_parameters() const {
  return vocab_size * hidden_size * (tied_embeddings ? 1 : 2) + hidden_size;
}

std::uint64_t ModelShape::parameters() const { return num_layers * layer_parameters() + outer_parameters(); }

namespace {

template <typename Enum>
struct Choice {
  std::string_view name;
  Enum value;
};

constexpr Choice<Precision> kPrecisions[] = {{"amp-bf16", Precision::kAmpBf16},
                                             {"amp-fp16", Precision::kAmpFp16},
                                             {"bf16", Precision::kBf16},
                                             {"fp32", Precision::kFp32}};
constexpr Choice<Optimizer> kOptimizers[] = {{"adamw", Optimizer::kAdamW},
                                             {"adam", Optimizer::kAdam},
                                             {"adamw-8bit", Optimizer::kAdamW8bit},
                                             {"sgd", Optimizer::kSgd},
                                             {"lion", Optimizer::kLion}};
constexpr Choice<Checkpointing> kCheckpointings[] = {{"none", Checkpointing::kNone},
                                                     {"selective", Checkpointing::kSelective},
                                                     {"full", Checkpointing::kFull}};
constexpr Choice<Attention> kAttentions[] = {
    {"sdpa", Attention::kSdpa}, {"flash", Attention::kFlash}, {"eager", Attention::kEager}};
constexpr Choice<Strategy> kStrategies[] = {{"none", Strategy::kNone},   {"ddp", Strategy::kDdp},
                                            {"fsdp", Strategy::kFsdp},   {"zero1", Strategy::kZero1},
                                            {"zero2", Strategy::kZero2}, {"zero3", Strategy::kZero3}};

template <typename Enum, std::size_t N>
std::string_view name_of(const Choice<Enum> (&choices)[N], Enum value) {
  for (const auto& c : choices)
    if (c.value == value) return c.name;
  return "?";
}

template <typename Enum, std::size_t N>
std::string names_of(const Choice<Enum> (&choices)[N]) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

/// Reads one table of the spec, remembering which keys were consumed so leftovers are errors.
class TableReader {
 public:
  TableReader(const toml::table* table, std::string source, std::string table_name)
      : table_(table), source_(std::move(source)), name_(std::move(table_name)) {}

  bool present() const { return table_ != nullptr; }

  std::optional<std::uint64_t> count(std::string_view key) {
    const toml::node* node = take(key);
    if (!node) return std::nullopt;
    auto value = node->value_exact<std::int64_t>();
    if (!value || *value < 1) fail(key, "must be a positive integer");
    return static_cast<std::uint64_t>(*value);
  }
  std::optional<bool> flag(std::string_view key) {
    const toml::node* node = take(key);
    if (!node) return std::nullopt;
    auto value = node->value_exact<bool>();
    if (!value) fail(key, "must be true or false");
    return *value;
  }
  std::optional<std::string> text(std::string_view key) {
    const toml::node* node = take(key);
    if (!node) return std::nullopt;
    auto value = node->value_exact<std::string>();
    if (!value) fail(key, "must be a string");
    return *value;
  }
  template <typename Enum, std::size_t N>
  std::optional<Enum> choice(std::string_view key, const Choice<Enum> (&choices)[N]) {
    auto value = text(key);
    if (!value) return std::nullopt;
    for (const auto& c : choices)
      if (c.name == *value) return c.value;
    fail(key, fmt::format("is \"{}\"; expected one of {}", *value, names_of(choices)));
  }
  std::uint64_t required(std::string_view key, std::optional<std::uint64_t> value) const {
    if (!value) fail(key, "is missing");
    return *value;
  }
  /// Every key of the table must have been read.
  void finish() const {
    if (!table_) return;
    for (const auto& [key, node] : *table_)
      if (!taken_.contains(std::string(key.str())))
        throw InputError(fmt::format("{}: unknown key [{}].{}", source_, name_, key.str()));
  }
  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw InputError(fmt::format("{}: [{}].{} {}", source_, name_, key, problem));
  }

 private:
  const toml::node* take(std::string_view key) {
    if (!table_) return nullptr;
    const toml::node* node = table_->get(key);
    if (node) taken_.insert(std::string(key));
    return node;
  }

  const toml::table* table_;
  std::string source_;
  std::string name_;
  std::set<std::string> taken_;
};

ModelShape read_model(TableReader& t) {
  ModelShape shape;
  if (auto preset = t.text("preset")) {
    auto found = find_model_preset(*preset);
    if (!found) t.fail("preset", fmt::format("is \"{}\"; known presets: {}", *preset, model_preset_names()));
    shape = *found;
  }
  const bool from_preset = !shape.preset.empty();
  auto take = [&](std::string_view key, std::uint64_t& field) {
    if (auto v = t.count(key)) field = *v;
    else if (!from_preset) t.fail(key, "is missing (or give preset = \"…\")");
  };
  take("hidden_size", shape.hidden_size);
  take("num_layers", shape.num_layers);
  take("num_attention_heads", shape.num_attention_heads);
  if (auto v = t.count("num_kv_heads")) shape.num_kv_heads = *v;
  else if (!from_preset) shape.num_kv_heads = shape.num_attention_heads;  // plain multi-head attention
  take("intermediate_size", shape.intermediate_size);
  take("vocab_size", shape.vocab_size);
  if (auto v = t.flag("tied_embeddings")) shape.tied_embeddings = *v;
  t.finish();
  return shape;
}

TrainingConfig read_training(TableReader& t) {
  TrainingConfig c;
  c.seq_len = t.required("seq_len", t.count("seq_len"));
  c.micro_batch_size = t.required("micro_batch_size", t.count("micro_batch_size"));
  if (auto v = t.count("grad_accum")) c.grad_accum = *v;
  if (auto v = t.choice("precision", kPrecisions)) c.precision = *v;
  if (auto v = t.choice("optimizer", kOptimizers)) c.optimizer = *v;
  if (auto v = t.choice("activation_checkpointing", kCheckpointings)) c.checkpointing = *v;
  if (auto v = t.choice("attention", kAttentions)) c.attention = *v;
  if (auto v = t.flag("variable_length")) c.variable_length = *v;
  if (auto v = t.flag("use_cache")) c.use_cache = *v;
  if (auto v = t.count("global_batch")) c.global_batch = *v;
  t.finish();
  return c;
}

ParallelConfig read_parallel(TableReader& t) {
  ParallelConfig c;
  if (auto v = t.choice("strategy", kStrategies)) c.strategy = *v;
  if (auto v = t.count("world_size")) c.world_size = *v;
  t.finish();
  return c;
}

HardwareConfig read_hardware(TableReader& t) {
  HardwareConfig c;
  auto gpu = t.text("gpu");
  if (!gpu) t.fail("gpu", fmt::format("is missing; known GPUs: {}", gpu_names_joined()));
  const GpuSpec* spec = find_gpu(*gpu);
  if (!spec) t.fail("gpu", fmt::format("is \"{}\"; known GPUs: {}", *gpu, gpu_names_joined()));
  c.gpu = std::string(spec->name);
  if (auto mig = t.text("mig")) c.mig = *mig;
  if (auto v = t.flag("expandable_segments")) c.expandable_segments = *v;
  t.finish();
  return c;
}

}  // namespace

std::string_view to_string(Precision value) { return name_of(kPrecisions, value); }
std::string_view to_string(Optimizer value) { return name_of(kOptimizers, value); }
std::string_view to_string(Checkpointing value) { return name_of(kCheckpointings, value); }
std::string_view to_string(Attention value) { return name_of(kAttentions, value); }
std::string_view to_string(Strategy value) { return name_of(kStrategies, value); }

void validate(const JobSpec& spec) {
  auto fail = [&](std::string_view key, std::string_view problem) {
    throw InputError(fmt::format("{}: {} {}", spec.source, key, problem));
  };
  const ModelShape& m = spec.model;
  if (m.hidden_size % m.num_attention_heads != 0)
    fail("[model].hidden_size", fmt::format("({}) is not divisible by num_attention_heads ({})", m.hidden_size,
                                            m.num_attention_heads));
  if (m.num_kv_heads == 0 || m.num_attention_heads % m.num_kv_heads != 0)
    fail("[model].num_kv_heads", fmt::format("({}) must divide num_attention_heads ({})", m.num_kv_heads,
                                             m.num_attention_heads));
  if (spec.parallel.strategy == Strategy::kNone && spec.parallel.world_size != 1)
    fail("[parallel].world_size", fmt::format("is {} but strategy is \"none\" (one GPU); use ddp, fsdp or zero*",
                                              spec.parallel.world_size));
  // Byte counts below stay far from 2^64: 10^6 layers of 10^6 hidden would not.
  constexpr std::uint64_t kSane = 1ull << 24;
  if (m.hidden_size > kSane || m.num_layers > kSane || m.intermediate_size > kSane || m.vocab_size > kSane ||
      spec.training.seq_len > kSane || spec.training.micro_batch_size > kSane)
    fail("[model]/[training]", "has a size beyond 16 Mi; not a real training job");
  constexpr std::uint64_t kMaxCount = 1ull << 20;
  if (spec.training.grad_accum > kMaxCount)
    fail("[training].grad_accum",
         fmt::format("({}) is beyond 1 Mi micro-steps per optimizer step; not a real training job",
                     spec.training.grad_accum));
  if (spec.parallel.world_size > kMaxCount)
    fail("[parallel].world_size",
         fmt::format("({}) is beyond 1 Mi GPUs; not a real training job", spec.parallel.world_size));
  if (const auto target = spec.training.global_batch; target && *target > kMaxGlobalBatch)
    fail("[training].global_batch", fmt::format("({}) is beyond 2^40 sequences; not a real training job", *target));
  // Within those ranges the products the model forms could still pass 2^64 (2^24 layers of
  // 2^24 hidden, 2^24-token sequences squared): bound each in 128 bits.
  using Wide = unsigned __int128;
  const Wide h = m.hidden_size, layers = m.num_layers, inter = m.intermediate_size, vocab = m.vocab_size;
  const Wide seq = spec.training.seq_len, tokens = seq * spec.training.micro_batch_size;
  const Wide parameters = layers * (4 * h * h + 3 * h * inter + 2 * h) + 2 * vocab * h + h;
  const Wide per_token = layers * (64 * h + 32 * inter + 32 * m.num_attention_heads * seq) + 32 * vocab;
  constexpr Wide kMaxBytes = Wide{1} << 62;
  if (64 * parameters > kMaxBytes || tokens * per_token > kMaxBytes || 8 * tokens * seq > kMaxBytes)
    fail("[model]/[training]", "sizes give a job of more than 4 EiB; not a real training job");
  if (Wide{spec.training.micro_batch_size} * spec.training.grad_accum * spec.parallel.world_size > kMaxGlobalBatch)
    fail("[training]",
         fmt::format("micro_batch_size {} × grad_accum {} × world_size {} is beyond 2^40 sequences per step",
                     spec.training.micro_batch_size, spec.training.grad_accum, spec.parallel.world_size));
  const GpuSpec* gpu = find_gpu(spec.hardware.gpu);
  if (!gpu) fail("[hardware].gpu", fmt::format("\"{}\" is unknown; known GPUs: {}", spec.hardware.gpu, gpu_names_joined()));
  if (!spec.hardware.mig.empty() && !find_mig_profile(*gpu, spec.hardware.mig)) {
    std::string profiles;
    for (const auto& p : gpu->mig_profiles) profiles += (profiles.empty() ? "" : ", ") + std::string(p.name);
    fail("[hardware].mig", fmt::format("\"{}\" is not a MIG profile of {}; {}", spec.hardware.mig, gpu->name,
                                       profiles.empty() ? "it has no MIG" : "its profiles: " + profiles));
  }
  if (auto target = spec.training.global_batch; target && *target < spec.parallel.world_size)
    fail("[training].global_batch", fmt::format("({}) is smaller than world_size ({})", *target,
                                                spec.parallel.world_size));
}

JobSpec parse_job_spec(std::string_view toml_text, std::string_view source_name) {
  const std::string source(source_name);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    std::string problem(e.description());
    std::replace(problem.begin(), problem.end(), '\n', ' ');
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, problem));
  }
  static const std::set<std::string> kTables = {"model", "training", "parallel", "hardware"};
  for (const auto& [key, node] : root) {
    if (!kTables.contains(std::string(key.str())))
      throw InputError(fmt::format("{}: unknown table or key [{}]", source, key.str()));
    if (!node.is_table()) throw InputError(fmt::format("{}: [{}] must be a table", source, key.str()));
  }
  auto table = [&](const char* name) { return TableReader(root[name].as_table(), source, name); };
  JobSpec spec;
  spec.source = source;
  auto model = table("model");
  if (!model.present()) throw InputError(fmt::format("{}: [model] table is missing", source));
  spec.model = read_model(model);
  auto training = table("training");
  if (!training.present()) throw InputError(fmt::format("{}: [training] table is missing", source));
  spec.training = read_training(training);
  auto parallel = table("parallel");
  spec.parallel = read_parallel(parallel);
  auto hardware = table("hardware");
  if (!hardware.present()) throw InputError(fmt::format("{}: [hardware] table is missing", source));
  spec.hardware = read_hardware(hardware);
  validate(spec);
  return spec;
}

JobSpec read_job_spec(const std::filesystem::path& path) {
  return parse_job_spec(read_bounded(path.string(), kMaxJobSpecBytes, "a job spec"), path.string());
}

}  // namespace fragscope::plan
