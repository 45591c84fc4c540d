"""The NCCL network plugin and the fabric environment a job would inherit.

NCCL loads an external network plugin (aws-ofi-nccl for EFA) by ``dlopen``:
``NCCL_NET_PLUGIN=<name>`` selects ``libnccl-net-<name>.so`` (or a path), otherwise it
tries ``libnccl-net.so``; the loader searches ``LD_LIBRARY_PATH`` and the system
directories. Without the plugin NCCL silently falls back to TCP sockets, which is why
"is the library there?" is worth asking before a job. The variables that steer the
plugin and libfabric (``NCCL_NET_PLUGIN``, ``FI_PROVIDER``, the tuning knobs of the EFA
provider and of aws-ofi-nccl) are reported, because a stray ``FI_PROVIDER=tcp`` explains a
slow job as well as a missing library does. Only known variables, by name: a prefix such as
``FI_EFA_*`` would also copy a site's ``FI_EFA_PASSWORD`` into every report, and reports go
to S3, MLflow and an HTTP endpoint (:mod:`gpu_preflight.redact` masks what still looks secret).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from msgspec.structs import replace

from ..records.fabric import OfiPlugin as OfiPlugin
from ..redact import redact_env

__all__ = ["FABRIC_CACHE", "FabricCache", "OfiPlugin", "fabric_environment", "find_ofi_plugin", "plugin_version"]

_EFA_KNOBS = (
    "CQ_SIZE", "EFA_CQ_READ_SIZE", "ENABLE_SHM_TRANSFER", "FORK_SAFE", "HOMOGENEOUS_PEERS",
    "INTER_MAX_GDRCOPY_MESSAGE_SIZE", "INTER_MAX_MEDIUM_MESSAGE_SIZE", "INTER_MIN_READ_MESSAGE_SIZE",
    "INTER_MIN_READ_WRITE_SIZE", "INTER_READ_SEGMENT_SIZE", "INTRA_MAX_MEDIUM_MESSAGE_SIZE",
    "INTRA_MIN_READ_MESSAGE_SIZE", "INTRA_MIN_READ_WRITE_SIZE", "INTRA_READ_SEGMENT_SIZE", "MAX_MEMCPY_SIZE",
    "MR_CACHE_ENABLE", "MR_CACHE_MERGE_REGIONS", "MR_MAX_CACHED_COUNT", "MR_MAX_CACHED_SIZE", "MTU_SIZE",
    "READ_SEGMENT_SIZE", "RECVWIN_SIZE", "RNR_BACKOFF_CAP", "RNR_BACKOFF_INITIAL_WAIT_TIME", "RNR_RETRY",
    "RUNT_SIZE", "RX_COPY_OOO", "RX_COPY_UNEXP", "RX_IOV_LIMIT", "RX_SIZE", "SET_CUDA_SYNC_MEMOPS",
    "SHM_AV_SIZE", "SHM_CQ_READ_SIZE", "SHM_MAX_MEDIUM_SIZE", "TIMEOUT_INTERVAL", "TX_IOV_LIMIT",
    "TX_MIN_CREDITS", "TX_QUEUE_SIZE", "TX_SIZE", "USE_DEVICE_RDMA", "USE_HUGE_PAGE", "USE_UNSOLICITED_WRITE_RECV",
    "USE_ZCPY_RX", "WRITE_SEGMENT_SIZE")
_OFI_NCCL_KNOBS = (
    "CQ_SIZE", "CUDA_FLUSH_ENABLE", "DISABLE_DMABUF", "DISABLE_GDR_REQUIRED_CHECK", "DISABLE_NATIVE_RDMA_CHECK",
    "DOMAIN_PER_THREAD", "EAGER_MAX_SIZE", "EARLY_COMPLETION", "ENDPOINT_PER_COMM", "ERRORCHECK_MUTEX",
    "EXCLUDE_TCP_IF", "FORCE_NUM_RAILS", "GDR_FLUSH_DISABLE", "MIN_STRIPE_SIZE", "MR_CACHE_DISABLE",
    "NET_LATENCY", "NIC_DUP_CONNS", "PROGRESS_MODEL", "PROTOCOL", "RDMA_MAX_POSTED_BOUNCE_BUFFERS",
    "RDMA_MIN_POSTED_BOUNCE_BUFFERS", "ROUND_ROBIN_THRESHOLD", "TOPO_FILE_TEMPLATE", "TOPO_FILE_WRITE_ENABLE",
    "USE_IPV6_TCP", "USE_LOW_LAT_TC")
ENV_NAMES = frozenset({
    "NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "LD_LIBRARY_PATH",
    "FI_LOG_LEVEL", "FI_HMEM_CUDA_USE_GDRCOPY",
    *(f"FI_EFA_{k}" for k in _EFA_KNOBS), *(f"OFI_NCCL_{k}" for k in _OFI_NCCL_KNOBS)})
DEFAULT_NAMES = ("libnccl-net.so", "libnccl-net-ofi.so", "libnccl-net-aws-ofi.so")
_SORTED_NAMES = tuple(sorted(ENV_NAMES))
FABRIC_CACHE = "fabric_cache"  # RunOptions.state key of a monitor's FabricCache


def fabric_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The known variables that steer NCCL's network plugin and libfabric, as set for this process
    (values that look like credentials masked)."""
    env = os.environ if environ is None else environ
    return redact_env({k: env[k] for k in _SORTED_NAMES if k in env})


def _candidates(requested: str | None) -> list[str]:
    if not requested:
        return list(DEFAULT_NAMES)
    if requested.endswith(".so") or ".so." in requested:
        return [requested]
    return [f"libnccl-net-{requested}.so", f"libnccl-{requested}.so", requested]


_VERSION = re.compile(rb"aws-ofi-nccl (\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.]+)?)")
VERSION_SCAN_BYTES = 64 << 20  # a plugin library is a few MB; a larger file is read this far
_CHUNK = 1 << 20


def plugin_version(path: str | Path, limit: int = VERSION_SCAN_BYTES) -> str | None:
    """The aws-ofi-nccl release a plugin library was built as, or None.

    The plugin logs ``"Initializing " PACKAGE_STRING`` when NCCL loads it, so its read-only
    data holds ``aws-ofi-nccl <version>`` (autoconf's ``AC_INIT([aws-ofi-nccl], [1.11.0-aws])``,
    aws/aws-ofi-nccl configure.ac). Read in chunks up to ``limit`` bytes (overlapping, so a
    string across a chunk boundary is found); an unreadable file or another plugin gives None.
    """
    tail = b""
    read = 0
    try:
        with open(path, "rb") as fh:
            while read < limit:
                chunk = fh.read(min(_CHUNK, limit - read))
                if not chunk:
                    return None
                read += len(chunk)
                m = _VERSION.search(tail + chunk)
                if m:
                    return m.group(1).decode("ascii")
                tail = chunk[-64:]
    except OSError:
        return None
    return None


def find_ofi_plugin(dirs: Iterable[str], environ: Mapping[str, str] | None = None) -> OfiPlugin:
    """The plugin NCCL would load: ``NCCL_NET_PLUGIN``'s choice, else the default names.

    Searched in ``LD_LIBRARY_PATH`` first (as the dynamic loader does), then ``dirs``.
    An absolute ``NCCL_NET_PLUGIN`` path is checked as given.
    """
    env = os.environ if environ is None else environ
    requested = env.get("NCCL_NET_PLUGIN") or None
    if requested and requested.lower() == "none":  # plugins switched off on purpose
        return OfiPlugin(False, None, requested, [])
    if requested and os.sep in requested:
        found = Path(requested).is_file()
        return OfiPlugin(found, requested if found else None, requested, [requested],
                         plugin_version(requested) if found else None)
    search = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + [d for d in dirs if d]
    search = list(dict.fromkeys(search))
    names = _candidates(requested)
    for directory in search:
        for name in names:
            candidate = Path(directory) / name
            if candidate.is_file():
                return OfiPlugin(True, str(candidate), requested, search, plugin_version(candidate))
    return OfiPlugin(False, None, requested, search)


class FabricCache:
    """A monitor's answers of :func:`find_ofi_plugin` and :func:`fabric_environment`, kept between ticks.

    Looking for the plugin stats every candidate name in every directory (~27 files, a
    quarter of a millisecond a tick); a plugin installed or removed meanwhile is seen once
    the answer is ``max_age_s`` old (the monitor's tool refresh, as for ``fi_info``'s
    answer), or at once when ``NCCL_NET_PLUGIN``, ``LD_LIBRARY_PATH`` or the directories
    change. The environment is redacted again only when one of its variables changed.
    """

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._plugin: tuple[tuple[object, ...], float, OfiPlugin] | None = None
        self._env: tuple[tuple[tuple[str, str], ...], dict[str, str]] | None = None
        self.searches = 0

    def plugin(self, dirs: Iterable[str], environ: Mapping[str, str] | None = None) -> OfiPlugin:
        env = os.environ if environ is None else environ
        dirs = tuple(dirs)
        key = (dirs, env.get("NCCL_NET_PLUGIN"), env.get("LD_LIBRARY_PATH"))
        now = self._clock()
        with self._lock:
            kept = self._plugin
        if kept is None or kept[0] != key or now - kept[1] >= self.max_age_s:
            kept = (key, now, find_ofi_plugin(dirs, env))
            with self._lock:
                self._plugin = kept
                self.searches += 1
        found = kept[2]
        return replace(found, searched=list(found.searched))  # the caller's own: a report may be edited

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        env = os.environ if environ is None else environ
        key = tuple((k, env[k]) for k in _SORTED_NAMES if k in env)
        with self._lock:
            kept = self._env
        if kept is None or kept[0] != key:
            kept = (key, fabric_environment(env))
            with self._lock:
                self._env = kept
        return dict(kept[1])
