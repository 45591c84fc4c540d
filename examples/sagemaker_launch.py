# %% [markdown]
# # gpu-preflight on SageMaker: the notebook, as a script
#
# The spec's notebook in cells (`# %%` opens a cell in VS Code/Jupytext). Every cell but the last
# runs offline: the last one creates a training job and costs money.
#
# Needs `pip install 'gpu-preflight[sagemaker]'` (sagemaker-train 1.x, the ModelTrainer of
# sagemaker 3.x) and an image from `container/build-and-push.sh --ecr --target sagemaker ...`.

# %% Configuration: instance, networking, image
import json
import tempfile
from pathlib import Path

from gpu_preflight.integrations.sagemaker_launcher import (
    LaunchOptions,
    build_model_trainer,
    job_spec,
    notes,
    write_source_dir,
)

image_uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-preflight:latest"  # your image
instance_type = "ml.g5.12xlarge"
instance_count = 2
subnets = ("subnet-xxxxxxxxx",)          # networking (required for EFA)
security_groups = ("sg-xxxxxxxxx",)      # must allow all traffic to itself

# %% Scenario: the spec's table, chosen for you ("auto"), or forced: "none" | "torchrun" | "mpi"
#  1 x single-GPU instance  -> no launcher        (GPU health, basic diagnostics)
#  1 x multi-GPU instance   -> Torchrun() or MPI  (GPU communication, NCCL performance)
#  2+ instances             -> Torchrun() or MPI  (inter-node networking, EFA)
options = LaunchOptions(
    image_uri=image_uri,
    instance_type=instance_type,
    instance_count=instance_count,
    distributed="auto",
    subnets=subnets,
    security_groups=security_groups,
    run_args=("--expect-gpus", "4"),   # anything `gpu-preflight run` accepts, e.g. "--full"
    job_fails_on="fail",                # "warn": WARN fails the job too; "never": always completes
    # role="arn:aws:iam::123456789012:role/SageMakerExecution",
    # output_path="s3://my-bucket/gpu-preflight",
)
for note in notes(options):
    print("note:", note)

# %% What will be submitted (plain data, no AWS call)
source_dir = write_source_dir(Path(tempfile.mkdtemp(prefix="gpu-preflight-sm-")))
spec = job_spec(options, str(source_dir))
print(json.dumps(spec, indent=2))

# %% The ModelTrainer (needs AWS credentials and a region; role validation asks IAM)
model_trainer = build_model_trainer(spec)
print(model_trainer.distributed, model_trainer.compute)

# %% Run it (creates the training job; streams its CloudWatch logs here)
model_trainer.train(wait=True, logs=True)
# The report: <output path>/<job name>/output/model.tar.gz -> report.json (+ artifacts/).
# In CloudWatch (/aws/sagemaker/TrainingJobs, stream <job>/algo-1-...): one JSON line per finding
# and a gpu_preflight.verdict line; the job's metrics gpu_preflight:fail_findings etc.
