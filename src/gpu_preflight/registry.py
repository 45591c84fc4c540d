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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, overload

import msgspec
from msgspec.structs import replace

from .actions import DETAIL_KEY, Action, with_action
from .config.report_schema import COMPONENTS
from .model import Finding, Status, id_matches
from .registries import Registry, UnknownKey

if TYPE_CHECKING:
    from .config import Config

CheckFn = Callable[["CheckContext"], "Iterable[Finding]"]
ProbeFn = Callable[["ProbeContext"], Any]
BudgetFn = Callable[["ProbeContext"], float]

SUITES = ("quick", "full")


class CheckSpec(msgspec.Struct, frozen=True):
    """A registered check: its id, what facts it needs and where it runs."""

    id: str
    fn: CheckFn
    needs: tuple[str, ...]
    title: str
    doc: str
    suites: tuple[str, ...] = SUITES
    tags: tuple[str, ...] = ()
    scope: str = "node"
    groups: tuple[str, ...] | None = None  # report groups (``test_results``); None: not declared
    component: str | None = None  # score component; None: not declared
    settings: tuple[str, ...] = ()  # thresholds ``checks explain`` shows beside those the doc names
    core: bool = False  # a measured finding proves its component was tested (:class:`CoreTable`)
    blocking_codes: tuple[str, ...] = ()  # codes that block a GPU job whatever their status

    def matches(self, pattern: str) -> bool:
        """Glob on the id (``gpu.*``) or exact tag (``gpu``)."""
        return id_matches(self.id, pattern) or pattern in self.tags


class DeclaredId(msgspec.Struct, frozen=True):
    """An id a report can carry that no ``@check`` produces (evidence verdicts, history, run meta)."""

    id: str
    title: str
    doc: str
    groups: tuple[str, ...] | None
    component: str | None
    settings: tuple[str, ...] = ()
    scope: str = "report"
    suites: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    core: bool = False
    blocking_codes: tuple[str, ...] = ()


Described = CheckSpec | DeclaredId


class ProbeSpec(msgspec.Struct, frozen=True):
    """A registered probe: gathers one named fact through the backends."""

    name: str
    fn: ProbeFn
    doc: str
    budget: BudgetFn | None = None  # seconds it may run when that exceeds the run's per-probe limit


class CheckContext(msgspec.Struct):
    """What a check may look at: facts gathered by probes, and thresholds. No I/O."""

    host: str
    facts: dict[str, Any]
    config: Config
    check_id: str = ""

    def fact(self, name: str) -> Any:
        return self.facts[name]

    def finding(self, status: Status, subject: str, code: str, summary: str, observed: Any = None,
                expected: Any = None, unit: str | None = None, recommendation: str | None = None,
                details: dict[str, Any] | None = None) -> Finding:
        """A finding of this check: the id comes from the check's registration, never typed again."""
        return Finding(self.check_id, status, subject, code, summary, observed, expected, unit, recommendation,
                       {} if details is None else details)


class RunInputs(msgspec.Struct, frozen=True):
    """What the run was asked to read instead of (or beside) the live machine."""

    replay: str | None = None  # a saved snapshot judged instead of this machine
    kernel_log: str | None = None  # a saved kernel log read instead of this machine's
    report_dir: str | None = None  # where the report goes (its file system is checked for space)
    suite: str = "quick"


# Keys of the objects a monitor keeps in ProbeState.kept from run to run (probes/shared.py reads them).
KERNEL_LOG_FOLLOWER = "kernel_log_follower"
TOOL_CACHE = "tool_cache"
NVML_SESSION = "nvml_session"
PROCESS_SCAN = "process_scan"
NVML_DUMP_ON_DEMAND = "nvml_dump_on_demand"  # set: the NVML dump text is kept only when a GPU hung


class ProbeState(msgspec.Struct):
    """What the probes of one run share. Every context of the run holds the same object (the
    engine's per-probe ``replace`` copies the reference), so the diagnostics phase and the
    once-per-run slots are one per run."""

    phase: object | None = None  # diagnostics.phase.RunPhase: the tools running now, made by the first tool
    kept: dict[str, Any] = {}  # a monitor's kept objects; once-per-run slots


class ProbeContext(msgspec.Struct):
    """What a probe may use: the config, the run's inputs (replay file, kernel log file...) and
    the state the run's probes share."""

    config: Config
    inputs: RunInputs
    timeout_s: float
    state: ProbeState = msgspec.field(default_factory=ProbeState)
    artifacts: dict[str, tuple[str, str]] = {}

    def save_artifact(self, name: str, filename: str, content: str) -> None:
        """Keep raw tool output; it is written beside the report, never inlined in it."""
        self.artifacts[name] = (filename, content)


def discover(scope: str | None = None) -> None:
    """Import the check and probe modules once (they register on import).

    ``scope="node"`` imports all but ``checks/cluster_*.py``: a node-only run (the start-up
    a user waits for on every node) does not pay for the cluster checks' imports. A module
    whose name starts with ``_`` is a helper its package's modules import where they need
    it (``probes/_dump_schema.py``: a replay's), not a plugin: it is not imported here.
    """
    wanted = {"node"} if scope == "node" else {"node", "cluster"}
    if wanted <= _discovered:
        return
    for name in PLUGIN_PACKAGES:  # by name: the plugins sit above the registry, which never imports them
        package = importlib.import_module(f"{__package__}.{name}")
        for mod in pkgutil.iter_modules(package.__path__):
            if mod.name.startswith("_"):
                continue
            kind = "cluster" if name == "checks" and mod.name.startswith(CLUSTER_MODULE_PREFIX) else "node"
            if kind in wanted:
                importlib.import_module(f"{package.__name__}.{mod.name}")
    _discovered.update(wanted)


def fail_closed(produce: Callable[[], Iterable[Finding]], *, check_id: str, subject: str, crashed: str,
                what: str, recommendation: str, silent_summary: str) -> tuple[list[Finding], bool]:
    """Run a check or an evidence judge so that it cannot pass by accident: an exception is one
    ``ERROR`` finding coded ``crashed`` (with where it was raised), silence one coded
    ``no_result``. Returns the findings and whether the producer itself answered.

    The engine runs every check through this (under its time limit); the evidence judges use
    it too, so a judge fails closed exactly as a check does.
    """
    try:
        findings = list(produce())
    except Exception as exc:
        import traceback  # with textwrap: ~1.5 ms a node run pays only when a check crashes

        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [Finding(check_id, Status.ERROR, subject, crashed,
                        f"{what} raised {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})",
                        recommendation=recommendation)], False
    if not findings:
        return [Finding(check_id, Status.ERROR, subject, "no_result", silent_summary)], False
    return findings, True


_discovered: set[str] = set()  # "node", "cluster": which modules are imported
CLUSTER_MODULE_PREFIX = "cluster_"  # checks/cluster_*.py hold the cluster-scope checks (tested)
PLUGIN_PACKAGES = ("probes", "checks")  # discovered by name, in this order
CHECKS: Registry[CheckSpec] = Registry("check", discover)
DECLARED: Registry[DeclaredId] = Registry("report id", lambda scope: discover("node"))  # declared in node modules
PROBES: Registry[ProbeSpec] = Registry("probe", lambda scope: discover("node"))  # every probe is a node module


def check(check_id: str, *, needs: tuple[str, ...], suites: tuple[str, ...] = SUITES,
          tags: tuple[str, ...] = (), scope: str = "node", group: str | tuple[str, ...] | None = None,
          component: str | None = None, settings: tuple[str, ...] = (), core: bool = False,
          blocking_codes: tuple[str, ...] = (), actions: Mapping[str, Action] | None = None
          ) -> Callable[[CheckFn], CheckFn]:
    """Register a check. Its docstring's first line is the title, the rest its explanation.
    The module's name for the function is the registered one, which sets ``ctx.check_id``.

    ``scope="node"`` checks judge one node's facts; ``scope="cluster"`` checks judge the
    gathered results of a distributed run (fact ``cluster``) on rank 0. ``group`` names the
    report group(s) its findings count in (:data:`GROUPS`; ``()`` for none, ``"name@rN"``
    for a group that counts only findings of diagnostic level N) and ``component`` the
    score component (:data:`~gpu_preflight.config.report_schema.COMPONENTS`). ``core=True``
    says that a measured finding of this check proves its component was tested (a GPU read,
    a link between two nodes: :func:`core_table`); ``blocking_codes`` are the codes that
    block a GPU job whatever their status (:func:`blocking_codes`). ``actions`` maps finding
    codes to the operator action they call for (:func:`operator_actions`).
    """
    groups = _groups(check_id, group)
    _component(check_id, component, core)
    _actions(check_id, actions)

    def register(fn: CheckFn) -> CheckFn:
        if check_id in CHECKS:
            raise ValueError(f"check id {check_id!r} registered twice")
        doc = inspect.cleandoc(fn.__doc__ or check_id)
        title = doc.splitlines()[0].rstrip(".")

        @functools.wraps(fn)  # keeps the check's module and name (tests tie cluster checks to their modules)
        def bound(ctx: CheckContext) -> Iterable[Finding]:
            found = fn(replace(ctx, check_id=check_id))  # the check knows its id, however it is called
            return stamp_actions(found) if actions else found

        CHECKS.register(check_id, CheckSpec(check_id, bound, needs, title, doc, suites,
                                            (check_id.split(".")[0], *tags), scope, groups, component, settings,
                                            core, tuple(blocking_codes)))
        return bound  # called directly too, the check knows its id (``ctx.finding``)

    return register


def declare(report_id: str, title: str, doc: str, *, group: str | tuple[str, ...] | None,
            component: str | None, settings: tuple[str, ...] = (), core: bool = False,
            blocking_codes: tuple[str, ...] = (), actions: Mapping[str, Action] | None = None) -> DeclaredId:
    """Declare an id that findings carry without a ``@check`` producing it, so that the
    report groups and scores it, and ``checks list`` / ``checks explain`` know it
    (``core``/``blocking_codes``/``actions`` as for :func:`check`; the code that makes such
    findings passes them through :func:`stamp_actions`)."""
    _actions(report_id, actions)
    spec = DeclaredId(report_id, title, inspect.cleandoc(doc), _groups(report_id, group),
                      _component(report_id, component, core), settings, core=core,
                      blocking_codes=tuple(blocking_codes))
    if report_id in CHECKS:
        raise ValueError(f"{report_id!r} is a check; declare only ids no check produces")
    return DECLARED.register(report_id, spec)


# Finding code -> operator action, per check or declared id (``@check(actions=...)``): each
# check module keeps its table beside the check; the one rule that applies them is here.
_ACTIONS: dict[str, Mapping[str, Action]] = {}
_NO_ACTION = frozenset({Status.PASS, Status.SKIP})


def _actions(report_id: str, actions: Mapping[str, Action] | None) -> None:
    if not actions:
        return
    wrong = [code for code, action in actions.items() if not isinstance(action, Action)]
    if wrong:
        raise ValueError(f"{report_id}: operator actions must be Action values ({', '.join(wrong)})")
    _ACTIONS[report_id] = dict(actions)


def operator_actions() -> Mapping[str, Mapping[str, Action]]:
    """Every registered code -> action table, by id (what docs/checks.md's table lists)."""
    CHECKS.names()
    DECLARED.names()  # both registries discovered: every module's table is in
    return dict(_ACTIONS)


def stamp_actions(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` with the operator action their id's table names for their code.

    Only a WARN, FAIL or ERROR calls for an action (a PASS or SKIP never does); a finding that
    already names one (the Xid policy's, DCGM's own) keeps it, and one whose code has no entry
    gets no key, so its output stays as it was. The details dict is replaced, never changed in
    place: a check may share one details dict between findings with different codes.
    """
    out = []
    for f in findings:
        table = _ACTIONS.get(f.check_id)
        if table is None and "cluster" not in _discovered and f.status not in _NO_ACTION:
            discover("node")  # a declared id's table registers with its module (localisation's, say)
            if f.check_id not in CHECKS and f.check_id not in DECLARED:
                discover()  # a cluster check's id judged on its own (a saved fi_pingpong file): its module
            table = _ACTIONS.get(f.check_id)
        action = table.get(f.code) if table and f.status not in _NO_ACTION else None
        if action is not None and DETAIL_KEY not in f.details:
            f.details = with_action(f.details, action)
        out.append(f)
    return out


# cluster_summary.test_results, in report order. A group is true when it has a PASS and
# nothing worse than SKIP, false when anything WARNs or worse, and null when every check
# in it was skipped. ``dcgm_basic``/``dcgm_extended`` count a levelled check's findings
# by the diagnostic level that found them (``group="dcgm_basic@r1"``).
GROUPS = ("gpu_detection", "gpu_health", "gpu_links", "system_resources", "nccl_communication", "efa_network",
          "dcgm_diagnostics", "dcgm_basic", "dcgm_extended", "compute", "training")
UNDECLARED_COMPONENT = "service_reliability"  # what an unknown id's findings count against


def _groups(report_id: str, group: str | tuple[str, ...] | None) -> tuple[str, ...] | None:
    if group is None:
        return None
    groups = (group,) if isinstance(group, str) else tuple(group)
    for name in groups:
        base, _, level = name.partition("@r")
        if base not in GROUPS or (level and not level.isdigit()):
            raise ValueError(f"{report_id}: unknown report group {name!r} (groups: {', '.join(GROUPS)})")
    return groups


def _component(report_id: str, component: str | None, core: bool = False) -> str | None:
    if component is not None and component not in COMPONENTS:
        raise ValueError(f"{report_id}: unknown score component {component!r} (components: {', '.join(COMPONENTS)})")
    if core and component is None:
        raise ValueError(f"{report_id}: core=True needs the component it proves measured")
    return component


def probe(name: str, *, budget: BudgetFn | None = None) -> Callable[[ProbeFn], ProbeFn]:
    """Register the probe that provides fact ``name``.

    ``budget`` is for a probe that runs a diagnostic tool: a node run gives every probe the
    same limit (``--timeout-s``, 30 s by default), right for NVML and /proc but not for
    ``dcgmi diag -r 2`` (minutes) or nccl-tests, so the engine grants such a probe
    ``max(run limit, budget(ctx))`` (:func:`probe_budget`). A budget exceeds the tool's own
    time limit by a margin, so the tool is killed (an ERROR naming it) before the engine
    gives up on the probe.
    """

    def register(fn: ProbeFn) -> ProbeFn:
        PROBES.register(name, ProbeSpec(name, fn, inspect.cleandoc(fn.__doc__ or name), budget))
        return fn

    return register


def probe_budget(name: str, ctx: ProbeContext) -> float:
    """Seconds probe ``name`` may run by its own declaration (0 when it declares none).

    Never raises: a budget that fails (or an unknown probe) leaves the run's limit in force,
    because a bug in a time estimate must not stop the run."""
    spec = PROBES.find(name)
    if spec is None or spec.budget is None:
        return 0.0
    try:
        return max(0.0, float(spec.budget(ctx)))
    except Exception:
        return 0.0


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


def described(scope: str | None = None) -> list[Described]:
    """Every id a report can carry that is known here (checks and declared ids), sorted."""
    discover(scope)
    specs: list[Described] = [*CHECKS.values(scope), *DECLARED.values(scope)]
    return sorted(specs, key=lambda s: s.id)


def describe(report_id: str) -> Described:
    """The check or declared id ``report_id``; an ``UnknownKey`` naming near misses otherwise."""
    found = DECLARED.find(report_id) if report_id in DECLARED else None
    if found is not None:
        return found
    try:
        return CHECKS.get(report_id)
    except UnknownKey:
        import difflib  # only for an id that was not found

        known = [s.id for s in described()]
        close = [k for k in known if k.startswith(report_id + ".")][:4] or difflib.get_close_matches(
            report_id, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownKey(f"no check or report id {report_id!r}{hint}") from None


def generation() -> tuple[int, int]:
    """Changes whenever a check or declared id is registered: a cache of what the ids mean keys on it."""
    return CHECKS.generation, DECLARED.generation


def cover(report_id: str) -> bool:
    """Import the cluster checks when ``report_id`` is none of the ids imported so far; returns
    whether that imported anything (the derived tables then rebuild).

    The tables are built from the scopes imported so far (:func:`_known_now`), so that a node
    run never pays for the cluster checks. A process that ran node checks and then reads a
    cluster report (a server re-rendering a saved report, one test after another) would
    otherwise count a cluster check's findings in no group and against no declared component.
    """
    if "cluster" in _discovered:
        return False
    base = report_id.partition("@")[0]  # a levelled group key, dcgm.diag@r2
    if base in CHECKS or base in DECLARED:
        return False
    discover(None)
    return True


def _known_now() -> list[Described]:
    """What the derived tables are built from: the ids of the scopes imported so far.

    A node-only run has imported the node modules (every declared id lives in one) and
    cannot produce a cluster check's id, so its report is grouped without importing
    ``checks/cluster_*.py``; a process that has imported nothing yet (re-rendering a saved
    report) imports everything first.
    """
    if "node" not in _discovered:
        discover(None)
    specs: list[Described] = [*CHECKS.values("node"), *DECLARED.values("node")]
    return sorted(specs, key=lambda s: s.id)


class _Derived:
    """A table rebuilt whenever a registry changed (discovery of a scope, a test's ``scoped()``)."""

    def __init__(self) -> None:
        self._stamp: tuple[int, int] | None = None

    def _fresh(self) -> bool:
        stamp = generation()
        if stamp == self._stamp:
            return True
        self._stamp = stamp
        return False


class GroupTable(_Derived, Mapping[str, tuple[str, ...]]):
    """``findings.canonical.TEST_GROUPS``: group → the ids (``id@rN`` for a levelled group) counted in it."""

    def __init__(self) -> None:
        super().__init__()
        self._table: dict[str, tuple[str, ...]] = {}

    def _build(self) -> dict[str, tuple[str, ...]]:
        if self._fresh() and self._table:
            return self._table
        table: dict[str, list[str]] = {name: [] for name in GROUPS}
        for spec in _known_now():
            groups = spec.groups or ()
            levelled = any("@r" in g for g in groups)
            for name in groups:
                base, _, level = name.partition("@r")
                table[base] += [f"{spec.id}@r{level}"] if level else [spec.id, *([f"{spec.id}@r*"] if levelled else [])]
        self._table = {name: tuple(ids) for name, ids in table.items()}
        return self._table

    def __getitem__(self, name: str) -> tuple[str, ...]:
        if name not in GROUPS:
            raise KeyError(name)
        return self._build()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(GROUPS)  # the keys are fixed: ``dict.fromkeys(TEST_GROUPS)`` imports nothing

    def __len__(self) -> int:
        return len(GROUPS)


class ComponentRules(_Derived, Sequence[tuple[str, str]]):
    """``report.scores.COMPONENT_RULES``: (id, component) per known id, then ``("*", service_reliability)``."""

    def __init__(self) -> None:
        super().__init__()
        self._rules: tuple[tuple[str, str], ...] = ()

    def _build(self) -> tuple[tuple[str, str], ...]:
        if self._fresh() and self._rules:
            return self._rules
        self._rules = (*((s.id, s.component) for s in _known_now() if s.component is not None),
                       ("*", UNDECLARED_COMPONENT))
        return self._rules

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        return self._build()[index]

    def __len__(self) -> int:
        return len(self._build())

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._build())


class CoreTable(_Derived, Mapping[str, tuple[tuple[str, ...], str]]):
    """``report.scores.CORE``: core component → (the ids declared ``core=True`` for it, what is
    missing when none of them measured anything). The components and their sentences are the
    scores' own; which ids prove them comes from the declarations."""

    def __init__(self, missing: Mapping[str, str]) -> None:
        super().__init__()
        self._missing = dict(missing)
        self._table: dict[str, tuple[tuple[str, ...], str]] = {}

    def _build(self) -> dict[str, tuple[tuple[str, ...], str]]:
        if self._fresh() and self._table:
            return self._table
        ids: dict[str, list[str]] = {name: [] for name in self._missing}
        for spec in _known_now():
            if spec.core and spec.component in ids:
                ids[spec.component].append(spec.id)
        self._table = {name: (tuple(ids[name]), why) for name, why in self._missing.items()}
        return self._table

    def __getitem__(self, component: str) -> tuple[tuple[str, ...], str]:
        if component not in self._missing:
            raise KeyError(component)
        return self._build()[component]

    def __iter__(self) -> Iterator[str]:
        return iter(self._missing)  # the components are fixed: membership imports nothing

    def __len__(self) -> int:
        return len(self._missing)


class BlockingCodes(_Derived, AbstractSet[tuple[str, str]]):
    """``report.scores.BLOCKING``: the (id, code) pairs declared ``blocking_codes=``."""

    def __init__(self) -> None:
        super().__init__()
        self._pairs: frozenset[tuple[str, str]] = frozenset()

    def _build(self) -> frozenset[tuple[str, str]]:
        if self._fresh() and self._pairs:
            return self._pairs
        self._pairs = frozenset((s.id, code) for s in _known_now() for code in s.blocking_codes)
        return self._pairs

    def __contains__(self, pair: object) -> bool:
        return pair in self._build()

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())


def test_groups() -> GroupTable:
    """The report groups, derived from what each check and declared id says (see :data:`GROUPS`)."""
    return GroupTable()


def component_rules() -> ComponentRules:
    """The score component of every known id, derived from the declarations."""
    return ComponentRules()


def core_table(missing: Mapping[str, str]) -> CoreTable:
    """The core components (``component → what is missing``) with the ids that prove each."""
    return CoreTable(missing)


def blocking_codes() -> BlockingCodes:
    """The (id, code) pairs that block a GPU job, derived from the declarations."""
    return BlockingCodes()
