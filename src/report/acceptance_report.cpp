#include "report/acceptance_report.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/json_header.h"
#include "util/shown_text.h"

namespace fragscope::report {

using diagnose::CheckReport;
using diagnose::CriterionVerdict;
using diagnose::criterion_label;
using diagnose::verdict_text;
using inputs::AcceptanceCriteria;

namespace {

// Display width of UTF-8 text ("≤" is one column).
std::size_t columns(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(std::string_view text, std::size_t width) {
  std::string out(text);
  out.append(width > columns(text) ? width - columns(text) : 0, ' ');
  return out;
}

std::string_view json_verdict(CriterionVerdict verdict) {
  switch (verdict) {
    case CriterionVerdict::kPass: return "pass";
    case CriterionVerdict::kFail: return "fail";
    case CriterionVerdict::kNotEvaluated: break;
  }
  return "not_evaluated";
}

}  // namespace

void write_check_table(std::ostream& out, const CheckReport& report, std::string_view criteria_source) {
  const std::vector<std::string> headings = {"SUBJECT", "CRITERION", "MEASURED", "LIMIT", "RESULT"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : report.results)
    rows.push_back({r.subject, std::string(criterion_label(r.criterion)),
                    r.measured_text.empty() ? "-" : r.measured_text, r.limit_text,
                    std::string(verdict_text(r.verdict))});
  std::vector<std::size_t> widths;
  for (std::size_t c = 0; c < headings.size(); ++c) {
    std::size_t w = columns(headings[c]);
    for (const auto& row : rows) w = std::max(w, columns(row[c]));
    widths.push_back(w);
  }
  out << fmt::format("fragscope check: criteria from {}\n", shown_name(criteria_source, kShownPathBytes));
  std::string line;
  for (std::size_t c = 0; c < headings.size(); ++c) line += pad(headings[c], widths[c]) + "  ";
  out << line << "DETAIL\n";
  std::string previous_subject;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    line.clear();
    for (std::size_t c = 0; c < headings.size(); ++c)
      line += pad(c == 0 && rows[i][0] == previous_subject ? "" : rows[i][c], widths[c]) + "  ";
    previous_subject = rows[i][0];
    out << line << report.results[i].detail << '\n';
  }
  for (const auto& w : report.warnings) out << "warning: " << w << '\n';
  const auto failed = report.count(CriterionVerdict::kFail);
  const auto skipped = report.count(CriterionVerdict::kNotEvaluated);
  out << fmt::format("result: {} ({} passed, {} failed, {} not evaluated){}\n", report.passed() ? "PASS" : "FAIL",
                     report.count(CriterionVerdict::kPass), failed, skipped,
                     skipped == 0 ? ""
                     : report.allow_unevaluated
                         ? "; not evaluated allowed (--allow-unevaluated)"
                         : "; a criterion not evaluated fails the check (--allow-unevaluated accepts it)");
}

nlohmann::ordered_json check_json(const CheckReport& report, const AcceptanceCriteria& criteria,
                                  std::string_view criteria_source) {
  nlohmann::ordered_json doc;
  add_json_header(doc, kCheckJsonSchema);
  doc["passed"] = report.passed();
  doc["failed"] = report.count(CriterionVerdict::kFail);
  doc["not_evaluated"] = report.count(CriterionVerdict::kNotEvaluated);
  doc["allow_unevaluated"] = report.allow_unevaluated;
  doc["criteria_source"] = criteria_source;
  doc["warnings"] = report.warnings;
  std::ostringstream criteria_json;
  inputs::write_acceptance_criteria(criteria_json, criteria);
  doc["criteria"] = nlohmann::ordered_json::parse(criteria_json.str());
  doc["results"] = nlohmann::ordered_json::array();
  for (const auto& r : report.results) {
    nlohmann::ordered_json row;
    row["subject"] = r.subject;
    if (r.rank) row["rank"] = *r.rank;
    row["criterion"] = r.criterion;
    row["verdict"] = json_verdict(r.verdict);
    if (r.measured) row["measured"] = *r.measured;
    if (r.limit) row["limit"] = *r.limit;
    row["measured_text"] = r.measured_text;
    row["limit_text"] = r.limit_text;
    row["detail"] = r.detail;
    doc["results"].push_back(std::move(row));
  }
  return doc;
}

}  // namespace fragscope::report
