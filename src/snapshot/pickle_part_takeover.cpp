// Taking over a part of the stream parsed apart by another machine (parallel_reader.h): the
// checks that it can be taken over exactly, its memo entries made values when referenced, its
// top-level log replayed.
#include <bit>

#include "snapshot/pickle_machine.h"

namespace fragscope::snapshot::pickle {

// An object standing for one a part made (counted there, so not again here).
Value Machine::typed_object(TypedRef ref) {
  objects_.push_back({ObjectKind::kTyped, ref.type, ref.index});
  return Value::make(Kind::kObject, objects_.size() - 1);
}

// An entry of a part taken over, made a value here on first use.
Value Machine::resolve_deferred(std::uint64_t local) {
  const std::uint64_t payload = memo_[local].payload();
  const AbsorbedPart& absorbed = absorbed_[payload >> 32];
  const Value v = absorbed.part->memo_[payload & 0xffffffffu];
  Value out = v;  // None, bools, small ints
  if (v.kind() == Kind::kString) {
    out = Value::make(Kind::kString, absorbed.translate.string(static_cast<StringId>(v.payload())));
  } else if (v.kind() == Kind::kForeign) {
    out = memo_value(v.payload());  // an entry here (the taker's memo base is 0), checked to exist by can_absorb_part
  } else if (v.kind() == Kind::kObject) {
    const TypedRef ref = absorbed.translate.typed(absorbed.part->typed(v));
    out = typed_object(ref);
  }
  memo_[local] = out;
  return out;
}

TypedRef Machine::memo_typed(std::uint64_t index) {
  const Value v = memo_value(index);
  if (v.kind() == Kind::kObject && objects_[v.payload()].kind == ObjectKind::kTyped) return typed(v);
  return {};
}

bool Machine::memo_string(std::uint64_t index, StringId& id) {
  const Value v = memo_value(index);
  if (v.kind() != Kind::kString) return false;
  id = static_cast<StringId>(v.payload());
  return true;
}

std::vector<std::uint64_t> Machine::foreign_references() const {
  std::vector<std::uint64_t> out;
  for (std::size_t w = 0; w < foreign_seen_.size(); ++w)
    for (std::uint64_t bits = foreign_seen_[w]; bits != 0; bits &= bits - 1)
      out.push_back(w * 64 + static_cast<std::uint64_t>(std::countr_zero(bits)));
  return out;
}

bool Machine::part_memo_takeable() const {
  for (const Value v : memo_) {
    const Kind k = v.kind();
    if (k == Kind::kObject && objects_[v.payload()].kind == ObjectKind::kTyped) continue;
    if (k != Kind::kNone && k != Kind::kBool && k != Kind::kInt && k != Kind::kString && k != Kind::kForeign)
      return false;
  }
  return true;
}

bool Machine::can_absorb_part(const Machine& part, std::span<const PartOp> log) const {
  if (memo_.size() != part.memo_base_ || memo_.size() + part.memo_.size() > kMaxValues) return false;
  for (const std::uint64_t i : part.foreign_references()) {
    if (i >= memo_.size() || memo_[i].kind() == Kind::kMark) return false;  // a whole-file parse fails there
    const Value known = i < part.known_before_.size() ? part.known_before_[i] : Value::make(Kind::kMark, 0);
    if (known.kind() == Kind::kString &&
        (memo_[i].kind() != Kind::kString || strings_.view(static_cast<StringId>(memo_[i].payload())) !=
                                                 part.strings_.view(static_cast<StringId>(known.payload()))))
      return false;
  }
  // The log on this stack: positions below `real` still hold this machine's values.
  std::size_t size = stack_.size(), real = stack_.size();
  // The counts the one-thread reader would have here: it made the part's objects and holds its items.
  std::uint64_t objects = objects_made_ + part.objects_made_, stored = stored_values_ + part.stored_values_;
  if (objects > kMaxValues || stored > kMaxValues) return false;
  std::vector<std::size_t> marks(marks_.begin(), marks_.end());
  for (const PartOp& op : log) {
    switch (op.kind) {
      case PartOp::kMark: marks.push_back(size); break;
      case PartOp::kPush:
        size += op.count;
        if (size > kMaxValues) return false;
        break;
      case PartOp::kAppends: {
        if (marks.empty()) return false;
        const std::size_t m = marks.back();
        marks.pop_back();
        if (m == 0 || (!marks.empty() && marks.back() >= m) || m - 1 >= real) return false;
        const Value container = stack_[m - 1];
        if (container.kind() != Kind::kObject || objects_[container.payload()].kind != ObjectKind::kList) return false;
        stored += size - m;
        if (stored > kMaxValues) return false;
        size = m;
        real = std::min(real, m);
        break;
      }
    }
  }
  return true;
}

void Machine::absorb_part(const Machine& part, std::span<const PartOp> log, PartTranslation translate) {
  const std::uint64_t slot = std::uint64_t{absorbed_.size()} << 32;
  const std::size_t count = part.memo_.size();
  for (std::size_t i = 0; i < count; ++i) memo_.push_back(Value::make(Kind::kDeferred, slot | i));
  absorbed_.push_back({&part, std::move(translate)});
  objects_made_ += part.objects_made_;
  stored_values_ += part.stored_values_;
  // The part's machine stays (its memo is read when referenced); its builder's events were copied.
  absorbed_bytes_ += part.machine_bytes();
  const PartTranslation& t = absorbed_.back().translate;
  for (const PartOp& op : log) {
    switch (op.kind) {
      case PartOp::kMark: marks_.push_back(stack_.size()); break;
      case PartOp::kPush: {  // each value as itself: ops after the part may count them
        const TypedRef first = t.typed({op.type, op.first});
        for (std::uint32_t i = 0; i < op.count; ++i) {
          if (stack_.full()) grow_stack();  // can_absorb_part checked the limit
          stack_.push_unchecked(typed_object({first.type, first.index + i}));
        }
        break;
      }
      case PartOp::kAppends: {
        const std::size_t m = pop_mark();
        add_list_items(stack_[m - 1], std::span(stack_).subspan(m));
        stack_.resize(m);
        break;
      }
    }
  }
  check_memory();  // with what was taken over; at this machine's offset, not where a one-thread read would stop
}

}  // namespace fragscope::snapshot::pickle
