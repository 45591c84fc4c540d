"""nvidia-smi's answer when it cannot load NVML (``parsers/nvidia_smi/failures.py``).

"NVIDIA-SMI couldn't find libnvidia-ml.so library in your system." is what nvidia-smi prints in a container
without the driver's libraries, or after an update broke the library's link: no GPU can be read, the same
state as "Failed to initialize NVML". Before, the sentence was recognised by no reader (exit 3).
"""

from __future__ import annotations

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

TEXT = ("$ nvidia-smi\n"
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
        "Display Driver is properly installed and present in your system.\n"
        "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n")


def test_missing_nvml_library_is_an_nvml_failure_that_fails() -> None:
    assert detect_kind(TEXT) == "nvidia-smi-error"
    kind, record = parse_text(TEXT)
    assert [f.code for f in record.failures] == ["nvml_init_failed"]
    findings = judge_record(kind, record, Config())
    assert Status.worst(f.status for f in findings) is Status.FAIL
    assert any(f.check_id == "nvidia_smi.failure" and f.status is Status.FAIL for f in findings)
