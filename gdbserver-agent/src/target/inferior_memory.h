// Raw access to a traced process's memory: /proc/pid/mem with pread/pwrite
// (works while threads run, any length in one call), PTRACE_PEEKDATA/POKEDATA
// word by word when the file cannot be opened. No breakpoint shadowing here.
#pragma once

#include <cstdint>
#include <span>
#include <sys/types.h>

#include "common/result.h"

namespace gdbtrace {

class InferiorMemory {
public:
  InferiorMemory() = default;
  InferiorMemory(const InferiorMemory&) = delete;
  InferiorMemory& operator=(const InferiorMemory&) = delete;
  ~InferiorMemory() { close(); }

  // (Re)opens /proc/PID/mem; after an exec the old file refers to the old image.
  void open(pid_t pid);
  void close();

  // Bytes read/written from the start of the range; an error only when the
  // very first byte is inaccessible.
  Result<size_t> read(uint64_t address, std::span<uint8_t> out);
  Result<size_t> write(uint64_t address, std::span<const uint8_t> data);

private:
  Result<size_t> peek(uint64_t address, std::span<uint8_t> out);
  Result<size_t> poke(uint64_t address, std::span<const uint8_t> data);

  pid_t pid_ = 0;
  int fd_ = -1;
};

} // namespace gdbtrace
