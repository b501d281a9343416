// The page shell every bundled front end (web/) is served in: the data cannot end its <script>
// element, nothing can be fetched, and the bundle compiled into the binary is inlined whole.
#include <sstream>

#include <gtest/gtest.h>

#include "report/web_page.h"
#include "web/report_bundle.h"

namespace fragscope::report {
namespace {

TEST(WebPage, JsonCannotCloseTheScriptElement) {
  const nlohmann::json data = {{"path", "/runs/</script><script>alert(1)</script>&.pickle"}};
  const std::string text = script_safe_json(data);
  EXPECT_EQ(text.find('<'), std::string::npos);
  EXPECT_EQ(text.find('>'), std::string::npos);
  EXPECT_EQ(text.find('&'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(text), data) << "the escapes mean the same characters";
}

TEST(WebPage, InvalidUtf8InTheDataDoesNotThrow) {
  const nlohmann::json data = {{"path", std::string("/runs/\xff\xfe.pickle")}};
  EXPECT_NO_THROW(nlohmann::json::parse(script_safe_json(data)));
}

TEST(WebPage, ShellInlinesTheBundleUnderAPolicyThatFetchesNothing) {
  const web::WebBundle bundle = web::report_bundle();
  ASSERT_NE(bundle.script.find("fragscope-data"), std::string_view::npos) << "web/common/page.js reads the data";
  EXPECT_NE(bundle.script.find("u-over"), std::string_view::npos) << "uPlot is bundled, not fetched";
  ASSERT_GT(bundle.style.size(), 100u) << "uPlot's style sheet";
  EXPECT_EQ(bundle.script.find("</script"), std::string_view::npos);
  const nlohmann::json data = {{"verdict", "ok"}};
  std::ostringstream out;
  write_web_page(out, {"a <title>", "h1{color:red}", "<h1>body</h1>", &data, bundle});
  const std::string page = out.str();
  EXPECT_NE(
      page.find("content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\""),
      std::string::npos);
  EXPECT_NE(page.find("<title>a &lt;title&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("<script type=\"application/json\" id=\"fragscope-data\">{\"verdict\":\"ok\"}</script>"),
            std::string::npos);
  EXPECT_NE(page.find(bundle.script), std::string::npos);
  EXPECT_LT(page.find("<h1>body</h1>"), page.find("id=\"fragscope-data\"")) << "the body exists when the script runs";
  EXPECT_LT(page.find("id=\"fragscope-data\""), page.find(bundle.script));
}

}  // namespace
}  // namespace fragscope::report
