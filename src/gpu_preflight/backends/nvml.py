"""The only code that talks to NVML: read every field once into a raw dump.

The dump has the layout of ``tests/fixtures/captured/h200-580.159.04/nvml_capture.json``
(recorded on a real H200), declared reading by reading in
:mod:`gpu_preflight.records.nvml_fields`: each call is stored as ``{"ok": value}`` or, when NVML
refuses, ``{"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}``.
Live runs, ``gpu-preflight snapshot`` and ``--replay`` therefore share one parser
(:mod:`gpu_preflight.probes.gpu`), and a replayed run judges exactly what a live run
would have read.

Each GPU is read in its own daemon thread under two deadlines: one for the whole read
(the run's time limit) and one for each NVML call (``gpu.nvml_call_timeout_s``, a few
seconds). A GPU that hangs NVML (a lost GPU can block for minutes) is named as soon as one
call of it overruns the call deadline: its dump is frozen with what was read, marked
``timed_out``, while the other GPUs' threads go on reading. A prolog with a 30 s budget
thus learns which GPU hung within seconds, not at 80 % of its budget.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from ..deadline import call
from ..kept_thread import KeptThread
from ..records import nvml_fields as table
from ..records.nvml_fields import ECC_TOTALS, FIELDS

# What read_device calls, from the table (records/nvml_fields.py), in its order: (top-level
# dump key or None, the keys below it, the dotted key, pynvml function, extra args after the handle).
Step = tuple[str | None, tuple[str, ...], str, str, tuple[Any, ...]]
PLAN: tuple[Step, ...] = tuple(
    (top if rest else None, tuple(rest.split(".")) if rest else (), r.path, r.fn, r.args)
    for r in table.CALLS for top, _, rest in [r.path.partition(".")])
GROUP_ENDS = frozenset(step[2] for step, after in zip(PLAN, (*PLAN[1:], None), strict=True)
                        if step[0] is not None and (after is None or after[0] != step[0]))
NVLINK_ERROR_COUNTERS = range(5)  # DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA, DL_ECC_DATA
__all__ = ["ECC_TOTALS", "FIELDS", "PLAN", "collect", "read_device"]

# Readings that cannot change while NVML stays initialised (board and PCI identity, link
# capability, VBIOS limits), and the application clocks, a setting an admin changes rarely
# (a change is seen at the session's next init, within its ``max_age_s``; on a real H100 each
# of these calls cost ~1 ms, more than all other readings of a GPU together): an NvmlSession
# reads each once per GPU and reuses a successful answer.
STATIC_SYSTEM_CALLS = frozenset({"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
                                 "nvmlSystemGetCudaDriverVersion"})
STATIC_DEVICE_CALLS = table.KEPT  # the table's STATIC readings

# An NvmlSession also keeps any call's NVML_ERROR_NOT_SUPPORTED: what the board or driver
# lacks (no fan, no NVLink, no ECC counters) it lacks until the next init, and on a real
# H100 such a refusal cost 160 us each time it was asked. Every other error (GPU lost,
# unknown, timeout, no permission, ...) is asked again at every read: it may pass, and a
# lost GPU must be seen at the tick it is lost.
NOT_SUPPORTED = 3
STALL_S = 0.05  # a call in progress this long lets another reader take the GPUs not yet read

# c_nvmlValue_t member per nvmlValueType_t
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class NvmlUnavailable(Exception):
    """NVML could not be initialised; ``value`` is the NVML return code (12, 9, ...)."""

    def __init__(self, name: str, value: int | None, message: str) -> None:
        super().__init__(message)
        self.name, self.value, self.message = name, value, message


def error_entry(exc: BaseException) -> dict[str, Any]:
    """Dump form of a failed call."""
    value = getattr(exc, "value", None)
    if isinstance(value, int) and hasattr(exc, "value"):
        return {"error": type(exc).__name__, "value": value, "str": str(exc)}
    return {"exc": type(exc).__name__, "str": str(exc)}


def to_plain(value: Any) -> Any:
    """Turn pynvml return values (bytes, ctypes structs, friendly objects) into JSON."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, ctypes.Structure):
        return {name: to_plain(getattr(value, name)) for name, *_ in value._fields_
                if not name.startswith(("reserved", "version"))}
    if isinstance(value, ctypes.Array):
        return [to_plain(v) for v in value]
    if hasattr(value, "value") and isinstance(value, ctypes._SimpleCData):
        return value.value
    if hasattr(value, "__dict__"):
        return {k: to_plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


_STALE_ERRORS = frozenset({1, 15})  # NVML_ERROR_UNINITIALIZED, NVML_ERROR_GPU_IS_LOST


class _Recorder:
    """Call NVML functions and record results; remembers the call in progress and since when.

    It also notes whether a call it recorded failed as on a lost GPU or an uninitialised NVML
    (:attr:`stale`): a session then starts afresh, and noting it here costs nothing, where
    walking the whole dump for it afterwards cost a 1-second monitor a tenth of its NVML time.
    """

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.in_call: tuple[str, float] | None = None  # one attribute: read whole from the watching thread
        self.stale = False

    @property
    def current(self) -> str | None:
        state = self.in_call
        return state[0] if state else None

    def enter(self, name: str) -> None:
        self.in_call = (name, time.monotonic())

    def leave(self) -> None:
        self.in_call = None

    def failed(self, exc: BaseException) -> dict[str, Any]:
        """:func:`error_entry` of a failed call, noting a stale handle or NVML."""
        entry = error_entry(exc)
        if entry.get("value") in _STALE_ERRORS:
            self.stale = True
        return entry

    def call(self, name: str, *args: Any) -> dict[str, Any]:
        self.enter(name)
        try:
            fn: Callable[..., Any] = getattr(self.nvml, name)
            return {"ok": to_plain(fn(*args))}
        except Exception as exc:  # NVMLError subclasses, AttributeError on old pynvml
            return self.failed(exc)
        finally:
            self.leave()


def _ask(rec: _Recorder, handle: Any, static: dict[str, Any] | None, key: str, fn: str,
         *args: Any) -> dict[str, Any]:
    """One device call, answered from a session's ``static`` store when it holds ``key``.

    Kept: a successful answer of a :data:`STATIC_DEVICE_CALLS` key, and a NOT_SUPPORTED
    refusal of any key (see :data:`NOT_SUPPORTED`).
    """
    if static is not None and key in static:
        return static[key]  # type: ignore[no-any-return]
    entry = rec.call(fn, handle, *args)
    if static is not None and (entry.get("value") == NOT_SUPPORTED if "error" in entry
                               else "ok" in entry and key in STATIC_DEVICE_CALLS):
        static[key] = entry
    return entry


def read_device(nvml: Any, handle: Any, rec: _Recorder, out: dict[str, Any],
                static: dict[str, Any] | None = None) -> None:
    """Fill ``out`` with every reading of one GPU (in place, so a timeout keeps what was read).

    With ``static`` (a session's store for this GPU) what :func:`_ask` keeps comes from it
    once it holds it; the dump is the same either way. What is read, in which order and
    under which key comes from the table (:mod:`gpu_preflight.records.nvml_fields`).
    """
    groups: dict[str, Any] = {}  # a group is stored once all its members are read (a timeout keeps none of it)
    for top, below, key, fn, args in PLAN:
        if fn == "nvmlDeviceGetModuleId":
            args = (ctypes.c_uint(),)  # pynvml's default output buffer is shared by every thread
        entry = _ask(rec, handle, static, key, fn, *args)
        if top is None:
            out[key] = entry
            continue
        target = groups.setdefault(top, {})
        for name in below[:-1]:
            target = target.setdefault(name, {})
        target[below[-1]] = entry
        if key in GROUP_ENDS:
            out[top] = groups[top]
    out["nvlink"] = read_nvlinks(nvml, handle, rec, static)
    out["field_values"] = read_fields(nvml, handle, rec, static)


def read_nvlinks(nvml: Any, handle: Any, rec: _Recorder, static: dict[str, Any] | None = None) -> dict[str, Any]:
    """Links until the first one NVML does not know (NotSupported / InvalidArgument).

    A link's version and remote end are fixed by the board's wiring: with ``static`` they are
    read once; its state and error counters at every read (a NotSupported one once).
    """

    def call(key: str, fn: str, *args: Any) -> dict[str, Any]:
        return _ask(rec, handle, static, key, fn, *args)

    def fixed(link: int, what: str, fn: str) -> dict[str, Any]:
        key = f"nvlink.{link}.{what}"
        if static is not None and key in static:
            return static[key]  # type: ignore[no-any-return]
        entry = rec.call(fn, handle, link)
        if static is not None and ("ok" in entry or entry.get("value") == NOT_SUPPORTED):
            static[key] = entry
        return entry

    links: dict[str, Any] = {}
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = call(f"nvlink.{link}.state", "nvmlDeviceGetNvLinkState", link)
        if "ok" not in state:
            links[str(link)] = state
            break
        links[str(link)] = {
            "state": state,
            "version": fixed(link, "version", "nvmlDeviceGetNvLinkVersion"),
            "remote_pci": fixed(link, "remote_pci", "nvmlDeviceGetNvLinkRemotePciInfo"),
            "errors": {str(c): call(f"nvlink.{link}.errors.{c}", "nvmlDeviceGetNvLinkErrorCounter", link, c)
                       for c in NVLINK_ERROR_COUNTERS},
        }
    return links


def read_fields(nvml: Any, handle: Any, rec: _Recorder, static: dict[str, Any] | None = None) -> dict[str, Any]:
    """The :data:`FIELDS` in one call; a session keeps the call's NOT_SUPPORTED, never a field's
    own ``nvmlReturn`` (the call is made for the other fields anyway)."""
    if static is not None and "field_values" in static:
        return static["field_values"]  # type: ignore[no-any-return]
    names = [n for n in FIELDS if hasattr(nvml, n)]
    rec.enter("nvmlDeviceGetFieldValues")
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, [getattr(nvml, n) for n in names])
    except Exception as exc:
        entry = rec.failed(exc)
        if static is not None and entry.get("value") == NOT_SUPPORTED:
            static["field_values"] = entry
        return entry
    finally:
        rec.leave()
    result: dict[str, Any] = {}
    for name, fv in zip(names, values, strict=False):
        if fv.nvmlReturn != 0:
            result[name] = {"nvmlReturn": int(fv.nvmlReturn)}
            continue
        member = _VALUE_MEMBERS.get(int(fv.valueType), "ullVal")
        result[name] = {"id": int(fv.fieldId), "valueType": int(fv.valueType),
                        "value": to_plain(getattr(fv.value, member))}
    return result


def import_pynvml() -> Any:
    """Import pynvml (nvidia-ml-py); its absence is reported like a missing library."""
    try:
        # optional: without nvidia-ml-py (or its library) this reads as no NVML, not an error
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("ImportError", None, f"pynvml (nvidia-ml-py) is not installed: {exc}") from exc
    return pynvml


def collect(device_timeout_s: float = 10.0, nvml: Any = None, call_timeout_s: float | None = None,
            session: NvmlSession | None = None) -> dict[str, Any]:
    """Read the whole NVML state of this host into a dump dict.

    ``device_timeout_s`` bounds the read of all GPUs, ``call_timeout_s`` (when given) each
    NVML call of one GPU. With a ``session`` NVML stays initialised afterwards, what cannot
    change meanwhile is read once, and the GPUs are read one after the other (see
    :class:`NvmlSession`); without one it is shut down again. Raises
    :class:`NvmlUnavailable` when NVML cannot be initialised (no library, no driver);
    per-GPU failures are recorded in the dump instead.
    """
    nvml = nvml or import_pynvml()
    init_s = session.open(nvml) if session is not None else _init(nvml)
    try:
        rec = _Recorder(nvml)
        kept = session.static if session is not None else None
        system: dict[str, Any] = {}
        for key in ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion",
                    "nvmlDeviceGetCount"):
            system[key] = kept["system"][key] if kept is not None and key in kept["system"] else rec.call(key)
            if kept is not None and key in STATIC_SYSTEM_CALLS and "ok" in system[key]:
                kept["system"][key] = system[key]
        count = int(system["nvmlDeviceGetCount"].get("ok") or 0)
        stores = [kept.setdefault(i, {}) for i in range(count)] if kept is not None else None
        recorders = [_Recorder(nvml) for _ in range(count)]
        devices = _read_devices(nvml, count, device_timeout_s, call_timeout_s, stores,
                                session.read_device if session is not None else read_device, recorders,
                                session.spawn if session is not None else None)
    except BaseException:
        if session is not None:
            session.close(device_timeout_s)
        else:
            _shutdown(nvml, device_timeout_s)
        raise
    hung = any("timed_out" in d for d in devices)  # with a GPU thread stuck in the driver, shutdown could block
    if session is not None:
        if not hung and (rec.stale or any(r.stale for r in recorders)):
            session.close(device_timeout_s)  # a reset GPU or a reloaded driver: the next read starts afresh
    elif not hung:
        _shutdown(nvml, device_timeout_s)
    return {
        "pynvml_version": getattr(nvml, "__version__", None),
        "source": "live",
        "init_s": init_s,
        "system": system,
        "devices": devices,
    }


def _init(nvml: Any) -> float:
    t0 = time.perf_counter()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(type(exc).__name__, getattr(exc, "value", None), str(exc)) from exc
    return time.perf_counter() - t0


class NvmlSession:
    """NVML kept initialised from one :func:`collect` to the next (a monitor with a short interval).

    An init is cheap, but the reads after it are not: on a real H200 the first read of a
    GPU after ``nvmlInit`` took 45 ms and later ones 14 ms, so a 1 s monitor spent three
    times the CPU on NVML when it shut NVML down after every tick. The price of keeping it
    open is that this process holds the GPUs' device files meanwhile (a GPU reset or a
    driver unload needs it stopped, as for any NVML client). The session re-initialises
    after ``max_age_s``, and at once after a read that found a GPU lost or NVML
    uninitialised (a reset GPU, a reloaded driver), so it never keeps reading stale handles.

    While it is open it also keeps :attr:`static`: the answers that cannot change until
    NVML is initialised again (:data:`STATIC_DEVICE_CALLS`, the driver and NVML versions,
    each link's version and remote end) and every call's NOT_SUPPORTED, read once and
    emptied by every init and close.
    Its GPUs are read as every read is (:func:`_read_devices`): one after the other in one
    thread, on the session's kept thread, another taking over the GPUs still to read when a
    call stalls or overruns ``call_timeout_s``.
    """

    def __init__(self, max_age_s: float = 600.0) -> None:
        self.max_age_s = max_age_s
        self.inits = 0
        self._nvml: Any = None
        self._opened = 0.0
        self._lock = threading.Lock()
        self.static: dict[Any, dict[str, Any]] = {"system": {}}
        self._reader = KeptThread("nvml-read")

    def spawn(self, fn: Callable[[], None]) -> None:
        """Run a GPU reader on the session's kept thread, or on a new one while that one is
        busy (stuck in a hung call): a reader thread started per read cost a 1-second monitor
        a thread start and its hand-overs every tick."""
        if self._reader.submit(fn) is None:
            threading.Thread(target=fn, name="nvml-read", daemon=True).start()

    @property
    def is_open(self) -> bool:
        return self._nvml is not None

    def open(self, nvml: Any) -> float:
        """Initialise NVML unless it already is (and is young enough); the seconds the init took."""
        with self._lock:
            if self._nvml is not None and time.monotonic() - self._opened >= self.max_age_s:
                _shutdown(self._nvml, 5.0)
                self._nvml = None
            if self._nvml is not None:
                return 0.0
            took = _init(nvml)
            self._nvml, self._opened = nvml, time.monotonic()
            self.static = {"system": {}}  # a fresh dict: a reader still blocked in the driver fills the old one
            self.inits += 1
            return took

    def close(self, timeout_s: float = 5.0) -> None:
        """Shut NVML down (under a deadline); the next :meth:`open` initialises it again."""
        with self._lock:
            if self._nvml is not None:
                _shutdown(self._nvml, timeout_s)
                self._nvml = None
            self.static = {"system": {}}

    def read_device(self, nvml: Any, handle: Any, rec: _Recorder, out: dict[str, Any],
                    static: dict[str, Any] | None) -> None:
        """One GPU's readings, :func:`read_device` (a monitor's session reads some less often)."""
        read_device(nvml, handle, rec, out, static)


def _shutdown(nvml: Any, timeout_s: float) -> None:
    """nvmlShutdown with a deadline: a wedged driver must not hang the run after the reads."""

    with contextlib.suppress(Exception):  # a failed or hung shutdown changes nothing we report
        call(nvml.nvmlShutdown, timeout_s, "nvml shutdown")


def _read_devices(nvml: Any, count: int, timeout_s: float, call_timeout_s: float | None = None,
                  stores: list[dict[str, Any]] | None = None,
                  read_one: Callable[..., None] = read_device,
                  recorders: list[_Recorder] | None = None,
                  spawn: Callable[[Callable[[], None]], None] | None = None) -> list[dict[str, Any]]:
    """Every GPU's readings: one reader takes the GPUs in turn, and another starts whenever a
    call has been in progress for :data:`STALL_S` (once per GPU) or a GPU is marked hung.

    Why not a thread per GPU from the start: NVML answers most calls in microseconds, and
    eight threads making ~70 calls each traded the GIL at every call (each ctypes call
    releases it): 8 GPUs were read in ~11 ms instead of ~3 ms one after the other on the
    stub library. A call that takes long (a hung GPU, a driver bringing a GPU up without
    persistence mode) still holds up no other GPU for more than :data:`STALL_S`: readers
    are added as calls stall, up to one per GPU. ``recorders`` (one per GPU) are the
    caller's, to learn what the calls noted; ``spawn`` starts a reader (a session's, on its
    kept thread when that is free)."""
    filled: list[dict[str, Any]] = [{} for _ in range(count)]  # what the readers write into
    outs = list(filled)  # what is returned: a GPU marked hung gets a frozen copy here
    recorders = recorders if recorders is not None else [_Recorder(nvml) for _ in range(count)]
    done = [False] * count
    given_up: set[int] = set()  # GPUs the watcher marked hung
    finished = threading.Condition()
    queued = list(range(count))  # GPUs no reader has taken yet

    def read(i: int) -> None:
        out = filled[i]
        try:
            recorders[i].enter("nvmlDeviceGetHandleByIndex")
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
            except Exception as exc:
                out["handle"] = recorders[i].failed(exc)
                return
            finally:
                recorders[i].leave()
            read_one(nvml, handle, recorders[i], out, stores[i] if stores is not None else None)
        finally:
            with finished:
                done[i] = True
                if all(d or k in given_up for k, d in enumerate(done)):
                    finished.notify_all()  # the watcher also wakes by itself for each call deadline

    def reader() -> None:
        while True:
            with finished:
                if not queued:
                    return
                i = queued.pop(0)
            read(i)

    def start_reader() -> None:
        if spawn is not None:
            spawn(reader)
        else:
            threading.Thread(target=reader, name="nvml-read", daemon=True).start()

    if count:
        start_reader()
    _watch(done, recorders, outs, finished, time.monotonic() + timeout_s, timeout_s, call_timeout_s,
           on_hung=start_reader, given_up=given_up)
    with finished:
        queued.clear()  # past the deadline: a reader still blocked in the driver starts no other GPU
    return outs


def _watch(done: list[bool], recorders: list[_Recorder], outs: list[dict[str, Any]],
           finished: threading.Condition, deadline: float, timeout_s: float, call_timeout_s: float | None,
           on_hung: Callable[[], None] | None = None, given_up: set[int] | None = None) -> None:
    """Wait for the GPU readers; freeze and mark each GPU whose call overran, or all left at
    ``deadline``. ``on_hung`` starts a reader for the GPUs not yet read: when a GPU is marked,
    and once per GPU whose call has been in progress for :data:`STALL_S`.

    The readers wake the watcher only once every GPU not in ``given_up`` (those it marked)
    is read: woken per GPU, it cost a monitor's tick a GIL hand-over per GPU. It looks at the
    calls in progress on its own when one is due to stall or to overrun its deadline."""
    marked = given_up if given_up is not None else set()
    stalled: set[int] = set()  # GPUs a call of which stalled: a reader was added for the others

    def hung(i: int, call: str | None, after_s: float) -> None:
        outs[i] = dict(outs[i])  # freeze what was read; the thread may still write to the old dict
        outs[i]["timed_out"] = {"call": call, "after_s": after_s}
        marked.add(i)

    pending = set(range(len(done)))
    with finished:
        while pending:
            now = time.monotonic()
            wake = deadline
            for i in sorted(pending):
                state = recorders[i].in_call
                if done[i]:
                    pending.discard(i)
                    continue
                if state is None:
                    continue
                if call_timeout_s is not None and now - state[1] >= call_timeout_s:
                    hung(i, state[0], call_timeout_s)
                    pending.discard(i)
                    if on_hung is not None and i not in stalled:  # else one was added when it stalled
                        on_hung()
                    continue
                if call_timeout_s is not None:
                    wake = min(wake, state[1] + call_timeout_s)
                if i not in stalled:
                    if now - state[1] >= STALL_S:
                        stalled.add(i)
                        if on_hung is not None:
                            on_hung()
                    else:
                        wake = min(wake, state[1] + STALL_S)
            if not pending:
                return
            if now >= deadline:
                for i in sorted(pending):
                    hung(i, recorders[i].current, timeout_s)
                return
            # a call that starts while we sleep is looked at within one call deadline at the latest
            nap = min(wake - now, call_timeout_s if call_timeout_s is not None else wake - now)
            finished.wait(max(0.001, nap))
