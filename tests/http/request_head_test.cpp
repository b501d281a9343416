#include "http/request_head.h"

#include <gtest/gtest.h>

namespace fragscope::http {
namespace {

using Status = RequestHead::Status;

TEST(RequestHeadTest, ACompleteHeadGivesMethodPathQueryAndHost) {
  const std::string text =
      "GET /api/timeline?from=0&to=99#top HTTP/1.1\r\nHost: 127.0.0.1:8123 \r\nAccept: */*\r\n\r\nrest";
  const RequestHead head = parse_request_head(text);
  ASSERT_EQ(head.status, Status::kComplete) << head.error;
  EXPECT_EQ(head.method, "GET");
  EXPECT_EQ(head.path, "/api/timeline");
  EXPECT_EQ(head.query, "from=0&to=99");
  EXPECT_EQ(head.host, "127.0.0.1:8123");
  EXPECT_EQ(head.head_bytes, text.size() - 4);
}

TEST(RequestHeadTest, NoQueryAndNoHostAreEmpty) {
  const RequestHead head = parse_request_head("HEAD /#only-a-fragment HTTP/1.0\n\n");
  ASSERT_EQ(head.status, Status::kComplete);
  EXPECT_EQ(head.path, "/");
  EXPECT_EQ(head.query, "");
  EXPECT_EQ(head.host, "");
}

TEST(RequestHeadTest, TheHostHeaderNameIsCaseInsensitiveAndMayAppearOnce) {
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nhOsT:localhost\r\n\r\n").host, "localhost");
  const RequestHead twice = parse_request_head("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
  EXPECT_EQ(twice.status, Status::kBad);
  EXPECT_EQ(twice.error_status, 400);
  EXPECT_EQ(twice.error, "more than one Host header");
}

// Which page made a request, for a server that answers only its own (the view's /api/).
TEST(RequestHeadTest, OriginAndSecFetchSiteAreKeptTheFirstOfEach) {
  const RequestHead head = parse_request_head(
      "GET /api/whatif HTTP/1.1\r\nHost: 127.0.0.1:8123\r\nsec-fetch-site:  cross-site \r\n"
      "Origin: https://evil.example\r\nOrigin: http://127.0.0.1:8123\r\n\r\n");
  ASSERT_EQ(head.status, Status::kComplete) << head.error;
  EXPECT_EQ(head.sec_fetch_site, "cross-site");
  EXPECT_EQ(head.origin, "https://evil.example");
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\n\r\n").origin, "");
}

TEST(RequestHeadTest, AnIncompleteHeadWaitsAndABadOneSaysWhy) {
  EXPECT_EQ(parse_request_head("GET /x HTTP/1.1\r\nHost: a").status, Status::kIncomplete);
  EXPECT_EQ(parse_request_head("PUT /x HTTP/1.1\r\n\r\n").error_status, 405);
  EXPECT_EQ(parse_request_head("GET x HTTP/1.1\r\n\r\n").error_status, 400);
  EXPECT_EQ(parse_request_head("GET /x HTTP/3.0\r\n\r\n").error_status, 505);
  EXPECT_EQ(parse_request_head(std::string(100, 'G'), 64).error_status, 431);
}

}  // namespace
}  // namespace fragscope::http
