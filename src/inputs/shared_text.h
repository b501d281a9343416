#pragma once
/// @file shared_text.h
/// @brief An optional immutable text that copies share, and the pool a read takes them from.
///
/// Why: every line of a steps.jsonl repeats the same field names ("allocated_bytes.all.current") and
/// phases; a string per record and field cost more than the line itself. A read asks the pool for
/// each name it meets, so all its records hold one copy of it, by a pointer: 8 bytes however long (a
/// std::shared_ptr takes 16, and a record holds a dozen).
/// Thread-safety: a SharedText is a plain value (its count is atomic: copies of one text on several
/// threads are safe, as for std::shared_ptr); a pool belongs to one read.

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace fragscope::inputs {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::nullopt_t) {}  // NOLINT: absent, as std::optional
  /// @brief A text of its own (not shared with anything yet).
  SharedText(std::string_view text);                                    // NOLINT: as std::optional<std::string>
  SharedText(const char* text) : SharedText(std::string_view(text)) {}  // NOLINT: as above
  SharedText(const SharedText& other) noexcept;
  SharedText(SharedText&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
  SharedText& operator=(SharedText other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~SharedText();

  bool has_value() const { return block_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  /// @brief The text; only when has_value().
  const std::string& operator*() const { return block_->text; }
  const std::string* operator->() const { return &**this; }

  /// @brief Bytes the text takes, counted once however many share it (0 when absent).
  std::size_t text_bytes() const;
  /// @brief The same text held by the same allocation (a pool's, or a copy's).
  const void* identity() const { return block_; }

  /// Equal to a text when present and equal, as std::optional<std::string>.
  friend bool operator==(const SharedText& a, std::string_view b) { return a.has_value() && *a == b; }

 private:
  struct Block {  // the text and how many SharedTexts hold it
    std::atomic<std::size_t> holders{1};
    const std::string text;
  };
  Block* block_ = nullptr;
};

/// @brief One SharedText per distinct text met during a read.
class SharedTextPool {
 public:
  /// @brief The pool's text equal to `text`, made on first use.
  SharedText get(std::string_view text);
  /// @brief What the pool holds: its texts and its table.
  std::size_t memory_bytes() const;

 private:
  std::unordered_map<std::string_view, SharedText> texts_;  // keys view their value's text
  std::size_t text_bytes_ = 0;
};

}  // namespace fragscope::inputs
