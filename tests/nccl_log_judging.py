"""What the NCCL job-log tests ask of a text: the signatures the parser names and the triage verdict."""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text


def kinds(text: str) -> list[str]:
    """The signature kinds the nccl-log parser reads in ``text``, in order."""
    _kind, record = parse_text(text, "nccl-log")
    return [s.kind for s in record.signatures]


def triage(text: str) -> list[tuple[Status, str]]:
    """(status, code) of each ``nccl_log.triage`` finding when ``text`` is judged as a job log."""
    return [(f.status, f.code) for f in judge_text(text, Config(), source="job.log")
            if f.check_id == "nccl_log.triage"]
