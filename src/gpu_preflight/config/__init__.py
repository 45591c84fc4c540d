"""Configuration: typed thresholds, GPU-model profiles, site files, environment, CLI."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .loader import ConfigError, Layer, env_layer, overrides_layer, read_file, resolve
from .profiles import Profile, find_profile, match_profile, shipped_profiles
from .schema import Config, GpuConfig, SystemConfig, XidConfig

__all__ = [
    "Config", "ConfigError", "GpuConfig", "Layer", "Profile", "SystemConfig", "XidConfig",
    "build_config", "find_profile", "match_profile", "shipped_profiles",
]


def build_config(
    *,
    profile: Profile | None = None,
    config_file: str | Path | None = None,
    overrides: list[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Config, list[str]]:
    """Resolve defaults ← profile ← site file ← environment ← overrides.

    Returns the config and the names of the layers that contributed, for the report.
    """
    layers: list[Layer] = []
    if profile is not None:
        layers.append(profile.layer)
    if config_file is not None:
        layers.append(read_file(config_file))
    env = env_layer(environ)
    if env.data:
        layers.append(env)
    if overrides:
        layers.append(overrides_layer(overrides))
    config = resolve(layers)
    if config.xid.policy_file or config.xid.severity_overrides:
        from .xid_policy import load_xid_policy

        load_xid_policy(config.xid.policy_file, config.xid.severity_overrides)  # a bad table is a config error
    return config, ["defaults", *(layer.name for layer in layers)]
