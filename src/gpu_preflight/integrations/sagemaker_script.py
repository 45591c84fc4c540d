"""What the SageMaker launcher and the job's entry agree on: the uploaded script and ``--job-fails-on``.

The launcher (a library call) uploads :data:`ENTRY_SCRIPT`; inside the job that script runs
:func:`gpu_preflight.cli.sagemaker_entry.main`, the job's command line. Keeping
the shared names here lets the launcher build a job without importing the command line.
"""

from __future__ import annotations

JOB_FAILS_ON = ("fail", "warn", "never")

# The script the launcher uploads as the job's entry point (the image has gpu-preflight).
ENTRY_SCRIPT_NAME = "gpu_preflight_entry.py"
ENTRY_SCRIPT = '''"""SageMaker entry point: hands over to gpu-preflight, installed in the training image."""
import sys

from gpu_preflight.cli.sagemaker_entry import main

sys.exit(main())
'''
