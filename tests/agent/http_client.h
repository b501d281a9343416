#pragma once
/// @file http_client.h
/// @brief A minimal blocking HTTP/1.0 GET for tests against the agent's server.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace fragscope::agent::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// GETs `path` from 127.0.0.1:`port`; status 0 when the connection failed.
inline HttpResponse http_get(int port, const std::string& path) {
  HttpResponse response;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return response;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!::write(fd, request.data(), request.size());
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) raw.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() > 12) response.status = std::stoi(raw.substr(9, 3));
  const auto body = raw.find("\r\n\r\n");
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

}  // namespace fragscope::agent::testing
