#include "agent/metrics_endpoint.h"

#include <exception>

#include <fmt/format.h>

namespace fragscope::agent {

http::Handler metrics_endpoint(const MetricsPage& page, std::function<std::string()> health) {
  return [&page, health = std::move(health)](const http::Request& request) {
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
