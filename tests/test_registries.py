"""The one registry type: duplicates, lazy entries, "did you mean", discovery, scoped()."""

from __future__ import annotations

import pytest

from gpu_preflight.registries import Registry, UnknownKey


def test_register_get_and_duplicates() -> None:
    reg: Registry[int] = Registry("widget")
    one, other = object(), object()
    objs: Registry[object] = Registry("widget")
    objs.register("a.b", one)
    objs.register("a.b", one)  # the same object again: a reload, not a clash
    with pytest.raises(ValueError, match=r"widget 'a\.b' registered twice"):
        objs.register("a.b", other)
    assert objs.get("a.b") is one
    assert reg.names() == []


def test_unknown_key_names_close_matches() -> None:
    reg: Registry[int] = Registry("check")
    for key in ("gpu.ecc", "gpu.xid", "system.disk"):
        reg.register(key, 1)
    with pytest.raises(UnknownKey) as err:
        reg.get("gpu.ec")
    assert str(err.value) == "unknown check 'gpu.ec'; did you mean gpu.ecc, gpu.xid?"
    with pytest.raises(UnknownKey, match=r"known: gpu.ecc, gpu.xid, system.disk"):
        reg.get("zzz")
    assert reg.find("zzz") is None
    assert reg.match("gpu.*") == ["gpu.ecc", "gpu.xid"]


def test_lazy_entry_is_imported_on_first_use_only() -> None:
    reg: Registry[object] = Registry("renderer")
    reg.lazy("dedent", "textwrap:dedent")
    assert "dedent" in reg and reg.names() == ["dedent"]
    import textwrap

    assert reg.get("dedent") is textwrap.dedent
    with pytest.raises(ValueError):
        reg.lazy("dedent", "textwrap:indent")


def test_discover_runs_before_a_miss_and_per_scope() -> None:
    calls: list[str | None] = []

    def discover(scope: str | None) -> None:
        calls.append(scope)
        reg.register("late", 7)

    reg: Registry[int] = Registry("probe", discover=discover)
    assert reg.get("late", "node") == 7
    assert calls == ["node"]
    reg.get("late")  # found: no discovery
    assert calls == ["node"]


def test_scoped_undoes_registrations_and_removals() -> None:
    reg: Registry[int] = Registry("judge")
    reg.register("kept", 1)
    with reg.scoped():
        reg.register("temp", 2)
        reg.unregister("kept")
        assert reg.names() == ["temp"]
    assert reg.names() == ["kept"]


def test_decorator_returns_the_object_and_can_wrap() -> None:
    reg: Registry[object] = Registry("check")

    @reg.decorator("x", wrap=lambda fn: ("wrapped", fn))
    def fn() -> int:
        return 3

    assert fn() == 3
    assert reg.get("x") == ("wrapped", fn)
