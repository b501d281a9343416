#include "inputs/acceptance_criteria.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "inputs/json_input.h"
#include "inputs/step_telemetry.h"
#include "inputs/text_file.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::inputs {

namespace {

// A JSON value quoted in an error: one line, printable, bounded.
std::string shown(const nlohmann::json& value) {
  return printable_excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

class Fields {
 public:
  Fields(const nlohmann::json& object, std::string_view source) : object_(object), source_(source) {}

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw InputError(fmt::format("{}: \"{}\" {}", source_, key, problem));
  }

  void fraction(const char* key, double& out, bool allow_zero = true) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (!v.is_number()) fail(key, fmt::format("must be a number, found {}", shown(v)));
    const double d = v.get<double>();
    if (!(d >= 0 && d <= 1) || (!allow_zero && d == 0))
      fail(key, fmt::format("must be a fraction in {}0, 1], found {}", allow_zero ? "[" : "(", shown(v)));
    out = d;
  }

  void spread(const char* key, double& out) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      fail(key, fmt::format("must be a non-negative number, found {}", shown(v)));
    out = v.get<double>();
  }

  void count(const char* key, std::int64_t& out) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t{1} << 62))
      fail(key, fmt::format("must be a non-negative integer, found {}", shown(v)));
    out = v.get<std::int64_t>();
  }

  void flag(const char* key, bool& out) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("must be true or false, found {}", shown(v)));
    out = v.get<bool>();
  }

  void bytes(const char* key, std::optional<std::uint64_t>& out) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > 0) {
      out = v.get<std::uint64_t>();
    } else if (v.is_string() && parse_bytes(v.get<std::string>()).value_or(0) > 0) {
      out = parse_bytes(v.get<std::string>());  // "141GB", "80 GiB"
    } else if (!v.is_null()) {
      fail(key, fmt::format("must be a positive byte count (85899345920 or \"80 GiB\"), found {}", shown(v)));
    }
  }

  void phases(const char* key, std::vector<std::string>& out) const {
    if (!object_.contains(key)) return;
    const auto& v = object_.at(key);
    if (!v.is_array()) fail(key, fmt::format("must be a list of phase names, found {}", shown(v)));
    out.clear();
    for (const auto& phase : v) {
      if (!phase.is_string() || phase.get<std::string>().empty())
        fail(key, fmt::format("must hold non-empty strings, found {}", shown(phase)));
      if (const std::string problem = phase_name_problem(phase.get<std::string>()); !problem.empty())
        fail(key, fmt::format("must hold phase names, each {}, found {}", problem, shown(phase)));
      out.push_back(phase.get<std::string>());
    }
  }

 private:
  const nlohmann::json& object_;
  std::string_view source_;
};

constexpr const char* kKeys[] = {"version",          "device_memory_bytes",   "max_hbm_fraction",
                                 "max_data_wait_fraction", "max_gpu_idle_fraction", "allow_oom",
                                 "max_alloc_retries", "required_phases",      "max_step_time_spread",
                                 "max_throughput_spread", "warmup_steps"};

}  // namespace

AcceptanceCriteria parse_acceptance_criteria(std::string_view json_text, std::string_view source) {
  const nlohmann::json document = parse_json_object(json_text, source, "acceptance criteria");
  for (const auto& [key, value] : document.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      throw InputError(fmt::format("{}: unknown key \"{}\" (known: {})", source, key,
                                   fmt::join(std::begin(kKeys), std::end(kKeys), ", ")));
  }
  if (!document.contains("version"))
    throw InputError(fmt::format("{}: missing \"version\" (this fragscope reads version {})", source,
                                 kAcceptanceCriteriaVersion));
  if (document["version"] != kAcceptanceCriteriaVersion)
    throw InputError(fmt::format("{}: unsupported \"version\" {} (this fragscope reads version {})",
                                 source, document["version"].dump(), kAcceptanceCriteriaVersion));
  AcceptanceCriteria criteria;
  const Fields fields(document, source);
  fields.bytes("device_memory_bytes", criteria.device_memory_bytes);
  fields.fraction("max_hbm_fraction", criteria.max_hbm_fraction, /*allow_zero=*/false);
  fields.fraction("max_data_wait_fraction", criteria.max_data_wait_fraction);
  fields.fraction("max_gpu_idle_fraction", criteria.max_gpu_idle_fraction);
  fields.flag("allow_oom", criteria.allow_oom);
  fields.count("max_alloc_retries", criteria.max_alloc_retries);
  fields.phases("required_phases", criteria.required_phases);
  fields.spread("max_step_time_spread", criteria.max_step_time_spread);
  fields.spread("max_throughput_spread", criteria.max_throughput_spread);
  fields.count("warmup_steps", criteria.warmup_steps);
  return criteria;
}

AcceptanceCriteria read_acceptance_criteria_file(const std::filesystem::path& path) {
  return parse_acceptance_criteria(read_text_file(path, kMaxCriteriaBytes, "a criteria file"), path.string());
}

nlohmann::ordered_json acceptance_criteria_json(const AcceptanceCriteria& criteria) {
  nlohmann::ordered_json object;
  object["version"] = criteria.version;
  if (criteria.device_memory_bytes) object["device_memory_bytes"] = *criteria.device_memory_bytes;
  object["max_hbm_fraction"] = criteria.max_hbm_fraction;
  object["max_data_wait_fraction"] = criteria.max_data_wait_fraction;
  object["max_gpu_idle_fraction"] = criteria.max_gpu_idle_fraction;
  object["allow_oom"] = criteria.allow_oom;
  object["max_alloc_retries"] = criteria.max_alloc_retries;
  object["required_phases"] = criteria.required_phases;
  object["max_step_time_spread"] = criteria.max_step_time_spread;
  object["max_throughput_spread"] = criteria.max_throughput_spread;
  object["warmup_steps"] = criteria.warmup_steps;
  return object;
}

void write_acceptance_criteria(std::ostream& out, const AcceptanceCriteria& criteria) {
  out << acceptance_criteria_json(criteria).dump(2) << '\n';
}

}  // namespace fragscope::inputs
