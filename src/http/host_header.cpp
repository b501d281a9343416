#include "http/host_header.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace fragscope::http {
namespace {

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<HostParts> split_host(std::string_view host) {
  HostParts parts{host, {}, false};
  bool has_port = false;
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    parts = {host.substr(1, close - 1), {}, true};
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return std::nullopt;
      parts.port = host.substr(close + 2);
      has_port = true;
    }
  } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    parts = {host.substr(0, colon), host.substr(colon + 1), false};
    has_port = true;
  }
  if (has_port && !all_digits(parts.port)) return std::nullopt;  // "name:" or "name:x"
  return parts;
}

bool names_an_address(const HostParts& host) {
  const std::string name(host.name);
  if (host.bracketed) {
    in6_addr v6{};
    return ::inet_pton(AF_INET6, name.c_str(), &v6) == 1;
  }
  in_addr v4{};
  return ::inet_pton(AF_INET, name.c_str(), &v4) == 1 || same_name(name, "localhost");
}

bool host_is_address_or_named(std::string_view host, const std::vector<std::string>& names) {
  if (host.empty()) return true;
  const auto parts = split_host(host);
  if (!parts) return false;
  if (names_an_address(*parts)) return true;
  return !parts->bracketed && std::any_of(names.begin(), names.end(), [&](const std::string& known) {
    return !known.empty() && same_name(parts->name, known);
  });
}

}  // namespace fragscope::http
