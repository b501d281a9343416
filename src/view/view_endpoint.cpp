#include "view/view_endpoint.h"

#include <arpa/inet.h>

#include <chrono>
#include <exception>

#include <fmt/format.h>

#include "http/host_header.h"
#include "util/error.h"
#include "view/query_string.h"
#include "view/site_ranking.h"
#include "view/timeline_query.h"
#include "view/view_json.h"

namespace fragscope::view {
namespace {

using Keys = std::set<std::string, std::less<>>;

constexpr std::uint64_t kMaxColumns = 4096;
constexpr std::uint64_t kMaxBands = 2000;
constexpr std::uint64_t kMaxRows = 500;

constexpr const char* kCommonHeaders =
    "X-Content-Type-Options: nosniff\r\n"
    "Cache-Control: no-store\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "X-Frame-Options: DENY\r\n"
    "Cross-Origin-Resource-Policy: same-origin\r\n";
constexpr const char* kPagePolicy =
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n";

/// A request the page never sends, or that names what is not there: the status and the reason.
struct Refusal {
  int status;
  std::string reason;
};

http::Response json_response(int status, const nlohmann::json& doc) {
  return http::Response::text(status, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                              "application/json");
}

http::Response error_response(int status, const std::string& reason) {
  return json_response(status, {{"error", reason}});
}

}  // namespace

bool host_names_this_server(const std::string& host, int port) {
  const auto parts = http::split_host(host);
  if (!parts || !http::names_an_address(*parts)) return false;
  if (parts->port.empty()) return port == 80;
  return parts->port == std::to_string(port);
}

std::string exposure_warning(const std::string& listen_address) {
  std::string host = listen_address.substr(0, listen_address.rfind(':'));
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  in_addr v4{};
  in6_addr v6{};
  const bool loopback = host == "localhost" ||
                        (::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) ||
                        (::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6));
  if (loopback) return "";
  return fmt::format("--listen {}: not a loopback address: whoever reaches it can read the snapshots "
                     "(stacks, file names); there is no authentication",
                     listen_address);
}

ViewEndpoint::ViewEndpoint(std::vector<ViewedSnapshot*> snapshots, std::string page_html)
    : snapshots_(std::move(snapshots)), page_(std::make_shared<const std::string>(std::move(page_html))) {}

ViewedSnapshot& ViewEndpoint::snapshot_at(std::uint64_t id) const {
  if (id >= snapshots_.size()) throw Refusal{404, fmt::format("no snapshot {} (there are {})", id, snapshots_.size())};
  return *snapshots_[id];
}

bool made_for_another_site(const http::Request& request) {
  if (request.sec_fetch_site == "cross-site" || request.sec_fetch_site == "same-site") return true;
  return !request.origin.empty() && request.origin != "http://" + request.host;
}

http::Response ViewEndpoint::handle(const http::Request& request) {
  const auto start = std::chrono::steady_clock::now();
  http::Response response;
  if (port_ == 0) {
    response = error_response(503, "starting");
  } else if (!host_names_this_server(request.host, port_)) {
    response = error_response(421, "this server answers only to its own address (Host: 127.0.0.1:PORT, "
                                    "localhost:PORT)");
  } else if (request.path.starts_with("/api/") && made_for_another_site(request)) {
    response = error_response(403, "the view answers only its own page, not another site's");
  } else {
    try {
      response = answer(request);
    } catch (const Refusal& refusal) {
      response = error_response(refusal.status, refusal.reason);
    } catch (const InputError& e) {
      response = error_response(400, e.what());
    } catch (const std::exception& e) {  // with the hardening headers, as every answer
      response = error_response(500, e.what());
    }
  }
  response.extra_headers += kCommonHeaders;
  // The server's own share of a round trip, apart from the network and the browser's scheduling.
  const std::chrono::duration<double, std::milli> spent = std::chrono::steady_clock::now() - start;
  response.extra_headers += fmt::format("Server-Timing: answer;dur={:.1f}\r\n", spent.count());
  return response;
}

http::Response ViewEndpoint::answer(const http::Request& request) {
  const std::string& path = request.path;
  if (path == "/" || path == "/index.html") {
    QueryString(request.query, {});
    http::Response page;
    page.content_type = "text/html; charset=utf-8";
    page.body = page_;
    page.extra_headers = kPagePolicy;
    return page;
  }
  if (path == "/api/snapshots") {
    QueryString(request.query, {});
    return json_response(200, snapshots_json({snapshots_.begin(), snapshots_.end()}));
  }
  // Every other answer is about one snapshot's events.
  const auto range = [](const QueryString& q, const TraceIndex& index) {
    const std::uint64_t last = index.event_count() - 1;
    const std::uint64_t from = q.number("from", 0, last, 0);
    const std::uint64_t to = q.number("to", from, last, last);
    return std::pair{static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(to)};
  };
  if (path == "/api/timeline") {
    const QueryString q(request.query, {"snapshot", "from", "to", "columns", "bands"});
    const TraceIndex& index = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0)).index();
    const auto [from, to] = range(q, index);
    const auto columns = static_cast<std::uint32_t>(q.number("columns", 1, kMaxColumns, 1000));
    const auto bands = static_cast<std::uint32_t>(q.number("bands", 0, kMaxBands, 400));
    return json_response(200, timeline_json(index, query_timeline(index, from, to, columns, bands)));
  }
  if (path == "/api/event" || path == "/api/segments") {
    const QueryString q(request.query, {"snapshot", "event"});
    const TraceIndex& index = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0)).index();
    const auto event = static_cast<std::uint32_t>(q.number("event", 0, index.event_count() - 1));
    if (path == "/api/event") return json_response(200, event_json(index, event));
    return json_response(200, segments_json(index, event, index.segments.at(event)));
  }
  if (path == "/api/allocation") {
    const QueryString q(request.query, {"snapshot", "id"});
    const TraceIndex& index = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0)).index();
    if (index.allocations.size() == 0) throw Refusal{404, "this snapshot has no allocations"};
    const auto id = static_cast<AllocationId>(q.number("id", 0, index.allocations.size() - 1));
    return json_response(200, allocation_json(index, id));
  }
  if (path == "/api/sites") {
    const QueryString q(request.query, {"snapshot", "from", "to", "limit"});
    const TraceIndex& index = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0)).index();
    const auto [from, to] = range(q, index);
    return json_response(200, sites_json(rank_sites(index, from, to, q.number("limit", 1, kMaxRows, 20))));
  }
  if (path == "/api/diff") {
    const QueryString q(request.query, {"before", "before_event", "after", "after_event", "limit"});
    const TraceIndex& before = snapshot_at(q.number("before", 0, snapshots_.size(), 0)).index();
    const TraceIndex& after = snapshot_at(q.number("after", 0, snapshots_.size(), 0)).index();
    const Moment from{&before, static_cast<std::uint32_t>(q.number("before_event", 0, before.event_count() - 1))};
    const Moment to{&after, static_cast<std::uint32_t>(q.number("after_event", 0, after.event_count() - 1))};
    return json_response(200, diff_json(diff_moments(from, to, q.number("limit", 1, kMaxRows, 20))));
  }
  if (path == "/api/whatif") {
    const QueryString q(request.query, {"snapshot", "config", "from", "to", "columns"});
    ViewedSnapshot& snapshot = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0));
    const auto [from, to] = range(q, snapshot.index());
    const auto columns = static_cast<std::uint32_t>(q.number("columns", 1, kMaxColumns, 1000));
    const auto curve = snapshot.whatif().request(q.text("config"));
    const Timeline timeline = query_timeline(snapshot.index(), from, to, columns, 0);
    return json_response(curve->state == WhatIfCurve::State::kPending ? 202 : 200, whatif_json(*curve, timeline));
  }
  if (path == "/api/doctor") {
    const QueryString q(request.query, {"snapshot"});
    ViewedSnapshot& snapshot = snapshot_at(q.number("snapshot", 0, snapshots_.size(), 0));
    const DoctorOutcome outcome = snapshot.doctor();
    return json_response(outcome.done ? 200 : 202, doctor_json(snapshot.index(), outcome));
  }
  throw Refusal{404, fmt::format("no such page: {}", path)};
}

}  // namespace fragscope::view
