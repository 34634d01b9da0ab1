// Byte transports gdb can talk to us over: TCP, stdin/stdout ("-"), a tty.
//
// Reads are asynchronous (so the io_context can also deliver target events);
// writes are synchronous and complete, like gdbserver's putpkt, which keeps
// replies strictly ordered without an output queue.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "common/result.h"

namespace asio {
class io_context;
}

namespace gdbtrace::rsp {

class Transport {
public:
  using ReadHandler = std::function<void(std::error_code, std::string_view)>;
  virtual ~Transport() = default;
  // Reads whatever is available (at least one byte) and calls HANDLER once.
  virtual void async_read_some(ReadHandler handler) = 0;
  virtual std::error_code write_all(std::string_view data) = 0;
  virtual void close() = 0;
  // The peer closed its end (an unread EOF or a reset is pending): a socket
  // says so without reading; other transports never do.
  virtual bool peer_hung_up() const { return false; }
};

// gdb's "target remote | gdbtrace-server - prog": the protocol runs over the
// pipe that was stdin/stdout. Moves it to new descriptors and points our fd 0
// at /dev/null and fd 1 at stderr, so inferiors we start (which inherit 0-2)
// cannot read or write the protocol stream. Call before starting programs.
struct StdioChannel {
  int in_fd = -1, out_fd = -1;
};
Result<StdioChannel> take_stdio_channel();
Result<std::unique_ptr<Transport>> make_stdio_transport(asio::io_context& io, StdioChannel channel);
// A serial line / tty device, opened raw.
Result<std::unique_ptr<Transport>> make_serial_transport(asio::io_context& io,
                                                         const std::string& device);

// A listening TCP socket that hands out one connection at a time.
class TcpListener {
public:
  struct Peer {
    std::string host;
    uint16_t port = 0;
  };
  using AcceptHandler = std::function<void(std::error_code, std::unique_ptr<Transport>, Peer)>;
  virtual ~TcpListener() = default;
  virtual uint16_t port() const = 0;
  virtual void async_accept(AcceptHandler handler) = 0;
  virtual void close() = 0;
};

// Binds HOST:PORT (empty host: 127.0.0.1; port 0: any free port). The error
// message is the system's text (e.g. "Address already in use").
Result<std::unique_ptr<TcpListener>> listen_tcp(asio::io_context& io, const std::string& host,
                                                uint16_t port);

} // namespace gdbtrace::rsp
