"""Load, validate and merge configuration layers.

Order (later wins): typed defaults ← GPU-model profile ← site file ← environment
(``GPU_PREFLIGHT_<SECTION>__<KEY>``) ← command line. Every layer is validated against
the Structs in :mod:`.schema` with errors that name the file, the dotted key and,
where the format allows, the line — a typo in a site file must not silently fall back
to a default.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from .fields import ValueRange, declared_in, setting_fields, value_range
from .schema import SECTIONS, Config

ENV_PREFIX = "GPU_PREFLIGHT_"


class ConfigError(ValueError):
    """A configuration problem with its location."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None,
                 line: int | None = None) -> None:
        self.message, self.source, self.key, self.line = message, source, key, line
        where = source or "config"
        if line is not None:
            where += f":{line}"
        if key:
            where += f": {key}"
        super().__init__(f"{where}: {message}")


class Layer(msgspec.Struct):
    """One source of settings: ``{section: {key: value}}`` plus where it came from.

    ``origins`` names the source of single keys where that says more than the layer's name
    (the environment variable or the ``--set`` pair that gave ``section.key``).
    """

    name: str
    data: dict[str, dict[str, Any]]
    lines: Mapping[str, int]
    origins: dict[str, str] = {}

    def line_of(self, key: str) -> int | None:
        return self.lines.get(key)


def read_config_text(path: Path, what: str) -> str:
    """The text of a configuration file (site config, profile, Xid policy) through
    :mod:`gpu_preflight.boundedio`: a FIFO, a device, a directory or a file over
    ``CONFIG_LIMIT`` is a :class:`ConfigError` naming it, never a hang; a UTF-16 file is
    named as such, not a traceback."""
    from ..boundedio import CONFIG_LIMIT, InputError, read_text

    try:
        return read_text(path, limit=CONFIG_LIMIT, what=what)
    except InputError as exc:
        raise ConfigError(str(exc).removeprefix(f"{path}: "), source=str(path)) from None


def read_file(path: str | Path) -> Layer:
    """Parse a TOML or YAML file into a validated layer (extension decides; default TOML)."""
    p = Path(path)
    text = read_config_text(p, "config file")
    try:
        if p.suffix.lower() in (".yaml", ".yml"):
            data, lines = _parse_yaml(text, str(p))
        else:
            data, lines = _parse_toml(text, str(p))
    except RecursionError:
        raise ConfigError("nested too deeply to be a config file", source=str(p)) from None
    return validate_layer(Layer(str(p), data, lines), allow_extra=())


def _parse_toml(text: str, source: str) -> tuple[dict[str, Any], Mapping[str, int]]:
    return parse_toml(text, source), toml_lines(text)


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; invalid TOML is a :class:`ConfigError` naming ``source`` and the line.

    Every TOML text we read (the shipped profiles and Xid policy, a site's files) comes
    through here, and what it parses to is kept nowhere: a site file may hold a credential
    (an MLflow URL with a password), and a copy of it in a cache would outlive the file's
    mode, owner and rotation (the start-up cache that once copied parsed TOML into a
    world-readable file is gone, issue 30).
    """
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(f"invalid TOML: {exc}", source=source, line=int(m.group(1)) if m else None) from exc


class TomlLines(Mapping[str, int]):
    """Dotted keys of a TOML text mapped to their line numbers (tomllib does not keep positions),
    worked out on first use: they only place an error, and a valid file (the shipped Xid
    policy: 450 lines read every run) needs none."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: dict[str, int] | None = None

    def _map(self) -> dict[str, int]:
        if self._lines is None:
            self._lines = _line_map(self._text)
        return self._lines

    def __getitem__(self, key: str) -> int:
        return self._map()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map())

    def __len__(self) -> int:
        return len(self._map())


def toml_lines(text: str) -> TomlLines:
    """Map dotted keys to line numbers (see :class:`TomlLines`)."""
    return TomlLines(text)


def _line_map(text: str) -> dict[str, int]:
    table_re = re.compile(r"^\[\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]$")
    key_re = re.compile(r"^([A-Za-z0-9_.\-\"']+)\s*=")
    lines: dict[str, int] = {}
    table = ""
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        if m := table_re.match(line):
            table = m.group(1).replace('"', "").replace("'", "")
            lines.setdefault(table, no)
        elif m := key_re.match(line):
            key = m.group(1).replace('"', "").replace("'", "")
            lines.setdefault(f"{table}.{key}" if table else key, no)
    return lines


def _parse_yaml(text: str, source: str) -> tuple[dict[str, Any], Mapping[str, int]]:
    import yaml  # only YAML users pay for the import

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"invalid YAML: {exc}", source=source,
                          line=mark.line + 1 if mark is not None else None) from exc
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError("top level must be a mapping of sections", source=source, line=1)
    lines: dict[str, int] = {}

    def walk(n: Any, prefix: str) -> None:
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = f"{prefix}.{k.value}" if prefix else str(k.value)
                lines[key] = k.start_mark.line + 1
                walk(v, key)

    walk(node, "")
    return data, lines


def validate_layer(layer: Layer, allow_extra: tuple[str, ...]) -> Layer:
    """Check every section and key exists and every value has the field's type and lies in its range."""
    clean: dict[str, dict[str, Any]] = {}
    for section, values in layer.data.items():
        if section in allow_extra:
            continue
        if section not in SECTIONS:
            origin = next((o for k, o in layer.origins.items() if k.partition(".")[0] == section), None)
            raise ConfigError(f"unknown section{_suggest(section, SECTIONS)}", source=origin or layer.name,
                              key=None if origin else section, line=layer.line_of(section))
        if not isinstance(values, Mapping):
            raise ConfigError("must be a table of settings", source=layer.name, key=section,
                              line=layer.line_of(section))
        known = {f.name: f for f in setting_fields(SECTIONS[section])}
        clean[section] = {}
        for key, value in values.items():
            dotted = f"{section}.{key}"
            origin = layer.origins.get(dotted)
            where: dict[str, Any] = ({"source": origin} if origin else
                                     {"source": layer.name, "key": dotted, "line": layer.line_of(dotted)})
            if key not in known:
                raise ConfigError(f"unknown setting{_suggest(key, known)}", **where)
            hint = _hint(SECTIONS[section], key)
            try:
                clean[section][key] = coerce(value, hint)
            except TypeError as exc:
                raise ConfigError(str(exc), **where) from exc
            if problem := range_problem(clean[section][key], known[key], hint):
                raise ConfigError(problem, **where)
    return Layer(layer.name, clean, layer.lines, layer.origins)


def field_range(f: Any, annotation: Any) -> ValueRange | None:
    """The valid range of a numeric setting (of each value, for a table of numbers); None otherwise."""
    return value_range(f, _numeric_kind(annotation))


def range_problem(value: Any, f: Any, annotation: Any) -> str | None:
    """Why a coerced value lies outside its setting's range, or None."""
    bounds = field_range(f, annotation)
    if bounds is None or value is None:
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if problem := bounds.problem(v):
                return f"{k!r} {problem}"
        return None
    return bounds.problem(value)


def _numeric_kind(annotation: Any) -> type | None:
    """``int`` or ``float`` for a number, an optional number or a table of numbers; else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = {_numeric_kind(a) for a in typing.get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if origin is dict:
        return _numeric_kind(typing.get_args(annotation)[1])
    return annotation if annotation in (int, float) else None


@functools.cache
def _hint(cls: type, name: str) -> Any:
    """``typing.get_type_hints(cls)[name]``, evaluating that one annotation only.

    A layer names a few settings of a section; ``get_type_hints`` compiles and evaluates
    every annotation of the class (60 for the settings one GPU profile touches, ~1.5 ms of a
    node check). Evaluated as it does for a class: the class's namespace first, then its
    module's (tests/test_config.py compares both on every setting), for the class that declares
    it (an assembled section's block: :func:`.fields.declared_in`).
    """
    klass = declared_in(cls, name)
    value = inspect.get_annotations(klass)[name]
    if isinstance(value, str):
        module = sys.modules[klass.__module__].__dict__
        value = eval(value, dict(vars(klass)), module)  # noqa: S307 - our own annotation text
    return type(None) if value is None else value


def _suggest(name: str, choices: Mapping[str, Any]) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(choices))})"


def coerce(value: Any, annotation: Any) -> Any:
    """Return ``value`` checked against a field annotation; raise ``TypeError`` with a reason."""
    ann = annotation
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(ann)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg)
            except TypeError as exc:
                errors.append(str(exc))
        raise TypeError(" or ".join(errors))
    if origin is typing.Literal:
        choices = typing.get_args(ann)
        if value in choices:
            return value
        raise TypeError(f"expected one of {', '.join(map(repr, choices))}, got {_kind(value)}")
    if origin is list:
        (item,) = typing.get_args(ann)
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {_kind(value)}")
        return [coerce(v, item) for v in value]
    if origin is dict:
        _, vtype = typing.get_args(ann)
        if not isinstance(value, Mapping):
            raise TypeError(f"expected a table, got {_kind(value)}")
        return {str(k): coerce(v, vtype) for k, v in value.items()}
    if ann is bool:
        if isinstance(value, bool):
            return value
        raise TypeError(f"expected true or false, got {_kind(value)}")
    if ann is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"expected an integer, got {_kind(value)}")
    if ann is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                raise TypeError(f"expected a number, got an integer of {len(str(abs(value)))} digits") from None
        raise TypeError(f"expected a number, got {_kind(value)}")
    if ann is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # "min_driver_version = 535" is a reasonable thing to write
        raise TypeError(f"expected a string, got {_kind(value)}")
    raise TypeError(f"unsupported setting type {ann!r}")


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def env_layer(environ: Mapping[str, str] | None = None) -> Layer:
    """Settings from ``GPU_PREFLIGHT_<SECTION>__<KEY>`` variables; values parse as TOML."""
    env = os.environ if environ is None else environ
    data: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
        data.setdefault(section, {})[key] = parse_scalar(raw)
        origins[f"{section}.{key}"] = f"{name}={_shown(raw)}"
    return validate_layer(Layer("environment", data, {}, origins), allow_extra=())


def _shown(raw: str) -> str:
    """A value as an error message quotes it: one line, not a page."""
    text = " ".join(raw.split())
    return text if len(text) <= 60 else text[:57] + "..."


def parse_scalar(raw: str) -> Any:
    """Parse a command-line or environment value as a TOML value, else keep the string."""
    import tomllib

    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply(config: Config, layer: Layer) -> Config:
    """A new config with the layer's values on top."""
    for section, values in layer.data.items():
        current = getattr(config, section)
        config = replace(config, **{section: replace(current, **values)})
    return config


def resolve(layers: list[Layer]) -> Config:
    config = Config()
    for layer in layers:
        config = apply(config, layer)
    return config


def overrides_layer(pairs: list[str], name: str = "command line") -> Layer:
    """``--set section.key=value`` pairs as a validated layer."""
    data: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        section, dot, field_name = key.strip().partition(".")
        if not sep or not dot:
            raise ConfigError(f"expected SECTION.KEY=VALUE, got {pair!r}", source=name)
        data.setdefault(section, {})[field_name] = parse_scalar(raw.strip())
        origins[f"{section}.{field_name}"] = f"--set {section}.{field_name}={_shown(raw.strip())}"
    return validate_layer(Layer(name, data, {}, origins), allow_extra=())
