#include "inputs/telemetry_reader.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inputs/json_input.h"
#include "inputs/text_file.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/input_file.h"

namespace fragscope::inputs {

namespace {

// A JSON value quoted in an error: one line, printable, bounded.
std::string shown(const nlohmann::json& value) {
  return printable_excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

class LineContext {
 public:
  LineContext(std::string_view source, std::size_t line) : source_(source), line_(line) {}

  [[noreturn]] void fail(std::string_view problem) const {
    throw InputError(fmt::format("{}:{}: {}", source_, line_, problem));
  }

  std::int64_t integer(const nlohmann::json& value, std::string_view field) const {
    if (value.is_number_integer()) {
      if (value.is_number_unsigned() &&
          value.get<std::uint64_t>() >
              static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(fmt::format("field \"{}\" is out of range", field));
      return value.get<std::int64_t>();
    }
    if (value.is_number_float()) {
      const double d = value.get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18)
        return static_cast<std::int64_t>(d);
    }
    fail(fmt::format("field \"{}\" must be an integer, found {}", field, shown(value)));
  }

  double number(const nlohmann::json& value, std::string_view field) const {
    if (value.is_number()) return value.get<double>();
    fail(fmt::format("field \"{}\" must be a number, found {}", field, shown(value)));
  }

  bool boolean(const nlohmann::json& value, std::string_view field) const {
    if (value.is_boolean()) return value.get<bool>();
    if (value.is_number_integer() && (value == 0 || value == 1)) return value == 1;
    fail(fmt::format("field \"{}\" must be true or false, found {}", field, shown(value)));
  }

  std::string text(const nlohmann::json& value, std::string_view field) const {
    if (value.is_string()) return value.get<std::string>();
    fail(fmt::format("field \"{}\" must be a string, found {}", field, shown(value)));
  }

  std::string phase_name(const nlohmann::json& value) const {
    std::string name = text(value, "phase");
    if (const std::string problem = phase_name_problem(name); !problem.empty())
      fail(fmt::format("field \"phase\" must be {}, found {}", problem, shown(value)));
    return name;
  }

  int small_integer(const nlohmann::json& value, std::string_view field) const {
    const auto v = integer(value, field);
    if (v < 0 || v > std::numeric_limits<int>::max())
      fail(fmt::format("field \"{}\" must be a non-negative integer, found {}", field, v));
    return static_cast<int>(v);
  }

  // An optional field's integer: the one that means absent (packed_optional.h) is out of range.
  std::int64_t optional_integer(const nlohmann::json& value, std::string_view field) const {
    const auto v = integer(value, field);
    if (v == PackedOptional<std::int64_t>::kAbsent) fail(fmt::format("field \"{}\" is out of range", field));
    return v;
  }

 private:
  std::string_view source_;
  std::size_t line_;
};

// Parses the lines of one read: the texts its lines repeat come from one pool, and a line's fields are
// gathered in scratch vectors that each record's maps are made from, exactly sized.
class RecordParser {
 public:
  StepRecord parse(std::string_view json_line, std::string_view source, std::size_t line);
  // What the parser holds besides the records: the pool of texts.
  std::size_t memory_bytes() const { return names_.memory_bytes(); }

 private:
  using Stats = std::vector<FieldMap<std::int64_t>::Field>;
  using Extra = std::vector<FieldMap<std::string>::Field>;
  SharedTextPool names_;
  Stats stats_;
  Extra extra_;
};

StepRecord RecordParser::parse(std::string_view json_line, std::string_view source, std::size_t line) {
  const LineContext ctx(source, line);
  nlohmann::json object;
  try {
    object = parse_json(json_line);
  } catch (const nlohmann::json::exception& e) {
    ctx.fail(fmt::format("invalid JSON: {}", json_error_text(e)));
  }
  if (!object.is_object()) ctx.fail(fmt::format("expected a JSON object, found {}", object.type_name()));
  if (!object.contains("step")) ctx.fail("missing field \"step\"");

  StepRecord record;
  record.line = line;
  stats_.clear();
  extra_.clear();
  for (const auto& [key, value] : object.items()) {  // in name order: nlohmann::json's objects are sorted
    if (value.is_null()) continue;  // the hook writes null for "not measured"
    if (key == "step") record.step = ctx.integer(value, key);
    else if (key == "seq_len") record.seq_len = ctx.optional_integer(value, key);
    else if (key == "mbs") record.mbs = ctx.optional_integer(value, key);
    else if (key == "optimizer_step") record.optimizer_step = ctx.boolean(value, key);
    else if (key == "data_wait_ms") record.data_wait_ms = ctx.number(value, key);
    else if (key == "compute_ms") record.compute_ms = ctx.number(value, key);
    else if (key == "t") record.t = ctx.number(value, key);
    else if (key == "phase") record.phase = names_.get(ctx.phase_name(value));
    else if (key == "rank") record.rank = ctx.small_integer(value, key);
    else if (key == "local_rank") record.local_rank = ctx.small_integer(value, key);
    else if (key == "tokens") record.tokens = ctx.optional_integer(value, key);
    else if (key == "max_seq_len") record.max_seq_len = ctx.optional_integer(value, key);
    else if (key == "queue_depth") record.queue_depth = ctx.optional_integer(value, key);
    else if (key == "device_total_bytes") record.device_total_bytes = ctx.optional_integer(value, key);
    else if (key == "h2d_ms") record.h2d_ms = ctx.number(value, key);
    else if (key == "samples_per_s") record.samples_per_s = ctx.number(value, key);
    else if (key == "tokens_per_s") record.tokens_per_s = ctx.number(value, key);
    else if (key == "step_time_ms") record.step_time_ms = ctx.number(value, key);
    else if (is_memory_stats_key(key)) stats_.push_back({names_.get(key), ctx.integer(value, key)});
    else extra_.push_back({names_.get(key), value.dump()});
  }
  if (record.data_wait_ms < 0 || record.compute_ms < 0)
    ctx.fail("data_wait_ms and compute_ms must not be negative");
  // Copies of the scratch vectors: exactly sized, where the scratch keeps its capacity for the next line.
  if (!stats_.empty()) record.memory_stats = FieldMap<std::int64_t>(Stats(stats_.begin(), stats_.end()));
  if (!extra_.empty())
    record.extra =
        FieldMap<std::string>(Extra(std::make_move_iterator(extra_.begin()), std::make_move_iterator(extra_.end())));
  return record;
}

}  // namespace

StepRecord parse_step_record(std::string_view json_line, std::string_view source, std::size_t line) {
  return RecordParser().parse(json_line, source, line);
}

namespace {

// Whether `text` is JSON cut off: the parser fails past its last byte (inside a number, a
// string, an object: it wanted more), not on one of them.
bool ends_too_soon(std::string_view text) {
  try {
    [[maybe_unused]] const auto parsed = parse_json(text);
  } catch (const nlohmann::json::parse_error& e) {
    return e.byte > text.size();
  }
  return false;
}

// The records as they are read: one vector that doubles would hold its old and new arrays at once as it
// grows (up to twice the records); past the first chunk's kChunkRecords they go to chunks of that many,
// moved into one vector of the exact size at the end. A chunk's array (50 MiB) is above glibc's largest
// mmap threshold (32 MiB): each goes back to the system as soon as it is moved out.
class RecordChunks {
 public:
  static constexpr std::size_t kChunkRecords = std::size_t{1} << 18;

  std::size_t size() const { return size_; }
  void push_back(StepRecord record) {
    if (chunks_.empty() || chunks_.back().size() == kChunkRecords) {
      chunks_.emplace_back();
      if (chunks_.size() > 1) chunks_.back().reserve(kChunkRecords);
    }
    chunks_.back().push_back(std::move(record));
    ++size_;
  }
  std::vector<StepRecord> take() && {
    if (chunks_.size() == 1) return std::move(chunks_.front());
    std::vector<StepRecord> all;
    all.reserve(size_);
    for (std::vector<StepRecord>& chunk : chunks_) {
      std::move(chunk.begin(), chunk.end(), std::back_inserter(all));
      std::vector<StepRecord>().swap(chunk);
    }
    return all;
  }

 private:
  std::vector<std::vector<StepRecord>> chunks_;
  std::size_t size_ = 0;
};

// Refuses a read whose records hold more than the lines read so far allow (telemetry_reader.h).
void check_memory(std::uint64_t held, std::uint64_t read, std::string_view source, std::size_t line) {
  if (held <= kTelemetryMemoryFloor + kTelemetryMemoryPerByte * read) return;
  throw InputError(fmt::format("{}:{}: the records need {} of memory for {} of lines, more than {} times that "
                               "plus {}: lines too short for step telemetry (a record takes {} bytes however short "
                               "its line)",
                               source, line, format_bytes(held), format_bytes(read), kTelemetryMemoryPerByte,
                               format_bytes(kTelemetryMemoryFloor), sizeof(StepRecord)));
}

// The records of the lines `next` yields (a line, whether it ended with '\n'). A last line that
// ended without '\n' inside its JSON was cut off by the writer's death: it is left out.
template <typename NextLine>
std::vector<StepRecord> read_records(NextLine next, std::string_view source, TelemetryNotes* notes) {
  RecordChunks records;
  RecordParser parser;
  std::string_view text;
  bool complete = true;
  std::size_t line = 0;
  std::uint64_t read = 0;  // bytes of the lines so far
  std::uint64_t held = 0;  // what the records hold of their own
  while (next(text, complete)) {
    ++line;
    read += text.size() + (complete ? 1 : 0);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (!complete && ends_too_soon(text)) {  // nothing follows a line without its '\n'
      if (notes) notes->cut_last_line = line;
      continue;
    }
    StepRecord record = parser.parse(text, source, line);
    held += sizeof(StepRecord) + record.heap_bytes();
    check_memory(held + parser.memory_bytes(), read, source, line);
    records.push_back(std::move(record));
  }
  if (records.size() == 0) throw InputError(fmt::format("{}: no telemetry records", source));
  return std::move(records).take();
}

}  // namespace

std::vector<StepRecord> read_telemetry(std::istream& in, std::string_view source, TelemetryNotes* notes) {
  std::string text;
  std::size_t line = 0;
  auto next = [&](std::string_view& out, bool& complete) {
    if (!std::getline(in, text)) return false;
    ++line;
    if (text.size() > kMaxTelemetryLineBytes)
      throw InputError(fmt::format("{}:{}: line longer than {} bytes", source, line, kMaxTelemetryLineBytes));
    complete = !in.eof();  // getline stops at the end of the input only when no '\n' came
    out = text;
    return true;
  };
  auto records = read_records(next, source, notes);
  if (in.bad()) throw InputError(fmt::format("{}: read error after line {}", source, line));
  return records;
}

std::vector<StepRecord> read_telemetry_file(const std::filesystem::path& path, TelemetryNotes* notes) {
  LineReader lines(open_input(path.string()), kMaxTelemetryLineBytes, LineReader::LongLines::kError,
                   kMaxTelemetryBytes, "a steps.jsonl");
  auto next = [&](std::string_view& out, bool& complete) {
    if (!lines.next(out)) return false;
    complete = lines.line_complete();
    return true;
  };
  return read_records(next, path.string(), notes);
}

}  // namespace fragscope::inputs
