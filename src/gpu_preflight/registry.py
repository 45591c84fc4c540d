"""Self-registration of checks and probes.

A check module declares ``@check("gpu.ecc", needs=("gpu",))`` on a pure function and is
found by :func:`discover`, which imports every module of :mod:`gpu_preflight.checks`.
Adding a check therefore touches one module; there is no central list to edit.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .model import id_matches
from .registries import Registry

if TYPE_CHECKING:
    from .config import Config
    from .model import Finding

CheckFn = Callable[["CheckContext"], "Iterable[Finding]"]
ProbeFn = Callable[["ProbeContext"], Any]

SUITES = ("quick", "full")


@dataclass(frozen=True)
class CheckSpec:
    """A registered check: its id, what facts it needs and where it runs."""

    id: str
    fn: CheckFn
    needs: tuple[str, ...]
    title: str
    doc: str
    suites: tuple[str, ...] = SUITES
    tags: tuple[str, ...] = ()
    scope: str = "node"

    def matches(self, pattern: str) -> bool:
        """Glob on the id (``gpu.*``) or exact tag (``gpu``)."""
        return id_matches(self.id, pattern) or pattern in self.tags


@dataclass(frozen=True)
class ProbeSpec:
    """A registered probe: gathers one named fact through the backends."""

    name: str
    fn: ProbeFn
    doc: str


@dataclass
class CheckContext:
    """What a check may look at: facts gathered by probes, and thresholds. No I/O."""

    host: str
    facts: dict[str, Any]
    config: Config
    options: dict[str, Any] = field(default_factory=dict)
    check_id: str = ""

    def fact(self, name: str) -> Any:
        return self.facts[name]


@dataclass
class ProbeContext:
    """What a probe may use: the config, run options (replay file, kernel log file...)."""

    config: Config
    options: dict[str, Any]
    timeout_s: float
    artifacts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def save_artifact(self, name: str, filename: str, content: str) -> None:
        """Keep raw tool output; it is written beside the report, never inlined in it."""
        self.artifacts[name] = (filename, content)


def discover(scope: str | None = None) -> None:
    """Import the check and probe modules once (they register on import).

    ``scope="node"`` imports all but ``checks/cluster_*.py``: a node-only run (the start-up
    a user waits for on every node) does not pay for the cluster checks' imports.
    """
    wanted = {"node"} if scope == "node" else {"node", "cluster"}
    if wanted <= _discovered:
        return
    from . import checks, probes

    for package in (probes, checks):
        for mod in pkgutil.iter_modules(package.__path__):
            kind = "cluster" if package is checks and mod.name.startswith(CLUSTER_MODULE_PREFIX) else "node"
            if kind in wanted:
                importlib.import_module(f"{package.__name__}.{mod.name}")
    _discovered.update(wanted)


_discovered: set[str] = set()  # "node", "cluster": which modules are imported
CLUSTER_MODULE_PREFIX = "cluster_"  # checks/cluster_*.py hold the cluster-scope checks (tested)
CHECKS: Registry[CheckSpec] = Registry("check", discover)
PROBES: Registry[ProbeSpec] = Registry("probe", lambda scope: discover("node"))  # every probe is a node module


def check(check_id: str, *, needs: tuple[str, ...], suites: tuple[str, ...] = SUITES,
          tags: tuple[str, ...] = (), scope: str = "node") -> Callable[[CheckFn], CheckFn]:
    """Register a check. Its docstring's first line is the title, the rest its explanation.

    ``scope="node"`` checks judge one node's facts; ``scope="cluster"`` checks judge the
    gathered results of a distributed run (fact ``cluster``) on rank 0.
    """

    def register(fn: CheckFn) -> CheckFn:
        if check_id in CHECKS:
            raise ValueError(f"check id {check_id!r} registered twice")
        doc = inspect.cleandoc(fn.__doc__ or check_id)
        title = doc.splitlines()[0].rstrip(".")

        @functools.wraps(fn)  # keeps the check's module and name (tests tie cluster checks to their modules)
        def bound(ctx: CheckContext) -> Iterable[Finding]:
            return fn(replace(ctx, check_id=check_id))  # the check knows its id, however it is called

        CHECKS.register(check_id, CheckSpec(check_id, bound, needs, title, doc, suites,
                                            (check_id.split(".")[0], *tags), scope))
        return fn

    return register


def probe(name: str) -> Callable[[ProbeFn], ProbeFn]:
    """Register the probe that provides fact ``name``."""

    def register(fn: ProbeFn) -> ProbeFn:
        PROBES.register(name, ProbeSpec(name, fn, inspect.cleandoc(fn.__doc__ or name)))
        return fn

    return register


def all_checks(scope: str | None = None) -> list[CheckSpec]:
    """Registered checks; ``scope="node"`` needs (and imports) only the node checks."""
    return [c for c in CHECKS.values(scope) if scope is None or c.scope == scope]


def matching(patterns: Iterable[str], scope: str | None = None) -> list[CheckSpec]:
    """Checks of ``scope`` for the given patterns' validation: every pattern must match some
    check of any scope (the cluster checks are imported only when a pattern needs them)."""
    specs = all_checks(scope)
    for pattern in patterns:
        if not any(s.matches(pattern) for s in specs):
            everything = all_checks()
            if not any(s.matches(pattern) for s in everything):
                known = ", ".join(s.id for s in everything)
                raise KeyError(f"no check matches {pattern!r} (known: {known})")
    return specs


def get_check(check_id: str) -> CheckSpec:
    """The check ``check_id``; a :class:`~gpu_preflight.registries.UnknownKey` (a ``KeyError``) names near misses."""
    return CHECKS.get(check_id)


def get_probe(name: str) -> ProbeSpec:
    return PROBES.get(name)


def select(suite: str, include: Iterable[str] = (), exclude: Iterable[str] = (),
           scope: str = "node") -> list[CheckSpec]:
    """Checks of a suite, narrowed by ``--check`` patterns and minus ``--skip`` patterns.

    An include pattern that matches nothing is an error: a typo must not silently run
    nothing and report success.
    """
    include, exclude = list(include), list(exclude)
    specs = matching([*include, *exclude], scope)
    chosen = [s for s in specs if suite in s.suites and s.scope == scope]
    if include:
        chosen = [s for s in specs if s.scope == scope and any(s.matches(p) for p in include)]
    return [s for s in chosen if not any(s.matches(p) for p in exclude)]
