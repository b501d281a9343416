#include "snapshot/string_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::snapshot {
namespace {

using namespace std::string_literals;

TEST(StringTable, EmptyStringIsIdZero) {
  StringTable table;
  EXPECT_EQ(table.intern(""), 0u);
  EXPECT_EQ(table.view(0), "");
  EXPECT_EQ(table.size(), 1u);
}

TEST(StringTable, EqualTextsShareAnIdAndViewsStayValid) {
  StringTable table;
  const StringId a = table.intern("alloc");
  const std::string_view view = table.view(a);
  for (int i = 0; i < 100000; ++i) table.intern("s" + std::to_string(i));  // growth moves nothing
  EXPECT_EQ(table.intern("alloc"), a);
  EXPECT_EQ(view, "alloc");
  EXPECT_EQ(table.intern(std::string(200, 'x')), table.intern(std::string(200, 'x')));
}

// Short strings go through a direct-mapped cache first: texts that share slots, prefixes,
// lengths or bytes up to a NUL must still get their own ids.
TEST(StringTable, ShortStringCacheNeverConfusesTexts) {
  StringTable table;
  std::vector<std::string> texts = {"a", "a\0"s, "\0"s, "\0\0"s, "ab", "abc", "N/A", "0123456789abcdef",
                                    "0123456789abcdeg", "0123456789abcdef0", "0123456789abcde"};
  for (int i = 0; i < 5000; ++i) texts.push_back("k" + std::to_string(i));  // many share a slot
  std::vector<StringId> ids;
  for (const std::string& t : texts) ids.push_back(table.intern(t));
  EXPECT_EQ(table.size(), texts.size() + 1);  // all distinct, plus ""
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < texts.size(); ++i) {
      ASSERT_EQ(table.intern(texts[i]), ids[i]) << i;
      ASSERT_EQ(table.view(ids[i]), texts[i]) << i;
    }
  }
}

// Inside a buffer the bytes after a short text are read and masked off: whatever they hold,
// the id is the one intern() gives.
TEST(StringTable, InternInBufferIgnoresTheBytesAfterTheText) {
  StringTable table;
  const std::string text = "0123456789abcdefXYZ";
  for (std::size_t n = 0; n <= text.size(); ++n) {
    SCOPED_TRACE(n);
    std::string buffer = text.substr(0, n) + std::string(16, static_cast<char>(0xa5));
    const StringId in_buffer = table.intern_in_buffer(std::string_view(buffer).substr(0, n));
    EXPECT_EQ(in_buffer, table.intern(text.substr(0, n)));
    buffer[n] = 'Q';  // other trailing bytes, same text
    EXPECT_EQ(table.intern_in_buffer(std::string_view(buffer).substr(0, n)), in_buffer);
    EXPECT_EQ(table.view(in_buffer), text.substr(0, n));
  }
}

// intern_in_buffer remembers the last text of up to 8 bytes (a trace entry's 'N/A'): a repeat
// answers from there, and a text that differs only in length or in one byte must not.
TEST(StringTable, InternInBufferRepeatsOnlyTheSameText) {
  StringTable table;
  auto in_buffer = [&](const std::string& text) {
    const std::string buffer = text + std::string(16, '\0');  // zeros after: as a NUL would read
    return table.intern_in_buffer(std::string_view(buffer).substr(0, text.size()));
  };
  const std::vector<std::string> sequence = {"N/A", "N/A", "N/B", "N/A", "ab", "ab\0"s, "ab", "",
                                             "\0"s, "", "12345678", "123456789", "12345678", "N/A"};
  for (const std::string& text : sequence) {
    SCOPED_TRACE(text.size());
    const StringId id = in_buffer(text);
    EXPECT_EQ(id, table.intern(text));
    EXPECT_EQ(table.view(id), text);
  }
  EXPECT_EQ(table.size(), 8u);  // "", N/A, N/B, ab, ab\0, \0, 12345678, 123456789
}

}  // namespace
}  // namespace fragscope::snapshot
