"""External diagnostics run when present: DCGM, nccl-tests, libfabric/EFA, InfiniBand, PCIe.

The probes (``probes/dcgm.py``, ``probes/nccl_tests.py``, ``probes/fabric.py``,
``probes/infiniband.py``, ``probes/pcie.py``) run the tools through
:mod:`gpu_preflight.backends.commands`, keep each tool's raw output as an artifact, and
parse it with the parsers ``gpu-preflight parse`` uses. The checks hand the parsed records
to the judges ``gpu-preflight judge`` uses. This package holds what they share: the facts
records, the run phase that lets counter reads bracket the tool runs, and the rule that
turns "the tool did not run" into SKIP or ERROR.
"""
