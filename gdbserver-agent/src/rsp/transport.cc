#include "rsp/transport.h"

#include <array>
#include <asio.hpp>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <type_traits>

namespace gdbtrace::rsp {
namespace {

// One transport over any pair of asio streams (the same object for sockets
// and ttys; two descriptors for stdin/stdout).
template <typename ReadStream, typename WriteStream> class StreamTransport : public Transport {
public:
  StreamTransport(std::unique_ptr<ReadStream> in, WriteStream* out)
      : in_(std::move(in)), out_(out) {}
  StreamTransport(std::unique_ptr<ReadStream> in, std::unique_ptr<WriteStream> out)
      : in_(std::move(in)), owned_out_(std::move(out)), out_(owned_out_.get()) {}

  void async_read_some(ReadHandler handler) override {
    in_->async_read_some(asio::buffer(buf_),
                         [this, handler = std::move(handler)](std::error_code ec, size_t n) {
                           handler(ec, std::string_view(buf_.data(), ec ? 0 : n));
                         });
  }

  bool peer_hung_up() const override {
    if constexpr (std::is_same_v<ReadStream, asio::ip::tcp::socket>) {
      char byte;
      const ssize_t n = ::recv(in_->native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
  }

  std::error_code write_all(std::string_view data) override {
    std::error_code ec;
    asio::write(*out_, asio::buffer(data.data(), data.size()), ec);
    return ec;
  }

  void close() override {
    std::error_code ec;
    in_->close(ec);
    if (owned_out_)
      owned_out_->close(ec);
  }

private:
  std::unique_ptr<ReadStream> in_;
  std::unique_ptr<WriteStream> owned_out_;
  WriteStream* out_;
  std::array<char, 16384> buf_{};
};

using TcpTransport = StreamTransport<asio::ip::tcp::socket, asio::ip::tcp::socket>;

class AsioTcpListener : public TcpListener {
public:
  explicit AsioTcpListener(asio::ip::tcp::acceptor acceptor) : acceptor_(std::move(acceptor)) {}

  uint16_t port() const override { return acceptor_.local_endpoint().port(); }

  void async_accept(AcceptHandler handler) override {
    acceptor_.async_accept(
        [handler = std::move(handler)](std::error_code ec, asio::ip::tcp::socket socket) {
          if (ec) {
            handler(ec, nullptr, {});
            return;
          }
          Peer peer;
          std::error_code peer_ec;
          auto remote = socket.remote_endpoint(peer_ec);
          if (!peer_ec)
            peer = {remote.address().to_string(), remote.port()};
          // Packets are small and interactive: don't let Nagle delay replies.
          socket.set_option(asio::ip::tcp::no_delay(true), peer_ec);
          auto sock = std::make_unique<asio::ip::tcp::socket>(std::move(socket));
          auto* raw = sock.get();
          handler({}, std::make_unique<TcpTransport>(std::move(sock), raw), peer);
        });
  }

  void close() override {
    std::error_code ec;
    acceptor_.close(ec);
  }

private:
  asio::ip::tcp::acceptor acceptor_;
};

} // namespace

Result<StdioChannel> take_stdio_channel() {
  StdioChannel ch;
  ch.in_fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  ch.out_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (ch.in_fd < 0 || ch.out_fd < 0)
    return make_error(errno, "cannot duplicate stdin/stdout");
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
    return make_error(errno, "cannot redirect stdin/stdout");
  if (null_fd != STDIN_FILENO)
    ::close(null_fd);
  return ch;
}

Result<std::unique_ptr<Transport>> make_stdio_transport(asio::io_context& io,
                                                        StdioChannel channel) {
  std::error_code ec;
  auto in = std::make_unique<asio::posix::stream_descriptor>(io);
  auto out = std::make_unique<asio::posix::stream_descriptor>(io);
  in->assign(channel.in_fd, ec);
  if (!ec)
    out->assign(channel.out_fd, ec);
  if (ec)
    return make_error(ec.value(), "stdin/stdout: " + ec.message());
  return std::unique_ptr<Transport>(
      new StreamTransport<asio::posix::stream_descriptor, asio::posix::stream_descriptor>(
          std::move(in), std::move(out)));
}

Result<std::unique_ptr<Transport>> make_serial_transport(asio::io_context& io,
                                                         const std::string& device) {
  auto port = std::make_unique<asio::serial_port>(io);
  std::error_code ec;
  port->open(device, ec);
  if (ec)
    return make_error(ec.value(), device + ": " + ec.message());
  auto* raw = port.get();
  return std::unique_ptr<Transport>(
      new StreamTransport<asio::serial_port, asio::serial_port>(std::move(port), raw));
}

Result<std::unique_ptr<TcpListener>> listen_tcp(asio::io_context& io, const std::string& host,
                                                uint16_t port) {
  std::error_code ec;
  auto address = asio::ip::make_address(host.empty() ? "127.0.0.1" : host, ec);
  if (ec) {
    // Not a literal address: resolve the name (e.g. "localhost"), worded like gdbserver.
    addrinfo hint{};
    hint.ai_family = AF_UNSPEC;
    hint.ai_socktype = SOCK_STREAM;
    addrinfo* info = nullptr;
    int r = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hint, &info);
    if (r != 0 || !info)
      return make_error(EINVAL, host + ":" + std::to_string(port) +
                                    ": cannot resolve name: " + ::gai_strerror(r));
    asio::ip::tcp::endpoint resolved;
    resolved.resize(info->ai_addrlen);
    std::memcpy(resolved.data(), info->ai_addr, info->ai_addrlen);
    ::freeaddrinfo(info);
    address = resolved.address();
  }
  asio::ip::tcp::endpoint endpoint(address, port);
  asio::ip::tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec)
    acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(endpoint, ec);
  if (!ec)
    acceptor.listen(1, ec);
  if (ec)
    return make_error(ec.value(), ec.message());
  return std::unique_ptr<TcpListener>(new AsioTcpListener(std::move(acceptor)));
}

} // namespace gdbtrace::rsp
