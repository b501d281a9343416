#include "agent/http_server.h"

#include <gtest/gtest.h>

#include "agent/node_metrics.h"
#include "http_client.h"
#include "util/error.h"

namespace fragscope::agent {
namespace {

using testing::http_get;

TEST(HttpServerTest, ServesMetricsAndHealth) {
  MetricsPage page;
  page.publish(NodeView{}, AgentStatus{});
  std::string problem;
  HttpServer server("127.0.0.1:0", page, [&problem] { return problem; });
  ASSERT_GT(server.port(), 0);

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
}

TEST(HttpServerTest, PortInUseIsAClearInputError) {
  // Another process's listener, as a plain socket on a kernel-chosen port.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  MetricsPage page;
  try {
    HttpServer server(taken, page, [] { return std::string(); });
    ADD_FAILURE() << "bound a port that is in use";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--listen " + taken + ": cannot serve HTTP there: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  ::close(fd);
  // Two servers on free ports at once are fine.
  HttpServer first("127.0.0.1:0", page, [] { return std::string(); });
  HttpServer second("127.0.0.1:0", page, [] { return std::string(); });
  EXPECT_EQ(http_get(first.port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(second.port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(second.port(), "/nothing-here").status, 404);
}

}  // namespace
}  // namespace fragscope::agent
