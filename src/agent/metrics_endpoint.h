#pragma once
/// @file metrics_endpoint.h
/// @brief What the agent answers over HTTP: /metrics (the latest poll's page) and /healthz.

#include <functional>
#include <string>
#include <vector>

#include "agent/node_metrics.h"
#include "http/server.h"

namespace fragscope::agent {

/// @brief The agent's request handler. /metrics serves the MetricsPage's latest text;
/// /healthz answers 200 "ok" while `health()` returns "", else 503 with its reason; anything
/// else is 404. A request whose Host is neither an address, "localhost" nor one of
/// `host_names` (the node's names) is refused with 421 (http/host_header.h: DNS rebinding).
/// `page` must outlive the handler; `health` runs on the server's thread.
http::Handler metrics_endpoint(const MetricsPage& page, std::function<std::string()> health,
                               std::vector<std::string> host_names);

}  // namespace fragscope::agent
