#!/usr/bin/env bash
# Build the gpu-preflight image (container/Dockerfile) and optionally push it.
#
#   container/build-and-push.sh [options] IMAGE [TAG]
#
#   IMAGE   name, or full reference with registry (123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-preflight)
#   TAG     default: latest
#
# Options:
#   --registry REG       prefix IMAGE with a registry (ghcr.io/OWNER, ACCOUNT.dkr.ecr.REGION.amazonaws.com)
#   --ecr                registry = this AWS account's ECR in the current region (aws sts / aws configure)
#   --target T           runtime (default; non-root, Kubernetes/Slurm) or sagemaker (root, sshd, MPI)
#   --aws-ofi-nccl       build the aws-ofi-nccl plugin (EFA on AWS); same as --build-arg WITH_AWS_OFI_NCCL=1
#   --build-arg K=V      passed to docker build (repeatable), e.g. CUDA_VERSION=12.8.1
#   --platform P         e.g. linux/amd64
#   --push               push after building (creates the ECR repository when missing)
#   --login              log in to the registry first (ECR: aws ecr get-login-password; GHCR: $GHCR_TOKEN)
#   --dry-run            print the commands, run nothing
#
# Examples (the spec's ./create-image.sh sagemaker-cluster-test latest):
#   container/build-and-push.sh --ecr --target sagemaker --aws-ofi-nccl --login --push gpu-preflight latest
#   GHCR_TOKEN=... container/build-and-push.sh --registry ghcr.io/acme --login --push gpu-preflight 0.1.0
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
context=$(cd "$here/.." && pwd)
dockerfile="$here/Dockerfile"
target=runtime registry="" use_ecr=0 push=0 login=0 dry_run=0 platform=""
build_args=()

die() { echo "build-and-push: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# Print a command, then run it unless --dry-run. Arguments are shell-quoted so the printed
# line can be pasted back into a shell.
run() {
  printf '+' >&2
  printf ' %q' "$@" >&2
  printf '\n' >&2
  if ((dry_run == 0)); then "$@"; fi
}

while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --registry) [[ $# -ge 2 ]] || die "--registry needs a value"; registry=${2%/}; shift 2 ;;
    --ecr) use_ecr=1; shift ;;
    --target) [[ $# -ge 2 ]] || die "--target needs a value"; target=$2; shift 2 ;;
    --aws-ofi-nccl) build_args+=(--build-arg WITH_AWS_OFI_NCCL=1); shift ;;
    --build-arg) [[ $# -ge 2 && $2 == *=* ]] || die "--build-arg needs KEY=VALUE"; build_args+=(--build-arg "$2"); shift 2 ;;
    --platform) [[ $# -ge 2 ]] || die "--platform needs a value"; platform=$2; shift 2 ;;
    --push) push=1; shift ;;
    --login) login=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
(($# >= 1 && $# <= 2)) || die "usage: build-and-push.sh [options] IMAGE [TAG] (see --help)"
image=$1 tag=${2:-latest}
[[ $target == runtime || $target == sagemaker ]] || die "--target must be runtime or sagemaker, not '$target'"
[[ $image =~ ^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$ ]] || die "bad image name '$image' (lowercase, digits, . _ - /)"
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "bad tag '$tag'"
((use_ecr == 0)) || [[ -z $registry ]] || die "--ecr and --registry exclude each other"

if ((use_ecr)); then
  command -v aws >/dev/null || die "--ecr needs the AWS CLI"
  account=$(aws sts get-caller-identity --query Account --output text) || die "aws sts get-caller-identity failed"
  region=${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}
  [[ -n $region ]] || die "no AWS region: set AWS_REGION or 'aws configure set region ...'"
  registry="$account.dkr.ecr.$region.amazonaws.com"
fi

ref="${registry:+$registry/}$image:$tag"
host=${ref%%/*}
[[ $ref == */* && ( $host == *.* || $host == *:* || $host == localhost ) ]] || host=""
repo=${ref#"$host"/}
repo=${repo%:"$tag"}

((push == 0)) || [[ $ref == */* ]] || die "--push needs a registry or namespace (--registry, --ecr, or IMAGE like ghcr.io/acme/name)"

ecr_region=""
if [[ $host =~ ^[0-9]{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$ ]]; then ecr_region=${BASH_REMATCH[1]}; fi

if ((login)); then
  if [[ -n $ecr_region ]]; then
    printf '+ aws ecr get-login-password --region %q | docker login --username AWS --password-stdin %q\n' \
      "$ecr_region" "$host" >&2
    if ((dry_run == 0)); then
      aws ecr get-login-password --region "$ecr_region" | docker login --username AWS --password-stdin "$host"
    fi
  elif [[ $host == ghcr.io ]]; then
    user=${GHCR_USER:-${GITHUB_ACTOR:-}}
    [[ -n ${GHCR_TOKEN:-} && -n $user ]] || die "GHCR login needs GHCR_TOKEN and GHCR_USER (or GITHUB_ACTOR)"
    # shellcheck disable=SC2016  # the variable's name is printed on purpose, never the token
    printf '+ printf %%s "$GHCR_TOKEN" | docker login ghcr.io --username %q --password-stdin\n' "$user" >&2
    if ((dry_run == 0)); then printf '%s' "$GHCR_TOKEN" | docker login ghcr.io --username "$user" --password-stdin; fi
  elif [[ -n $host ]]; then
    die "--login knows ECR and ghcr.io; for $host run 'docker login $host' yourself"
  else
    die "--login needs a registry (--registry or --ecr)"
  fi
elif ((push)) && [[ -n $host ]]; then
  if [[ -n $ecr_region ]]; then
    echo "build-and-push: not logged in? aws ecr get-login-password --region $ecr_region | docker login --username AWS --password-stdin $host" >&2
  elif [[ $host == ghcr.io ]]; then
    echo "build-and-push: not logged in? echo \"\$GHCR_TOKEN\" | docker login ghcr.io -u <user> --password-stdin" >&2
  fi
fi

build=(docker build --file "$dockerfile" --target "$target" --tag "$ref")
[[ -z $platform ]] || build+=(--platform "$platform")
run "${build[@]}" "${build_args[@]}" "$context"

if ((push)); then
  if [[ -n $ecr_region ]]; then
    printf '+ aws ecr describe-repositories --region %q --repository-names %q || aws ecr create-repository ...\n' \
      "$ecr_region" "$repo" >&2
    if ((dry_run == 0)) && ! aws ecr describe-repositories --region "$ecr_region" --repository-names "$repo" >/dev/null 2>&1; then
      aws ecr create-repository --region "$ecr_region" --repository-name "$repo" >/dev/null
    fi
  fi
  run docker push "$ref"
fi
echo "$ref"
