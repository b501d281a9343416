#pragma once
/// @file server.h
/// @brief A small HTTP/1.1 server on one listening address: one thread, non-blocking sockets
/// and poll(2), so no client, however slow, holds anything another client needs. The agent
/// serves /metrics with it, `fragscope view` its page and answers.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "http/request_head.h"

namespace fragscope::http {

/// @brief What one client may take. A connection that overstays its deadline is closed; at the
/// cap, the oldest connection still sending its request head is closed to make room, so a
/// flood of idle connections cannot lock out the clients that matter (Prometheus, a probe, the
/// page's own requests).
struct Limits {
  std::size_t max_connections = 256;  ///< lowered to fit RLIMIT_NOFILE
  std::chrono::milliseconds head_timeout{5000};    ///< from accept to the end of the request head
  std::chrono::milliseconds write_timeout{10000};  ///< from the end of the head to the last byte sent
  std::chrono::milliseconds linger_timeout{1000};  ///< reading what the client still sends, after the answer
  std::size_t max_head_bytes = kMaxRequestHeadBytes;
  /// Response bodies held for connections still sending them, each distinct body counted once
  /// (clients given the same shared body cost it once). A body that would not fit closes the
  /// connections holding the oldest other bodies first: clients that stopped reading cannot make
  /// the server keep one old page each.
  std::size_t max_body_bytes_in_flight = std::size_t{64} << 20;
  std::size_t max_linger_bytes = 64 * 1024;  ///< read after the answer; a client sending more is closed
};

/// @brief A complete request head, as the handler sees it.
struct Request {
  std::string method;  ///< "GET" or "HEAD"
  std::string path;    ///< starts with '/', no query
  std::string query;   ///< after '?', undecoded
  std::string host;    ///< the Host header, "" when absent
  std::string origin;  ///< the Origin header, "" when absent
  std::string sec_fetch_site;  ///< the Sec-Fetch-Site header, "" when absent (RequestHead says what it is)
};

/// @brief The handler's answer. A HEAD request gets the same headers and no body.
struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  /// Shared, not copied: a large page published once can be sent to many clients at once.
  std::shared_ptr<const std::string> body;
  std::string extra_headers;  ///< whole lines, each ending in "\r\n"

  /// @brief A response whose body is `text`.
  static Response text(int status, std::string text, std::string content_type = "text/plain; charset=utf-8");
};

/// @brief Answers one request. Runs on the server's thread, so it must be quick: work that takes
/// long belongs elsewhere, its result published for the handler to read. An exception it throws
/// becomes a 500 naming it.
using Handler = std::function<Response(const Request&)>;

/// @brief The server. GET and HEAD only; one request per connection (every answer says
/// `Connection: close`); a malformed request gets 400/405/431/505 without reaching the handler.
///
/// Thread-safety: requests are served on the server's own thread; `handler` must be safe to
/// call from it and whatever it reads must outlive the server.
class Server {
 public:
  /// @param listen_address "127.0.0.1:9478", "[::1]:9478", "0.0.0.0:9478" or a bare port (all
  ///   IPv4 interfaces); port 0 picks a free port (see port()).
  /// @throws InputError when the address cannot be bound (one line, naming it and the reason).
  Server(const std::string& listen_address, Handler handler, Limits limits = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// @brief The port actually listened on.
  int port() const { return port_; }

  /// @brief The connection cap in force (Limits::max_connections, lowered to fit the process's
  /// file-descriptor limit).
  std::size_t max_connections() const { return limits_.max_connections; }

 private:
  struct Connection;
  class Loop;

  Handler handler_;
  Limits limits_;
  int listen_fd_ = -1;
  int wake_read_fd_ = -1;
  int wake_write_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace fragscope::http
