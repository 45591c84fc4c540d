"""Under load: what every GPU did while the workloads ran — clocks, power, temperature.

Each GPU rank samples its GPU through NVML while its workloads run
(:mod:`gpu_preflight.backends.nvml_sampler`) and sends per-phase statistics (``load`` in
its payload). These checks judge them per GPU and per phase, and name the phase and the
numbers, because a GPU that is healthy at idle but throttles, overheats or cannot draw
power under load is one of the commonest causes of a straggling rank — and the idle node
checks cannot see it. CPU workers and replays have no series: the checks SKIP and say so.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..actions import BY_NVIDIA_ACTION, Action, with_action
from ..config.load import LoadConfig, load_config
from ..model import Finding, Status
from ..records import ClusterView
from ..registry import CheckContext, check
from .cluster_rollup import Passes
from .gpu_thermal import CLOCK_ACTIONS, CLOCK_ADVICE, CLOCK_REASONS, THERMAL_ACTIONS

# Clock event reason bits that mean the board protects itself (FAIL past a share of the phase).
HW_BITS = {f"0x{bit:x}": name for bit, (name, status) in CLOCK_REASONS.items() if status is Status.FAIL}
SW_THERMAL = "0x20"
IDLE_PHASES = frozenset({"idle", "stack"})
Load = Mapping[str, Any]


def _loads(ctx: CheckContext) -> tuple[ClusterView, LoadConfig, list[tuple[str, int, Load]], list[Finding]]:
    """(facts, settings, [(subject, rank, load summary)], findings for GPU ranks without one)."""
    c: ClusterView = ctx.fact("cluster")
    cfg = load_config(ctx.config)
    out: list[tuple[str, int, Load]] = []
    problems: list[Finding] = []
    for rank in sorted(c.payloads):
        p = c.payloads[rank]
        load = p.get("load")
        if isinstance(load, Mapping) and load.get("phases") is not None:
            out.append((c.rank_subject(rank), rank, load))
        elif p.get("load_error"):
            problems.append(Finding(ctx.check_id or "load", Status.ERROR, c.rank_subject(rank), "not_sampled",
                                    f"no load series: {p['load_error']}",
                                    recommendation="Check that NVML answers on this node (gpu.nvml)."))
    return c, cfg, out, problems


Judge = Callable[[CheckContext, LoadConfig, list[tuple[str, int, Load]], Passes], Iterator[Finding]]


def over_loads(judge: Judge) -> Callable[[CheckContext], Iterator[Finding]]:
    """Turn a judgement of the sampled GPUs into a cluster check: the rules every load check
    shares (no series → SKIP saying why; a GPU whose sampler failed → ERROR; passes rolled up
    at scale) so each check states only what it judges."""

    @functools.wraps(judge)
    def check_all(ctx: CheckContext) -> Iterator[Finding]:
        c, cfg, loads, problems = _loads(ctx)
        yield from problems
        if not loads:
            if not problems:
                why = "no GPU rank sampled its GPU under load" if c.gpu_ranks else \
                    "CPU workers only: there is no GPU to sample under load"
                yield Finding(ctx.check_id or "load", Status.SKIP, "cluster", "no_series", why)
            return
        passes = Passes(ctx, c, label=f"{ctx.check_id} under load")
        yield from judge(ctx, cfg, loads, passes)
        yield from passes.findings()

    return check_all


def _load_phases(load: Load, cfg: LoadConfig) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The phases that put the GPU under load and are long enough to judge."""
    for name, ph in (load.get("phases") or {}).items():
        if name not in IDLE_PHASES and int(ph.get("n", 0)) >= cfg.min_samples:
            yield name, ph


def explain(load: Any, phase: str) -> tuple[str, dict[str, Any]] | None:
    """Why a GPU was slow in a phase, from its load series: the hardware reasons active, its SM
    clock and how much of its power limit it drew (``None`` when it was not sampled there)."""
    ph = ((load or {}).get("phases") or {}).get(phase) if isinstance(load, Mapping) else None
    if not isinstance(ph, Mapping):
        return None
    shares = ph.get("reason_share") or {}
    parts = [f"{reason.replace('_', ' ')} active {100 * float(shares[bit]):.0f}% of the phase"
             for bit, reason in HW_BITS.items() if float(shares.get(bit, 0.0)) > 0]
    if float(shares.get(SW_THERMAL, 0.0)) > 0:
        parts.append(f"SW thermal slowdown active {100 * float(shares[SW_THERMAL]):.0f}% of the phase")
    sm = _median(ph, "sm_mhz")
    if sm is not None:
        parts.append(f"SM clock median {sm:g} MHz")
    if ph.get("power_max_fraction") is not None:
        parts.append(f"power peaked at {100 * float(ph['power_max_fraction']):.0f}% of its limit")
    return ("; ".join(parts), {"phase": phase, **dict(ph)}) if parts else None


def _median(ph: Mapping[str, Any], key: str) -> float | None:
    stats = ph.get(key)
    return float(stats["median"]) if isinstance(stats, Mapping) and stats.get("median") is not None else None


LOAD_CLOCK_ACTIONS = {**CLOCK_ACTIONS, "clock_drop": Action.CHECK_MECHANICALS, "lost_under_load": Action.REBOOT_NODE}
"""The idle clock reasons' actions (gpu.clocks), plus: a GEMM's SM clock held well below the
model's is the board's cooling or power delivery giving way (a visit); a GPU lost under load is
lost as gpu.nvml's ``gpu_lost`` is (reboot, NVIDIA's RESTART_BM for Xid 79)."""


@check("load.clocks", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True,
       actions=LOAD_CLOCK_ACTIONS)
@over_loads
def clocks(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
           passes: Passes) -> Iterator[Finding]:
    """Clocks hold under load: no hardware slowdown, no sustained drop.

    Per GPU and load phase: FAIL when HW slowdown, HW thermal slowdown or HW power brake
    is active in more than ``load.hw_reason_fail_share`` of the phase's samples (WARN for
    less); WARN when SW thermal slowdown is active in more than
    ``load.sw_thermal_warn_share``. In GEMM phases, the median SM clock against the
    profile's ``load.expected_gemm_sm_mhz``: WARN more than ``load.clock_drop_warn_fraction``
    below, FAIL more than ``load.clock_drop_fail_fraction`` below. SW power cap is normal
    under a dense GEMM and never judged. A GPU lost during the run FAILs.
    """
    for subject, _, load in loads:
        flagged = False
        if load.get("lost"):
            flagged = True
            yield ctx.finding(Status.FAIL, subject, "lost_under_load",
                              f"{subject}: {load['lost']} while the workloads ran",
                              recommendation="Drain the node: a GPU that falls off under load will crash jobs.")
        for name, ph in _load_phases(load, cfg):
            shares = ph.get("reason_share") or {}
            for bit, reason in HW_BITS.items():
                share = float(shares.get(bit, 0.0))
                if share > 0:
                    flagged = True
                    status = Status.FAIL if share > cfg.hw_reason_fail_share else Status.WARN
                    yield ctx.finding(status, subject, reason,
                                      f"{subject}: {reason.replace('_', ' ')} active {100 * share:.0f}% of {name} "
                                      f"(SM clock median {_median(ph, 'sm_mhz') or 0:g} MHz)", observed=round(share, 4),
                                      expected=f"<= {cfg.hw_reason_fail_share:g}", unit="share of samples",
                                      recommendation=CLOCK_ADVICE[reason], details={"phase": name, "stats": dict(ph)})
            sw = float(shares.get(SW_THERMAL, 0.0))
            if sw > cfg.sw_thermal_warn_share:
                flagged = True
                yield ctx.finding(Status.WARN, subject, "sw_thermal_slowdown",
                                  f"{subject}: SW thermal slowdown active {100 * sw:.0f}% of {name}",
                                  observed=round(sw, 4),
                                  expected=f"<= {cfg.sw_thermal_warn_share:g}", unit="share of samples",
                                  recommendation=CLOCK_ADVICE["sw_thermal_slowdown"], details={"phase": name})
            sm = _median(ph, "sm_mhz")
            want = cfg.expected_gemm_sm_mhz
            if name.startswith("gemm") and want and sm is not None and sm < want * (1 - cfg.clock_drop_warn_fraction):
                flagged = True
                drop = 1 - sm / want
                status = Status.FAIL if drop > cfg.clock_drop_fail_fraction else Status.WARN
                yield ctx.finding(status, subject, "clock_drop",
                                  f"{subject}: SM clock median {sm:g} MHz in {name}, {100 * drop:.0f}% below the "
                                  f"{want:g} MHz this model holds under GEMM", observed=sm,
                                  expected=f">= {want * (1 - cfg.clock_drop_warn_fraction):g}", unit="MHz",
                                  recommendation="Compare its clock event reasons, temperature and power with its "
                                                 "peers; check cooling and the power limit "
                                                 "(nvidia-smi -q -d PERFORMANCE).",
                                  details={"phase": name, "stats": dict(ph)})
        if not flagged:
            judged = {n: _median(ph, "sm_mhz") for n, ph in _load_phases(load, cfg)}
            lowest = min((v for v in judged.values() if v is not None), default=None)
            text = (f"{subject}: no hardware slowdown under load in {len(judged)} phase(s), lowest median SM "
                    f"clock {lowest or 0:g} MHz" if judged else
                    f"{subject}: no load phase had {cfg.min_samples} samples to judge")
            yield from passes.add_finding(Finding(
                "load.clocks", Status.PASS if judged else Status.SKIP, subject, "ok" if judged else "too_short",
                text, observed=lowest, unit="MHz", details={"phases": judged}))


LOAD_THERMAL_ACTIONS = {"at_limit": THERMAL_ACTIONS["temp_slowdown"], "near_limit": THERMAL_ACTIONS["temp_high"]}
"""As at idle (gpu.thermal): at the limit under load is a cooling fault, near it is watched."""


@check("load.thermal", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True,
       actions=LOAD_THERMAL_ACTIONS)
@over_loads
def thermal(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
            passes: Passes) -> Iterator[Finding]:
    """Temperatures stay clear of the GPU's own limits under load.

    Per GPU and load phase, the maximum GPU temperature against the GPU's slowdown
    temperature (and memory temperature against its maximum operating temperature), as
    the GPU itself reports them: FAIL at or above, WARN within ``load.temp_margin_c``.
    """
    for subject, _, load in loads:
        static = load.get("static") or {}
        worst: tuple[float, str, str, float, float] | None = None  # (headroom, phase, what, max, limit)
        for name, ph in _load_phases(load, cfg):
            for key, limit_key, what in (("temp_c", "temp_slowdown_c", "GPU"),
                                         ("mem_temp_c", "temp_mem_max_c", "memory")):
                stats, limit = ph.get(key), static.get(limit_key)
                if isinstance(stats, Mapping) and isinstance(limit, (int, float)) and limit > 0:
                    headroom = float(limit) - float(stats["max"])
                    if worst is None or headroom < worst[0]:
                        worst = (headroom, name, what, float(stats["max"]), float(limit))
        if worst is None:
            yield ctx.finding(Status.SKIP, subject, "no_limits",
                              f"{subject}: no temperature with a limit to judge under load")
            continue
        headroom, name, what, peak, limit = worst
        status = Status.FAIL if headroom <= 0 else Status.WARN if headroom <= cfg.temp_margin_c else Status.PASS
        text = (f"{subject}: {what} reached {peak:g} C in {name}, "
                + (f"at or above its limit {limit:g} C" if headroom <= 0 else f"{headroom:g} C below its limit "
                   f"{limit:g} C"))
        yield from passes.add_finding(Finding(
            "load.thermal", status, subject, "ok" if status is Status.PASS else
            "at_limit" if status is Status.FAIL else "near_limit", text, observed=peak,
            expected=f"< {limit - cfg.temp_margin_c:g}", unit="C", details={"phase": name, "what": what},
            recommendation=None if status is Status.PASS else
            "Check airflow, fans, inlet temperature and neighbouring GPUs before long jobs."))


LOAD_POWER_ACTIONS = {"power_low": Action.CHECK_MECHANICALS}
"""A GPU that cannot draw its power under a dense GEMM is held back by its power delivery (PSUs,
cables): DCGM files the same failure (DCGM_FR_TARGET_POWER) under hardware power."""


@check("load.power", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True,
       actions=LOAD_POWER_ACTIONS)
@over_loads
def power(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
          passes: Passes) -> Iterator[Finding]:
    """Under GEMM the GPU draws the power it needs (DCGM's targeted-power idea).

    WARN when a GPU's power never reaches ``load.gemm_power_min_fraction`` of its enforced
    limit in any GEMM phase: a board that cannot draw power (a failing VRM, a brake, a
    throttled PSU) cannot compute at speed. SKIP where no GEMM phase was long enough.
    """
    for subject, _, load in loads:
        fractions = {n: float(ph["power_max_fraction"]) for n, ph in _load_phases(load, cfg)
                     if n.startswith("gemm") and ph.get("power_max_fraction") is not None}
        if not fractions:
            yield ctx.finding(Status.SKIP, subject, "no_gemm_phase",
                              f"{subject}: no GEMM phase long enough (or no power limit) to judge power under load")
            continue
        best_phase = max(fractions, key=lambda n: fractions[n])
        best = fractions[best_phase]
        limit = (load.get("static") or {}).get("power_limit_w")
        text = f"{subject}: power peaked at {100 * best:.0f}% of its {limit or '?'} W limit ({best_phase})"
        if best < cfg.gemm_power_min_fraction:
            yield ctx.finding(Status.WARN, subject, "power_low", text, observed=round(best, 4),
                              expected=f">= {cfg.gemm_power_min_fraction:g}", unit="of limit",
                              recommendation="A GPU that cannot draw power under GEMM computes slowly: check its "
                                             "power brake and clock reasons (nvidia-smi -q -d POWER,PERFORMANCE) and "
                                             "the node's PSUs.", details={"phases": fractions})
        else:
            yield from passes.add_finding(ctx.finding(Status.PASS, subject, "ok", text, observed=round(best, 4),
                                                   expected=f">= {cfg.gemm_power_min_fraction:g}", unit="of limit"))


@check("load.peers", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True)
@over_loads
def peers(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
          passes: Passes) -> Iterator[Finding]:
    """Under the same load, a GPU's clocks and power match those of its node's other GPUs.

    Per node and load phase, each GPU's median SM clock and median power are compared
    with the median of the node's other GPUs in the same phase: WARN more than
    ``load.peer_fraction`` below, naming the GPU and the numbers. SKIP with fewer than two
    sampled GPUs on every node.
    """
    by_node: dict[str, list[tuple[str, Load]]] = {}
    for subject, _, load in loads:
        by_node.setdefault(subject.rsplit("/", 1)[0], []).append((subject, load))
    compared = 0
    for node, members in sorted(by_node.items()):
        if len(members) < 2:
            continue
        flagged: set[str] = set()
        phases = {n for _, load in members for n, _ in _load_phases(load, cfg)}
        for name in sorted(phases):
            for key, what, unit in (("sm_mhz", "SM clock", "MHz"), ("power_w", "power", "W")):
                values = {s: v for s, load in members
                          if (v := _median((load.get("phases") or {}).get(name) or {}, key)) is not None}
                for subject, value in values.items():
                    others = [v for s, v in values.items() if s != subject]
                    if not others:
                        continue
                    ref = statistics.median(others)
                    compared += 1
                    if ref > 0 and value < ref * (1 - cfg.peer_fraction):
                        flagged.add(subject)
                        yield ctx.finding(Status.WARN, subject, f"{key.split('_')[0]}_below_peers",
                                          f"{subject}: {what} median {value:g} {unit} in {name}, "
                                          f"{100 * (1 - value / ref):.0f}% below its {len(others)} peer(s) on {node} "
                                          f"({ref:g} {unit})", observed=value,
                                          expected=f">= {ref * (1 - cfg.peer_fraction):g}", unit=unit,
                                          recommendation="Compare this GPU's clock reasons, temperature and power "
                                                         "limit with its peers'; a persistent straggler slows every "
                                                         "step.",
                                          details={"phase": name, "peers_median": ref})
        for subject, _ in members:
            if subject not in flagged:
                yield from passes.add_finding(Finding(
                    "load.peers", Status.PASS, subject, "ok",
                    f"{subject}: clocks and power under load in line with {len(members) - 1} peer(s)"))
    if not compared:
        yield ctx.finding(Status.SKIP, "cluster", "no_peers",
                          "no node sampled two or more GPUs under the same load: nothing to compare")


LOAD_ECC_ACTIONS = {"uncorrectable_under_load": Action.RESET_GPU}
"""As gpu.ecc.errors' volatile uncorrectable errors: NVIDIA's Xid 48 workflow resets the GPU."""


@check("load.ecc", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True,
       actions=LOAD_ECC_ACTIONS)
@over_loads
def ecc(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
        passes: Passes) -> Iterator[Finding]:
    """No uncorrectable ECC error appeared while the workloads ran.

    The sampler reads the volatile ECC counters before and after: FAIL when the
    uncorrectable count rose under load (the memory failed while it was being used);
    corrected errors are counted in the details and judged by ``gpu.ecc.errors``.
    """
    for subject, _, load in loads:
        delta = load.get("ecc_delta") or {}
        if "volatile_uncorrected" not in delta:
            yield ctx.finding(Status.SKIP, subject, "not_read",
                              f"{subject}: ECC counters not readable before and after the run")
        elif delta["volatile_uncorrected"] > 0:
            yield ctx.finding(Status.FAIL, subject, "uncorrectable_under_load",
                              f"{subject}: {delta['volatile_uncorrected']} uncorrectable ECC error(s) during the run",
                              observed=delta["volatile_uncorrected"], expected=0, unit="errors", details=dict(delta),
                              recommendation="Drain the node and reset the GPU; replace it if errors recur.")
        else:
            yield from passes.add_finding(ctx.finding(Status.PASS, subject, "ok",
                                                   f"{subject}: no uncorrectable ECC error during the run "
                                                   f"({delta.get('volatile_corrected', 0)} corrected)", observed=0,
                                                   unit="errors"))


@check("load.xid", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health", core=True)
def xid_under_load(ctx: CheckContext) -> Iterator[Finding]:
    """No serious Xid event appeared in a node's kernel log while the workloads ran.

    Each GPU node's leader reads the kernel log before and after its workloads and sends
    the Xid lines that are new (``load_xids``): an Xid that a GEMM or a collective provoked
    is seen by this run, not the next. Judged with the Xid policy table as ``gpu.xid`` judges
    the log at idle (hardware Xids FAIL or WARN, application Xids WARN when repeated); a line
    shaped like an Xid that cannot be read is an ERROR; a kernel log the node cannot read
    (containers often deny it) is a SKIP that says so — never "no Xid".
    """
    from .gpu_xid import SEVERITY_STATUS, xid_policy

    c: ClusterView = ctx.fact("cluster")
    watched = sorted((r, p["load_xids"]) for r, p in c.payloads.items() if isinstance(p.get("load_xids"), Mapping))
    if not watched:
        why = "no GPU node watched its kernel log under load" if c.gpu_ranks else \
            "CPU workers only: no GPU node to watch for Xid events"
        yield ctx.finding(Status.SKIP, "cluster", "not_watched", why)
        return
    for rank, watch in watched:
        node = c.rank_subject(rank).rsplit("/", 1)[0]
        if watch.get("error"):
            yield ctx.finding(Status.SKIP, node, "log_unreadable", str(watch["error"]))
            continue
        counts: dict[int, int] = {}
        for e in watch.get("events") or ():
            counts[int(e["xid"])] = counts.get(int(e["xid"]), 0) + 1
        flagged = False
        for xid, n in sorted(counts.items()):
            rule = xid_policy(ctx.config.xid).rule(xid)  # cached; read only when an event is there to judge
            status = SEVERITY_STATUS.get(rule.severity_for(n), Status.PASS)
            if status is Status.PASS:
                continue
            flagged = True
            yield ctx.finding(status, node, f"xid_{xid}",
                              f"{node}: Xid {xid} ({rule.name}) x{n} while the workloads ran", observed=n,
                              expected=0, unit="events", recommendation=rule.recommendation,
                              details=with_action({"lines": [e["line"] for e in watch.get("events") or ()
                                                             if e["xid"] == xid][:5],
                                                   "cause": rule.cause, "action": rule.action},
                                                  BY_NVIDIA_ACTION.get(rule.action)))
        if watch.get("unparsed"):
            flagged = True
            yield ctx.finding(Status.ERROR, node, "xid_unparsed",
                              f"{node}: {watch['unparsed']} Xid line(s) during the run could not be read",
                              recommendation="Read the node's kernel log (dmesg -T) around the run.")
        if not flagged:
            yield ctx.finding(Status.PASS, node, "ok",
                              f"{node}: no serious Xid while the workloads ran ({watch.get('count', 0)} event(s); "
                              f"{watch.get('source')})", observed=int(watch.get("count") or 0), unit="events")
