#include "http/request_head.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

namespace fragscope::http {
namespace {

// RFC 9110 token characters.
bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char); }

RequestHead bad(int status, std::string reason) {
  RequestHead head;
  head.status = RequestHead::Status::kBad;
  head.error_status = status;
  head.error = std::move(reason);
  return head;
}

/// The request line; fills method and path, or returns the error.
std::optional<RequestHead> parse_request_line(std::string_view line, RequestHead& head) {
  const auto first_space = line.find(' ');
  const auto last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    return bad(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = line.substr(last_space + 1);
  if (!is_token(method)) return bad(400, "malformed method");
  if (target.empty() || target.front() != '/' ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
    return bad(400, "malformed request target");
  }
  if (version != "HTTP/1.0" && version != "HTTP/1.1") {
    const bool looks_like_http = version.size() == 8 && version.starts_with("HTTP/") && version[6] == '.' &&
                                 version[5] >= '0' && version[5] <= '9' && version[7] >= '0' && version[7] <= '9';
    return looks_like_http ? bad(505, "HTTP version not supported") : bad(400, "malformed HTTP version");
  }
  if (method != "GET" && method != "HEAD") return bad(405, fmt::format("method {} not allowed", method));
  head.method = std::string(method);
  const std::string_view without_fragment = target.substr(0, target.find('#'));
  const auto question = without_fragment.find('?');
  head.path = std::string(without_fragment.substr(0, question));
  if (question != std::string_view::npos) head.query = std::string(without_fragment.substr(question + 1));
  return std::nullopt;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

/// One header line; keeps the Host, Origin and Sec-Fetch-Site headers' values in `head`.
std::optional<RequestHead> check_header_line(std::string_view line, RequestHead& head, bool& seen_host) {
  if (line.front() == ' ' || line.front() == '\t') return bad(400, "obsolete header line folding");
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return bad(400, "malformed header");
  const std::string_view value = line.substr(colon + 1);
  const bool clean = std::all_of(value.begin(), value.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte == '\t' || (byte >= 0x20 && byte != 0x7f);
  });
  if (!clean) return bad(400, "control character in a header value");
  if (equals_ignoring_case(line.substr(0, colon), "host")) {
    if (seen_host) return bad(400, "more than one Host header");
    seen_host = true;
    head.host = std::string(trimmed(value));
  } else if (equals_ignoring_case(line.substr(0, colon), "origin") && head.origin.empty()) {
    head.origin = std::string(trimmed(value));
  } else if (equals_ignoring_case(line.substr(0, colon), "sec-fetch-site") && head.sec_fetch_site.empty()) {
    head.sec_fetch_site = std::string(trimmed(value));
  }
  return std::nullopt;
}

}  // namespace

RequestHead parse_request_head(std::string_view received, std::size_t max_head_bytes) {
  RequestHead head;
  bool seen_host = false;
  const auto too_large = [&] {
    return bad(431, fmt::format("request head larger than {} bytes", max_head_bytes));
  };
  for (std::size_t start = 0, line_number = 0;; ++line_number) {
    const auto newline = received.find('\n', start);
    if (newline == std::string_view::npos) return received.size() > max_head_bytes ? too_large() : RequestHead{};
    if (newline + 1 > max_head_bytes) return too_large();
    std::string_view line = received.substr(start, newline - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    start = newline + 1;
    if (line_number == 0) {
      if (auto error = parse_request_line(line, head)) return std::move(*error);
    } else if (line.empty()) {
      head.status = RequestHead::Status::kComplete;
      head.head_bytes = start;
      return head;
    } else if (auto error = check_header_line(line, head, seen_host)) {
      return std::move(*error);
    }
  }
}

}  // namespace fragscope::http
