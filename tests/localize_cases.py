"""Recorded localisation runs: simulator cases whose verdicts must not change when the code gets faster.

``tests/fixtures/localize/expected.json`` holds, per case, the verdicts (excluded nodes,
suspects with kind, reason, rail, peers and confidence), the cost (rounds, tests) and a
digest of every judged observation in order, so a change in any plan or any judgement
shows. It was written by the scheduler as it was before the planning was made linear
(``python tests/localize_cases.py --write``); rewrite it only for a deliberate change of
the rules, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from gpu_preflight.localize.model import LocalizeConfig
from gpu_preflight.localize.simulate import SimResult, make_scenario, simulate

FIXTURE = Path(__file__).parent / "fixtures" / "localize" / "expected.json"

# name -> (nodes, bad, mode, seed, extra scenario/config/simulate options)
CASES: dict[str, dict[str, Any]] = {
    "quick-2-slow": {"nodes": 2, "bad": 1, "noise": 0.1, "seed": 3},
    "quick-3-slow": {"nodes": 3, "bad": 1, "noise": 0.1, "seed": 1},
    "quick-5-slow": {"nodes": 5, "bad": 1, "noise": 0.1, "seed": 2},
    "quick-64-slow-s0": {"nodes": 64, "bad": 1, "noise": 0.1, "seed": 0},
    "quick-64-slow-s7": {"nodes": 64, "bad": 1, "noise": 0.1, "seed": 7},
    "quick-1024-two": {"nodes": 1024, "bad": 2, "noise": 0.1, "seed": 1},
    "quick-4096-one": {"nodes": 4096, "bad": 1, "noise": 0.1, "seed": 5},
    "quick-256-mixed-passes": {"nodes": 256, "bad": 10, "fault": "mixed", "noise": 0.1, "seed": 4,
                               "cover_passes": 3},
    "quick-256-mixed-unknown-star": {"nodes": 256, "bad": 6, "fault": "mixed", "noise": 0.1, "seed": 9,
                                     "dead_known": False, "star": True},
    "quick-128-rails": {"nodes": 128, "bad": 2, "fault": "rail", "rails": 4, "noise": 0.05, "seed": 2},
    "quick-128-link": {"nodes": 128, "bad": 0, "slow_links": [(5, 69)], "noise": 0.1, "seed": 6},
    "quick-300-healthy": {"nodes": 300, "bad": 0, "noise": 0.1, "seed": 11},
    "group-256-two": {"nodes": 256, "bad": 2, "mode": "group", "noise": 0.1, "seed": 3},
    "group-500-mixed": {"nodes": 500, "bad": 5, "mode": "group", "fault": "mixed", "noise": 0.1, "seed": 8},
    "full-16-link": {"nodes": 16, "bad": 0, "mode": "full", "slow_links": [(3, 11)], "seed": 0},
    "full-33-two": {"nodes": 33, "bad": 2, "mode": "full", "noise": 0.1, "seed": 5},
    "full-64-mixed": {"nodes": 64, "bad": 4, "mode": "full", "fault": "mixed", "noise": 0.1, "seed": 3},
    "full-48-flaky-unknown": {"nodes": 48, "bad": 3, "mode": "full", "fault": "flaky", "noise": 0.05, "seed": 1,
                              "dead_known": False},
}


def run_case(case: dict[str, Any]) -> SimResult:
    sc = make_scenario(case["nodes"], case["bad"], fault=case.get("fault", "slow"), noise=case.get("noise", 0.0),
                       rails=case.get("rails", 1), slow_links=case.get("slow_links"), seed=case["seed"])
    config = LocalizeConfig(mode=case.get("mode", "quick"), rails=case.get("rails", 1),
                            cover_passes=case.get("cover_passes", 1))
    return simulate(sc, config, seed=case["seed"], dead_known=case.get("dead_known", True),
                    star=case.get("star", False))


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.9g}"


def summarize(r: SimResult) -> dict[str, Any]:
    """What must stay identical: verdicts, cost, and every judged observation (as a digest)."""
    out = r.outcome
    digest = hashlib.sha256()
    for o in out.observations:
        digest.update(f"{o.test_id}|{o.round}|{o.members}|{o.rail}|{o.kind}|{o.positive}|{o.reason}|{_num(o.gbps)}|"
                      f"{_num(o.latency_us)}|{_num(o.threshold_gbps)}|{_num(o.fluke)}\n".encode())
    return {
        "rounds": out.rounds, "tests": out.tests, "done": out.done, "rounds_to_find": r.rounds_to_find,
        "excluded": out.excluded, "healthy": len(out.healthy), "false_positives": r.false_positives,
        "missed": r.missed, "links_found": [list(x) for x in r.links_found],
        "suspects": [[s.node, s.kind, s.reason, s.rail, list(s.peers), s.confidence, s.passes, s.failures]
                     for s in out.suspects],
        "round_found": {str(k): v for k, v in sorted(out.round_found.items())},
        "duration_s": out.duration_s, "observations": len(out.observations), "digest": digest.hexdigest(),
    }


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python tests/localize_cases.py --write   (records the current scheduler's verdicts)",
              file=sys.stderr)
        return 3
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    data = {name: summarize(run_case(case)) for name, case in CASES.items()}
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(data)} cases to {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
