#include "agent/rank_simulator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/shown_text.h"

namespace fragscope::agent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uintmax_t kMaxStepsFileBytes = std::uintmax_t{1} << 30;
constexpr std::size_t kWindowSteps = 20;  // the hook's default window (python/fragscope/recorder.py)
constexpr auto kHeartbeat = std::chrono::seconds(1);
constexpr auto kTick = std::chrono::milliseconds(50);
constexpr double kMinPassSeconds = 0.1;  // a one-step run recorded at t=0 must not spin

std::uint64_t unix_ns_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
}

/// Reads one line's fields, naming the file and line in every error.
class LineReader {
 public:
  LineReader(const nlohmann::json& line, const std::string& where) : line_(line), where_(where) {}

  double seconds_from_ms(const char* key, bool required) { return number(key, required) / 1e3; }

  double number(const char* key, bool required) {
    const auto found = line_.find(key);
    if (found == line_.end()) {
      if (required) throw InputError(fmt::format("{}: missing \"{}\"", where_, key));
      return 0;
    }
    if (!found->is_number() || !(found->get<double>() >= 0) || !std::isfinite(found->get<double>())) {
      throw InputError(fmt::format("{}: \"{}\" must be a number >= 0", where_, key));
    }
    return found->get<double>();
  }

  std::uint64_t count(const char* key) {
    const auto found = line_.find(key);
    if (found != line_.end() && found->is_number_unsigned()) return found->get<std::uint64_t>();
    return static_cast<std::uint64_t>(number(key, false));
  }

  JobPhase phase() {
    const auto found = line_.find("phase");
    if (found == line_.end()) return JobPhase::kTrain;
    for (JobPhase phase : kHookPhases) {
      if (found->is_string() && found->get<std::string>() == phase_name(phase)) return phase;
    }
    throw InputError(fmt::format("{}: \"phase\" must be \"train\", \"eval\" or \"checkpoint\"", where_));
  }

 private:
  const nlohmann::json& line_;
  const std::string& where_;
};

RecordedStep parse_step(const std::string& text, const std::string& where) {
  const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object()) throw InputError(fmt::format("{}: not a JSON object", where));
  LineReader read(line, where);
  RecordedStep step;
  step.end_seconds = read.number("t", true);
  step.data_wait_seconds = read.seconds_from_ms("data_wait_ms", true);
  step.compute_seconds = read.seconds_from_ms("compute_ms", true);
  step.h2d_seconds = read.seconds_from_ms("h2d_ms", false);
  step.samples = read.count("mbs");
  step.longest_sequence = read.count("seq_len");
  step.tokens = line.contains("tokens") ? read.count("tokens") : step.samples * step.longest_sequence;
  step.phase = read.phase();
  step.allocated_bytes = read.count("allocated_bytes.all.current");
  step.reserved_bytes = read.count("reserved_bytes.all.current");
  step.active_bytes = read.count("active_bytes.all.current");
  step.inactive_split_bytes = read.count("inactive_split_bytes.all.current");
  step.requested_bytes = read.count("requested_bytes.all.current");
  step.allocated_peak_bytes = read.count("allocated_bytes.all.peak");
  step.reserved_peak_bytes = read.count("reserved_bytes.all.peak");
  step.alloc_retries = read.count("num_alloc_retries");
  step.ooms = read.count("num_ooms");
  step.segments = read.count("segment.all.current");
  return step;
}

/// memory.total of the last sample in nvidia-smi's CSV (`--format=csv`: "143771 MiB").
std::uint64_t device_total_from_smi_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string header;
  if (!in || !std::getline(in, header)) throw InputError(fmt::format("{}: cannot read", path.string()));
  std::vector<std::string> columns;
  for (std::istringstream cells(header); std::getline(cells, columns.emplace_back(), ',');) {
  }
  std::size_t total_column = columns.size();
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].find("memory.total [MiB]") != std::string::npos) total_column = i;
  }
  if (total_column == columns.size()) throw InputError(fmt::format("{}: no memory.total [MiB] column", path.string()));
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  std::istringstream cells(last);
  std::string cell;
  for (std::size_t i = 0; i <= total_column && std::getline(cells, cell, ','); ++i) {
  }
  const std::size_t digits = cell.find_first_not_of(' ');
  char* end = nullptr;
  const std::uint64_t mib = digits == std::string::npos ? 0 : std::strtoull(cell.c_str() + digits, &end, 10);
  if (mib == 0 || mib > (std::uint64_t{1} << 40) || std::string_view(end).find("MiB") == std::string_view::npos) {
    throw InputError(fmt::format("{}: memory.total is not a number of MiB in its last line", path.string()));
  }
  return mib << 20;
}

}  // namespace

RecordedRun load_recorded_run(const std::filesystem::path& path) {
  std::error_code error;
  const bool folder = std::filesystem::is_directory(path, error);
  const std::filesystem::path steps_path = folder ? path / "steps.jsonl" : path;
  struct stat info {};
  if (::stat(steps_path.c_str(), &info) != 0) {
    throw InputError(fmt::format("{}: cannot read the recorded steps: {}", steps_path.string(), std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) throw InputError(fmt::format("{}: not a regular file", steps_path.string()));
  if (static_cast<std::uintmax_t>(info.st_size) > kMaxStepsFileBytes) {
    throw InputError(fmt::format("{}: {} bytes, more than the {} a recorded run may have", steps_path.string(),
                                 info.st_size, kMaxStepsFileBytes));
  }
  RecordedRun run;
  const std::filesystem::path folder_path = folder ? path : steps_path.parent_path();
  run.name = folder || steps_path.filename() == "steps.jsonl"
                 ? std::filesystem::absolute(folder_path).lexically_normal().filename().string()
                 : steps_path.stem().string();
  if (run.name.empty()) {
    run.name = std::filesystem::absolute(folder_path).lexically_normal().parent_path().filename().string();
  }
  std::ifstream in(steps_path);
  if (!in) throw InputError(fmt::format("{}: cannot open", steps_path.string()));
  std::string text;
  for (std::size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", steps_path.string(), number);
    if (run.steps.size() == kMaxRecordedSteps) {
      throw InputError(fmt::format("{}: more than {} steps", where, kMaxRecordedSteps));
    }
    RecordedStep step = parse_step(text, where);
    if (!run.steps.empty() && step.end_seconds < run.steps.back().end_seconds) {
      throw InputError(fmt::format("{}: \"t\" goes backwards ({} after {})", where, step.end_seconds,
                                   run.steps.back().end_seconds));
    }
    run.steps.push_back(step);
  }
  if (run.steps.empty()) throw InputError(fmt::format("{}: no steps", steps_path.string()));
  const auto smi = folder_path / "smi.csv";
  if (std::filesystem::is_regular_file(smi, error)) run.device_total_bytes = device_total_from_smi_csv(smi);
  return run;
}

/// One replayed run: its record, its file, where it is in the recording.
struct RankSimulator::SimulatedRank {
  RecordedRun run;
  RankRecord record;
  std::unique_ptr<RankFileWriter> writer;
  Clock::time_point start;
  std::size_t next = 0;       // index of the next step to publish
  double pass_start = 0;      // recorded seconds at which the current pass began
  std::uint64_t retries_before = 0, ooms_before = 0;  // counters at the end of earlier passes
  std::deque<RecordedStep> window;
  Clock::time_point last_write;
  std::uint64_t pending_checkpoint = 0;

  Clock::time_point due(double speed) const {
    const double at = (pass_start + run.steps[next].end_seconds) / speed;
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
  }

  void take_step() {
    const RecordedStep& s = run.steps[next];
    RankRecord& r = record;
    const double step_seconds = s.data_wait_seconds + s.compute_seconds;
    window.push_back(s);
    if (window.size() > kWindowSteps) window.pop_front();
    double window_step = 0, window_wait = 0, window_samples = 0;
    for (const auto& w : window) {
      window_step += w.data_wait_seconds + w.compute_seconds;
      window_wait += w.data_wait_seconds;
      window_samples += static_cast<double>(w.samples);
    }
    r.phase = s.phase;
    r.step += 1;
    r.step_unix_ns = r.update_unix_ns = unix_ns_now();
    r.allocated_bytes = s.allocated_bytes;
    r.reserved_bytes = s.reserved_bytes;
    r.active_bytes = s.active_bytes;
    r.inactive_split_bytes = s.inactive_split_bytes;
    r.requested_bytes = s.requested_bytes;
    r.allocated_peak_bytes = s.allocated_peak_bytes;
    r.reserved_peak_bytes = s.reserved_peak_bytes;
    r.alloc_retries = retries_before + s.alloc_retries;
    r.ooms = ooms_before + s.ooms;
    r.segments = s.segments;
    r.batch_samples = s.samples;
    r.batch_tokens = s.tokens;
    r.batch_longest_sequence = s.longest_sequence;
    r.samples_total += s.samples;
    r.tokens_total += s.tokens;
    r.step_seconds = step_seconds;
    r.data_wait_seconds = s.data_wait_seconds;
    r.h2d_seconds = s.h2d_seconds;
    r.compute_seconds = s.compute_seconds;
    r.data_wait_ratio = window_step > 0 ? window_wait / window_step : 0;
    r.samples_per_second = window_step > 0 ? window_samples / window_step : 0;
    r.step_seconds_total += step_seconds;
    r.data_wait_seconds_total += s.data_wait_seconds;
    if (pending_checkpoint > r.checkpoint_ack) r.checkpoint_ack = pending_checkpoint;
    if (++next == run.steps.size()) {  // the next pass continues the counters
      next = 0;
      pass_start += std::max(run.steps.back().end_seconds, kMinPassSeconds);
      retries_before = r.alloc_retries;
      ooms_before = r.ooms;
    }
  }

  /// The agent's request id from the flag file beside the rank file (0: none or unreadable).
  void read_checkpoint_request() {
    std::ifstream in(writer->path().string() + ".checkpoint");
    std::uint64_t id = 0;
    if (in >> id) pending_checkpoint = std::max(pending_checkpoint, id);
  }
};

RankSimulator::RankSimulator(std::vector<RecordedRun> runs, const std::filesystem::path& rank_dir, double speed)
    : speed_(speed) {
  std::error_code error;
  std::filesystem::create_directories(rank_dir, error);
  std::set<std::string> names;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!names.insert(runs[i].name).second) {
      throw InputError(fmt::format("--simulate: two recorded runs are named '{}'; training jobs must differ",
                                   runs[i].name));
    }
    auto rank = std::make_unique<SimulatedRank>();
    rank->run = std::move(runs[i]);
    RankRecord& r = rank->record;
    r.pid = ::getpid();
    r.gpu = static_cast<std::int32_t>(i);
    r.job = printable_text(rank->run.name);  // a folder's name, as a rank file's job is read
    r.device_total_bytes = rank->run.device_total_bytes;
    r.throughput_totals_known = true;
    r.update_unix_ns = unix_ns_now();
    rank->start = rank->last_write = now;
    // The agent reads only the hook's names, rank<R>-pid<P>.fsr; one process writes every run,
    // so R is the run's index here (each record says rank 0 of its own job).
    rank->writer = std::make_unique<RankFileWriter>(rank_dir / fmt::format("rank{}-pid{}.fsr", i, r.pid), r);
    ranks_.push_back(std::move(rank));
  }
  thread_ = std::thread([this] { loop(); });
}

RankSimulator::~RankSimulator() {
  stop_.store(true);
  thread_.join();
}

std::vector<std::filesystem::path> RankSimulator::rank_files() const {
  std::vector<std::filesystem::path> files;
  for (const auto& rank : ranks_) files.push_back(rank->writer->path());
  return files;
}

void RankSimulator::loop() {
  try {
    while (!stop_.load()) {
      const auto now = Clock::now();
      for (auto& rank : ranks_) {
        rank->read_checkpoint_request();
        bool stepped = false;
        while (rank->due(speed_) <= now) {
          rank->take_step();
          stepped = true;
        }
        if (stepped || now - rank->last_write >= kHeartbeat) {
          rank->record.update_unix_ns = unix_ns_now();
          rank->writer->publish(rank->record);
          rank->last_write = now;
        }
      }
      std::this_thread::sleep_for(kTick);
    }
  } catch (const InputError& e) {
    std::cerr << "fragscope: simulate: " << e.what() << " (the simulated ranks stop)\n";
  }
}

}  // namespace fragscope::agent
