"""``gpu-preflight k8s label SOURCE``: node labels and taints from a report; ``k8s manifest``:
the deploy manifests rendered for a site (image, private-registry pull secret).

``label`` is a dry run by default: prints the ``kubectl`` commands (stdout) and the notes (stderr), so
an operator sees exactly what would change. ``--apply`` sends them through the official
client (in-cluster service account, else the kubeconfig). Exit codes: 0 done; 1 the
circuit breaker held taints back; 2 usage or an unreadable report; 3 the cluster could
not be changed (no client, API errors, unknown node).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..safeio import describe_error, write_text
from .argtypes import fraction
from .exits import EXIT_USAGE

if TYPE_CHECKING:
    from ..integrations.k8s import LabelPlan

EXIT_OK = 0
EXIT_HELD = 1
EXIT_API = 3
MANIFEST_LIMIT = 4 << 20  # a manifest file is kilobytes; refuse what cannot be one


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``k8s`` on the CLI's subparsers (imports nothing: every command pays for the parser)."""
    k8s = sub.add_parser("k8s", help="Kubernetes: label and taint nodes from a report").add_subparsers(
        dest="k8s_cmd", required=True)
    p = k8s.add_parser("label", help="labels gpu-preflight.io/health and last-run, taint on failure (dry run)",
                       description="Label, annotate and (on FAIL/ERROR) taint the nodes of a report. Prints "
                                   "kubectl commands unless --apply.")
    p.add_argument("source", help="report.json, '-' for stdin, or a 'gpu-preflight serve' /status URL")
    p.add_argument("--node", help="Kubernetes node name of a single-node report (default: the report's host name)")
    p.add_argument("--apply", action="store_true", help="change the cluster through the API (default: dry run)")
    p.add_argument("--taint-on", default="fail,error",
                   help="comma-separated health values that taint: pass, warn, fail, error, unknown "
                        "(default fail,error; '' never taints)")
    p.add_argument("--taint-effect", default="NoSchedule",
                   help="NoSchedule (default), PreferNoSchedule or NoExecute")
    p.add_argument("--max-taint-fraction", type=fraction(), default=0.5,
                   help="circuit breaker: never taint more than this share of the nodes at once (default 0.5)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    m = k8s.add_parser("manifest", help="render deploy/k8s manifests: image and imagePullSecrets",
                       description="Print MANIFEST files (YAML, e.g. deploy/k8s/job.yaml) with the gpu-preflight "
                                   "containers' image replaced and an imagePullSecrets entry in every pod template "
                                   "and ServiceAccount, for a private registry. Exit 0, or 3 with one line.")
    m.add_argument("manifests", nargs="+", metavar="MANIFEST", help="YAML file(s), '-' for stdin")
    m.add_argument("--image", help="image of the gpu-preflight containers (those whose repository ends in "
                                   "/gpu-preflight), e.g. registry.corp/ml/gpu-preflight:0.1.0")
    m.add_argument("--image-pull-secret", action="append", default=[], metavar="NAME",
                   help="a docker-registry Secret in the pods' namespace (repeatable; "
                        "default $GPU_PREFLIGHT_IMAGE_PULL_SECRET, comma-separated)")
    m.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Run ``k8s label`` or ``k8s manifest``; returns the process exit code."""
    if args.k8s_cmd == "manifest":
        return _manifest(args)
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..integrations.k8s import ReportSourceError, hold_if_over, load_report, plan, render_commands

    if not 0 < args.max_taint_fraction <= 1:
        print("gpu-preflight: --max-taint-fraction must be in (0, 1]", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = load_report(args.source)
        out = plan(report, node=args.node, taint_on=[t for t in args.taint_on.split(",") if t],
                   effect=args.taint_effect)
    except (ReportSourceError, ValueError) as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.apply:
        hold_if_over(out, total_nodes=len(out.actions), already_tainted=set(), fraction=args.max_taint_fraction)
        sys.stdout.write(render_commands(out))
        _notes([*out.notes, "dry run: nothing changed (--apply changes the cluster)"])
        return EXIT_HELD if out.tripped else EXIT_OK
    return _apply(out, args)


def _apply(out: LabelPlan, args: argparse.Namespace) -> int:
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..integrations.k8s_apply import ClientMissing, apply, connect

    try:
        api = connect(args.kubeconfig, args.context)
        result = apply(out, api, max_taint_fraction=args.max_taint_fraction)
    except ClientMissing as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_API
    except Exception as exc:  # config and connection errors of the client share no base class
        print(f"gpu-preflight: cannot reach the Kubernetes API: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_API
    for action in out.actions:
        if action.node in result.patched:
            taint = action.taint.spec() if action.taint else "no gpu-preflight taint"
            print(f"{action.node}: health={action.health}, {taint}")
    for node, why in result.failed.items():
        print(f"{node}: NOT changed: {why}", file=sys.stderr)
    _notes(out.notes)
    if result.failed:
        return EXIT_API
    return EXIT_HELD if out.tripped else EXIT_OK


PULL_SECRET_ENV = "GPU_PREFLIGHT_IMAGE_PULL_SECRET"


def _manifest(args: argparse.Namespace) -> int:
    """``k8s manifest``: every file's documents rendered together (an ``--image`` must reach a
    container in one of them), printed as one YAML stream in the order given."""
    # start-up: --help/--version import every command module; this command's work loads when it runs
    from ..boundedio import read_text
    from ..integrations.k8s_manifest import ManifestError, dump_documents, load_documents, render

    secrets = args.image_pull_secret or [s.strip() for s in os.environ.get(PULL_SECRET_ENV, "").split(",")
                                         if s.strip()]
    docs: list[object] = []
    try:
        for source in args.manifests:
            try:
                text = read_text(source, limit=MANIFEST_LIMIT, what="manifest")
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise ManifestError(f"cannot read {source}: {exc}") from None
            try:
                docs += load_documents(text)
            except ManifestError as exc:
                raise ManifestError(f"{source}: {exc}") from None
        out = dump_documents(render(docs, image=args.image, pull_secrets=secrets).documents)
    except ManifestError as exc:
        print(f"gpu-preflight: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.output:
        try:
            write_text(args.output, out)
        except (OSError, ValueError) as exc:
            print(f"gpu-preflight: cannot write {args.output}: {describe_error(exc, args.output)}", file=sys.stderr)
            return EXIT_USAGE
    else:
        sys.stdout.write(out)
    return EXIT_OK


def _notes(notes: list[str]) -> None:
    for note in notes:
        print(f"gpu-preflight: {note}", file=sys.stderr)
