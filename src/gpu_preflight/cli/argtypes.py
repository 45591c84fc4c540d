"""``argparse`` types for numeric flags: finite, in range, said in one line.

``type=float`` takes ``nan``, ``inf``, ``-1`` and ``1e308``; each of those as a timeout, an
interval or a fraction either never fires or switches a check off, and none is what a
user meant. These types refuse them at parse time, so the error is argparse's one line
(exit 3 through :class:`~gpu_preflight.cli.exits.Parser`) naming the flag, the value and
the range: ``argument --timeout-s: must be a finite number in (0, 86400] s, got 'nan'``.
The wording is the config loader's (:class:`~gpu_preflight.config.fields.ValueRange`),
so a setting and a flag with the same meaning are described the same way.

:func:`env_number` reads a numeric environment variable with the same rules; a bad value
is a :class:`~gpu_preflight.config.ConfigError` naming the variable.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable, Mapping

from ..config import ConfigError
from ..config.fields import ValueRange

__all__ = [
    "DAY_S", "TIMEOUT_ENV", "count", "env_number", "fraction", "gpu_count", "gpu_index", "host", "number", "port",
    "seconds",
]

DAY_S = 86_400.0
TIMEOUT_ENV = "GPU_PREFLIGHT_TIMEOUT_S"  # `run --timeout-s` from the environment (a launcher's job spec)


def number(low: float = 0.0, high: float = 1e9, *, above: bool = False, unit: str | None = None
           ) -> Callable[[str], float]:
    """A finite float in ``[low, high]`` (``(low, high]`` with ``above``)."""
    bounds = ValueRange(low, high, integer=False, low_open=above, unit=unit)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        return float(_checked(bounds, value, text))

    parse.__name__ = "number"
    return parse


def count(low: int = 0, high: int = 10**9, *, unit: str | None = None) -> Callable[[str], int]:
    """A whole number in ``[low, high]``."""
    bounds = ValueRange(low, high, integer=True, unit=unit)

    def parse(text: str) -> int:
        try:
            value: int | None = int(text.strip())
        except ValueError:  # "1.5", "abc", or more digits than int() converts
            value = None
        return int(_checked(bounds, value, text))

    parse.__name__ = "count"
    return parse


def seconds(high: float = DAY_S) -> Callable[[str], float]:
    """A positive duration: a timeout or an interval of 0 or less never means what was typed."""
    return number(0.0, high, above=True, unit="s")


def fraction(*, above: bool = False) -> Callable[[str], float]:
    """A share in ``[0, 1]`` (``(0, 1]`` with ``above``)."""
    return number(0.0, 1.0, above=above)


port = count(0, 65_535)
gpu_count = count(0, 256, unit="GPUs")
gpu_index = count(0, 255)


_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def host(text: str) -> str:
    """An IP address or a DNS host name (``''`` for every address), as ``--host`` takes.

    Checked here because ``http.client`` refuses a name with a space or a control
    character with an exception of its own (``InvalidURL``), not an ``OSError``.
    """
    name = text.strip()
    if name.startswith("[") and name.endswith("]") and _is_ip(name[1:-1]):
        return name[1:-1]
    if name == "" or _is_ip(name):
        return name
    labels = name.removesuffix(".").split(".")
    if len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels):
        return name
    raise argparse.ArgumentTypeError(f"must be an IP address or a host name, got {text!r}")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])  # fe80::1%eth0: a scope is allowed
    except ValueError:
        return False
    return True


def env_number(name: str, parse: Callable[[str], float], environ: Mapping[str, str] | None = None
               ) -> float | None:
    """The value of environment variable ``name`` through ``parse``; None when unset or empty.

    A value that ``parse`` refuses is a :class:`~gpu_preflight.config.ConfigError` whose line
    names the variable and the range, instead of being ignored.
    """
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        return None
    try:
        return parse(raw)
    except argparse.ArgumentTypeError as exc:
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise ConfigError(str(exc).removesuffix(f", got {raw!r}"), source=f"{name}={shown}") from None


def _checked(bounds: ValueRange, value: float | None, text: str) -> float:
    if value is None or bounds.problem(value) is not None:
        raise argparse.ArgumentTypeError(f"must be {bounds.describe()}, got {text!r}")
    return value
