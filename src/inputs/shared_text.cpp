#include "inputs/shared_text.h"

namespace fragscope::inputs {

SharedText::SharedText(std::string_view text) : block_(new Block{.text = std::string(text)}) {}

SharedText::SharedText(const SharedText& other) noexcept : block_(other.block_) {
  if (block_) block_->holders.fetch_add(1, std::memory_order_relaxed);
}

SharedText::~SharedText() {
  // The last holder deletes; acquire-release so that it sees every other holder done with the text.
  if (block_ && block_->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete block_;
}

std::size_t SharedText::text_bytes() const {
  if (!block_) return 0;
  // The block, then the string's own buffer when the text does not fit inside the string.
  static const std::size_t inline_capacity = std::string().capacity();
  const std::size_t buffer = block_->text.capacity() > inline_capacity ? block_->text.capacity() + 1 : 0;
  return sizeof(Block) + buffer;
}

SharedText SharedTextPool::get(std::string_view text) {
  if (const auto it = texts_.find(text); it != texts_.end()) return it->second;
  SharedText made(text);
  text_bytes_ += made.text_bytes();
  texts_.emplace(*made, made);
  return made;
}

std::size_t SharedTextPool::memory_bytes() const {
  // A node: its link, its key and value, its cached hash; and a pointer per bucket.
  const std::size_t node = sizeof(void*) + sizeof(decltype(texts_)::value_type) + sizeof(std::size_t);
  return text_bytes_ + texts_.size() * node + texts_.bucket_count() * sizeof(void*);
}

}  // namespace fragscope::inputs
