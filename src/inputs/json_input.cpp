#include "inputs/json_input.h"

#include <fmt/format.h>

#include "inputs/text_file.h"
#include "util/error.h"

namespace fragscope::inputs {

std::string json_error_text(const nlohmann::json::exception& error) {
  std::string text = error.what();
  if (text.starts_with("[json.exception.")) {
    if (const auto close = text.find("] "); close != std::string::npos) text.erase(0, close + 2);
  }
  return printable_excerpt(text, 300);
}

nlohmann::json parse_json(std::string_view text) {
  const auto bounded = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw nlohmann::json::parse_error::create(101, 0, fmt::format("nested deeper than {}", kMaxJsonDepth), nullptr);
    return true;
  };
  return nlohmann::json::parse(text.begin(), text.end(), bounded);
}

nlohmann::json parse_json_object(std::string_view text, std::string_view source, std::string_view what) {
  nlohmann::json document;
  try {
    document = parse_json(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", source, json_error_text(e)));
  }
  if (!document.is_object())
    throw InputError(fmt::format("{}: {} must be a JSON object, found {}", source, what, document.type_name()));
  return document;
}

}  // namespace fragscope::inputs
