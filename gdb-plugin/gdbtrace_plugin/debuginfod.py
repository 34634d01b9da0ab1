"""Names for stack frames the stub found no symbol for, from debuginfod (no gdb import).

The stub names a pc from the symbol tables of the module it has; a stripped module leaves
frames as module+0xOFFSET with the module's build-id (stacks.py). When DEBUGINFOD_URLS is set
in gdb's environment, DebuginfodSymbolizer asks those servers for the module's debug info by
build-id (libdebuginfod, the client library gdb itself uses, with its cache and
DEBUGINFOD_TIMEOUT), then looks the offset up in that file's function symbols. The offset is
an ELF address of the module (docs/stacks.md), so the debug file's symbol values compare with
it directly.

Only names come back (no file:line: that would need a DWARF line-table reader here)."""

import bisect
import ctypes
import ctypes.util
import os
import struct

SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC, STT_GNU_IFUNC = 2, 10
STB_LOCAL = 0


class FunctionSymbols:
    """The function symbols of an ELF64 little-endian file (.symtab, else .dynsym), for
    looking up which function holds an address."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("%s is not a 64-bit little-endian ELF file" % path)
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        table = next((s for s in sections if s[1] == SHT_SYMTAB), None) or \
            next((s for s in sections if s[1] == SHT_DYNSYM), None)
        if table is None:
            raise ValueError("%s has no symbol table" % path)
        strtab = sections[table[6]]
        str_off = strtab[4]
        found = {}  # start -> (global?, end, name): a global name wins over a local alias
        for off in range(table[4], table[4] + table[5], 24):
            st_name, st_info, _other, st_shndx, value, size = struct.unpack_from("<IBBHQQ", data, off)
            if st_info & 0xF not in (STT_FUNC, STT_GNU_IFUNC) or st_shndx == 0 or size == 0:
                continue
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name:end].decode("utf-8", "replace")
            is_global = (st_info >> 4) != STB_LOCAL
            if value not in found or (is_global and not found[value][0]):
                found[value] = (is_global, value + size, name)
        self.starts = sorted(found)
        self.ends = [found[s][1] for s in self.starts]
        self.names = [found[s][2] for s in self.starts]

    def lookup(self, address):
        i = bisect.bisect_right(self.starts, address) - 1
        if i >= 0 and address < self.ends[i]:
            return self.names[i]
        return None


class DebuginfodSymbolizer:
    """A stacks.parse_lines symbolizer: (Module, offset) -> function name or None. Each
    module is fetched once; what happened to each is kept in `notes` for the output."""

    def __init__(self, urls, demangle=None):
        self.urls = urls
        self.demangle = demangle or (lambda name: name)
        self.tables = {}  # build-id -> FunctionSymbols, or None when it could not be had
        self.notes = {}  # module path -> one line saying where its names came from, or why not
        self._lib = self._client = None
        self._error = None

    def __call__(self, mod, offset):
        if not mod.build_id:
            self.notes[mod.path] = "module %s has no build-id: debuginfod cannot name its frames" % mod.path
            return None
        if mod.build_id not in self.tables:
            self.tables[mod.build_id] = self._fetch(mod)
        table = self.tables[mod.build_id]
        name = table.lookup(offset) if table else None
        return self.demangle(name) if name else None

    def close(self):
        if self._client:
            self._lib.debuginfod_end(self._client)
        self._client = None

    def _fetch(self, mod):
        path, error = self._find_debuginfo(mod.build_id)
        if path is None:
            self.notes[mod.path] = "module %s (build-id %s): not named through debuginfod: %s" % (
                mod.path, mod.build_id, error)
            return None
        try:
            table = FunctionSymbols(path)
        except (OSError, ValueError) as e:
            self.notes[mod.path] = "module %s (build-id %s): debuginfod's file %s is unusable: %s" % (
                mod.path, mod.build_id, path, e)
            return None
        what = {"none": "has no symbols", "dynamic": "has only dynamic symbols"}.get(
            mod.symbols, "has symbols that do not cover every frame")
        self.notes[mod.path] = "module %s %s; its frames were named from debuginfod's %s (build-id %s)" % (
            mod.path, what, path, mod.build_id)
        return table

    def _find_debuginfo(self, build_id):
        """(path, None) or (None, why)."""
        if not self._open():
            return None, self._error
        out = ctypes.c_void_p()
        fd = self._lib.debuginfod_find_debuginfo(self._client, build_id.encode(), 0, ctypes.byref(out))
        if fd < 0:
            return None, "%s (from %s)" % (os.strerror(-fd), self.urls)
        os.close(fd)
        path = ctypes.string_at(out.value).decode()
        self._libc.free(out)
        return path, None

    def _open(self):
        if self._client or self._error:
            return self._client is not None
        try:
            lib = ctypes.CDLL("libdebuginfod.so.1")
        except OSError as e:
            self._error = "libdebuginfod.so.1 is not installed (apt-get install libdebuginfod1): %s" % e
            return False
        lib.debuginfod_begin.restype = ctypes.c_void_p
        lib.debuginfod_end.argtypes = [ctypes.c_void_p]
        lib.debuginfod_find_debuginfo.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                                  ctypes.POINTER(ctypes.c_void_p)]
        lib.debuginfod_find_debuginfo.restype = ctypes.c_int
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"))
        self._libc.free.argtypes = [ctypes.c_void_p]
        self._lib, self._client = lib, lib.debuginfod_begin()
        if not self._client:
            self._error = "debuginfod_begin failed"
        return self._client is not None


def from_environment(demangle=None):
    """A DebuginfodSymbolizer when DEBUGINFOD_URLS is set (and not empty), else None."""
    urls = os.environ.get("DEBUGINFOD_URLS", "").strip()
    return DebuginfodSymbolizer(urls, demangle) if urls else None
