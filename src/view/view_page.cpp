#include "view/view_page.h"

#include "web/view_bundle.h"

namespace fragscope::view {

std::string view_page_html() {
  const web::WebBundle bundle = web::view_bundle();
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<title>fragscope view</title>\n<style>";
  html += bundle.style;
  html += "</style>\n"
          // Before any other script: an error anywhere is shown on the page, where a person or a test sees it.
          "<script>window.addEventListener('error',function(e){var d=document.getElementById('errors')||"
          "document.body;var p=document.createElement('p');p.className='page-error';p.textContent='error: '+"
          "e.message;d.appendChild(p);});</script>\n</head><body>\n<div id=\"errors\"></div>\n<div id=\"app\"></div>\n"
          "<script>";
  html += bundle.script;
  html += "</script>\n</body></html>\n";
  return html;
}

}  // namespace fragscope::view
