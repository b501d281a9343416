#include "snapshot/parallel_reader.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "snapshot/pickle_machine.h"
#include "snapshot/pickle_splitter.h"
#include "snapshot/read_progress.h"
#include "snapshot/snapshot_builder.h"
#include "snapshot/stream_reader.h"

namespace fragscope::snapshot {

namespace {

constexpr std::uint64_t kMinPartedBytes = std::uint64_t{32} << 20;

/// The main machine's source: pauses where a part starts (the walks say where, ahead of it),
/// and after a part is taken over opens the stream again after it.
class PausingSource final : public ByteSource {
 public:
  PausingSource(std::unique_ptr<ByteSource> inner, SplitPlan& plan, const OpenSourceAt& reopen)
      : inner_(std::move(inner)), plan_(plan), reopen_(reopen) {}

  std::size_t read(std::span<std::uint8_t> out) override {
    const auto bytes = take(out.size());
    std::copy(bytes.begin(), bytes.end(), out.begin());
    return bytes.size();
  }
  std::span<const std::uint8_t> next_chunk() override { return take(~std::size_t{0}); }
  std::uint64_t input_consumed() const override { return inner_->input_consumed(); }
  std::uint64_t expected_size() const override { return inner_->expected_size(); }
  bool paused() const override { return paused_; }
  void lift_pause() override {  // a pause inside an opcode: the part cannot be taken over
    paused_ = false;
    floor_ = offset_ + 1;
  }

  std::size_t paused_part() const { return paused_part_; }
  /// Reads on from the pause, which is not made again.
  void read_on() { lift_pause(); }
  /// Goes on at `offset` (a part's end; a part may start right there).
  void skip_to(std::uint64_t offset) {
    paused_ = false;
    floor_ = offset;
    if (offset >= offset_ + pending_.size()) {
      inner_ = reopen_(offset);
      pending_ = {};
    } else {
      pending_ = pending_.subspan(static_cast<std::size_t>(offset - offset_));
    }
    offset_ = offset;
  }

 private:
  // Up to `max` bytes, up to the next part's start (then paused there).
  std::span<const std::uint8_t> take(std::size_t max) {
    if (paused_) return {};
    if (pending_.empty()) pending_ = inner_->next_chunk();
    if (pending_.empty()) return {};
    std::size_t n = std::min(max, pending_.size());
    if (const auto k = plan_.first_start_in(std::max(offset_, floor_), offset_ + n)) {
      const std::uint64_t start = plan_.start(*k)->offset;
      if (start == offset_) {
        paused_ = true;
        paused_part_ = *k;
        return {};
      }
      n = static_cast<std::size_t>(start - offset_);
    }
    const auto out = pending_.first(n);
    pending_ = pending_.subspan(n);
    offset_ += n;
    return out;
  }

  std::unique_ptr<ByteSource> inner_;
  SplitPlan& plan_;
  const OpenSourceAt& reopen_;
  std::span<const std::uint8_t> pending_;  // the rest of inner_'s last chunk
  std::uint64_t offset_ = 0;               // of pending_'s first byte
  std::uint64_t floor_ = 0;                // no pause before this offset
  bool paused_ = false;
  std::size_t paused_part_ = 0;
};

/// A part's source that ends early once the read is over (the main machine failed or is done).
class CancellableSource final : public ByteSource {
 public:
  CancellableSource(std::unique_ptr<ByteSource> inner, const std::atomic<bool>& cancelled)
      : inner_(std::move(inner)), cancelled_(cancelled) {}
  std::size_t read(std::span<std::uint8_t> out) override { return cancelled_ ? 0 : inner_->read(out); }
  std::span<const std::uint8_t> next_chunk() override {
    if (cancelled_) return {};
    return inner_->next_chunk();
  }
  std::uint64_t input_consumed() const override { return inner_->input_consumed(); }
  std::uint64_t expected_size() const override { return inner_->expected_size(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  const std::atomic<bool>& cancelled_;
};

/// One part parsed apart, with everything its taker reads.
struct Part {
  Snapshot snapshot;  // its strings and stacks
  std::unique_ptr<SnapshotBuilder> builder;
  std::unique_ptr<ByteSource> source;
  std::unique_ptr<pickle::Machine> machine;
  std::vector<pickle::PartOp> log;
  SnapshotBuilder::PartMaps maps;  // where the taker put its strings, frames and stacks
  PartStart start;
  bool parsed = false;
};

// The thread of part j: walks region j (every later part's memo base needs its count), then
// parses part j. A parse that fails leaves the part unparsed: the main machine reads it itself.
void parse_part(Part& part, std::size_t j, SplitPlan& plan, const OpenSourceAt& open_at, const std::string& name,
                const std::atomic<bool>& cancelled, const ReadLimits& limits) {
  try {
    const auto source = std::make_unique<CancellableSource>(open_at(plan.region_begin(j)), cancelled);
    walk_region(*source, plan, j);
  } catch (const std::exception&) {
    plan.set_region(j, {});  // could not open: not walked
  }
  const std::optional<PartStart> start = plan.start(j);
  if (!start) return;
  part.start = *start;
  std::vector<pickle::Value> known_before;
  for (const KnownString& s : plan.known_strings()) {
    if (s.memo_index >= start->memo_base) break;
    known_before.resize(s.memo_index + 1, pickle::Value::make(pickle::Kind::kMark, 0));
    known_before[s.memo_index] = pickle::Value::make(pickle::Kind::kString, part.snapshot.strings.intern(s.text));
  }
  part.source = std::make_unique<CancellableSource>(open_at(start->offset), cancelled);
  const std::uint64_t nominal_stop = plan.region_end(j);
  part.builder = std::make_unique<SnapshotBuilder>(
      part.snapshot, nominal_stop != ~std::uint64_t{0} ? nominal_stop - start->offset : part.source->expected_size());
  part.machine = std::make_unique<pickle::Machine>(*part.source, name, part.snapshot.strings, part.builder.get(),
                                                   std::function<void()>{}, limits);
  part.machine->start_part(start->offset, start->memo_base, known_before);
  const auto stop = [&] {
    const std::optional<PartStart> next = j + 1 < plan.region_count() ? plan.start(j + 1) : std::nullopt;
    return next ? next->offset : ~std::uint64_t{0};
  };
  part.machine->run_part(nominal_stop, stop, part.log);
  part.builder->end_part();
  part.source.reset();  // read to its end: its buffers go
  part.parsed = part.machine->part_memo_takeable();
}

}  // namespace

unsigned reader_parts(std::uint64_t stream_bytes) {
  if (const char* env = std::getenv("FRAGSCOPE_READER_PARTS")) {
    const long n = std::strtol(env, nullptr, 10);
    if (n >= 1 && n <= 64) return static_cast<unsigned>(n);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (stream_bytes < kMinPartedBytes || cores < 4) return 1;
  return std::min(8u, cores / 2);
}

Snapshot read_snapshot_in_parts(const OpenSourceAt& open_at, const ReadAt& read_at, const std::string& name,
                                std::uint64_t input_size, const ProgressCallback& progress, unsigned parts,
                                PartsTaken* taken_count, const ReadLimits& limits) {
  std::unique_ptr<ByteSource> main = open_at(0);
  const std::uint64_t expected = main->expected_size();
  SplitPlan plan(frame_bounds(read_at, expected ? expected : input_size, parts));  // uncompressed: the same
  if (taken_count) *taken_count = {plan.region_count() - 1, 0};
  if (plan.region_count() < 2) return read_snapshot(*main, name, input_size, progress, limits);  // not framed
  std::atomic<bool> cancelled = false;
  std::vector<Part> part(plan.region_count());  // part[j] starts in region j (part[0] is unused)
  std::vector<std::jthread> threads;  // joined on every way out, after `cancelled` is set
  struct Cancel {
    std::atomic<bool>& flag;
    std::vector<std::jthread>& threads;
    ~Cancel() {
      flag = true;
      threads.clear();
    }
  } cancel{cancelled, threads};
  threads.reserve(plan.region_count());
  // Parts run at once: each may hold its share of the ceiling (over it, the main machine reads it).
  const ReadLimits part_limits{limits.max_memory / plan.region_count()};
  try {
    threads.emplace_back([&] {
      try {
        const auto source = std::make_unique<CancellableSource>(open_at(0), cancelled);
        walk_region(*source, plan, 0);
      } catch (const std::exception&) {
        plan.set_known_strings({}, std::nullopt);
        plan.set_region(0, {});
      }
    });
    for (std::size_t j = 1; j < part.size(); ++j) {
      threads.emplace_back([&, j] {
        try {
          parse_part(part[j], j, plan, open_at, name, cancelled, part_limits);
        } catch (const std::exception&) {
          // Not parsed: the main machine reads these bytes itself.
        }
      });
    }
  } catch (const std::system_error&) {  // no more threads to be had: one thread reads it all
    cancelled = true;
    if (threads.empty()) plan.set_known_strings({}, std::nullopt);
    for (std::size_t j = threads.size(); j < plan.region_count(); ++j) plan.set_region(j, {});  // no waits left
    threads.clear();
    return read_snapshot(*main, name, input_size, progress, limits);
  }

  Snapshot snapshot;
  SnapshotBuilder builder(snapshot, expected);
  PausingSource source(std::move(main), plan, open_at);
  const pickle::Machine* running = nullptr;
  pickle::Machine machine(source, name, snapshot.strings, &builder,
                          machine_progress(progress, source, running, input_size), limits);
  running = &machine;
  pickle::Value top;
  while (!machine.run_until_pause(top)) {
    const std::size_t k = source.paused_part();
    const std::uint64_t at = machine.offset();
    threads[k].join();
    Part& p = part[k];
    const bool taken = p.parsed && p.start.offset == at && machine.can_absorb_part(*p.machine, p.log) &&
                       builder.can_absorb_part(*p.builder, machine, p.log);
    if (taken) {
      if (taken_count) ++taken_count->taken;
      builder.absorb_part(*p.builder, machine, p.maps);
      machine.absorb_part(*p.machine, p.log, builder.part_translation(p.maps));
      const std::uint64_t end = p.machine->offset();
      source.skip_to(end);
      machine.resume_at(end);
    } else {
      source.read_on();
      machine.resume_at(at);
    }
    p.builder.reset();  // its events are copied; its machine's memo is read when referenced
    p.log = {};
    p.snapshot = Snapshot{};
    if (!taken) p.machine.reset();
  }
  builder.finish(machine, top);
  report_read(progress, expected, input_size);
  return snapshot;
}

}  // namespace fragscope::snapshot
