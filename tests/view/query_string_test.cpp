#include "view/query_string.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::view {
namespace {

TEST(QueryStringTest, DecodesValuesAndReadsBoundedNumbers) {
  const QueryString q("config=expandable_segments%3ATrue%2Cmax_split_size_mb:64&from=10&empty=&flag",
                      {"config", "from", "empty", "flag", "to"});
  EXPECT_EQ(q.text("config"), "expandable_segments:True,max_split_size_mb:64");
  EXPECT_EQ(q.number("from", 0, 100), 10u);
  EXPECT_EQ(q.number("to", 0, 100, 42), 42u);
  EXPECT_TRUE(q.has("flag"));
  EXPECT_EQ(q.text("flag"), "");
  EXPECT_EQ(q.text("to", "fallback"), "fallback");
  EXPECT_EQ(QueryString("a=x+y", {"a"}).text("a"), "x y");
}

TEST(QueryStringTest, RefusesWhatThePageNeverSends) {
  const auto reason = [](std::string_view query, std::string_view key = "") {
    try {
      const QueryString q(query, {"a", "b"});
      if (!key.empty()) q.number(key, 5, 10);
      return std::string();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(reason("c=1"), "unknown parameter 'c'");
  EXPECT_EQ(reason("a=1&a=2"), "parameter 'a' given twice");
  EXPECT_EQ(reason("a=%4"), "malformed percent-escape in the query");
  EXPECT_EQ(reason("a=%g1"), "malformed percent-escape in the query");
  EXPECT_EQ(reason("a=4", "a"), "parameter 'a' is 4: outside [5, 10]");
  EXPECT_EQ(reason("a=1e3", "a"), "parameter 'a' is not a whole number");
  EXPECT_EQ(reason("a=99999999999999999999999", "a"), "parameter 'a' is not a whole number");
  EXPECT_EQ(reason("", "b"), "parameter 'b' is required");
}

}  // namespace
}  // namespace fragscope::view
