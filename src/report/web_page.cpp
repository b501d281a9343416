#include "report/web_page.h"

#include <string>

#include "util/shown_text.h"

namespace fragscope::report {

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : valid_utf8(text)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_safe_json(const nlohmann::json& json) {
  // These characters occur only inside JSON strings, where the escapes mean the same.
  const std::string text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// Before any other script: an error anywhere is shown on the page, where a test or a person sees it.
constexpr std::string_view kErrorHook =
    "<script>window.addEventListener('error',function(e){var d=document.getElementById('errors')||document.body;"
    "var p=document.createElement('p');p.className='page-error';p.textContent='error: '+e.message;d.appendChild(p);});"
    "</script>";

}  // namespace

void write_web_page(std::ostream& out, const WebPage& page) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
         "script-src 'unsafe-inline'; img-src data:\">\n"
      << "<title>" << escape_html(page.title) << "</title>\n"
      << "<style>" << page.bundle.style << "</style>\n<style>" << page.style << "</style>\n"
      << kErrorHook << "\n</head><body>\n<div id=\"errors\"></div>\n"
      << page.body_html << "\n<script type=\"application/json\" id=\"fragscope-data\">"
      << (page.data ? script_safe_json(*page.data) : std::string("null")) << "</script>\n"
      << "<script>" << page.bundle.script << "</script>\n</body></html>\n";
}

}  // namespace fragscope::report
