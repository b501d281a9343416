#include "http/server.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http_client.h"
#include "util/error.h"

namespace fragscope::http {
namespace {

using testing::connect_loopback;
using testing::http_exchange;
using testing::http_get;
using testing::read_until_closed;
using testing::still_open;
using std::chrono::milliseconds;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// /healthz answers "ok"; /page serves `page`; anything else is 404.
Handler test_handler(std::shared_ptr<const std::string> page = std::make_shared<const std::string>("page\n")) {
  return [page](const Request& request) {
    if (request.path == "/healthz") return Response::text(200, "ok\n");
    if (request.path == "/page") {
      Response response;
      response.body = page;
      return response;
    }
    return Response::text(404, "not found\n");
  };
}

TEST(HttpServerTest, TheHandlerSeesPathQueryAndHostAndItsAnswerIsSent) {
  Request seen;
  Server server("127.0.0.1:0", [&seen](const Request& request) {
    seen = request;
    Response response = Response::text(202, "later\n", "application/json");
    response.extra_headers = "X-Test: 1\r\n";
    return response;
  });
  ASSERT_GT(server.port(), 0);
  const auto answer = http_exchange(server.port(), "GET /api/x?from=1&to=2#frag HTTP/1.1\r\nHost: localhost:7\r\n\r\n");
  EXPECT_EQ(answer.status, 202);
  EXPECT_EQ(answer.body, "later\n");
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.path, "/api/x");
  EXPECT_EQ(seen.query, "from=1&to=2");
  EXPECT_EQ(seen.host, "localhost:7");
}

TEST(HttpServerTest, AHandlerThatThrowsGivesA500NamingTheProblem) {
  Server server("127.0.0.1:0", [](const Request&) -> Response { throw std::runtime_error("no such event"); });
  const auto answer = http_get(server.port(), "/anything");
  EXPECT_EQ(answer.status, 500);
  EXPECT_EQ(answer.body, "the server failed: no such event\n");
}

// Review: the answers the server makes itself (a bad request, a handler that threw) went out without the
// hardening headers every handler's answer carries.
TEST(HttpServerTest, TheServersOwnAnswersAreNeverSniffedNorCached) {
  Server server("127.0.0.1:0", [](const Request&) -> Response { throw std::runtime_error("no such event"); });
  for (const std::string request : {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "GET / HTTP/1.1\r\n\r\n"}) {
    const int fd = connect_loopback(server.port());
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string raw;
    ASSERT_TRUE(read_until_closed(fd, raw, milliseconds(2000)));
    ::close(fd);
    EXPECT_TRUE(raw.starts_with("HTTP/1.1 400") || raw.starts_with("HTTP/1.1 500")) << raw;
    EXPECT_NE(raw.find("X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"), std::string::npos) << raw;
  }
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

  try {
    Server server(taken, test_handler());
    ADD_FAILURE() << "bound a port that is in use";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--listen " + taken + ": cannot serve HTTP there: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  ::close(fd);
  // Two servers on free ports at once are fine.
  Server first("127.0.0.1:0", test_handler());
  Server second("127.0.0.1:0", test_handler());
  EXPECT_EQ(http_get(first.port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(second.port(), "/healthz").status, 200);
  EXPECT_EQ(http_get(second.port(), "/nothing-here").status, 404);
}

// Issue 16: the server had two worker threads, so two slow clients took /healthz offline.
TEST(HttpServerTest, HealthzAnswersFastWhile200SlowClientsAreConnected) {
  Server server("127.0.0.1:0", test_handler());
  // 100 clients stop half-way through their request line; 100 trickle a header line every 100 ms.
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_loopback(server.port());
    ASSERT_GE(fd, 0);
    const std::string start = i % 2 == 0 ? "GET /hea" : "GET /page HTTP/1.1\r\n";
    ASSERT_EQ(::send(fd, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (std::size_t i = 1; i < slow.size(); i += 2)
        ::send(slow[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  std::this_thread::sleep_for(milliseconds(200));
  std::vector<double> latencies;
  for (int probe = 0; probe < 20; ++probe) {
    const auto start = std::chrono::steady_clock::now();
    const auto health = http_get(server.port(), "/healthz", milliseconds(1000));
    latencies.push_back(seconds_since(start));
    EXPECT_EQ(health.status, 200) << "probe " << probe;
    std::this_thread::sleep_for(milliseconds(50));
  }
  done = true;
  trickle.join();
  // The slow clients were all still connected while the probes ran.
  EXPECT_EQ(std::count_if(slow.begin(), slow.end(), still_open), 200);
  for (const int fd : slow) ::close(fd);
  // Waiting on a slow client would take its 5 s head deadline; 0.5 s leaves room for a loaded CI machine.
  EXPECT_LT(*std::max_element(latencies.begin(), latencies.end()), 0.500);
}

// One header line every 100 ms must not keep a connection: the head deadline is absolute.
TEST(HttpServerTest, ARequestHeadMustArriveWithinTheDeadlineHoweverItTrickles) {
  Limits limits;
  limits.head_timeout = milliseconds(800);
  Server server("127.0.0.1:0", test_handler(), limits);
  const int trickler = connect_loopback(server.port());
  const int silent = connect_loopback(server.port());
  const auto start = std::chrono::steady_clock::now();
  ::send(trickler, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
  while (still_open(trickler) && seconds_since(start) < 5) {
    ::send(trickler, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT);
    std::this_thread::sleep_for(milliseconds(100));
  }
  const double closed_after = seconds_since(start);
  EXPECT_GT(closed_after, 0.7);
  EXPECT_LT(closed_after, 1.5);
  std::string raw;
  EXPECT_TRUE(read_until_closed(silent, raw, milliseconds(1000)));
  EXPECT_EQ(raw, "");  // closed without an answer
  ::close(trickler);
  ::close(silent);
}

TEST(HttpServerTest, AtTheConnectionCapTheOldestUnfinishedRequestMakesRoom) {
  Limits limits;
  limits.max_connections = 32;
  Server server("127.0.0.1:0", test_handler(), limits);
  EXPECT_EQ(server.max_connections(), 32u);
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(connect_loopback(server.port()));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(server.port(), "/healthz").status, 200);
  EXPECT_LT(seconds_since(start), 0.500);  // waiting for an idle client to time out would take 5 s
  std::this_thread::sleep_for(milliseconds(100));
  // The server holds at most 32; the first ones opened were closed to make room.
  EXPECT_LE(std::count_if(idle.begin(), idle.end(), still_open), 32);
  EXPECT_FALSE(still_open(idle.front()));
  EXPECT_TRUE(still_open(idle.back()));
  for (const int fd : idle) ::close(fd);
}

/// Bytes no kernel here buffers for one connection: twice the most TCP autotuning may give a socket's send
/// buffer (tcp_wmem's third field; hosts tuned for bandwidth raise it to 16 MB and more), and 1 MB.
std::size_t page_larger_than_the_send_buffer() {
  std::ifstream tcp_wmem("/proc/sys/net/ipv4/tcp_wmem");
  std::size_t low = 0, initial = 0, most = 4u << 20;
  tcp_wmem >> low >> initial >> most;
  return 2 * std::max<std::size_t>(most, 4u << 20) + (1u << 20);
}

TEST(HttpServerTest, AClientThatNeverReadsItsPageHoldsNothing) {
  // A page larger than the socket buffers take, so the server must wait on the client.
  const std::size_t page_size = page_larger_than_the_send_buffer();
  Limits limits;
  limits.write_timeout = milliseconds(500);
  Server server("127.0.0.1:0", test_handler(std::make_shared<const std::string>(page_size, 'x')), limits);
  std::vector<int> readers;
  for (int i = 0; i < 10; ++i) {
    const int fd = connect_loopback(server.port(), /*receive_buffer=*/4096);
    ::send(fd, "GET /page HTTP/1.1\r\n\r\n", 23, MSG_NOSIGNAL);
    readers.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(server.port(), "/healthz").status, 200);
  EXPECT_LT(seconds_since(start), 0.250);  // waiting on a stuck reader would take its 500 ms write deadline
  std::this_thread::sleep_for(milliseconds(1000));
  for (const int fd : readers) {
    std::string raw;
    EXPECT_TRUE(read_until_closed(fd, raw, milliseconds(2000)));
    EXPECT_LT(raw.size(), page_size);  // given up on at the write deadline
    ::close(fd);
  }
  // A client that reads gets the whole page.
  EXPECT_EQ(http_get(server.port(), "/page").body.size(), page_size);
}

/// Reads what has arrived on `fd`: true when the server closed it before `body_bytes` came (cut off), false while
/// it is open or once the whole body came. A whole answer may close too (`Connection: close`): where tcp_wmem lets
/// the kernel take the whole page, the server has sent it all and closed by the time the client drains it.
bool cut_off_after_draining(int fd, std::size_t body_bytes) {
  char buffer[65536];
  std::size_t received = 0;
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      received += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    return received < body_bytes;
  }
}

// Audit: each client that stopped reading kept the page it was given for up to its 10 s write
// deadline; the agent's page changes every poll, so 24 of them held 24 versions (96 → 178 MB).
TEST(HttpServerTest, ClientsThatStopReadingHoldNoMoreThanTheBudgetOfBodies) {
  const std::size_t page_size = 4u << 20;
  Limits limits;
  limits.max_body_bytes_in_flight = 2 * page_size + page_size / 2;
  std::atomic<int> served{0};
  Server server(
      "127.0.0.1:0",
      [&](const Request&) {
        Response response;  // a new page for every request, as when the agent polls between them
        response.body = std::make_shared<const std::string>(page_size, static_cast<char>('a' + served++));
        return response;
      },
      limits);
  std::vector<int> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(connect_loopback(server.port(), /*receive_buffer=*/4096));
    ::send(stalled.back(), "GET /page HTTP/1.1\r\n\r\n", 23, MSG_NOSIGNAL);
    for (int wait = 0; wait < 200 && served.load() <= i; ++wait) std::this_thread::sleep_for(milliseconds(5));
  }
  std::this_thread::sleep_for(milliseconds(200));
  // Two bodies fit: the third and the fourth request closed the holders of the oldest ones.
  EXPECT_TRUE(cut_off_after_draining(stalled[0], page_size));
  EXPECT_TRUE(cut_off_after_draining(stalled[1], page_size));
  EXPECT_FALSE(cut_off_after_draining(stalled[2], page_size));
  EXPECT_FALSE(cut_off_after_draining(stalled[3], page_size));
  for (const int fd : stalled) ::close(fd);
  // Clients given the same body share it: a page served to many costs it once.
  Server shared("127.0.0.1:0", test_handler(std::make_shared<const std::string>(page_size, 'x')), limits);
  std::vector<int> readers;
  for (int i = 0; i < 4; ++i) {
    readers.push_back(connect_loopback(shared.port(), /*receive_buffer=*/4096));
    ::send(readers.back(), "GET /page HTTP/1.1\r\n\r\n", 23, MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(milliseconds(300));
  for (const int fd : readers) {
    EXPECT_FALSE(cut_off_after_draining(fd, page_size));
    ::close(fd);
  }
}

// Audit: after its answer the server read whatever the client still sent, without a bound: a
// client that kept sending kept its connection (and, as fast as it could send, the server's only
// thread) busy until the linger deadline.
TEST(HttpServerTest, AClientThatKeepsSendingAfterItsAnswerIsCutOff) {
  Server server("127.0.0.1:0", test_handler());  // linger_timeout: 1 s
  const int fd = connect_loopback(server.port());
  ::send(fd, "GET /healthz HTTP/1.1\r\n\r\n", 26, MSG_NOSIGNAL);
  std::atomic<double> cut_off_after{-1};
  std::thread sender([&] {
    const std::string chunk(1 << 16, 'x');
    const auto start = std::chrono::steady_clock::now();
    while (seconds_since(start) < 3) {
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) {
        cut_off_after = seconds_since(start);
        return;
      }
    }
  });
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(server.port(), "/healthz").status, 200);
  EXPECT_LT(seconds_since(start), 0.250);
  sender.join();
  EXPECT_GE(cut_off_after.load(), 0.0);
  EXPECT_LT(cut_off_after.load(), 0.5);  // 64 KiB read, then closed; not read on until the 1 s deadline
  ::close(fd);
}

TEST(HttpServerTest, MalformedOversizedAndOtherRequestsGetTheirStatus) {
  Server server("127.0.0.1:0", test_handler());
  EXPECT_EQ(http_exchange(server.port(), "garbage\r\n\r\n").status, 400);
  EXPECT_EQ(http_exchange(server.port(), "GET /healthz HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_EQ(http_exchange(server.port(), "POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n").status, 405);
  EXPECT_EQ(http_exchange(server.port(), "GET /healthz HTTP/1.1\r\nX: a\x01b\r\n\r\n").status, 400);
  const auto oversized =
      http_exchange(server.port(), "GET /healthz HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(oversized.status, 431);
  EXPECT_EQ(oversized.body, "request head larger than 8192 bytes\n");
  const auto head = http_exchange(server.port(), "HEAD /page HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(http_exchange(server.port(), "GET /healthz?verbose=1 HTTP/1.1\n\n").body, "ok\n");
}

}  // namespace
}  // namespace fragscope::http
