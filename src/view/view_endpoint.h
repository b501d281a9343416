#pragma once
/// @file view_endpoint.h
/// @brief What `fragscope view` answers over HTTP: the page at "/", and under /api/ the JSON
/// answers of view_json.h, each computed from the index on the server's thread (what-if replays
/// and the doctor run on threads of their own and are answered "pending" until done).
///
/// Hardening beside the server's own (http/server.h): a request whose Host is a DNS name other
/// than localhost, or names another port, is refused (421), so a web page the browser visits
/// cannot read the snapshot through DNS rebinding; an /api/ request a browser made for another
/// site's page (Sec-Fetch-Site cross-site or same-site, or an Origin not this server's) is refused
/// (403): such a page cannot read the answers, but it could start what-if replays and take the 16
/// curves the view keeps; every answer forbids framing, sniffing,
/// caching and referrers, and the page's Content-Security-Policy lets it load nothing and talk
/// only to this server; parameters are read strictly (query_string.h) and bounded.
/// Thread-safety: handle() runs on the server's thread only.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "http/server.h"
#include "view/viewed_snapshot.h"

namespace fragscope::view {

class ViewEndpoint {
 public:
  /// @param page_html the page served at "/".
  ViewEndpoint(std::vector<ViewedSnapshot*> snapshots, std::string page_html);

  /// @brief The port the server listens on, for the Host check; until set, requests get 503.
  void set_port(int port) { port_ = port; }
  http::Response handle(const http::Request& request);

 private:
  http::Response answer(const http::Request& request);
  ViewedSnapshot& snapshot_at(std::uint64_t id) const;

  std::vector<ViewedSnapshot*> snapshots_;
  std::shared_ptr<const std::string> page_;
  std::atomic<int> port_{0};
};

/// @brief True when the browser says another site's page made `request` (its Sec-Fetch-Site is
/// "cross-site" or "same-site", or its Origin is not "http://" + its Host); a request without
/// either header (curl, a script) is not.
bool made_for_another_site(const http::Request& request);

/// @brief True when `host` (a Host header) names this server by an IP literal or "localhost",
/// with `port` (or no port, for port 80).
bool host_names_this_server(const std::string& host, int port);

/// @brief "" when `listen_address` (a --listen value) binds only a loopback address; else the
/// warning to print: whoever reaches that address reads the snapshots' stacks and file names.
std::string exposure_warning(const std::string& listen_address);

}  // namespace fragscope::view
