#include "agent/metrics_endpoint.h"

#include <exception>

#include <fmt/format.h>

#include "http/host_header.h"

namespace fragscope::agent {

http::Handler metrics_endpoint(const MetricsPage& page, std::function<std::string()> health,
                               std::vector<std::string> host_names) {
  return [&page, health = std::move(health), host_names = std::move(host_names)](const http::Request& request) {
    if (!http::host_is_address_or_named(request.host, host_names)) {
      return http::Response::text(421, "this agent answers to its addresses and node name only (Host)\n");
    }
    if (request.path == "/metrics") {
      http::Response response;
      response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      response.body = page.text();
      return response;
    }
    if (request.path == "/healthz") {
      std::string problem;
      try {
        problem = health();
      } catch (const std::exception& e) {
        problem = fmt::format("health check failed: {}", e.what());
      }
      return problem.empty() ? http::Response::text(200, "ok\n") : http::Response::text(503, problem + "\n");
    }
    return http::Response::text(404, "not found\n");
  };
}

}  // namespace fragscope::agent
