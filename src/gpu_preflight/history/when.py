"""When a run happened, as the history may believe it: a real date, not in the future.

A report's ``timestamp`` is whatever its file says. A run filed with ``"yesterday"`` or
``2099-01-01`` was never removed by ``history prune`` (older than N days never holds) and,
since the repeat-offender window is "since N days ago", a failure dated 2099 stayed inside
it for ever: the GPU was flagged on every later run. So a timestamp is checked where a run
enters the history (:meth:`HistoryStore.record`, hence ``history import`` and every run
that files itself) and again where one is read back (``prune``, the repeat-offender
window), since a database filled by an older version may already hold such rows.

The sane range: from :data:`EARLIEST` (before any GPU this tool knows) to
:data:`FUTURE_SLACK` past this machine's clock, which allows for a report written on a
host whose clock runs ahead, and no more. Stored timestamps are ISO 8601 in UTC, so the
database's text comparisons order them as times.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["EARLIEST", "FUTURE_SLACK", "TimestampError", "checked", "plausible", "stored"]

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)


class TimestampError(ValueError):
    """A run's timestamp that is not a date, or not one a run can have had."""


def checked(value: object, now: datetime) -> datetime:
    """``value`` as an aware UTC datetime; :class:`TimestampError` saying why it cannot be a run's time.

    A naive timestamp is taken as UTC, as gpu-preflight writes them.
    """
    if not isinstance(value, str) or not value.strip():
        raise TimestampError(f"timestamp {value!r} is not a date")
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TimestampError(f"timestamp {value!r} is not an ISO 8601 date") from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if when < EARLIEST:
        raise TimestampError(f"timestamp {value!r} is before {EARLIEST.date().isoformat()}")
    if when > now + FUTURE_SLACK:
        ahead = (when - now).total_seconds() / 86400
        raise TimestampError(f"timestamp {value!r} is {ahead:,.0f} days in the future (this clock says "
                             f"{now.isoformat(timespec='seconds')})")
    return when


def stored(value: object, now: datetime) -> str:
    """The form a run's timestamp is filed in: ISO 8601, UTC (raises as :func:`checked`)."""
    return checked(value, now).isoformat()


def plausible(value: object, now: datetime) -> bool:
    """Whether a timestamp read back from the database is one a run can have had."""
    try:
        checked(value, now)
    except TimestampError:
        return False
    return True
