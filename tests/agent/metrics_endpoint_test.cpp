#include "agent/metrics_endpoint.h"

#include <gtest/gtest.h>

#include "http/server.h"
#include "http_client.h"

namespace fragscope::agent {
namespace {

using http::testing::http_exchange;
using http::testing::http_get;

TEST(MetricsEndpointTest, ServesMetricsAndHealth) {
  MetricsPage page;
  page.publish(NodeView{}, AgentStatus{});
  std::string problem;
  http::Server server("127.0.0.1:0", metrics_endpoint(page, [&problem] { return problem; }, {"gpu-node-7"}));

  auto health = http_get(server.port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");

  const auto scrape = http_get(server.port(), "/metrics");
  EXPECT_EQ(scrape.status, 200);
  EXPECT_EQ(scrape.body, *page.text());
  EXPECT_NE(scrape.body.find("fragscope_nvml_up 0"), std::string::npos) << scrape.body;

  problem = "last poll 17.0 s ago";
  health = http_get(server.port(), "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("last poll 17.0 s ago"), std::string::npos) << health.body;

  EXPECT_EQ(http_get(server.port(), "/nothing-here").status, 404);
  EXPECT_EQ(http_get(server.port(), "/healthz?verbose=1").body, "last poll 17.0 s ago\n");
  const auto head = http_exchange(server.port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
}

TEST(MetricsEndpointTest, AHealthCheckThatThrowsIsA503WithItsReason) {
  MetricsPage page;
  const auto failing = []() -> std::string { throw std::runtime_error("rank folder gone"); };
  http::Server server("127.0.0.1:0", metrics_endpoint(page, failing, {}));
  const auto health = http_get(server.port(), "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, "health check failed: rank folder gone\n");
}

// Audit: /metrics answered any Host, so a web page rebinding its own name to 127.0.0.1 could read
// the loopback agent's page (job names, uids). Prometheus scrapes by address or node name.
TEST(MetricsEndpointTest, OnlyAddressesAndTheNodesNamesAreAnswered) {
  MetricsPage page;
  page.publish(NodeView{}, AgentStatus{});
  http::Server server("127.0.0.1:0", metrics_endpoint(page, [] { return std::string(); }, {"gpu-node-7"}));
  auto get = [&](const std::string& host) {
    return http_exchange(server.port(), "GET /metrics HTTP/1.1\r\nHost: " + host + "\r\n\r\n").status;
  };
  EXPECT_EQ(get("attacker.example:" + std::to_string(server.port())), 421);
  EXPECT_EQ(get("10.244.3.17:9478"), 200);  // a pod IP, as Prometheus' Kubernetes discovery scrapes
  EXPECT_EQ(get("gpu-node-7:9478"), 200);
  EXPECT_EQ(get("localhost:" + std::to_string(server.port())), 200);
  EXPECT_EQ(http_exchange(server.port(), "GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n").status, 421);
}

}  // namespace
}  // namespace fragscope::agent
