"""The package's import graph: no module imports, at the top or late inside a function,
a module that imports it back (directly or through others). ``KNOWN`` is where a cycle
accepted for a while would be listed; there is none (issue 43 broke the last ones)."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "simjax"

#: cycles not yet broken (frozensets of module names): none
KNOWN: set = set()


def _modules() -> dict:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _edges(modules: dict) -> dict:
    edges = {m: set() for m in modules}
    for m, path in modules.items():
        package = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = (
                    ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level
                    else node.module
                )
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    target = sub if sub in modules else base
                    if target in modules and target != m:
                        edges[m].add(target)
            elif isinstance(node, ast.Import):
                edges[m].update(a.name for a in node.names if a.name in modules and a.name != m)
    return edges


def _cycles(edges: dict) -> list:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        component.add(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_no_import_cycles_beyond_the_known_ones():
    modules = _modules()
    assert "simjax.optimize.ipm" in modules and "simjax.io.osim.forces" in modules
    cycles = _cycles(_edges(modules))
    new = [sorted(c) for c in cycles if c not in KNOWN]
    assert not new, f"import cycles: {new}"
    # (the check finds a cycle: a late import back is one)
    edges = _edges(modules)
    edges["simjax.spatial"].add("simjax.muscles.path")  # (which imports spatial)
    assert any("simjax.spatial" in c for c in _cycles(edges))
