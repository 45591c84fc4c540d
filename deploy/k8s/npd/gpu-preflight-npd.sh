#!/bin/sh
# node-problem-detector custom plugin: gpu-preflight's verdict as the node condition GPUPreflightProblem.
#
# NPD's plugin protocol: exit 0 = OK (condition False), 1 = NonOK (condition True, the problem is
# there), anything else = Unknown; the first line of stdout is the condition's message (NPD keeps
# max_output_length characters). This script never runs the checks itself: it asks the
# gpu-preflight server on this node (`gpu-preflight serve`, the DaemonSet or a systemd service)
# for its last verdict, in about 0.1 s:
#   server ready (GET /readyz 200)       -> exit 0, "ready: ..."
#   server not ready (503: FAIL/ERROR)   -> exit 1, "not ready: <the failing checks>"
#   no server, no answer, bad answer     -> exit 2 (Unknown): a failure to see is never "healthy"
# Settings (environment): GPU_PREFLIGHT (the binary), GPU_PREFLIGHT_HOST (default 127.0.0.1),
# GPU_PREFLIGHT_PORT (default 9470), GPU_PREFLIGHT_QUERY_TIMEOUT_S (default 5).
GPU_PREFLIGHT=${GPU_PREFLIGHT:-gpu-preflight}
HOST=${GPU_PREFLIGHT_HOST:-127.0.0.1}
PORT=${GPU_PREFLIGHT_PORT:-9470}
TIMEOUT=${GPU_PREFLIGHT_QUERY_TIMEOUT_S:-5}

if ! command -v "$GPU_PREFLIGHT" >/dev/null 2>&1; then
  echo "gpu-preflight not found (set GPU_PREFLIGHT)"
  exit 2
fi
message=$("$GPU_PREFLIGHT" serve --query --host "$HOST" --port "$PORT" --query-timeout-s "$TIMEOUT" 2>&1)
rc=$?
printf '%s\n' "$message" | head -n 1
case $rc in
  0) exit 0 ;;   # ready
  2) exit 1 ;;   # not ready: the node failed its checks
  *) exit 2 ;;   # no answer or a usage problem: Unknown
esac
