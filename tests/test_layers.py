"""Import directions of the house (issue 15; docs/architecture.md).

Every import under ``src/gpu_preflight`` (top level, in a function, under TYPE_CHECKING) is
resolved to a package module and must go to a layer its own layer may use. Checks and probes
are plugins: outside their package only the engine imports them (discovery goes by package
name). No import circles. KNOWN/KNOWN_CIRCLES only shrink: a fixed arrow left listed fails.

Records sit on the model floor, below config: DESIGN.md's layout puts "statuses, findings,
records" in the model, and its data flow has every layer hand typed records up (backends and
probes build them, parsers fill them, checks read them). So every layer may read records
and records read only the model; the Xid window/tally (records.xid) is shared that way by the
Xid policy (config), the log parsers and the checks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "gpu_preflight"
# module (without "gpu_preflight.") -> layer; longest prefix wins, "" is the lazy facade
LAYER_OF = {
    "": "api", "_version": "model", "model": "model", "recovery": "model", "registries": "model",
    "boundedio": "util", "kept_thread": "util", "deadline": "util", "safeio": "util", "redact": "util",
    "interrupts": "util", "progress": "util",
    "actions": "model", "ids": "model",
    "config": "config", "registry": "registry", "records": "records",
    "checks": "checks", "parsers": "parsers", "backends": "backends", "workloads": "workloads",
    "probes": "probes", "diagnostics": "probes",
    "engine": "engine", "evidence": "engine", "snapshots": "engine",
    "findings": "findings", "cluster": "findings", "localize": "findings",
    "distributed": "distributed", "report": "report", "outputs": "outputs", "history": "outputs",
    "integrations": "outputs", "server": "outputs", "health": "outputs", "run": "run", "cli": "cli",
    "__main__": "cli",
}
_B = {"model", "util"}
MAY_USE: dict[str, set[str]] = {
    "model": {"model"}, "util": _B, "records": {"model", "records"},
    "config": _B | {"records", "config"}, "registry": {"model", "records", "config", "registry"},
    "checks": {"model", "config", "registry", "records", "checks"},  # pure: not even file helpers
    "parsers": _B | {"records", "parsers"},
    "backends": _B | {"records", "parsers", "backends"},
    "workloads": _B | {"config", "records", "backends", "workloads"},
    "probes": _B | {"config", "registry", "records", "parsers", "backends", "probes"},
    "engine": _B | {"config", "registry", "records", "checks", "parsers", "backends", "probes", "engine"},
    "findings": _B | {"config", "registry", "records", "engine", "findings"},
    "distributed": _B | {"config", "registry", "records", "parsers", "backends", "workloads", "probes", "engine",
                         "findings", "distributed"},
    "report": _B | {"config", "registry", "records", "findings", "report"},
}
MAY_USE["outputs"] = set(MAY_USE) | {"outputs"}
MAY_USE["run"] = MAY_USE["outputs"] | {"run"}
MAY_USE["cli"] = MAY_USE["run"] | {"cli"}
MAY_USE["api"] = set(MAY_USE)
PRIVATE = {"checks": {"checks", "engine"}, "probes": {"probes", "engine"}}  # package -> layers that may import it


def _pairs(text: str) -> set[tuple[str, str]]:
    return {(a, b) for line in text.strip().splitlines() for a, _, bs in [line.partition(": ")] for b in bs.split()}


KNOWN: set[tuple[str, str]] = _pairs("""
""")  # one "module: imported ..." line per known wrong-way import
KNOWN_CIRCLES: list[tuple[str, ...]] = []
MODULES = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
           for p in sorted((SRC / PKG).rglob("*.py"))}


def _resolve(name: str) -> str | None:
    parts = name.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) or None


def _short(module: str) -> str:
    return module.removeprefix(PKG).removeprefix(".") or PKG


def imports() -> list[tuple[str, str, int]]:
    """(importer, imported, line) in short names, for every import of a package module."""
    edges = []
    for mod, path in MODULES.items():
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = {_resolve(a.name) for a in node.names if a.name.split(".")[0] == PKG}
            elif isinstance(node, ast.ImportFrom):
                where = base[: len(base) - node.level + 1] if node.level else []
                src = ".".join([*where, node.module] if node.module else where)
                targets = {f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES else _resolve(src)
                           for a in node.names} if src.split(".")[0] == PKG else set()
            else:
                continue
            edges += [(_short(mod), _short(t), node.lineno) for t in targets if t is not None and t != mod]
    return edges


def layer(short: str) -> str:
    name = "" if short == PKG else short
    return LAYER_OF[max((p for p in LAYER_OF if p in ("", name) or name.startswith(p + ".")), key=len)]


def wrong_way() -> dict[tuple[str, str], list[int]]:
    bad: dict[tuple[str, str], list[int]] = defaultdict(list)
    for src, dst, line in imports():
        top = dst.split(".")[0]
        if layer(dst) not in MAY_USE[layer(src)] or (top in PRIVATE and layer(src) not in PRIVATE[top]):
            bad[src, dst].append(line)
    return dict(bad)


def folder(short: str) -> str:
    """The folder a module sits in (its first name under the package); a top-level module is its own."""
    return short.split(".")[0]


def circles(node: Callable[[str], str] = str) -> list[tuple[str, ...]]:
    """Groups of modules (or, with ``node=folder``, of folders) that import each other, directly or
    not (the facade's TYPE_CHECKING imports aside)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in imports():
        if src != PKG and dst != PKG and node(src) != node(dst):
            graph[node(src)].add(node(dst))
    reach: dict[str, set[str]] = {}
    for start in list(graph):
        seen: set[str] = set()
        todo = [start]
        while todo:
            for w in graph[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        reach[start] = seen
    return sorted({tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in reach if v in reach[v]})


def test_every_module_has_a_layer_with_rules() -> None:
    assert {layer(_short(m)) for m in MODULES} <= set(MAY_USE)


def test_imports_go_down_the_layers() -> None:
    bad = wrong_way()
    new = [f"{s} -> {d} (line {', '.join(map(str, bad[s, d]))}): {layer(s)} may not use {layer(d)}"
           for s, d in sorted(set(bad) - KNOWN)]
    assert not new, "imports against the layers:\n" + "\n".join(new)
    assert not sorted(KNOWN - set(bad)), f"fixed, remove from KNOWN: {sorted(KNOWN - set(bad))}"


def test_no_import_circles() -> None:
    assert circles() == KNOWN_CIRCLES


def test_folders_are_the_layers() -> None:
    """A layer is a set of whole folders (a top-level module counts as its own folder): no file is
    re-homed into another layer than its folder's, so where a file sits says what it may import."""
    assert [name for name in LAYER_OF if "." in name] == []


def test_no_folder_circles() -> None:
    """Drawn by folder, no two folders import each other, directly or through others: a folder
    that needs something of a folder that needs it holds a file that belongs elsewhere."""
    assert circles(folder) == []
