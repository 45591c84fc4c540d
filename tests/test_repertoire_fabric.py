"""The fabric tools' output forms derived from their own source (issue 27; docs/repertoire/fabric.md).

Each fixture under ``tests/fixtures/repertoire/fabric/`` renders one format string of the tool's source with
plausible values (the README there names the repository, commit and file:line of each). The test says what
``gpu-preflight judge`` must make of it: the kind it is read as and the ``ib.*`` finding it gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.config.evidence import EvidenceConfig
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "fabric"


def form(name: str) -> str:
    return (FORMS / name).read_text()


def findings(text: str, check: str, config: Config | None = None) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, config or Config(), source="n1") if f.check_id == check]


def floor(gbps: float) -> Config:
    """A config with a perftest bandwidth floor (as tests/test_evidence_judge.py builds its [evidence] section)."""
    cfg = Config()
    setattr(cfg, "evidence", EvidenceConfig(perftest_min_bw_gbps=gbps))  # noqa: B010 - as test_evidence_judge
    return cfg


# perftest: the result tables of perftest_parameters.h beside the plain one

@pytest.mark.parametrize(("name", "rows", "peak_gbps"), [
    ("perftest-ib_write_bw-cpu-util.txt", 1, 97.4603),  # RESULT_FMT + RESULT_EXT_CPU_UTIL (--cpu_util)
    ("perftest-ib_write_bw-report-per-port.txt", 1, 192.9388),  # RESULT_FMT_PER_PORT (--report-per-port)
])
def test_perftest_bandwidth_tables_with_more_columns_are_read(name: str, rows: int, peak_gbps: float) -> None:
    text = form(name)
    assert detect_kind(text) == "perftest"
    _, record = parse_text(text)
    assert len(record.rows) == rows and record.bw_peak_max_gbps == peak_gbps and not record.errors
    assert findings(text, "ib.perftest") == [(Status.SKIP, "no_floor")]


@pytest.mark.parametrize(("name", "latency"), [
    ("perftest-ib_write_lat-rc.txt", 1.04),  # RESULT_FMT_LAT: t_typical
    ("perftest-ib_write_lat-D-duration.txt", 1.07),  # RESULT_FMT_LAT_DUR (-D): t_avg
])
def test_perftest_latency_runs_are_read_and_not_held_to_the_bandwidth_floor(name: str, latency: float) -> None:
    text = form(name)
    assert detect_kind(text) == "perftest"
    _, record = parse_text(text)
    assert record.test == "RDMA_Write Latency Test"
    assert [r.latency_usec for r in record.rows] == [latency] and record.bw_avg_max_gbps is None
    for config in (Config(), floor(100.0)):  # a floor set must not FAIL a run that measured no bandwidth
        assert findings(text, "ib.perftest", config) == [(Status.SKIP, "latency_run")]


def test_perftest_failure_after_result_rows_fails() -> None:
    """A -a run prints a row per size it finished, then NOTIFY_COMP_ERROR_SEND and exits: not a pass on its rows."""
    text = form("perftest-ib_write_bw-a-completion-error-after-rows.txt")
    _, record = parse_text(text)
    assert len(record.rows) == 3 and record.errors[0] == "Completion with error at client"
    for config in (Config(), floor(0.0001)):  # its rows clear any floor: the failure still FAILs
        assert findings(text, "ib.perftest", config) == [(Status.FAIL, "perftest_failed")]



def test_perftest_teardown_error_below_the_closed_table_is_a_warning_not_a_failure() -> None:
    """destroy_ctx runs after the closing RESULT_LINE and logs a verbs object it could not release ('Failed to
    deallocate PD - Device or resource busy'): the measurement above it stands. Before the table closes (a -a run
    cut by a completion error goes to destroy_context too) the run's own failure line is still read first."""
    text = form("perftest-ib_write_bw-teardown-error-after-result-line.txt")
    _, record = parse_text(text)
    assert len(record.rows) == 1 and record.errors == []
    assert record.warnings == ["Failed to deallocate PD - Device or resource busy"]
    assert findings(text, "ib.perftest", floor(300.0)) == [(Status.PASS, "ok")]
    cut = text.replace("-" * 87 + "\nFailed to deallocate", "Failed to deallocate")  # no closing line: not teardown
    _, open_table = parse_text(cut)
    assert open_table.errors == ["Failed to deallocate PD - Device or resource busy"]


# ibstat and ibstatus (rdma-core's infiniband-diags)

def test_ibstat_one_port_form_names_its_ca() -> None:
    """``ibstat mlx5_0 1`` prints ``CA: 'mlx5_0'`` and that port's lines unindented: a whole answer, not a fragment."""
    text = form("ibstat-ca-port-alone-down.txt")
    assert detect_kind(text) == "ibstat"
    _, record = parse_text(text)
    assert [d.name for d in record.devices] == ["mlx5_0"] and record.fragment is None and not record.incomplete
    assert findings(text, "ib.ports") == [(Status.FAIL, "port_down")]


@pytest.mark.parametrize(("name", "kind"), [
    ("ibstat-ibpanic-umad.txt", "ibstat"),  # no ib_umad: ibstat sees no HCA
    ("ibstat-ibpanic-not-found.txt", "ibstat"),  # the CA asked for is not there
    ("ibstat-ibwarn-only.txt", "ibstat"),  # the CA listed could not be read
    ("ibstatus-fatal-no-devices.txt", "ibstatus"),  # no /sys/class/infiniband
    ("ibstatus-fatal-sys-files.txt", "ibstatus"),  # the device asked for has no ports
])
def test_the_port_tools_own_failure_lines_alone_fail(name: str, kind: str) -> None:
    text = form(name)
    assert detect_kind(text) == kind
    _, record = parse_text(text)
    assert not record.devices and record.errors
    assert findings(text, "ib.ports") == [(Status.FAIL, "device_error")]


def test_ibstatus_default_link_layer_ib_is_infiniband() -> None:
    """ibstatus prints 'IB' where sysfs has no link_layer file: an InfiniBand port, so a down one FAILs (was WARN)."""
    text = form("ibstatus-link-layer-default-ib-down.txt")
    _, record = parse_text(text)
    assert record.devices[0].ports[0].link_layer == "InfiniBand"
    assert findings(text, "ib.ports") == [(Status.FAIL, "port_down")]


@pytest.mark.parametrize("text", [
    "ibwarn: [20511] main: can't sort list IB device names\n",  # a warning ibstat goes on after
    "ibpanic: [4242] mad_rpc_open_port: can't open UMAD port (mlx5_0:1)\n",  # another diag tool's panic
    "Fatal error: something else\n",
])
def test_other_lines_of_the_same_prefix_are_not_the_port_tools(text: str) -> None:
    assert detect_kind(text) not in ("ibstat", "ibstatus")


# ibv_devinfo (rdma-core's libibverbs/examples/devinfo.c)

@pytest.mark.parametrize("name", [
    "ibv_devinfo-not-found.txt",  # -d names a device the node does not have
    "ibv_devinfo-perror.txt",  # ibv_get_device_list failed: no uverbs
    "ibv_devinfo-query-device-failed.txt",
    "ibv_devinfo-query-port-failed.txt",  # after the device's lines: its port cannot be queried
])
def test_ibv_devinfo_failure_lines_fail(name: str) -> None:
    text = form(name)
    assert detect_kind(text) == "ibv-devinfo"
    _, record = parse_text(text)
    assert record.errors
    assert (Status.FAIL, "device_error") in findings(text, "ib.ports")


def test_ibv_devinfo_l_lists_devices_without_ports() -> None:
    """``ibv_devinfo -l`` says which devices exist, as ibv_devices does: ports not judged; none is a node without."""
    text = form("ibv_devinfo-l.txt")
    assert detect_kind(text) == "ibv-devices"
    _, record = parse_text(text)
    assert (record.format, [d.name for d in record.devices]) == ("ibv_devinfo -l", ["mlx5_0", "mlx5_1"])
    assert findings(text, "ib.ports") == [(Status.SKIP, "no_port_state")]
    assert findings(form("ibv_devinfo-l-zero.txt"), "ib.ports") == [(Status.FAIL, "device_error")]
    _, cut = parse_text("3 HCAs found:\n\tmlx5_0\n\tmlx5_1\n")
    assert cut.incomplete == ["2 of the 3 HCAs it counts are listed"]


# libfabric: fi_info -l and fi_pingpong (util/info.c, util/pingpong.c)

def test_fi_info_provider_list_is_read_and_not_counted_as_entries() -> None:
    """``fi_info -l`` names the providers built in (FI_PROV_ATTR_ONLY): no device shown, so not a PASS."""
    text = form("fi_info-l.txt")
    assert detect_kind(text) == "fi-info"
    _, record = parse_text(text)
    assert not record.providers and [p.provider for p in record.provider_list][:2] == ["tcp", "udp"]
    assert findings(text, "fabric.fi_info") == [(Status.SKIP, "provider_list")]


@pytest.mark.parametrize("name", [
    "fi_pingpong-rows-then-data-check-error.txt",  # -c found a corrupted message at the next size
    "fi_pingpong-rows-then-cq-readerr.txt",  # a completion error at the next size
])
def test_fi_pingpong_error_after_rows_fails(name: str) -> None:
    text = form(name)
    assert detect_kind(text) == "fi-pingpong"
    _, record = parse_text(text)
    assert len(record.rows) == 2 and len(record.errors) == 1
    assert findings(text, "fabric.pingpong") == [(Status.FAIL, "pingpong_failed")]


def test_fi_pingpong_teardown_close_error_after_a_complete_table_is_no_failure() -> None:
    """pp_free_res closes every fid after the exchange; a close the provider refuses ('fi_close (-22) fid 0') below
    the table is the expected output of AWS's EFA test, not an exchange that stopped."""
    text = form("fi_pingpong-rows-then-teardown-fi-close-error.txt")
    _, record = parse_text(text)
    assert len(record.rows) == 4 and record.errors == []
    assert findings(text, "fabric.pingpong") == [(Status.PASS, "ok")]
    _, alone = parse_text("[error] util/pingpong.c:1876: fi_close (-22) fid 0\nfi_pingpong\n")
    assert alone.rows == [] and len(alone.errors) == 1  # no table: the run did not complete


@pytest.mark.parametrize("name", ["fi_pingpong-printerr-eq-sread-timeout.txt", "fi_pingpong-printerr-getinfo-61.txt"])
def test_fi_pingpong_failed_call_lines_alone_fail(name: str) -> None:
    text = form(name)
    assert detect_kind(text) == "fi-pingpong"
    assert findings(text, "fabric.pingpong") == [(Status.FAIL, "pingpong_failed")]


# perfquery / ibqueryerrors (rdma-core's infiniband-diags)

@pytest.mark.parametrize("name", ["perfquery-iberror-cannot-resolve.txt", "perfquery-iberror-failed-to-open.txt"])
def test_perfquery_that_could_not_query_is_not_judged(name: str) -> None:
    """IBEXIT's 'perfquery: iberror: failed: ...': no counter was read, so ib.counters is ERROR, never PASS."""
    text = form(name)
    assert detect_kind(text) == "perfquery"
    _, record = parse_text(text)
    assert not record.blocks and len(record.errors) == 1
    assert findings(text, "ib.counters") == [(Status.ERROR, "counters_unreadable")]
