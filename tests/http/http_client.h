#pragma once
/// @file http_client.h
/// @brief Minimal HTTP/1.0 clients for tests against the HTTP server: a GET that never waits
/// longer than its timeout, and raw loopback connections for slow and hostile clients.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace fragscope::http::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// A connected loopback TCP socket, or -1. A `receive_buffer` above 0 is set before connecting, so the
/// window the client advertises is small from the first byte (set later, the kernel keeps the larger one).
inline int connect_loopback(int port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Reads until the peer closes or `timeout` passes; false on timeout.
inline bool read_until_closed(int fd, std::string& raw, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return true;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
}

/// Sends `request` as is to 127.0.0.1:`port` and parses the answer; status 0 when the
/// connection failed or no complete answer came within `timeout`.
inline HttpResponse http_exchange(int port, const std::string& request,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  HttpResponse response;
  const int fd = connect_loopback(port);
  if (fd < 0) return response;
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  const bool closed = read_until_closed(fd, raw, timeout);
  ::close(fd);
  if (!closed) return response;
  if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() > 12) response.status = std::stoi(raw.substr(9, 3));
  const auto body = raw.find("\r\n\r\n");
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

/// GETs `path` from 127.0.0.1:`port`.
inline HttpResponse http_get(int port, const std::string& path,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  return http_exchange(port, "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n", timeout);
}

/// True while the server keeps `fd` open (nothing to read yet, no EOF, no reset).
inline bool still_open(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace fragscope::http::testing
