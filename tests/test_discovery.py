"""What a node-only run imports, and the id globbing that replaced fnmatch on the start-up path.

A node run imports only node modules (``checks/cluster_*.py`` hold every cluster check, and
only cluster checks), so the start-up every node pays stays small; the fast glob must agree
with ``fnmatch.fnmatchcase`` on every pattern.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import subprocess
import sys

from gpu_preflight import registry
from gpu_preflight.model import id_matches

from .conftest import H200_DUMP, REPO

IDS = ["gpu.ecc.errors", "gpu", "system.limits", "nccl.collectives", "cluster.completeness", "a.b", "", "gpu.x.y",
       "gpux", "nccl_tests.bandwidth"]
PATTERNS = ["gpu.*", "*", "gpu", "system.limits", "g?u.*", "*.limits", "gpu*", "[gs]*", "nccl_tests.*", "", "gpu.ecc.*",
            "*ecc*", "nccl*", "gpu.[e]cc.*"]


def test_id_matches_agrees_with_fnmatch() -> None:
    for check_id, pattern in itertools.product(IDS, PATTERNS):
        assert id_matches(check_id, pattern) == fnmatch.fnmatchcase(check_id, pattern), (check_id, pattern)


def test_cluster_checks_live_in_cluster_modules_and_only_there() -> None:
    for spec in registry.all_checks():
        module = spec.fn.__module__.rsplit(".", 1)[-1]
        assert (spec.scope == "cluster") == module.startswith(registry.CLUSTER_MODULE_PREFIX), (spec.id, module)


def test_a_node_only_run_imports_no_cluster_check_and_no_torch() -> None:
    code = ("import sys, json; "
            f"sys.argv = ['gpu-preflight', 'run', '--replay', {str(H200_DUMP)!r}, '--format', 'json']\n"
            "from gpu_preflight.cli.main import main\nmain()\n"  # the program's work, before it leaves
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('gpu_preflight.checks.cluster', "
            "'torch', 'gpu_preflight.distributed')))), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []
    assert json.loads(out.stdout)["cluster_summary"]["overall_status"] in ("PASS", "WARN")


def test_a_pattern_naming_only_a_cluster_check_is_still_known() -> None:
    specs = registry.matching(["compute.gemm"], "node")  # valid: it names a cluster check
    assert all(s.scope == "node" for s in specs)
    try:
        registry.matching(["compute.gem"], "node")
    except KeyError as exc:
        assert "compute.gemm" in str(exc)  # the known list includes the cluster checks
    else:
        raise AssertionError("a pattern matching nothing must be an error")
