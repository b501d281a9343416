#include "diagnose/step_alignment.h"

#include <algorithm>
#include <optional>

namespace fragscope::diagnose {
namespace {

/// Events either side of a record's time searched for its figures: the record is written a
/// few frees or allocations of another thread away from the step's last event.
constexpr std::ptrdiff_t kWindowEvents = 8;

struct Figures {
  std::uint64_t reserved = 0;
  std::uint64_t requested = 0;
};

std::optional<Figures> figures_of(const inputs::StepRecord& record) {
  const auto reserved = record.memory_stat("reserved_bytes.all.current");
  const auto requested = record.memory_stat("requested_bytes.all.current");
  if (!reserved || !requested || *reserved < 0 || *requested < 0) return std::nullopt;
  return Figures{static_cast<std::uint64_t>(*reserved), static_cast<std::uint64_t>(*requested)};
}

class Aligner {
 public:
  Aligner(std::span<const snapshot::TraceEvent> trace, const RecordedCurve& curve) : curve_(curve) {
    // Threads stamp their events a little out of order: search the running maximum.
    times_.reserve(trace.size());
    std::int64_t latest = 0;
    for (const snapshot::TraceEvent& e : trace) times_.push_back(latest = std::max(latest, e.time_us));
  }

  bool holds(std::size_t event, const Figures& f) const {
    return curve_.reserved[event] == f.reserved && curve_.allocated[event] == f.requested;
  }

  /// The last event at or before `time_us`, if any.
  std::optional<std::size_t> event_at(double time_us) const {
    const auto it = std::upper_bound(times_.begin(), times_.end(), time_us,
                                     [](double t, std::int64_t e) { return t < static_cast<double>(e); });
    if (it == times_.begin()) return std::nullopt;
    return static_cast<std::size_t>(it - times_.begin()) - 1;
  }

  /// The event nearest `around` within the window that holds `f`.
  std::optional<std::size_t> matching_near(std::size_t around, const Figures& f) const {
    const auto n = static_cast<std::ptrdiff_t>(times_.size());
    const auto at = static_cast<std::ptrdiff_t>(around);
    for (std::ptrdiff_t d = 0; d <= kWindowEvents; ++d)
      for (const std::ptrdiff_t i : {at - d, at + d})
        if (i >= 0 && i < n && holds(static_cast<std::size_t>(i), f)) return static_cast<std::size_t>(i);
    return std::nullopt;
  }

  /// Midpoint of the time the state after `event` lasted.
  double settled_time(std::size_t event) const {
    const auto now = static_cast<double>(times_[event]);
    return event + 1 < times_.size() ? (now + static_cast<double>(times_[event + 1])) / 2 : now;
  }

  std::size_t size() const { return times_.size(); }

 private:
  const RecordedCurve& curve_;
  std::vector<std::int64_t> times_;
};

}  // namespace

std::vector<AlignedStep> align_steps_to_trace(std::span<const inputs::StepRecord> records,
                                              std::span<const snapshot::TraceEvent> trace, const RecordedCurve& curve) {
  if (trace.empty() || curve.reserved.size() != trace.size() || trace.front().time_us == 0) return {};
  struct Usable {
    std::size_t record;
    double t_us;
    Figures figures;
  };
  std::vector<Usable> usable;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].t)
      if (const auto f = figures_of(records[i])) usable.push_back({i, *records[i].t * 1e6, *f});
  if (usable.empty()) return {};

  const Aligner aligner(trace, curve);
  std::optional<double> best_offset;
  std::size_t best_score = 0;
  for (std::size_t event = 0; event < aligner.size(); ++event) {
    if (!aligner.holds(event, usable.front().figures)) continue;
    const double offset = aligner.settled_time(event) - usable.front().t_us;
    std::size_t score = 0;
    for (const Usable& u : usable)
      if (const auto at = aligner.event_at(offset + u.t_us); at && aligner.matching_near(*at, u.figures)) ++score;
    if (score > best_score) {
      best_score = score;
      best_offset = offset;
    }
  }
  const bool enough = 2 * best_score >= usable.size() && (usable.size() < 2 || best_score >= 2);
  if (!best_offset || !enough) return {};

  std::vector<AlignedStep> steps;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!records[i].t) continue;
    const auto at = aligner.event_at(*best_offset + *records[i].t * 1e6);
    if (!at) continue;
    const auto f = figures_of(records[i]);
    const auto matched = f ? aligner.matching_near(*at, *f) : std::nullopt;
    steps.push_back({i, matched.value_or(*at), matched.has_value()});
  }
  return steps;
}

}  // namespace fragscope::diagnose
