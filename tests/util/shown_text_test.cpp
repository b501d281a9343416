// Text from inputs made safe to show: what a terminal acts on, and what is not UTF-8.
#include "util/shown_text.h"

#include <gtest/gtest.h>

#include <string>

namespace fragscope {
namespace {

TEST(ShownText, TerminalSafeReplacesWhatATerminalActsOn) {
  EXPECT_EQ(terminal_safe("a\x1b[2J\x1b]0;title\x07 b\r\x7f"), "a?[2J?]0;title? b??");
  EXPECT_EQ(terminal_safe(std::string("nul\0end", 7)), "nul?end");
  EXPECT_EQ(terminal_safe("csi\xc2\x9b" "31m"), "csi?31m");                       // a C1 control, U+009B
  EXPECT_EQ(terminal_safe("run\xe2\x80\xae" "yp.exe"), "run?yp.exe");             // U+202E, right-to-left override
  EXPECT_EQ(terminal_safe("x\xe2\x81\xa6" "y\xe2\x81\xa9"), "x?y?");              // U+2066, U+2069 isolates
  EXPECT_EQ(terminal_safe("a\xe2\x80\xa8" "b\xe2\x80\x8f" "c"), "a?b?c");        // U+2028, U+200F
}

TEST(ShownText, TerminalSafeKeepsLinesTabsAndUtf8) {
  const std::string text = "évaluation\tstep 3\n模型.py:12 in forward — 4.59 GiB 🚀\n";
  EXPECT_EQ(terminal_safe(text), text);
}

TEST(ShownText, BytesThatAreNotUtf8BecomeOneMarkEach) {
  EXPECT_EQ(terminal_safe("bytes\xff.py"), "bytes?.py");
  EXPECT_EQ(terminal_safe("\x80\xbf"), "??");                  // stray continuations
  EXPECT_EQ(terminal_safe("\xc0\xaf"), "??");                  // an overlong '/'
  EXPECT_EQ(terminal_safe("\xe0\x80\xaf"), "???");             // overlong in three bytes
  EXPECT_EQ(terminal_safe("bad\xed\xa0\x80utf"), "bad???utf");  // a lone surrogate, U+D800
  EXPECT_EQ(terminal_safe("\xf4\x90\x80\x80"), "????");        // past U+10FFFF
  EXPECT_EQ(terminal_safe("cut\xe6\xa8"), "cut??");            // a sequence cut short
}

TEST(ShownText, ValidUtf8ReplacesWithTheReplacementCharacter) {
  EXPECT_EQ(valid_utf8("bytes\xff.py"), "bytes\xef\xbf\xbd.py");
  EXPECT_EQ(valid_utf8(std::string("nul\0\x1b", 5)), "nul\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(valid_utf8("line\n\tmodèle"), "line\n\tmodèle");
}

TEST(ShownText, OneLineSafeAlsoShowsNewlinesAndTabs) {
  EXPECT_EQ(one_line_safe("a\nb\tc\x1b[2J\xe2\x80\xae" "d"), "a?b?c?[2J?d");
  EXPECT_EQ(one_line_safe("modèle.py:12"), "modèle.py:12");
}

TEST(ShownText, ANameIsShownOnOneLineAndCutAroundAnEllipsis) {
  EXPECT_EQ(shown_name("train.py"), "train.py");
  EXPECT_EQ(shown_name("fake\nfragscope doctor · verdict: ok\t\x1b[2J"), "fake?fragscope doctor · verdict: ok??[2J");
  EXPECT_EQ(shown_name(std::string(1000, 'a') + "/modeling_llama.py", 40), std::string(20, 'a') + "…" +
                                                                                std::string(2, 'a') +
                                                                                "/modeling_llama.py");
  // The cuts move off a character's continuation bytes: two-byte "é"s are never split.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "é";
  const std::string shown = shown_name(accents, 11);
  EXPECT_EQ(shown, "éé…ééé");
  EXPECT_EQ(terminal_safe(shown), shown);
}

constexpr const char* kFffd = "\xEF\xBF\xBD";

std::string r(int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += kFffd;
  return out;
}

TEST(PrintableText, PrintableUtf8PassesUnchanged) {
  for (const char* text :
       {"", "llama-sft", "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001", "caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC",
        "\xF0\x9F\x9A\x80 launch", "tab\xC2\xA0nbsp", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_EQ(printable_text(text), text) << text;
  }
}

TEST(PrintableText, InvalidBytesAndControlsBecomeReplacementCharacters) {
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

TEST(PrintableText, IsIdempotent) {
  for (const char* text : {"bad\xFF\xFEjob", "\x1B[31m\xC0\xAF", "ok"}) {
    EXPECT_EQ(printable_text(printable_text(text)), printable_text(text));
  }
}

TEST(PrintableText, FormatControlsAndLineSeparatorsToo) {
  EXPECT_EQ(printable_text("job\xE2\x80\xAE" "exe\xE2\x80\xA8"), "job" + r(1) + "exe" + r(1));  // U+202E, U+2028
}

}  // namespace
}  // namespace fragscope
