#include "http/server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::http {
namespace {

using Clock = std::chrono::steady_clock;

// Descriptors the process needs besides its connections (the agent's NVML, rank folders, event log).
constexpr rlim_t kReservedDescriptors = 64;
// Accepts per wake-up, so reading the connections already open is never put off for long.
constexpr int kAcceptBurst = 64;

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
  }
  return "Internal Server Error";
}

/// "host:port", "[v6]:port" or "port" → the address to bind; throws the reason otherwise.
addrinfo* resolve_listen_address(const std::string& listen_address) {
  std::string host;
  std::string port = listen_address;
  if (listen_address.starts_with('[')) {
    const auto close = listen_address.find("]:");
    if (close == std::string::npos) throw std::runtime_error("expected [IPV6]:PORT");
    host = listen_address.substr(1, close - 1);
    port = listen_address.substr(close + 2);
  } else if (const auto colon = listen_address.rfind(':'); colon != std::string::npos) {
    host = listen_address.substr(0, colon);
    port = listen_address.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) || std::stoi(port) > 65535) {
    throw std::runtime_error(fmt::format("'{}' is not a port number", port));
  }
  addrinfo hints{};
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    throw std::runtime_error(::gai_strerror(error));
  }
  return found;
}

int open_listener(const std::string& listen_address) {
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> address(resolve_listen_address(listen_address), ::freeaddrinfo);
  const int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::bind(fd, address->ai_addr, address->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::runtime_error(std::strerror(error));
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

std::size_t fit_descriptor_limit(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  const rlim_t room = limit.rlim_cur > 2 * kReservedDescriptors ? limit.rlim_cur - kReservedDescriptors
                                                                  : limit.rlim_cur / 2;
  return std::max<std::size_t>(1, std::min<std::size_t>(wanted, room));
}

}  // namespace

Response Response::text(int status, std::string text, std::string content_type) {
  Response response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::make_shared<const std::string>(std::move(text));
  return response;
}

struct Server::Connection {
  enum class State { kReading, kWriting, kLingering };

  int fd = -1;
  State state = State::kReading;
  Clock::time_point deadline;
  std::string received;
  std::string head;  ///< status line and headers, then any small body
  std::shared_ptr<const std::string> body;  ///< the handler's answer, shared, not copied
  Clock::time_point answered;  ///< when `body` was handed to this connection
  std::size_t sent = 0;
  std::size_t lingered = 0;  ///< bytes read after the answer

  ~Connection() {
    if (fd >= 0) ::close(fd);
  }
  std::size_t response_size() const { return head.size() + (body ? body->size() : 0); }
};

/// The serving thread: owns the connections, in accept order.
class Server::Loop {
 public:
  explicit Loop(const Server& server) : server_(server) {}

  void run() {
    std::vector<pollfd> polled;
    std::vector<Connection*> polled_connections;
    for (;;) {
      polled.clear();
      polled_connections.clear();
      polled.push_back({server_.wake_read_fd_, POLLIN, 0});
      const bool accepting = Clock::now() >= accept_paused_until_;
      polled.push_back({accepting ? server_.listen_fd_ : -1, POLLIN, 0});
      for (auto& connection : connections_) {
        polled.push_back(
            {connection->fd, connection->state == Connection::State::kWriting ? short(POLLOUT) : short(POLLIN), 0});
        polled_connections.push_back(connection.get());
      }
      if (::poll(polled.data(), polled.size(), next_timeout_ms()) < 0 && errno != EINTR) return;
      if (polled[0].revents != 0) return;  // the destructor asks the loop to end
      for (std::size_t i = 0; i < polled_connections.size(); ++i) {
        // One closed to make room for another's answer may still have had something to do.
        if (polled[i + 2].revents != 0 && !finished(*polled_connections[i])) advance(*polled_connections[i]);
      }
      if (polled[1].revents != 0) accept_new();
      close_finished_and_overdue();
    }
  }

 private:
  int next_timeout_ms() const {
    auto next = Clock::now() + std::chrono::seconds(1);
    for (const auto& connection : connections_) next = std::min(next, connection->deadline);
    if (accept_paused_until_ > Clock::now()) next = std::min(next, accept_paused_until_);
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<std::int64_t>(wait + 1, 0, 1000));
  }

  void accept_new() {
    for (int i = 0; i < kAcceptBurst; ++i) {
      const int fd = ::accept4(server_.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: make room, or stop accepting for a moment rather than spin.
          if (!evict_one()) accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      if (connections_.size() >= server_.limits_.max_connections) evict_one();
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      auto connection = std::make_unique<Connection>();
      connection->fd = fd;
      connection->deadline = Clock::now() + server_.limits_.head_timeout;
      connections_.push_back(std::move(connection));
      advance(*connections_.back());  // the request is often there already
    }
  }

  /// Closes the oldest connection still sending its head, else the oldest one; false if none.
  bool evict_one() {
    if (connections_.empty()) return false;
    auto victim = std::find_if(connections_.begin(), connections_.end(),
                               [](const auto& c) { return c->state == Connection::State::kReading; });
    connections_.erase(victim != connections_.end() ? victim : connections_.begin());
    return true;
  }

  void advance(Connection& connection) {
    switch (connection.state) {
      case Connection::State::kReading: read_head(connection); break;
      case Connection::State::kWriting: write_response(connection); break;
      case Connection::State::kLingering: linger(connection); break;
    }
  }

  void read_head(Connection& connection) {
    char buffer[4096];
    const std::size_t limit = server_.limits_.max_head_bytes + 1;  // one byte past the limit tells "too large"
    bool peer_done = false;  // closed its side: what it sent is all there will be
    while (connection.received.size() < limit) {
      const ssize_t n = ::recv(connection.fd, buffer, std::min(sizeof buffer, limit - connection.received.size()), 0);
      if (n > 0) {
        connection.received.append(buffer, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        peer_done = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
    }
    const RequestHead request = parse_request_head(connection.received, server_.limits_.max_head_bytes);
    if (request.status == RequestHead::Status::kIncomplete) {
      if (peer_done) finish(connection);
      return;
    }
    connection.received.clear();
    connection.received.shrink_to_fit();
    respond(connection, request);
    connection.state = Connection::State::kWriting;
    connection.deadline = Clock::now() + server_.limits_.write_timeout;
    write_response(connection);
  }

  void respond(Connection& connection, const RequestHead& request) {
    // The answers the server makes itself, which no handler hardens: never sniffed, never cached.
    static constexpr std::string_view kOwnAnswerHeaders =
        "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n";
    Response response;
    if (request.status == RequestHead::Status::kBad) {
      response = Response::text(request.error_status, request.error + "\n");
      response.extra_headers = kOwnAnswerHeaders;
      if (request.error_status == 405) response.extra_headers += "Allow: GET, HEAD\r\n";
    } else {
      try {
        response = server_.handler_(
            Request{request.method, request.path, request.query, request.host, request.origin, request.sec_fetch_site});
      } catch (const std::exception& e) {
        response = Response::text(500, fmt::format("the server failed: {}\n", e.what()));
        response.extra_headers = kOwnAnswerHeaders;
      }
    }
    const std::size_t length = response.body ? response.body->size() : 0;
    connection.head = fmt::format(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n", response.status,
        reason_phrase(response.status), response.content_type, length, response.extra_headers);
    if (request.method != "HEAD" && response.body) {
      make_room_for(*response.body);
      connection.body = std::move(response.body);
      connection.answered = Clock::now();
    }
  }

  /// Closes the connections that hold the oldest other bodies until `body` fits within
  /// max_body_bytes_in_flight beside the bodies still held.
  void make_room_for(const std::string& body) {
    for (;;) {
      std::vector<std::pair<const std::string*, Clock::time_point>> held;  // body, first answered
      std::size_t held_bytes = 0;
      for (const auto& connection : connections_) {
        if (!connection->body || finished(*connection)) continue;
        const std::string* other = connection->body.get();
        if (other == &body) return;  // shared with a client being served: it costs nothing more
        auto found = std::find_if(held.begin(), held.end(), [&](const auto& h) { return h.first == other; });
        if (found == held.end()) {
          held.emplace_back(other, connection->answered);
          held_bytes += other->size();
        } else {
          found->second = std::min(found->second, connection->answered);
        }
      }
      if (held.empty() || held_bytes + body.size() <= server_.limits_.max_body_bytes_in_flight) return;
      const std::string* oldest =
          std::min_element(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
              ->first;
      for (const auto& connection : connections_) {
        if (connection->body.get() == oldest) reset(*connection);
      }
    }
  }

  void write_response(Connection& connection) {
    while (connection.sent < connection.response_size()) {
      iovec parts[2];
      int count = 0;
      if (connection.sent < connection.head.size()) {
        parts[count++] = {connection.head.data() + connection.sent, connection.head.size() - connection.sent};
      }
      if (connection.body) {
        const std::size_t body_sent =
            connection.sent > connection.head.size() ? connection.sent - connection.head.size() : 0;
        parts[count++] = {const_cast<char*>(connection.body->data()) + body_sent, connection.body->size() - body_sent};
      }
      msghdr message{};
      message.msg_iov = parts;
      message.msg_iovlen = static_cast<std::size_t>(count);
      const ssize_t n = ::sendmsg(connection.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) finish(connection);
        return;
      }
      connection.sent += static_cast<std::size_t>(n);
    }
    // All sent: say so, then read what the client may still send, so closing does not reset
    // the connection (and lose the answer) while its bytes sit unread.
    connection.body.reset();
    ::shutdown(connection.fd, SHUT_WR);
    connection.state = Connection::State::kLingering;
    connection.deadline = Clock::now() + server_.limits_.linger_timeout;
    linger(connection);
  }

  void linger(Connection& connection) {
    char buffer[4096];
    // Bounded: a client that keeps sending must not keep the server's one thread here.
    while (connection.lingered < server_.limits_.max_linger_bytes) {
      const ssize_t n = ::recv(connection.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        connection.lingered += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) finish(connection);
      return;
    }
    finish(connection);
  }

  static void finish(Connection& connection) { connection.deadline = Clock::time_point::min(); }
  static bool finished(const Connection& connection) { return connection.deadline == Clock::time_point::min(); }

  /// Closes a connection whose answer is not all sent: a reset, so the kernel drops what it holds.
  static void reset(Connection& connection) {
    const struct ::linger reset{1, 0};
    ::setsockopt(connection.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    connection.body.reset();
    finish(connection);
  }

  void close_finished_and_overdue() {
    const auto now = Clock::now();
    std::erase_if(connections_, [now](const auto& connection) {
      if (connection->deadline > now) return false;
      // A client that stopped reading: reset rather than leave the kernel holding its page.
      if (connection->state == Connection::State::kWriting && !finished(*connection)) reset(*connection);
      return true;
    });
  }

  const Server& server_;
  std::list<std::unique_ptr<Connection>> connections_;
  Clock::time_point accept_paused_until_{};
};

Server::Server(const std::string& listen_address, Handler handler, Limits limits)
    : handler_(std::move(handler)), limits_(limits) {
  limits_.max_connections = fit_descriptor_limit(limits_.max_connections);
  try {
    listen_fd_ = open_listener(listen_address);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("--listen {}: cannot serve HTTP there: {}", listen_address, e.what()));
  }
  port_ = bound_port(listen_fd_);
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw InputError(fmt::format("--listen {}: cannot start the server: {}", listen_address, std::strerror(errno)));
  }
  wake_read_fd_ = wake[0];
  wake_write_fd_ = wake[1];
  thread_ = std::thread([this] { Loop(*this).run(); });
}

Server::~Server() {
  (void)!::write(wake_write_fd_, "x", 1);
  thread_.join();
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
  ::close(listen_fd_);
}

}  // namespace fragscope::http
