"""Where a compiled program's kernels come from: XLA's top-level operations (on CPU,
one thunk each) counted by the source line of simjax that produced them.

On the CPU a program's cost at small sizes is mostly the number of kernels it runs, so
this is the first thing to look at when a right-hand side is slow. Loops
(``while``) and conditionals count once here; their bodies are listed apart.

Run: ``python -m benchmarks.hlo_ops MODEL [--batch N] [--top 40]`` (the accelerations
of a shipped model), or call ``report(compiled_text)`` on any ``jit(...).lower(...)
.compile().as_text()``.
"""

from __future__ import annotations

import argparse
import collections
import re

_SKIP = {"parameter", "constant", "bitcast", "get-tuple-element", "tuple"}


def _tables(text: str):
    """The debug tables of an HLO module: file names, function names, file locations,
    stack frames (each by id)."""
    tables, current = {}, None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
            continue
        if current is not None:
            m = re.match(r"(\d+) (.*)$", line)
            if not m:
                current = None
                continue
            current[int(m.group(1))] = m.group(2)
    return tables


def _location(tables, frame_id: int) -> str:
    """``file:line (function)`` of the innermost frame of a stack."""
    frame = tables.get("StackFrames", {}).get(frame_id, "")
    m = re.search(r"file_location_id=(\d+)", frame)
    if not m:
        return "?"
    loc = tables["FileLocations"].get(int(m.group(1)), "")
    f = re.search(r"file_name_id=(\d+)", loc)
    fn = re.search(r"function_name_id=(\d+)", loc)
    ln = re.search(r"line=(\d+)", loc)
    name = tables["FileNames"].get(int(f.group(1)), "?").strip('"') if f else "?"
    name = name.split("/simjax/")[-1] if "/simjax/" in name else name.rsplit("/", 1)[-1]
    func = tables["FunctionNames"].get(int(fn.group(1)), "").strip('"') if fn else ""
    return f"{name}:{ln.group(1) if ln else '?'} ({func})"


def report(text: str, top: int = 40) -> str:
    """A table of the entry computation's kernels by source line, most first."""
    tables = _tables(text)
    entry = text[text.index("ENTRY") :].split("\n}\n", 1)[0]
    kinds, where = collections.Counter(), collections.Counter()
    for line in entry.splitlines()[1:]:
        m = re.search(r"= \S+ ([\w-]+)\(", line)
        if not m or m.group(1) in _SKIP:
            continue
        kinds[m.group(1)] += 1
        sf = re.search(r"stack_frame_id=(\d+)", line)
        where[_location(tables, int(sf.group(1))) if sf else "?"] += 1
    lines = [f"{sum(kinds.values())} kernels: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common())]
    lines += [f"{n:5d}  {loc}" for loc, n in where.most_common(top)]
    return "\n".join(lines)


def main(argv=None) -> None:
    """Print the kernel report of a shipped model's accelerations."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=0, help="vmap over this many states (0: one state)")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args(argv)
    import jax

    from benchmarks import suite
    import simjax as sj

    system = suite.load_simjax(args.model)
    state = suite.initial_state(system)
    fn = lambda st: sj.accelerations(system, st).udot  # noqa: E731
    if args.batch:
        state, fn = suite.perturbed_states(system, state, args.batch), jax.vmap(fn)
    print(report(suite.jit(fn).lower(state).compile().as_text(), args.top))


if __name__ == "__main__":
    main()
