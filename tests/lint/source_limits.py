#!/usr/bin/env python3
"""Size limits of production code: no source file over 700 lines, no function
over 120 lines (gdbserver-agent/src, kmodule, gdb-plugin). Long files and
functions are where a reader loses the thread; the limits are the project's
rule (docs/architecture.md, "Source rules") and this check keeps them.

Usage: source_limits.py [REPO]   exits 1 and names each file or function over.

C and C++ functions are found by the project's clang-format layout: a
definition starts on an unindented line (or one indented by namespace-free
class scope) whose signature ends in `{` (C++), or whose `{` stands alone in
column 0 (the module's kernel style), and ends at the `}` of the same
indentation. Python functions come from the ast module."""
import ast
import pathlib
import re
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120
ROOTS = ["gdbserver-agent/src", "kmodule", "gdb-plugin"]
C_SUFFIXES = {".c", ".cc", ".h"}

CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|case|return|namespace|struct|class|enum|union|"
                     r"typedef|extern|template|using|static_assert|#)\b")


def c_functions(lines):
    """Yields (signature, first line number, line count) for each definition:
    a signature starting in column 0 (or at 2 spaces, a member defined in a
    class body) that may run over several lines and ends in `{`, either at the
    end of its last line (clang-format) or alone in column 0 (kernel style);
    the body ends at the `}` of the signature's indentation. A body is skipped
    whole, so lambdas count towards the function that holds them."""
    i = 0
    while i < len(lines):
        m = re.match(r"^( {0,2})[A-Za-z_~]", lines[i])
        text = lines[i].rstrip()
        if (not m or CONTROL.match(text) or text.endswith((";", ":")) or
                (text.endswith(",") and "(" not in text)):
            i += 1
            continue
        indent = m.group(1)
        sig = i
        j = i
        while j < len(lines) and j - sig < 8:
            text = lines[j].rstrip()
            if text.endswith("{") or text == "{" or text.endswith(";") or not text:
                break
            j += 1
        opening = lines[j].rstrip() if j < len(lines) else ""
        joined = " ".join(line.strip() for line in lines[sig:j + 1])
        if not opening.endswith("{") or "(" not in joined or "=" in joined.split("(")[0]:
            i = j + 1
            continue
        end = j + 1
        while end < len(lines) and not re.match(r"^" + indent + r"\}", lines[end]):
            end += 1
        yield lines[sig].strip(), sig + 1, end - sig + 1
        i = end + 1


def python_functions(text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def main():
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    problems = []
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*")):
            if not path.is_file() or path.suffix not in C_SUFFIXES | {".py"}:
                continue
            rel = path.relative_to(repo)
            if any(part in ("axsrc", "__pycache__") for part in rel.parts):
                continue  # the module's prepared copies of shared sources; caches
            text = path.read_text(errors="replace")
            lines = text.split("\n")
            if len(lines) - 1 > MAX_FILE_LINES:
                problems.append(f"{rel}: {len(lines) - 1} lines (limit {MAX_FILE_LINES})")
            funcs = python_functions(text) if path.suffix == ".py" else c_functions(lines)
            for name, line, count in funcs:
                if count > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{line}: {name[:70]} is {count} lines "
                                    f"(limit {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} over the limits")
        return 1
    print("source limits: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
