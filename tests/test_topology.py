"""Topology detection for every launcher, from the variables each one sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_preflight.backends.launcher.topology import Launcher, TopologyError, detect, slurm_tasks_per_node

NO_SM = Path("/nonexistent/resourceconfig.json")


def topo(env: dict[str, str], **kw: object):  # type: ignore[no-untyped-def]
    return detect(env, hostname="h", resource_config=kw.get("rc", NO_SM))  # type: ignore[arg-type]


def test_no_launcher() -> None:
    t = topo({})
    assert (t.launcher, t.world_size, t.rank, t.is_distributed) == ("none", 1, 0, False)


def test_torchrun_multi_node() -> None:
    t = topo({"TORCHELASTIC_RUN_ID": "j", "RANK": "11", "LOCAL_RANK": "3", "WORLD_SIZE": "16",
              "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "n0",
              "MASTER_PORT": "29400"})
    assert (t.launcher, t.rank, t.local_rank, t.node_rank, t.num_nodes, t.master_port) == ("torchrun", 11, 3, 1, 2,
                                                                                          29400)


def test_slurm_with_hostlist_and_tasks_per_node() -> None:
    t = topo({"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
              "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_JOB_NODELIST": "gpu-[007,012]",
              "SLURM_JOB_ID": "123"})
    assert (t.launcher, t.rank, t.local_world_size, t.node_name, t.master_addr) == ("slurm", 9, 8, "gpu-012",
                                                                                    "gpu-007")
    assert t.hosts == ("gpu-007", "gpu-012") and t.master_port == 29500 + 123


def test_torchrun_inside_srun_wins_but_keeps_slurm_hosts() -> None:
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "a[1-2]", "RANK": "5",
           "LOCAL_RANK": "1", "WORLD_SIZE": "8", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    t = topo(env)
    # c10d numbers nodes in join order: the host list cannot name this node, the host name can
    assert t.launcher == "torchrun" and t.hosts == ("a1", "a2") and t.node_name == "h"
    assert topo({**env, "SLURMD_NODENAME": "a1"}).node_name == "a1"


def test_openmpi_and_pmix() -> None:
    t = topo({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
              "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "MASTER_ADDR": "n0"})
    assert (t.launcher, t.rank, t.node_rank, t.num_nodes, t.master_addr) == ("openmpi", 3, 1, 2, "n0")
    p = topo({"PMIX_RANK": "1", "PMIX_SIZE": "2"})
    assert (p.launcher, p.rank, p.world_size) == ("pmix", 1, 2)


def test_sagemaker_env_and_resource_config(tmp_path: Path) -> None:
    t = topo({"SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-2"})
    assert (t.launcher, t.rank, t.node_rank, t.num_nodes, t.master_addr, t.node_name) == (
        "sagemaker", 1, 1, 2, "algo-1", "algo-2")
    rc = tmp_path / "resourceconfig.json"
    rc.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1", "algo-2", "algo-3"]}))
    t = detect({}, hostname="h", resource_config=rc)
    assert (t.num_nodes, t.rank) == (3, 0)
    # torchrun inside a SageMaker job: ranks from torchrun, node names from SageMaker
    t = detect({"RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "4"},
               hostname="h", resource_config=rc)
    assert t.launcher == "torchrun" and t.node_name == "algo-1"  # SageMaker says which host this is


def test_kubeflow_pytorchjob() -> None:
    t = topo({"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456",
              "PET_NNODES": "3"})
    assert (t.launcher, t.rank, t.num_nodes, t.node_rank) == ("kubeflow", 2, 3, 2)


def test_node_name_override() -> None:
    assert detect({"GPU_PREFLIGHT_NODE_NAME": "rack3-n7"}, resource_config=NO_SM).hostname == "rack3-n7"


@pytest.mark.parametrize("env, message", [
    ({"RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "GROUP_RANK": "0"}, "rank 4 outside"),
    ({"SLURM_PROCID": "x", "SLURM_NTASKS": "2"}, "not an integer"),
    ({"SM_HOSTS": "[algo-1", "SM_CURRENT_HOST": "algo-1"}, "not a JSON list"),
    ({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-9"}, "not in SM_HOSTS"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "gpu-[3-"}, "bad Slurm hostlist"),
])
def test_inconsistent_variables_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        topo(env)


SLURM_ONE = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}


@pytest.mark.parametrize(("env", "named"), [
    ({"SM_HOSTS": "123", "SM_CURRENT_HOST": "algo-1"}, "SM_HOSTS=123 (not a JSON list of host names)"),
    ({"SM_HOSTS": "null", "SM_CURRENT_HOST": "algo-1"}, "SM_HOSTS=null (not a JSON list of host names)"),
    ({"SM_HOSTS": '[1, 2]', "SM_CURRENT_HOST": "algo-1"}, "SM_HOSTS=[1, 2] (not a JSON list"),
    ({"SM_HOSTS": "[" * 5000, "SM_CURRENT_HOST": "algo-1"}, "SM_HOSTS=[[[["),  # deeper than json can nest
    ({**SLURM_ONE, "SLURM_JOB_NUM_NODES": "0"}, "SLURM_JOB_NUM_NODES=0 (must be from 1"),
    ({**SLURM_ONE, "SLURM_JOB_ID": "abc"}, "SLURM_JOB_ID=abc (not an integer)"),
    ({**SLURM_ONE, "SLURM_TASKS_PER_NODE": "4(x1000000000)"}, "SLURM_TASKS_PER_NODE=4(x1000000000) (more than"),
    ({**SLURM_ONE, "MASTER_PORT": "70000"}, "MASTER_PORT=70000 (must be from 1 to 65535)"),
    ({**SLURM_ONE, "SLURM_NODELIST": "gpu-[1-100000000]"}, "SLURM_NODELIST=gpu-[1-100000000] (bad Slurm hostlist"),
    ({"RANK": "0", "WORLD_SIZE": "2", "NNODES": "-3"}, "NNODES=-3 (must be at least 0)"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "0"}, "0 processes each"),
    ({**SLURM_ONE, "SLURM_JOB_ID": "7" * 5000}, "SLURM_JOB_ID=" + "7" * 80 + "... (not an integer)"),
    ({**SLURM_ONE, "SLURM_JOB_ID": "1\x1b[2J"}, "SLURM_JOB_ID='1\\x1b[2J' (not an integer)"),
])
def test_malformed_launcher_variables_are_named(env: dict[str, str], named: str) -> None:
    """Issue 28 item 10: each of these crashed (TypeError, ZeroDivisionError, ValueError, MemoryError)."""
    with pytest.raises(TopologyError) as info:
        topo(env)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_tasks_per_node_forms() -> None:
    assert slurm_tasks_per_node("4(x2),2") == [4, 4, 2]
    with pytest.raises(TopologyError):
        slurm_tasks_per_node("4(y2)")


# Each launcher's environment (the least that names it) and the launcher it is parsed to, once,
# by detect(): every member of Launcher appears, so a new launcher comes with its row here.
TORCHRUN_ENV = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
LAUNCHED_BY = [
    ({}, Launcher.NONE),
    ({"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}, Launcher.TORCHRUN),
    (TORCHRUN_ENV, Launcher.TORCHRUN),
    ({**TORCHRUN_ENV, "GPU_PREFLIGHT_LAUNCHER": "self"}, Launcher.SELF),
    ({**TORCHRUN_ENV, "GPU_PREFLIGHT_LAUNCHER": "other"}, Launcher.TORCHRUN),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, Launcher.OPENMPI),
    ({"PMIX_RANK": "0", "PMIX_SIZE": "2"}, Launcher.PMIX),
    ({"PMIX_RANK": "0", "PMIX_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, Launcher.SLURM),  # srun's PMIx
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, Launcher.SLURM),
    ({"RANK": "0", "WORLD_SIZE": "2", "PET_NNODES": "2"}, Launcher.KUBEFLOW),
    ({"RANK": "0", "WORLD_SIZE": "2", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, Launcher.KUBEFLOW),
    ({"RANK": "0", "WORLD_SIZE": "2"}, Launcher.ENV),
    ({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"}, Launcher.SAGEMAKER),
]


@pytest.mark.parametrize(("env", "launcher"), LAUNCHED_BY, ids=[f"{r[1].value}-{i}" for i, r in enumerate(LAUNCHED_BY)])
def test_each_environment_is_parsed_to_its_launcher(env: dict[str, str], launcher: Launcher) -> None:
    t = topo(env)
    assert t.launcher is launcher
    assert t.is_distributed is (launcher is not Launcher.NONE)
    assert t.self_launched is (launcher is Launcher.SELF)


def test_every_launcher_has_an_environment() -> None:
    assert {launcher for _, launcher in LAUNCHED_BY} == set(Launcher)


def test_the_launcher_is_written_and_printed_as_its_word() -> None:
    """Reports and payloads carry ``cluster_topology.launcher`` as the same string as before it was typed."""
    t = topo({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert json.loads(json.dumps(t.to_dict()))["launcher"] == "slurm"
    assert json.dumps({"launcher": t.launcher}) == '{"launcher": "slurm"}'
    assert f"a {t.launcher} job" == "a slurm job" and str(t.launcher) == "slurm"
    assert [m.value for m in Launcher] == ["torchrun", "self", "openmpi", "pmix", "slurm", "kubeflow", "env",
                                           "sagemaker", "none"]


def test_only_slurm_and_sagemaker_list_hosts_in_node_order() -> None:
    assert {m for m in Launcher if m.hosts_in_node_order} == {Launcher.SLURM, Launcher.SAGEMAKER}
