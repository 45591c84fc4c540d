"""``gpu-preflight config defaults|profiles``: every setting with its default, and the shipped profiles."""

from __future__ import annotations

import argparse
import json
import sys

from ..config import shipped_profiles
from ..config.describe import defaults_json, defaults_toml


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    config = sub.add_parser("config", help="show configuration").add_subparsers(dest="config_cmd", required=True)
    defaults = config.add_parser("defaults", help="every threshold with its default and meaning")
    defaults.add_argument("--format", choices=("toml", "json"), default="toml",
                          help="toml (default; a valid site file to edit) or json")
    config.add_parser("profiles", help="the shipped GPU-model profiles")


def run(args: argparse.Namespace) -> int:
    if args.config_cmd == "profiles":
        for profile in shipped_profiles():
            print(f"{profile.name:12} {profile.title:28} match: {', '.join(profile.patterns)}")
        return 0
    if args.format == "json":
        print(json.dumps(defaults_json(), indent=2))
    else:
        sys.stdout.write(defaults_toml())
    return 0
