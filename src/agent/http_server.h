#pragma once
/// @file http_server.h
/// @brief /metrics and /healthz on one listening address (civetweb, as prometheus-cpp's own
/// exposer uses it).

#include <functional>
#include <memory>
#include <string>

#include "agent/node_metrics.h"

class CivetServer;

namespace fragscope::agent {

/// @brief The agent's HTTP endpoint. /metrics serves the MetricsPage's latest text;
/// /healthz answers 200 "ok" while `health()` returns "", else 503 with its reason.
///
/// Thread-safety: civetweb serves requests on its own threads; `page` and `health` must be
/// safe to call from them and must outlive the server.
class HttpServer {
 public:
  /// @param listen_address civetweb syntax: "127.0.0.1:9478", "[::1]:9478", "0.0.0.0:9478";
  ///   port 0 picks a free port (see port()).
  /// @throws InputError when the address cannot be bound (one line, naming it and the reason).
  HttpServer(const std::string& listen_address, const MetricsPage& page, std::function<std::string()> health);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// @brief The port actually listened on.
  int port() const;

 private:
  class MetricsHandler;
  class HealthHandler;
  std::unique_ptr<MetricsHandler> metrics_;
  std::unique_ptr<HealthHandler> health_;
  std::unique_ptr<CivetServer> server_;
};

}  // namespace fragscope::agent
