#include "agent/http_server.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <mutex>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::agent {
namespace {

// civetweb reports why it could not start only through its log callback, which carries no
// user pointer while the server is being built: keep the first message of the attempt here.
std::mutex startup_log_mutex;
std::string startup_log;

int keep_first_message(const mg_connection*, const char* message) {
  std::lock_guard lock(startup_log_mutex);
  if (startup_log.empty()) startup_log = message;
  return 1;  // handled: civetweb prints nothing itself
}

void send(mg_connection* connection, int status, const char* reason, const std::string& body, const char* type) {
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
            reason, type, body.size());
  mg_write(connection, body.data(), body.size());
}

}  // namespace

class HttpServer::MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(const MetricsPage& page) : page_(page) {}
  bool handleGet(CivetServer*, mg_connection* connection) override {
    send(connection, 200, "OK", *page_.text(), "text/plain; version=0.0.4; charset=utf-8");
    return true;
  }

 private:
  const MetricsPage& page_;
};

class HttpServer::HealthHandler : public CivetHandler {
 public:
  explicit HealthHandler(std::function<std::string()> health) : health_(std::move(health)) {}
  bool handleGet(CivetServer*, mg_connection* connection) override {
    const std::string problem = health_();
    if (problem.empty()) {
      send(connection, 200, "OK", "ok\n", "text/plain");
    } else {
      send(connection, 503, "Service Unavailable", problem + "\n", "text/plain");
    }
    return true;
  }

 private:
  std::function<std::string()> health_;
};

HttpServer::HttpServer(const std::string& listen_address, const MetricsPage& page,
                       std::function<std::string()> health)
    : metrics_(std::make_unique<MetricsHandler>(page)), health_(std::make_unique<HealthHandler>(std::move(health))) {
  CivetCallbacks callbacks;
  callbacks.log_message = keep_first_message;
  // tcp_nodelay: headers and body go out in two writes; with Nagle's algorithm the body would
  // wait for the client's delayed ACK (tens of ms per scrape).
  const std::vector<std::string> options{"listening_ports", listen_address, "num_threads", "2", "tcp_nodelay", "1"};
  {
    std::lock_guard lock(startup_log_mutex);
    startup_log.clear();
  }
  try {
    server_ = std::make_unique<CivetServer>(options, &callbacks);
  } catch (const CivetException& e) {
    std::lock_guard lock(startup_log_mutex);
    throw InputError(fmt::format("--listen {}: cannot serve HTTP there: {}", listen_address,
                                 startup_log.empty() ? e.what() : startup_log));
  }
  server_->addHandler("/metrics", *metrics_);
  server_->addHandler("/healthz", *health_);
}

HttpServer::~HttpServer() { server_.reset(); }  // stops civetweb's threads before the handlers go

int HttpServer::port() const {
  const auto ports = server_->getListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace fragscope::agent
