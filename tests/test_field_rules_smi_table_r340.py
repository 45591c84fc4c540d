"""The ``nvidia-smi`` table of drivers before R346: memory in ``MB`` and a ``Compute processes:`` box.

Those drivers print ``4499MB /  4799MB`` (the same mebibytes later printed ``MiB``) and list compute
processes in a box titled ``Compute processes:``, without a Type column (``|    0     30317  ./test.exe   57MB |``);
on a GeForce card of then the box says ``0  Not Supported``. The memory was not read and the box was not
found, so a K20 running a job was "memory in use with no visible process", and a GeForce whose processes
nvidia-smi could not list would have been idle. Read now: the process is a compute one (the box lists no
other), and ``Not Supported`` leaves the GPU's processes unknown. Inputs written here in the R340 layout.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text

HEAD = """+------------------------------------------------------+
| NVIDIA-SMI 340.29     Driver Version: 340.29         |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K20m          Off  | 0000:02:00.0     Off |                    0 |
| N/A   33C    P0    48W / 225W |   4499MB /  4799MB   |     99%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Compute processes:                                               GPU Memory |
|  GPU       PID  Process name                                     Usage      |
|=============================================================================|
"""
END = "+-----------------------------------------------------------------------------+\n"


def test_memory_in_mb_and_a_compute_process_are_read() -> None:
    text = HEAD + "|    0     30317  ./test.exe                                          4482MB  |\n" + END
    [gpu] = parse_text(text)[1].gpus
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (4499, 4799)
    assert [(p.pid, p.type, p.used_memory_mib) for p in gpu.processes or []] == [(30317, "C", 4482)]
    busy = [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.busy"]
    assert busy == [(Status.WARN, "processes_running")]


def test_processes_not_supported_are_unknown_not_none() -> None:
    text = HEAD + "|    0            Not Supported                                               |\n" + END
    [gpu] = parse_text(text)[1].gpus
    assert gpu.processes is None
