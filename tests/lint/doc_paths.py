#!/usr/bin/env python3
"""Every path the docs name exists: a doc that names a file the code no longer
has sends the next engineer looking for nothing.

Checks README.md, SECURITY.md, docs/*.md and the README.md of each top-level
folder. A path is a `backticked` token that looks like one: it has a slash and starts
with one of the repository's folders (or the stub's rooms), or is a bare file
name with a source suffix; a wildcard must match a file. It may be written from the
repository root, from gdbserver-agent/src (the stub's rooms: `trace/frame.h`),
from gdb-plugin/ or from the doc's own folder; an option, a URL or a path on
the user's machine (/usr/..., ~/...) is not a repository path.

Usage: doc_paths.py [REPO]   exits 1 and lists each missing path with its doc."""
import pathlib
import re
import subprocess
import sys

# Bare file names are checked when they have a source suffix (a doc that says
# `frame.h` means this repository's); gdb's own testsuite files (.exp) and the
# like are someone else's.
SOURCE_SUFFIXES = ("c", "cc", "h", "py", "sh")
TOKEN = re.compile(r"`([^`\s]+)`")
LOOKS_LIKE_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
# Where a relative path may be written from: the root, the stub's rooms, the
# shared C room, the plugin.
BASES = ("", "gdbserver-agent/src", "gdbserver-agent/src/shared", "gdb-plugin",
         "gdb-plugin/gdbtrace_plugin")


def rooms(repo):
    """First components that make a token a repository path."""
    names = set()
    for base in BASES:
        d = repo / base
        if d.is_dir():
            names.update(p.name for p in d.iterdir() if p.is_dir() and p.name not in ("build",))
    return names - {".git"}


def is_path(token, room_names):
    if token.startswith(".") or "..." in token or not LOOKS_LIKE_PATH.match(token.replace("*", "x")):
        return False
    if any(re.fullmatch(r"[A-Z_]+", part) for part in token.split("/")):
        return False  # a name standing for any (`tests/fuzz/corpus/TARGET/`)
    if "/" in token.rstrip("/"):
        return token.split("/", 1)[0] in room_names
    return "." in token and token.rsplit(".", 1)[-1] in SOURCE_SUFFIXES


def exists(repo, doc, token):
    token = token.rstrip("/")
    if token.endswith(".ko") or token.startswith("tests/qemu/work"):
        return True  # the module's build product; the guest kernels' cache
    if "/" not in token:
        return any(p for p in repo.glob("**/" + token) if ".git" not in p.parts and "build" not in p.parts)
    for base in (repo / b for b in BASES + (str(doc.parent.relative_to(repo)),)):
        target = base / token
        # a program or object built from a source of that name counts; a
        # wildcard must match something
        if "*" in token and any(base.glob(token)):
            return True
        if target.exists() or any(target.parent.glob(target.name + ".*")):
            return True
    # a build product the tree ignores (kmodule/shared/ after `make prepare`)
    return any(subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", t]).returncode == 0
               for t in (token, token + "/"))


def unnamed_rooms(repo):
    """docs/architecture.md is the map: every room of the stub (and of its shared C) and every
    top-level folder must appear on it as `room/`."""
    text = (repo / "docs/architecture.md").read_text()
    src = repo / "gdbserver-agent/src"
    rooms = [p.name + "/" for p in src.iterdir() if p.is_dir() and p.name != "shared"]
    rooms += ["shared/" + p.name + "/" for p in (src / "shared").iterdir() if p.is_dir()]
    rooms += [p.name + "/" for p in repo.iterdir()
              if p.is_dir() and (repo / ".git").exists() and p.name not in (".git", "Testing")
              and subprocess.run(["git", "-C", str(repo), "ls-files", "--error-unmatch", "-z", p.name],
                                 capture_output=True).returncode == 0]
    return [f"docs/architecture.md: the room `{r}` is not on the map" for r in sorted(rooms)
            if f"`{r}" not in text and f"`{r.rstrip('/')}`" not in text]


def main():
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    docs = [repo / "README.md", repo / "SECURITY.md", *sorted((repo / "docs").glob("*.md")),
            *sorted(repo.glob("*/README.md"))]
    missing = []
    checked = 0
    room_names = rooms(repo)
    for doc in docs:
        if not doc.exists():
            continue
        for n, line in enumerate(doc.read_text().split("\n"), 1):
            for token in TOKEN.findall(line):
                if not is_path(token, room_names):
                    continue
                checked += 1
                if not exists(repo, doc, token):
                    missing.append(f"{doc.relative_to(repo)}:{n}: `{token}` names no file of the repository")
    missing += unnamed_rooms(repo)
    for m in missing:
        print(m)
    print(f"doc paths: {checked} checked, {len(missing)} missing")
    return 1 if missing or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
