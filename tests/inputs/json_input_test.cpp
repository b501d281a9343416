// parse_json_object: a recorded stats.json reads whole; anything else is one line naming the
// source and the problem (where in the text, or what type was found).
#include "inputs/json_input.h"

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "inputs/text_file.h"
#include "util/error.h"

namespace fragscope::inputs {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_json_object(text, "run/stats.json", "memory_stats");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ParseJsonObject, ReadsARecordedStatsFile) {
  const auto path = testing::fixtures_dir() / "frag_oom_104" / "stats.json";
  const auto j =
      parse_json_object(read_text_file(path, kMaxMemoryStatsBytes, "memory_stats"), path.string(), "memory_stats");
  const auto truth = testing::read_json(testing::fixtures_dir() / "frag_oom_104" / "truth.json");
  EXPECT_EQ(j.at("reserved_bytes.all.current"), truth["total_reserved"]);
  EXPECT_EQ(j.at("num_ooms"), truth["num_ooms"]);
  EXPECT_EQ(j.at("num_alloc_retries"), truth["num_alloc_retries"]);
}

TEST(ParseJsonObject, TruncatedTextSaysWhereOnOneLine) {
  const std::string whole =
      read_text_file(testing::fixtures_dir() / "frag_oom_104" / "stats.json", kMaxMemoryStatsBytes, "memory_stats");
  const std::string e = error_of(whole.substr(0, whole.size() / 2));
  EXPECT_EQ(e.rfind("run/stats.json: invalid JSON: ", 0), 0u) << e;
  EXPECT_NE(e.find("line "), std::string::npos) << e;
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << "library tag stripped: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

// Review: 100,000 nested arrays (200 KB) parsed, then overflowed the stack in nlohmann's recursive dump(): rc 139.
TEST(ParseJsonObject, NestingDeeperThan64IsAParseError) {
  const std::string deep = "{\"version\":1,\"x\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  EXPECT_EQ(error_of(deep), "run/stats.json: invalid JSON: parse error: nested deeper than 64");
  const std::string fine = "{\"x\":" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_NO_THROW(parse_json_object(fine, "run/stats.json", "memory_stats"));
}

TEST(ParseJsonObject, OtherDocumentsNameTheTypeFound) {
  EXPECT_EQ(error_of("[1, 2]"), "run/stats.json: memory_stats must be a JSON object, found array");
  EXPECT_EQ(error_of("42"), "run/stats.json: memory_stats must be a JSON object, found number");
  EXPECT_EQ(error_of("null"), "run/stats.json: memory_stats must be a JSON object, found null");
}

TEST(ParseJsonObject, NonStandardJsonIsRefused) {
  for (const char* text : {"{\"a\": NaN}", "{\"a\": 1} // note", "{\"a\": 1,}", "", "{\"a\": 1} {\"b\": 2}"}) {
    const std::string e = error_of(text);
    EXPECT_EQ(e.rfind("run/stats.json: invalid JSON: ", 0), 0u) << text << " → " << e;
  }
}

TEST(ParseJsonObject, HostileBytesInTheTextDoNotReachTheMessage) {
  const std::string e = error_of(std::string("{\"a\": \x1b[31m\n\x01\xff}", 13));
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << "no terminal escape in the error";
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(e.find('\xff'), std::string::npos);
}

}  // namespace
}  // namespace fragscope::inputs
