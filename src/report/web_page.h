#pragma once
/// @file web_page.h
/// @brief The shell of a self-contained HTML page drawn by a bundled front end (web/): a
/// Content-Security-Policy that lets it fetch nothing, the data as JSON inside the page, the
/// bundle inlined. The bundle reads the data (web/common/page.js) and draws; the server side
/// decides what the data says.

#include <ostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "report/web_bundle.h"

namespace fragscope::report {

struct WebPage {
  std::string_view title;       ///< plain text (escaped here)
  std::string_view style;       ///< the page's own CSS, after the bundle's
  std::string_view body_html;   ///< the static body, already escaped by the caller
  const nlohmann::json* data = nullptr;  ///< given to the script as `pageData()`
  web::WebBundle bundle;
};

/// @brief Writes `page` as one HTML document. Errors the script throws are shown on the page
/// (an element of class "page-error") and the script marks <html data-rendered="ok"> when done.
void write_web_page(std::ostream& out, const WebPage& page);

/// @brief `json` as text safe inside a <script> element: '<', '>' and '&' as \u escapes.
std::string script_safe_json(const nlohmann::json& json);

/// @brief `text` with the five HTML special characters escaped, as valid UTF-8 (util/shown_text.h's valid_utf8:
/// a snapshot's names may hold any bytes).
std::string escape_html(std::string_view text);

}  // namespace fragscope::report
