#include "inputs/telemetry_writer.h"

#include <nlohmann/json.hpp>

namespace fragscope::inputs {

namespace {

template <typename Optional>
void put(nlohmann::ordered_json& object, const char* key, const Optional& value) {
  if (value) object[key] = *value;
}

}  // namespace

std::string format_step_record(const StepRecord& record) {
  nlohmann::ordered_json object;
  object["step"] = record.step;
  put(object, "seq_len", record.seq_len);
  put(object, "mbs", record.mbs);
  put(object, "optimizer_step", record.optimizer_step);
  object["data_wait_ms"] = record.data_wait_ms;
  object["compute_ms"] = record.compute_ms;
  put(object, "t", record.t);
  put(object, "phase", record.phase);
  put(object, "rank", record.rank);
  put(object, "local_rank", record.local_rank);
  put(object, "tokens", record.tokens);
  put(object, "max_seq_len", record.max_seq_len);
  put(object, "queue_depth", record.queue_depth);
  put(object, "device_total_bytes", record.device_total_bytes);
  put(object, "h2d_ms", record.h2d_ms);
  put(object, "samples_per_s", record.samples_per_s);
  put(object, "tokens_per_s", record.tokens_per_s);
  put(object, "step_time_ms", record.step_time_ms);
  for (const auto& [key, value] : record.memory_stats) object[*key] = value;
  // Extra values were valid JSON when read (or are documented to be when set by code).
  for (const auto& [key, json_text] : record.extra)
    object[*key] = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_telemetry(std::ostream& out, std::span<const StepRecord> records) {
  for (const auto& record : records) out << format_step_record(record) << '\n';
}

}  // namespace fragscope::inputs
