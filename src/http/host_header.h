#pragma once
/// @file host_header.h
/// @brief Which Host headers a server answers to, against DNS rebinding: a web page that the
/// browser loaded from an attacker's name, re-resolved to this server's address, still sends
/// that name in Host, so answering only to addresses and known names keeps the page from reading
/// what the server serves (on loopback or the pod network).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope::http {

/// @brief A Host header's parts: the name (an IPv6 literal without its brackets) and the port's
/// text ("" when none). Views into the header.
struct HostParts {
  std::string_view name;
  std::string_view port;
  bool bracketed = false;  ///< "[...]": the name must be an IPv6 literal
};

/// @brief `host` split into its parts; nullopt when malformed: an unclosed bracket, something other
/// than ":port" after it, or a port that is empty or not all digits.
std::optional<HostParts> split_host(std::string_view host);

/// @brief True when the name is an IP address literal (IPv6 when bracketed, else IPv4) or "localhost"
/// (not bracketed), compared without case.
bool names_an_address(const HostParts& host);

/// @brief True when `host` (a Host header, "" when absent: no browser omits it) names the server
/// by an IP address literal (IPv4, or IPv6 in brackets), "localhost", or one of `names` (compared
/// without case), with any port or none. The port is not checked: port forwarding and node ports
/// change it, and it is not what rebinding forges.
bool host_is_address_or_named(std::string_view host, const std::vector<std::string>& names);

}  // namespace fragscope::http
