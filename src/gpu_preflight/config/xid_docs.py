"""docs/xids.md, rendered from the Xid catalogue: the docs cannot say one thing and the check another.

The README once listed Xids 94/95 as hardware FAILs while the check warned on 94 (what NVIDIA's
table says); a hand-kept list drifts. Here the page is a pure function of the loaded policy, and
``tests/test_xid_catalogue.py`` re-renders it and compares it with the committed file.

Run ``python -m gpu_preflight.config.xid_docs > docs/xids.md`` after editing
``data/xid_policy.toml``; ``--check FILE`` exits 1 when FILE differs from what would be rendered.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from ..actions import BY_NVIDIA_ACTION, Action
from .xid_policy import SEVERITIES, XidPolicy, XidRule, load_xid_policy

__all__ = ["operator_action", "render", "verdict_words"]

_STATUS = {"fail": "FAIL", "warn": "WARN", "info": "PASS (info)", "ignore": "not shown"}


def operator_action(rule: XidRule) -> Action:
    """The routable action a finding of ``rule`` carries (``details.operator_action`` when not PASS)."""
    return BY_NVIDIA_ACTION[rule.action]


def verdict_words(rule: XidRule) -> tuple[str, str]:
    """(our verdict, count rule) as the table prints them."""
    if rule.count <= 1:
        return _STATUS[rule.severity], "any"
    lower = SEVERITIES[max(SEVERITIES.index(rule.severity) - 1, 0)]
    return _STATUS[rule.severity], f"≥ {rule.count} per GPU (fewer: {_STATUS[lower]})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _nvidia(rule: XidRule) -> str:
    if rule.nvidia_action is None:
        return "none listed"
    then = rule.nvidia_investigation
    return f"`{rule.nvidia_action}`" + (f" (then {_cell(then)})" if then and then != rule.nvidia_action else "")


def _row(first: str, rule: XidRule) -> str:
    verdict, count = verdict_words(rule)
    action = operator_action(rule)
    shown = "—" if rule.severity in ("info", "ignore") or action is Action.NONE else f"`{action.value}`"
    name = _cell(rule.name) + (f" (`{_cell(rule.mnemonic)}`)" if rule.mnemonic else "")
    return f"| {first} | {name} | {verdict} | {count} | {shown} | {_nvidia(rule)} |"


_HEAD = ("| {what} | Name | Our verdict | Count rule | Operator action | NVIDIA's resolution |\n"
         "|---|---|---|---|---|---|")


def _lines(policy: XidPolicy) -> Iterator[str]:
    cat = policy.catalogue
    yield "# Xid catalogue"
    yield ""
    yield ("<!-- Rendered from src/gpu_preflight/data/xid_policy.toml by "
           "`python -m gpu_preflight.config.xid_docs`; do not edit by hand. -->")
    yield ""
    yield ("How `gpu.xid` judges every Xid NVIDIA publishes, with the operator action a scheduler hook can "
           "route on (`details.operator_action`, docs/outputs.md) and NVIDIA's own resolution bucket "
           "(immediate action, then the investigatory one).")
    if cat is not None:
        yield f"Edition: {cat.edition}; Xids {cat.first}–{cat.last}."
    yield ""
    yield ("*Count rule*: how many events of that Xid one GPU must log within `xid.window_hours` "
           "(default 2 h) before the verdict applies. An Xid that FAILs but is older than the window "
           "still WARNs, with its age, unless the log shows a driver load, a boot or that GPU's "
           "recovery (Xid 154 back to `None`) after it. NVLink5 Xids 144–150 are judged by the "
           "`Fatal`/`Nonfatal` their line prints and Xid 154 by the recovery action it names "
           "(docs/replay-and-kernel-log.md). A site changes verdicts with `xid.severity_overrides` or "
           "replaces the table with `xid.policy_file` (docs/configuration.md).")
    yield ""
    yield _HEAD.format(what="Xid")
    for xid in sorted(policy.rules):
        yield _row(str(xid), policy.rules[xid])
    yield _row("other", policy.default)
    if policy.drivers:
        yield ""
        yield "## Driver messages without an Xid number"
        yield ""
        yield _HEAD.format(what="Message")
        for key, rule in sorted(policy.drivers.items()):
            yield _row(f"`nvrm_{key}`", rule)
    if policy.sxids:
        yield ""
        yield "## NVSwitch SXids"
        yield ""
        yield "An SXid line is judged by the severity it prints (`Fatal`, `Non-fatal`) or, without one, as unknown."
        yield ""
        yield _HEAD.format(what="SXid line")
        for key, rule in sorted(policy.sxids.items()):
            yield _row(key, rule)


def render(policy: XidPolicy | None = None) -> str:
    """The whole page for ``policy`` (the shipped catalogue by default)."""
    return "\n".join(_lines(policy or load_xid_policy())) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = render()
    if args[:1] == ["--check"] and len(args) == 2:
        with open(args[1], encoding="utf-8") as fh:
            same = fh.read() == text
        if not same:
            print(f"{args[1]} differs from the catalogue: run python -m gpu_preflight.config.xid_docs > {args[1]}",
                  file=sys.stderr)
        return 0 if same else 1
    if args:
        print("usage: python -m gpu_preflight.config.xid_docs [--check FILE]", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
