#include "agent/printable_text.h"

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

constexpr const char* kFffd = "\xEF\xBF\xBD";

std::string r(int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += kFffd;
  return out;
}

TEST(PrintableTextTest, PrintableUtf8PassesUnchanged) {
  for (const char* text :
       {"", "llama-sft", "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001", "caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC",
        "\xF0\x9F\x9A\x80 launch", "tab\xC2\xA0nbsp", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_EQ(printable_text(text), text) << text;
  }
}

TEST(PrintableTextTest, InvalidBytesAndControlsBecomeReplacementCharacters) {
  EXPECT_EQ(printable_text("bad\xFF\xFEjob"), "bad" + r(2) + "job");
  EXPECT_EQ(printable_text("\x1B[31mred"), r(1) + "[31mred");
  EXPECT_EQ(printable_text("a\nb\tc\x7F"), "a" + r(1) + "b" + r(1) + "c" + r(1));
  EXPECT_EQ(printable_text("\xC2\x85"), r(1));                  // C1 control NEL
  EXPECT_EQ(printable_text("\xC0\xAF"), r(2));                  // overlong '/'
  EXPECT_EQ(printable_text("\xED\xA0\x80"), r(3));              // surrogate D800
  EXPECT_EQ(printable_text("\xF4\x90\x80\x80"), r(4));          // past U+10FFFF
  EXPECT_EQ(printable_text("caf\xC3"), "caf" + r(1));          // cut in half
  EXPECT_EQ(printable_text("\xE6\x97"), r(2));
}

TEST(PrintableTextTest, IsIdempotent) {
  for (const char* text : {"bad\xFF\xFEjob", "\x1B[31m\xC0\xAF", "ok"}) {
    EXPECT_EQ(printable_text(printable_text(text)), printable_text(text));
  }
}

}  // namespace
}  // namespace fragscope::agent
