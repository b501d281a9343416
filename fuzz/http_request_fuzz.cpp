// libFuzzer target: the HTTP request-head parser (the agent's and `fragscope view`'s), fed
// whatever a client on the network may send. Never a crash, a sanitizer report or an exception,
// and the verdict is monotone, as the server relies on (it parses again after every read): once
// a prefix of the stream is complete or bad, every longer prefix says the same. A complete head
// is GET or HEAD with a path that starts with '/' and holds no '?', within the size limit.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "http/request_head.h"

namespace {

using fragscope::http::parse_request_head;
using fragscope::http::RequestHead;

[[noreturn]] void fail(const char* what, std::size_t at) {
  std::fprintf(stderr, "%s (prefix of %zu bytes)\n", what, at);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view stream(reinterpret_cast<const char*>(data), size);
  // A small limit too, so that inputs of fuzzing size reach the 431 paths.
  const std::size_t limit = size % 2 == 0 ? fragscope::http::kMaxRequestHeadBytes : 64;
  const RequestHead whole = parse_request_head(stream, limit);
  if (whole.status == RequestHead::Status::kComplete) {
    if (whole.method != "GET" && whole.method != "HEAD") fail("complete with another method", size);
    if (whole.path.empty() || whole.path.front() != '/') fail("complete with a path not starting with '/'", size);
    if (whole.path.find_first_of("?#") != std::string_view::npos) fail("a path holding its query", size);
    if (whole.head_bytes > size || whole.head_bytes > limit) fail("head longer than the input or the limit", size);
  }
  if (whole.status == RequestHead::Status::kBad && (whole.error_status < 400 || whole.error.empty())) {
    fail("bad without a status and a reason", size);
  }
  // Reads of any size: the first verdict a prefix gives is the verdict of the whole.
  const std::size_t step = size % 13 + 1;
  for (std::size_t end = 0; end < size; end += step) {
    const RequestHead partial = parse_request_head(stream.substr(0, end), limit);
    if (partial.status != RequestHead::Status::kIncomplete) {
      if (!(partial == whole)) fail("a prefix's verdict differs from the whole input's", end);
      break;
    }
  }
  return 0;
}
