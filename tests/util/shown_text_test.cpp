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

}  // namespace
}  // namespace fragscope
