// Test oracle for the module's instruction decoder (gdbserver-agent/src/shared/x86/emulate.c): the
// emulation recipe and the length Zydis makes of an instruction. The module decodes probed
// instructions itself; the unit tests hold its decoder against this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "gdbtrace_uapi.h"

namespace gdbtrace::kmod::test {

// The recipe for the instruction at the start of BYTES, or nullopt when it is
// not one of the emulated forms.
std::optional<gdbtrace_emu> zydis_emu_recipe(std::span<const uint8_t> bytes);

// Length of the instruction at the start of BYTES, or nullopt when Zydis
// cannot decode it.
std::optional<size_t> zydis_length(std::span<const uint8_t> bytes);

} // namespace gdbtrace::kmod::test
