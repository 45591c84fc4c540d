"""Keeping secrets out of what gpu-preflight prints and stores.

Reports travel far (JSON on stdout, ``report.json``, MLflow artifacts, S3, the health
server's ``/status``, which the shipped DaemonSet binds to every interface), so nothing
that may hold a credential goes in unfiltered. Two rules, used by every place that prints
or stores an environment variable or a URL:

- a variable whose *name* looks secret (``*PASS*``, ``*TOKEN*``, ``*SECRET*``, ``*KEY*``,
  credentials, auth, cookies, signatures) has its value replaced by :data:`MASK`;
- a URL keeps its scheme, host, port and path but loses the password of its user part
  and the values of query parameters whose names look secret (``?token=``,
  ``X-Amz-Signature=``), wherever it appears in free text (an exception message from a
  client library repeats the URL it was given).

The names of the environment variables a report records at all are an allow-list
(:mod:`gpu_preflight.backends.fabric`); these rules are the second line behind it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["MASK", "looks_secret", "redact_env", "redact_text"]

MASK = "<redacted>"
_SECRET_NAME = re.compile(r"PASS|PWD|TOKEN|SECRET|KEY|CRED|AUTH|COOKIE|SESSION|SIGNATURE|PRIVATE|CERT", re.I)
# scheme://user:password@ (the password may hold anything but '@', '/' and whitespace)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:@/\s]*):(?P<pw>[^@/\s]*)@")
_QUERY = re.compile(r"(?P<sep>[?&;])(?P<name>[A-Za-z0-9_.-]+)=(?P<value>[^&#\s'\"]*)")
# NAME=value or NAME: value pairs in free text (a "FI_EFA_PASSWORD=x" echoed by a tool)
_ASSIGN = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>=|: )(?P<value>[^\s,;'\"&]+)")


def looks_secret(name: str) -> bool:
    """Whether a variable or parameter name suggests a credential (case-insensitive)."""
    return bool(_SECRET_NAME.search(name))


def _query(match: re.Match[str]) -> str:
    if not looks_secret(match["name"]) or not match["value"]:
        return match[0]
    return f"{match['sep']}{match['name']}={MASK}"


def _assign(match: re.Match[str]) -> str:
    if not looks_secret(match["name"]) or match["value"] == MASK:
        return match[0]
    return f"{match['name']}{match['op']}{MASK}"


def redact_text(text: str) -> str:
    """``text`` (a URL, an error message) with URL passwords, secret query parameters and
    ``SECRET_NAME=value`` values masked."""
    if not text:
        return text
    out = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    out = _QUERY.sub(_query, out)
    return _ASSIGN.sub(_assign, out)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables as they may be printed or stored: secret-looking names masked, and
    credentials inside the other values (a URL with a password) masked too."""
    return {k: MASK if looks_secret(k) else redact_text(v) for k, v in env.items()}
