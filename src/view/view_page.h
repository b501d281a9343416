#pragma once
/// @file view_page.h
/// @brief The page `fragscope view` serves at "/": web/view/ bundled at build time and inlined,
/// so the browser loads nothing else; its data comes from this server's /api/ (view_endpoint.h).

#include <string>

namespace fragscope::view {

/// @brief The whole HTML document.
std::string view_page_html();

}  // namespace fragscope::view
