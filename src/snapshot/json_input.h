#pragma once
/// @file json_input.h
/// @brief JSON parsing for the readers: nlohmann's errors turned into one-line InputErrors.
///
/// Internal to the readers (snapshot and diagnose); not part of their public headers.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fragscope::snapshot {

/// @brief Parses one JSON document (no comments, no NaN).
/// @throws InputError "SOURCE: invalid JSON: parse error at line L, column C: ...".
nlohmann::json parse_json_document(std::string_view text, std::string_view source);

/// @brief nlohmann's message without its "[json.exception.x.y] " tag and with no line breaks.
std::string json_error_text(const nlohmann::json::exception& error);

}  // namespace fragscope::snapshot
