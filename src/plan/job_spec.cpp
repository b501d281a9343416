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
#include "util/toml_key_depth.h"

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
                                             {"mixed-bf16", Precision::kMixedBf16},
                                             {"bf16", Precision::kBf16},
                                             {"fp32", Precision::kFp32}};
constexpr Choice<Optimizer> kOptimizers[] = {{"adamw", Optimizer::kAdamW},
                                             {"adam", Optimizer::kAdam},
                                             {"adamw-8bit", Optimizer::kAdamW8bit},
                                             {"sgd", Optimizer::kSgd},
                                             {"lion", Optimizer::kLion}};
constexpr Choice<OptimizerImpl> kOptimizerImpls[] = {{"foreach", OptimizerImpl::kForeach},
                                                     {"fused", OptimizerImpl::kFused},
                                                     {"single-tensor", OptimizerImpl::kSingleTensor}};
constexpr Choice<Checkpointing> kCheckpointings[] = {{"none", Checkpointing::kNone},
                                                     {"selective", Checkpointing::kSelective},
                                                     {"full", Checkpointing::kFull}};
constexpr Choice<Attention> kAttentions[] = {
    {"sdpa", Attention::kSdpa}, {"flash", Attention::kFlash}, {"eager", Attention::kEager}};
constexpr Choice<Loss> kLosses[] = {
    {"standard", Loss::kStandard}, {"chunked", Loss::kChunked}, {"fused", Loss::kFused}};
constexpr Choice<CpuOffload> kOffloads[] = {
    {"none", CpuOffload::kNone}, {"optimizer", CpuOffload::kOptimizer}, {"parameters", CpuOffload::kParameters}};
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
  bool has_alloc_conf() const { return table_ && table_->contains("alloc_conf"); }

  std::optional<std::uint64_t> count(std::string_view key) {
    const toml::node* node = take(key);
    if (!node) return std::nullopt;
    auto value = node->value_exact<std::int64_t>();
    if (!value || *value < 1) fail(key, "must be a positive integer");
    return static_cast<std::uint64_t>(*value);
  }
  std::optional<double> positive_number(std::string_view key) {
    const toml::node* node = take(key);
    if (!node) return std::nullopt;
    auto value = node->value<double>();  // an integer is a number too
    if (!value || !(*value > 0) || *value > 1e6) fail(key, "must be a positive number");
    return *value;
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
  if (auto v = t.choice("optimizer_impl", kOptimizerImpls)) c.optimizer_impl = *v;
  if (auto v = t.choice("activation_checkpointing", kCheckpointings)) c.checkpointing = *v;
  if (auto v = t.count("checkpointed_layers")) c.checkpointed_layers = *v;
  if (auto v = t.choice("attention", kAttentions)) c.attention = *v;
  if (auto v = t.flag("variable_length")) c.variable_length = *v;
  if (auto v = t.count("min_seq_len")) c.min_seq_len = *v;
  if (auto v = t.count("median_seq_len")) c.median_seq_len = *v;
  if (auto v = t.positive_number("length_sigma")) c.length_sigma = *v;
  if (auto v = t.flag("use_cache")) c.use_cache = *v;
  if (auto v = t.count("global_batch")) c.global_batch = *v;
  if (auto v = t.choice("loss", kLosses)) c.loss = *v;
  if (auto v = t.count("loss_chunk_tokens")) c.loss_chunk_tokens = *v;
  if (auto v = t.choice("cpu_offload", kOffloads)) c.cpu_offload = *v;
  t.finish();
  return c;
}

EvalConfig read_eval(TableReader& t) {
  EvalConfig c;
  c.micro_batch_size = t.required("micro_batch_size", t.count("micro_batch_size"));
  c.seq_len = t.required("seq_len", t.count("seq_len"));
  if (auto v = t.count("every")) c.every = *v;
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
  if (auto mig = t.text("mig")) {  // as the catalogue spells it (matched loosely); an unknown one is refused below
    const MigProfile* profile = find_mig_profile(*spec, *mig);
    c.mig = profile ? std::string(profile->name) : *mig;
  }
  if (auto conf = t.text("alloc_conf")) {
    try {
      c.alloc_config = alloc::parse_alloc_conf(*conf);
    } catch (const InputError& e) {
      t.fail("alloc_conf", fmt::format("is not a PYTORCH_CUDA_ALLOC_CONF PyTorch accepts: {}", e.what()));
    }
  }
  if (auto v = t.flag("expandable_segments")) {
    if (t.has_alloc_conf() && c.alloc_config.expandable_segments != *v)
      t.fail("expandable_segments", "contradicts [hardware].alloc_conf; say it in one place");
    c.alloc_config.expandable_segments = *v;
  }
  t.finish();
  return c;
}

/// Applies one "table.key=value" override to the parsed document.
void apply_override(toml::table& root, const std::string& override_text) {
  const std::string where = fmt::format("--set {}", override_text);
  const auto equals = override_text.find('=');
  const auto dot = override_text.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals)
    throw InputError(fmt::format("{}: expected table.key=value (e.g. training.micro_batch_size=2)", where));
  const std::string table = override_text.substr(0, dot);
  const std::string key = override_text.substr(dot + 1, equals - dot - 1);
  std::string value = override_text.substr(equals + 1);
  static const std::set<std::string> kTables = {"model", "training", "eval", "parallel", "hardware"};
  if (!kTables.contains(table) || key.empty() || value.empty())
    throw InputError(fmt::format("{}: expected table.key=value with table one of model, training, eval, parallel, "
                                 "hardware",
                                 where));
  refuse_deep_toml_keys(value, where);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    try {  // a bare word is a string: --set training.precision=bf16
      parsed = toml::parse("v = \"" + value + "\"");
    } catch (const toml::parse_error&) {
      throw InputError(fmt::format("{}: the value is neither TOML nor a plain word", where));
    }
  }
  if (!root.contains(table)) root.insert(table, toml::table{});
  toml::table* target = root[table].as_table();
  if (!target) throw InputError(fmt::format("{}: [{}] is not a table", where, table));
  target->insert_or_assign(key, *parsed.get("v"));
}

}  // namespace

std::string_view to_string(Precision value) { return name_of(kPrecisions, value); }
std::string_view to_string(Optimizer value) { return name_of(kOptimizers, value); }
std::string_view to_string(OptimizerImpl value) { return name_of(kOptimizerImpls, value); }
std::string_view to_string(Checkpointing value) { return name_of(kCheckpointings, value); }
std::string_view to_string(Attention value) { return name_of(kAttentions, value); }
std::string_view to_string(Strategy value) { return name_of(kStrategies, value); }
std::string_view to_string(Loss value) { return name_of(kLosses, value); }
std::string_view to_string(CpuOffload value) { return name_of(kOffloads, value); }

ComputeMode compute_mode(const JobSpec& spec) {
  switch (spec.training.precision) {
    case Precision::kFp32: return ComputeMode::kFp32;
    case Precision::kBf16:
    case Precision::kMixedBf16: return ComputeMode::kLowPrecision;
    case Precision::kAmpBf16:
    case Precision::kAmpFp16: return ComputeMode::kAutocast;
  }
  return ComputeMode::kAutocast;
}

void validate(const JobSpec& spec) {
  auto fail = [&](std::string_view key, std::string_view problem) {
    throw InputError(fmt::format("{}: {} {}", spec.source, key, problem));
  };
  const ModelShape& m = spec.model;
  // Byte counts stay far from 2^64: 10^6 layers of 10^6 hidden would not.
  constexpr std::uint64_t kSane = 1ull << 24;
  if (m.hidden_size % m.num_attention_heads != 0)
    fail("[model].hidden_size", fmt::format("({}) is not divisible by num_attention_heads ({})", m.hidden_size,
                                            m.num_attention_heads));
  if (m.num_kv_heads == 0 || m.num_attention_heads % m.num_kv_heads != 0)
    fail("[model].num_kv_heads", fmt::format("({}) must divide num_attention_heads ({})", m.num_kv_heads,
                                             m.num_attention_heads));
  const Strategy strategy = spec.parallel.strategy;
  if (spec.training.precision == Precision::kMixedBf16 && (strategy == Strategy::kNone || strategy == Strategy::kDdp))
    fail("[training].precision", "\"mixed-bf16\" (bf16 compute copies of fp32 master weights) needs strategy fsdp or "
                                 "zero*; on one GPU or DDP use \"amp-bf16\" (autocast) or \"bf16\"");
  if (spec.parallel.strategy == Strategy::kNone && spec.parallel.world_size != 1)
    fail("[parallel].world_size", fmt::format("is {} but strategy is \"none\" (one GPU); use ddp, fsdp or zero*",
                                              spec.parallel.world_size));
  if (m.hidden_size > kSane || m.num_layers > kSane || m.intermediate_size > kSane || m.vocab_size > kSane ||
      spec.training.seq_len > kSane || spec.training.micro_batch_size > kSane)
    fail("[model]/[training]", "has a size beyond 16 Mi; not a real training job");
  if (spec.eval && (spec.eval->micro_batch_size > kSane || spec.eval->seq_len > kSane))
    fail("[eval]", "has a size beyond 16 Mi; not an eval pass");
  constexpr std::uint64_t kMaxCount = 1ull << 20;
  if (spec.training.grad_accum > kMaxGradAccum)
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
  __extension__ typedef unsigned __int128 Wide;  // GCC and Clang; not ISO C++
  const Wide h = m.hidden_size, layers = m.num_layers, inter = m.intermediate_size, vocab = m.vocab_size;
  const Wide parameters = layers * (4 * h * h + 3 * h * inter + 2 * h) + 2 * vocab * h + h;
  constexpr Wide kMaxBytes = Wide{1} << 62;
  const auto pass_too_large = [&](Wide seq, Wide batch) {  // a forward and backward of batch × seq tokens
    const Wide tokens = seq * batch;
    const Wide per_token = layers * (64 * h + 32 * inter + 32 * m.num_attention_heads * seq) + 32 * vocab;
    return tokens * per_token > kMaxBytes || 8 * tokens * seq > kMaxBytes;
  };
  if (64 * parameters > kMaxBytes || pass_too_large(spec.training.seq_len, spec.training.micro_batch_size))
    fail("[model]/[training]", "sizes give a job of more than 4 EiB; not a real training job");
  if (spec.eval && pass_too_large(spec.eval->seq_len, spec.eval->micro_batch_size))
    fail("[eval]", "sizes give an eval pass of more than 4 EiB; not a real training job");
  if (Wide{spec.training.micro_batch_size} * spec.training.grad_accum * spec.parallel.world_size > kMaxGlobalBatch)
    fail("[training]",
         fmt::format("micro_batch_size {} × grad_accum {} × world_size {} is beyond 2^40 sequences per step",
                     spec.training.micro_batch_size, spec.training.grad_accum, spec.parallel.world_size));
  const GpuSpec* gpu = find_gpu(spec.hardware.gpu);
  if (!gpu)
    fail("[hardware].gpu", fmt::format("\"{}\" is unknown; known GPUs: {}", spec.hardware.gpu, gpu_names_joined()));
  if (!spec.hardware.mig.empty() && !find_mig_profile(*gpu, spec.hardware.mig)) {
    std::string profiles;
    for (const auto& p : gpu->mig_profiles) profiles += (profiles.empty() ? "" : ", ") + std::string(p.name);
    fail("[hardware].mig", fmt::format("\"{}\" is not a MIG profile of {}; {}", spec.hardware.mig, gpu->name,
                                       profiles.empty() ? "it has no MIG" : "its profiles: " + profiles));
  }
  const TrainingConfig& t = spec.training;
  if (auto target = t.global_batch) {
    const std::uint64_t step = t.micro_batch_size * spec.parallel.world_size;
    if (*target % step != 0) {
      const std::uint64_t below = *target / step * step, above = below + step;
      fail("[training].global_batch",
           fmt::format("({}) cannot be reached: every optimizer step takes a multiple of micro_batch_size × "
                       "world_size = {} sequences; the nearest reachable are {}{}",
                       *target, step, below ? fmt::format("{} and ", below) : "", above));
    }
  }
  if (t.checkpointed_layers) {
    if (t.checkpointing != Checkpointing::kFull)
      fail("[training].checkpointed_layers", "needs activation_checkpointing = \"full\"");
    if (*t.checkpointed_layers > m.num_layers)
      fail("[training].checkpointed_layers",
           fmt::format("({}) is more than num_layers ({})", *t.checkpointed_layers, m.num_layers));
  }
  if (t.min_seq_len || t.median_seq_len || t.length_sigma) {
    if (!t.variable_length)
      fail("[training].min_seq_len", "(and median_seq_len, length_sigma) need variable_length = true");
    const std::uint64_t lo = t.min_seq_len.value_or(1), mid = t.median_seq_len.value_or(lo);
    if (lo > t.seq_len || mid < lo || mid > t.seq_len)
      fail("[training].median_seq_len",
           fmt::format("must satisfy min_seq_len ({}) ≤ median_seq_len ({}) ≤ seq_len ({})", lo, mid, t.seq_len));
  }
  if (t.cpu_offload == CpuOffload::kParameters && strategy != Strategy::kFsdp)
    fail("[training].cpu_offload", "\"parameters\" is FSDP2's CPUOffloadPolicy: it needs strategy fsdp");
  if (t.cpu_offload == CpuOffload::kOptimizer && (strategy == Strategy::kNone || strategy == Strategy::kDdp))
    fail("[training].cpu_offload", "\"optimizer\" needs DeepSpeed (zero*) or FSDP2 (fsdp); stock PyTorch keeps "
                                   "the optimizer on the GPU");
  if (t.loss != Loss::kStandard && t.loss_chunk_tokens > 1u << 20)
    fail("[training].loss_chunk_tokens", "is above 1 Mi tokens; not a chunk");
}

JobSpec parse_job_spec(std::string_view toml_text, std::string_view source_name,
                       std::span<const std::string> overrides) {
  const std::string source(source_name);
  refuse_deep_toml_keys(toml_text, source);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    std::string problem(e.description());
    std::replace(problem.begin(), problem.end(), '\n', ' ');
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, problem));
  }
  for (const auto& o : overrides) apply_override(root, o);
  static const std::set<std::string> kTables = {"model", "training", "eval", "parallel", "hardware"};
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
  if (auto eval = table("eval"); eval.present()) spec.eval = read_eval(eval);
  auto parallel = table("parallel");
  spec.parallel = read_parallel(parallel);
  auto hardware = table("hardware");
  if (!hardware.present()) throw InputError(fmt::format("{}: [hardware] table is missing", source));
  spec.hardware = read_hardware(hardware);
  validate(spec);
  return spec;
}

JobSpec read_job_spec(const std::filesystem::path& path, std::span<const std::string> overrides) {
  return parse_job_spec(read_bounded(path.string(), kMaxJobSpecBytes, "a job spec"), path.string(), overrides);
}

}  // namespace fragscope::plan
