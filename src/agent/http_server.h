#pragma once
/// @file http_server.h
/// @brief /metrics and /healthz on one listening address: one thread, non-blocking sockets and
/// poll(2), so no client, however slow, holds anything another client needs.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "agent/http_request.h"
#include "agent/node_metrics.h"

namespace fragscope::agent {

/// @brief What one client may take. A connection that overstays its deadline is closed; at the
/// cap, the oldest connection still sending its request head is closed to make room, so a
/// flood of idle connections cannot lock out Prometheus or the kubelet's probes.
struct HttpLimits {
  std::size_t max_connections = 256;  ///< lowered to fit RLIMIT_NOFILE
  std::chrono::milliseconds head_timeout{5000};    ///< from accept to the end of the request head
  std::chrono::milliseconds write_timeout{10000};  ///< from the end of the head to the last byte sent
  std::chrono::milliseconds linger_timeout{1000};  ///< reading what the client still sends, after the answer
  std::size_t max_head_bytes = kMaxRequestHeadBytes;
};

/// @brief The agent's HTTP endpoint. /metrics serves the MetricsPage's latest text;
/// /healthz answers 200 "ok" while `health()` returns "", else 503 with its reason. GET and HEAD
/// only; one request per connection (every answer says `Connection: close`).
///
/// Thread-safety: requests are served on the server's own thread; `page` and `health` must be
/// safe to call from it and must outlive the server.
class HttpServer {
 public:
  /// @param listen_address "127.0.0.1:9478", "[::1]:9478", "0.0.0.0:9478" or a bare port (all
  ///   IPv4 interfaces); port 0 picks a free port (see port()).
  /// @throws InputError when the address cannot be bound (one line, naming it and the reason).
  HttpServer(const std::string& listen_address, const MetricsPage& page, std::function<std::string()> health,
             HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// @brief The port actually listened on.
  int port() const { return port_; }

  /// @brief The connection cap in force (HttpLimits::max_connections, lowered to fit the
  /// process's file-descriptor limit).
  std::size_t max_connections() const { return limits_.max_connections; }

 private:
  struct Connection;
  class Loop;

  const MetricsPage& page_;
  std::function<std::string()> health_;
  HttpLimits limits_;
  int listen_fd_ = -1;
  int wake_read_fd_ = -1;
  int wake_write_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace fragscope::agent
