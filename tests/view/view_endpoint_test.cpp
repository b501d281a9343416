#include "view/view_endpoint.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/doctor.h"
#include "http_client.h"
#include "metrics/snapshot_analysis.h"
#include "../doctor_options.h"

namespace fragscope::view {
namespace {

using http::testing::http_exchange;

const std::string kSnapshot = std::string(FRAGSCOPE_FIXTURES_DIR) + "/frag_oom_104/snapshot.pickle.zst";

/// The view of the frag_oom_104 recording, served on a free loopback port.
class ViewEndpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    snapshot_ = std::make_unique<ViewedSnapshot>(kSnapshot, diagnose::collect_doctor_inputs({kSnapshot}));
    endpoint_ = std::make_unique<ViewEndpoint>(std::vector<ViewedSnapshot*>{snapshot_.get()}, "<html>page</html>");
    server_ = std::make_unique<http::Server>("127.0.0.1:0",
                                             [](const http::Request& request) { return endpoint_->handle(request); });
    endpoint_->set_port(server_->port());
  }
  static void TearDownTestSuite() {
    server_.reset();
    endpoint_.reset();
    snapshot_.reset();
  }

  /// GET `target` as the page does (Host: 127.0.0.1:PORT); the whole raw answer in `raw`.
  static http::testing::HttpResponse get(const std::string& target, const std::string& host = "") {
    const std::string named = host.empty() ? "127.0.0.1:" + std::to_string(server_->port()) : host;
    return http_exchange(server_->port(), "GET " + target + " HTTP/1.1\r\nHost: " + named + "\r\n\r\n");
  }
  static nlohmann::json get_json(const std::string& target, int status = 200) {
    const auto response = get(target);
    EXPECT_EQ(response.status, status) << target << ": " << response.body;
    return nlohmann::json::parse(response.body);
  }

  static inline std::unique_ptr<ViewedSnapshot> snapshot_;
  static inline std::unique_ptr<ViewEndpoint> endpoint_;
  static inline std::unique_ptr<http::Server> server_;
};

TEST_F(ViewEndpointTest, ThePageAndEveryAnswerCarryTheHardeningHeaders) {
  const int fd = http::testing::connect_loopback(server_->port());
  const std::string request = "GET / HTTP/1.1\r\nHost: localhost:" + std::to_string(server_->port()) + "\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  ASSERT_TRUE(http::testing::read_until_closed(fd, raw, std::chrono::milliseconds(2000)));
  ::close(fd);
  EXPECT_NE(raw.find("HTTP/1.1 200 OK"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Content-Type: text/html"), std::string::npos);
  EXPECT_NE(raw.find("Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
                     "style-src 'unsafe-inline'; connect-src 'self'"),
            std::string::npos);
  for (const char* header : {"X-Content-Type-Options: nosniff", "Cache-Control: no-store", "X-Frame-Options: DENY",
                             "Referrer-Policy: no-referrer"}) {
    EXPECT_NE(raw.find(header), std::string::npos) << header;
  }
  EXPECT_TRUE(raw.ends_with("<html>page</html>"));
}

TEST_F(ViewEndpointTest, AnotherHostNameIsRefusedSoDnsRebindingReadsNothing) {
  const std::string port = std::to_string(server_->port());
  EXPECT_EQ(get("/api/snapshots", "attacker.example:" + port).status, 421);
  EXPECT_EQ(get("/api/snapshots", "127.0.0.1:1").status, 421);
  EXPECT_EQ(get("/api/snapshots", "127.0.0.1").status, 421);
  EXPECT_EQ(http_exchange(server_->port(), "GET /api/snapshots HTTP/1.0\r\n\r\n").status, 421);
  EXPECT_EQ(get("/api/snapshots", "LOCALHOST:" + port).status, 200);
  EXPECT_EQ(get("/api/snapshots", "[::1]:" + port).status, 200);
  EXPECT_TRUE(host_names_this_server("10.0.0.7:80", 80));
  EXPECT_TRUE(host_names_this_server("localhost", 80));
  EXPECT_FALSE(host_names_this_server("localhost.attacker.example:80", 80));
  EXPECT_FALSE(host_names_this_server("[::1", 80));
}

// Review: another site's page could not read the answers, but its requests started what-if replays until the 16
// curves the view keeps were taken. A browser says which page made a request; the view's own page and tools that
// say nothing (curl) are answered.
TEST_F(ViewEndpointTest, ARequestAnotherSitesPageMadeIsRefused) {
  const std::string host = "127.0.0.1:" + std::to_string(server_->port());
  const auto with = [&](const std::string& target, const std::string& headers) {
    return http_exchange(server_->port(), "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + headers + "\r\n");
  };
  const auto refused = with("/api/whatif?config=max_split_size_mb:101", "Sec-Fetch-Site: cross-site\r\n");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(nlohmann::json::parse(refused.body)["error"], "the view answers only its own page, not another site's");
  EXPECT_EQ(with("/api/snapshots", "Sec-Fetch-Site: same-site\r\n").status, 403);
  EXPECT_EQ(with("/api/snapshots", "Origin: https://evil.example\r\n").status, 403);
  EXPECT_EQ(with("/api/snapshots", "Sec-Fetch-Site: same-origin\r\nOrigin: http://" + host + "\r\n").status, 200);
  EXPECT_EQ(with("/api/snapshots", "Sec-Fetch-Site: none\r\n").status, 200);
  EXPECT_EQ(with("/api/snapshots", "").status, 200);
  EXPECT_EQ(with("/", "Sec-Fetch-Site: cross-site\r\n").status, 200);  // a link to the page: it reads nothing
}

TEST_F(ViewEndpointTest, RequestsThePageNeverSendsAreRefusedWithTheReason) {
  EXPECT_EQ(get_json("/api/nothing", 404)["error"], "no such page: /api/nothing");
  EXPECT_EQ(get_json("/api/timeline?snapshot=1", 404)["error"], "no snapshot 1 (there are 1)");
  EXPECT_EQ(get_json("/api/timeline?color=red", 400)["error"], "unknown parameter 'color'");
  EXPECT_EQ(get_json("/api/timeline?from=1&from=2", 400)["error"], "parameter 'from' given twice");
  EXPECT_EQ(get_json("/api/timeline?columns=0", 400)["error"], "parameter 'columns' is 0: outside [1, 4096]");
  EXPECT_EQ(get_json("/api/timeline?from=-1", 400)["error"], "parameter 'from' is not a whole number");
  EXPECT_EQ(get_json("/api/timeline?from=20&to=10", 400)["error"], "parameter 'to' is 10: outside [20, 10369]");
  EXPECT_EQ(get_json("/api/event", 400)["error"], "parameter 'event' is required");
  EXPECT_EQ(get_json("/api/event?event=10370", 400)["error"], "parameter 'event' is 10370: outside [0, 10369]");
  EXPECT_EQ(get_json("/api/whatif?config=%zz", 400)["error"], "malformed percent-escape in the query");
  const std::string unknown_key = get_json("/api/whatif?config=no_such_key:1", 400)["error"];
  EXPECT_NE(unknown_key.find("no_such_key"), std::string::npos) << unknown_key;
}

TEST_F(ViewEndpointTest, AnswersAgreeWithAnalyzeAndTheTrace) {
  const auto& snapshot = snapshot_->input().snapshot;
  const auto analysis = metrics::analyze_snapshot(snapshot, 0);
  const auto summary = get_json("/api/snapshots")["snapshots"][0];
  EXPECT_EQ(summary["events"], analysis.trace.entries);
  EXPECT_EQ(summary["peak_reserved_bytes"], analysis.trace_peak_reserved);
  EXPECT_EQ(summary["final_reserved_bytes"], analysis.totals.reserved_bytes);
  EXPECT_EQ(summary["oom_events"], nlohmann::json::array({analysis.trace.ooms.at(0).index}));

  const std::size_t last = analysis.trace.entries - 1;
  const auto segments = get_json("/api/segments?event=" + std::to_string(last));
  ASSERT_EQ(segments["segments"].size(), analysis.segment_map.size());
  std::uint64_t free = 0;
  for (const auto& s : segments["segments"]) free += s["free_bytes"].get<std::uint64_t>();
  EXPECT_EQ(free, analysis.totals.inactive_bytes);

  const auto oom = get_json("/api/event?event=" + std::to_string(analysis.trace.ooms[0].index));
  EXPECT_EQ(oom["action"], "oom");
  EXPECT_EQ(oom["device_free_bytes"], analysis.trace.ooms[0].device_free_bytes);
  EXPECT_EQ(oom["size"], analysis.trace.ooms[0].request_bytes);

  const auto alloc = get_json("/api/event?event=" + std::to_string(last - 40));
  if (!alloc["allocation"].is_null()) {
    const auto a = get_json("/api/allocation?id=" + std::to_string(alloc["allocation"].get<int>()));
    EXPECT_EQ(a["address"], alloc["address"]);
  }
  const auto timeline = get_json("/api/timeline?columns=300&bands=50");
  EXPECT_EQ(timeline["columns"]["active_max"].size(), 300u);
  EXPECT_LE(timeline["bands"].size(), 50u);
  EXPECT_EQ(timeline["oom_events"], summary["oom_events"]);

  const auto sites = get_json("/api/sites?from=" + std::to_string(last) + "&limit=3");
  EXPECT_EQ(sites["rows"][0]["location"], analysis.top_sites.at(0).location);
  const auto diff = get_json("/api/diff?before_event=0&after_event=" + std::to_string(last));
  EXPECT_EQ(diff["after"]["reserved_bytes"], analysis.totals.reserved_bytes);
}

TEST_F(ViewEndpointTest, WhatIfAndTheDoctorAnswerPendingThenTheirResult) {
  const auto wait_for = [](const std::string& target) {
    for (int i = 0; i < 600; ++i) {
      const auto response = get(target);
      if (response.status != 202) return nlohmann::json::parse(response.body);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nlohmann::json();
  };
  const auto recorded = wait_for("/api/whatif?config=&columns=100");
  EXPECT_EQ(recorded["state"], "done");
  // The recorded config at the recorded capacity fails where the run failed.
  const auto oom = get_json("/api/snapshots")["snapshots"][0]["oom_events"][0];
  EXPECT_EQ(recorded["oom_event"], oom);
  EXPECT_EQ(recorded["columns"]["reserved_max"].size(), 100u);
  const auto ideal = wait_for("/api/whatif?config=ideal&columns=100");
  EXPECT_EQ(ideal["state"], "done");
  EXPECT_LE(ideal["peak_reserved_bytes"].get<std::uint64_t>(), recorded["peak_reserved_bytes"].get<std::uint64_t>());

  const auto doctor = wait_for("/api/doctor");
  ASSERT_EQ(doctor["state"], "done");
  const auto direct =
      diagnose::run_doctor(diagnose::collect_doctor_inputs({kSnapshot}), fragscope::testing::doctor_options());
  EXPECT_EQ(doctor["diagnosis"]["verdict"], std::string(diagnose::to_string(direct.verdict)));
  EXPECT_EQ(doctor["oom_event"], oom);
}

TEST(ExposureWarningTest, OnlyLoopbackAddressesAreQuiet) {
  EXPECT_EQ(exposure_warning("127.0.0.1:8470"), "");
  EXPECT_EQ(exposure_warning("127.1.2.3:0"), "");
  EXPECT_EQ(exposure_warning("[::1]:8470"), "");
  EXPECT_EQ(exposure_warning("localhost:8470"), "");
  EXPECT_NE(exposure_warning("0.0.0.0:8470").find("not a loopback address"), std::string::npos);
  EXPECT_NE(exposure_warning("8470").find("not a loopback address"), std::string::npos);
  EXPECT_NE(exposure_warning("[::]:8470").find("not a loopback address"), std::string::npos);
}

}  // namespace
}  // namespace fragscope::view
