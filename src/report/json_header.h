#pragma once
/// @file json_header.h
/// @brief What every `--json` document carries: "schema", the version of its layout, and
/// "build_info" {"version", "revision"}, the fragscope that wrote it (util/build_info.h).
///
/// A document's schema number goes up when one of its keys changes meaning, type or goes away;
/// a key added leaves it as it is, so a reader checks `schema` and ignores keys it does not
/// know. docs/json-schemas.md lists every key of every document.

#include <string>

#include "util/build_info.h"

namespace fragscope::report {

inline constexpr int kAnalyzeJsonSchema = 1;
inline constexpr int kReplayJsonSchema = 1;
inline constexpr int kWhatIfJsonSchema = 1;
inline constexpr int kDoctorJsonSchema = 1;
inline constexpr int kCheckJsonSchema = 1;
inline constexpr int kPlanJsonSchema = 1;

/// @brief Sets doc["schema"] and doc["build_info"] (nlohmann::json or ordered_json; an ordered
/// document gets them where they are first set: call this first to have them on top).
template <typename Json>
void add_json_header(Json& doc, int schema) {
  const BuildInfo info = build_info();
  doc["schema"] = schema;
  doc["build_info"] = {{"version", std::string(info.version)}, {"revision", std::string(info.revision)}};
}

}  // namespace fragscope::report
