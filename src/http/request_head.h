#pragma once
/// @file request_head.h
/// @brief The HTTP request-head parser: a pure function over the bytes received so far, so the
/// server can call it after every read and the fuzzer can call it on anything.

#include <cstddef>
#include <string>
#include <string_view>

namespace fragscope::http {

/// @brief The most bytes a request head (request line, headers, blank line) may take.
inline constexpr std::size_t kMaxRequestHeadBytes = 8192;

/// @brief What the bytes received so far make of a request.
///
/// Monotone: once a prefix of a stream yields kComplete or kBad, every longer prefix yields the
/// same result (the verdict depends only on complete lines and on the size limit).
struct RequestHead {
  enum class Status { kIncomplete, kComplete, kBad };
  Status status = Status::kIncomplete;
  int error_status = 0;  ///< for kBad: 400, 405, 431 or 505
  std::string error;     ///< for kBad: the reason, one line, for the response body
  std::string method;    ///< for kComplete: "GET" or "HEAD"
  std::string path;      ///< for kComplete: the target without its query, starting with '/'
  std::string query;     ///< for kComplete: what follows '?' in the target, up to any '#'
  std::string host;      ///< for kComplete: the Host header's value, trimmed ("" when absent)
  std::string origin;    ///< for kComplete: the first Origin header's value, trimmed ("" when absent)
  /// for kComplete: the first Sec-Fetch-Site header's value, trimmed ("" when absent): a browser says whether the
  /// page that made the request is this server's ("same-origin"), none ("none": typed, a bookmark) or another's
  std::string sec_fetch_site;
  std::size_t head_bytes = 0;  ///< for kComplete: bytes up to and including the blank line

  bool operator==(const RequestHead&) const = default;
};

/// @brief Parses the head of one HTTP/1.0 or 1.1 request.
///
/// Accepts GET and HEAD with an origin-form target (printable ASCII, starting with '/'); lines
/// end in LF with an optional CR before it; header names are tokens and values hold no control
/// character but tab. Everything else is kBad: a malformed line or header (400), another method
/// (405), a head longer than `max_head_bytes` (431), another HTTP version (505). Obsolete line
/// folding is refused, and so is a second Host header. Header values are not interpreted but
/// Host's, Origin's and Sec-Fetch-Site's (kept for a server that checks who it is called as, and
/// from which page): the server answers and closes.
RequestHead parse_request_head(std::string_view received, std::size_t max_head_bytes = kMaxRequestHeadBytes);

}  // namespace fragscope::http
