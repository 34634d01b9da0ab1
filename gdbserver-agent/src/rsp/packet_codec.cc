#include "rsp/packet_codec.h"

#include "common/hex.h"

namespace gdbtrace::rsp {

uint8_t checksum(std::string_view payload) {
  uint8_t sum = 0;
  for (char c : payload)
    sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(c));
  return sum;
}

static bool needs_escape(char c) {
  return c == '$' || c == '#' || c == '}' || c == '*';
}

std::string escape_binary(std::string_view data) {
  std::string out;
  out.reserve(data.size() + data.size() / 8);
  for (char c : data) {
    if (needs_escape(c)) {
      out.push_back('}');
      out.push_back(static_cast<char>(c ^ 0x20));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> unescape_binary(std::string_view data) {
  std::string out;
  out.reserve(data.size());
  for (size_t i = 0; i < data.size(); i++) {
    if (data[i] == '}') {
      if (++i == data.size())
        return std::nullopt;
      out.push_back(static_cast<char>(data[i] ^ 0x20));
    } else {
      out.push_back(data[i]);
    }
  }
  return out;
}

std::string run_length_encode(std::string_view payload) {
  std::string out;
  out.reserve(payload.size());
  size_t i = 0;
  while (i < payload.size()) {
    char c = payload[i];
    size_t repeats = 0;
    while (i + 1 + repeats < payload.size() && payload[i + 1 + repeats] == c && repeats < 97)
      repeats++;
    // '#' and '$' (counts 6 and 7) cannot follow '*'; encode a shorter run.
    while (repeats + 29 == '#' || repeats + 29 == '$')
      repeats--;
    out.push_back(c);
    if (repeats >= 3) {
      out.push_back('*');
      out.push_back(static_cast<char>(repeats + 29));
      i += 1 + repeats;
    } else {
      i += 1;
    }
  }
  return out;
}

std::optional<std::string> run_length_decode(std::string_view payload) {
  std::string out;
  for (size_t i = 0; i < payload.size(); i++) {
    if (payload[i] == '*') {
      if (out.empty() || i + 1 >= payload.size())
        return std::nullopt;
      int count = static_cast<unsigned char>(payload[++i]) - 29;
      if (count < 0)
        return std::nullopt;
      out.append(static_cast<size_t>(count), out.back());
    } else {
      out.push_back(payload[i]);
    }
  }
  return out;
}

std::string frame_packet(std::string_view payload, bool rle, char start) {
  std::string body = rle ? run_length_encode(payload) : std::string(payload);
  static const char digits[] = "0123456789abcdef";
  uint8_t sum = checksum(body);
  std::string out;
  out.reserve(body.size() + 4);
  out.push_back(start);
  out += body;
  out.push_back('#');
  out.push_back(digits[sum >> 4]);
  out.push_back(digits[sum & 15]);
  return out;
}

void PacketDecoder::feed(std::string_view bytes, std::vector<Event>& out) {
  for (char c : bytes) {
    switch (state_) {
    case State::Idle:
      if (c == '$') {
        state_ = State::Payload;
        payload_.clear();
        oversize_ = false;
      } else if (c == '+') {
        out.push_back({Event::Ack, {}});
      } else if (c == '-') {
        out.push_back({Event::Nack, {}});
      } else if (c == '\x03') {
        out.push_back({Event::Interrupt, {}});
      }
      // Anything else between packets is line noise: ignored, as gdbserver does.
      break;
    case State::Payload:
      if (c == '#') {
        state_ = State::Checksum1;
      } else if (c == '$') {
        // A new start inside a packet: gdb gave up on the old one and restarted.
        payload_.clear();
        oversize_ = false;
      } else if (payload_.size() >= max_payload_) {
        oversize_ = true; // keep consuming up to '#', but stop storing
      } else {
        payload_.push_back(c);
      }
      break;
    case State::Checksum1:
      sum_hi_ = hex::digit(c);
      state_ = State::Checksum2;
      break;
    case State::Checksum2: {
      int lo = hex::digit(c);
      state_ = State::Idle;
      if (oversize_) {
        payload_.clear();
        out.push_back({Event::Oversize, {}});
      } else if (sum_hi_ < 0 || lo < 0 || checksum(payload_) != sum_hi_ * 16 + lo) {
        out.push_back({Event::BadChecksum, std::move(payload_)});
        payload_.clear();
      } else {
        out.push_back({Event::Packet, std::move(payload_)});
        payload_.clear();
      }
      break;
    }
    }
  }
}

} // namespace gdbtrace::rsp
