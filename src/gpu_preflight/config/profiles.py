"""GPU-model profiles: threshold layers keyed by what NVML calls the GPU.

A profile is a TOML file with a ``[profile]`` table (``name``, ``title``, ``match`` — a
list of regular expressions tried against the NVML device name) followed by ordinary
config sections. Shipped profiles live beside this module; ``--profile FILE`` loads a
site's own. Auto-selection picks the profile whose pattern matches the GPU name with the
longest match, so "H100 PCIe" is not mistaken for a generic "H100".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from .loader import ConfigError, Layer, parse_toml, read_config_text, toml_lines, validate_layer

PROFILE_DIR = Path(__file__).with_name("profiles")
_MATCH_FLAGS = re.IGNORECASE


@dataclass(frozen=True)
class Profile:
    """A profile's name, title and GPU-name patterns, and its settings as a validated ``layer``.

    The layer is worked out on first use (:func:`load_profile_file` does so at once for a
    site's own file): auto-selection reads every shipped profile's patterns but uses one
    profile's settings, and a node check should not validate nine profiles to use one.
    """

    name: str
    title: str
    patterns: tuple[str, ...]
    path: str
    toml: tuple[str, dict[str, Any]] = field(repr=False, compare=False)  # the file's text and parsed data

    def match_length(self, gpu_name: str) -> int:
        """Length of the longest pattern match in ``gpu_name`` (0: no match)."""
        best = 0
        for pattern in self.patterns:
            if m := re.search(pattern, gpu_name, _MATCH_FLAGS):
                best = max(best, len(m.group(0)))
        return best

    @cached_property
    def layer(self) -> Layer:
        text, data = self.toml
        lines = toml_lines(text)
        layer = validate_layer(Layer(f"profile {self.name} ({self.path})", data, lines), allow_extra=("profile",))
        for pattern in layer.data.get("perf", {}).get("allreduce_nvswitch_gpu_names", []):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"bad regular expression {pattern!r}: {exc}", source=self.path,
                                  key="perf.allreduce_nvswitch_gpu_names",
                                  line=lines.get("perf.allreduce_nvswitch_gpu_names")) from exc
        return layer


def load_profile_file(path: str | Path, *, lazy: bool = False) -> Profile:
    """The profile in ``path``; its settings are validated here unless ``lazy`` (then on first use)."""
    p = Path(path)
    text = read_config_text(p, "profile")
    data = parse_toml(text, str(p))
    meta = data.get("profile")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise ConfigError("a profile needs a [profile] table with a name", source=str(p),
                          key="profile.name", line=toml_lines(text).get("profile"))
    patterns = meta.get("match", [])
    if not isinstance(patterns, list) or not all(isinstance(x, str) for x in patterns):
        raise ConfigError("expected a list of regular expressions", source=str(p), key="profile.match",
                          line=toml_lines(text).get("profile.match"))
    for pattern in patterns:
        try:
            re.compile(pattern, _MATCH_FLAGS)  # as matched: the compiled pattern stays in re's cache
        except re.error as exc:
            raise ConfigError(f"bad regular expression {pattern!r}: {exc}", source=str(p),
                              key="profile.match", line=toml_lines(text).get("profile.match")) from exc
    profile = Profile(meta["name"], str(meta.get("title", meta["name"])), tuple(patterns), str(p), (text, data))
    if not lazy:
        _ = profile.layer  # a site's file is checked when it is named, not when first used
    return profile


@cache
def shipped_profiles() -> tuple[Profile, ...]:
    return tuple(load_profile_file(p, lazy=True) for p in sorted(PROFILE_DIR.glob("*.toml")))


def find_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile file by path."""
    for profile in shipped_profiles():
        if profile.name == name_or_path:
            return profile
    if Path(name_or_path).suffix == ".toml" or "/" in name_or_path:
        return load_profile_file(name_or_path)
    known = ", ".join(p.name for p in shipped_profiles())
    raise ConfigError(f"unknown profile {name_or_path!r} (shipped: {known}; or give a .toml path)",
                      source="--profile")


def match_profile(gpu_names: list[str]) -> Profile | None:
    """The shipped profile for the first GPU name that any profile recognises."""
    for gpu_name in gpu_names:
        scored = [(p.match_length(gpu_name), p) for p in shipped_profiles()]
        scored = [s for s in scored if s[0] > 0]
        if scored:
            return max(scored, key=lambda s: s[0])[1]
    return None
