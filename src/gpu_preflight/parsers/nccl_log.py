"""NCCL and torch.distributed logs of a failed job: which known failure each line shows.

A training job that died leaves thousands of lines; the cause is usually one of a dozen
signatures. Each line is matched against :data:`SIGNATURES` (first match wins, most
specific first) and tagged with what the line says about *where*: the rank
(``[rank3]:``, ``[Rank 3]``), and from NCCL's own prefix ``host:pid:tid [cuda device]``
the host, pid and device. NCCL wraps some warnings onto a second line; an unprefixed line
after a prefixed NCCL line is joined to it first. Author commentary (``#`` lines) is
ignored, so a pasted note that *mentions* a timeout does not become one.

The torchrun summary's ``Root Cause (first observed failure)`` block names the rank that
died first: it becomes a ``rank_exited`` signature, because on the other ranks the same
incident only shows as a remote error.
"""

from __future__ import annotations

import re
import signal

from ..records.nccl import NcclLogRecord as NcclLogRecord
from ..records.nccl import NcclSignature as NcclSignature
from .cuda_errors import CUDA_ERROR_KINDS as CUDA_ERROR_KINDS
from .cuda_errors import CUDA_ERRORS as CUDA_ERRORS
from .cuda_errors import CUDA_TEXT_PATTERN as _CUDA_TEXT
from .detect import parser
from .errors import ParseError
from .slurm_job import CONSEQUENCE, SLURM_SIGNATURES, SLURM_SNIFF, SLURM_SNIFF_SCORE
from .text import is_noise, prepare

KIND = "nccl-log"
UNCLASSIFIED_WARN = "nccl_warn"  # an NCCL WARN line no other signature names
PROXY_RESULT = "proxy_result"  # a placeholder kind: classify() names the signature from the ncclResult_t code
# ncclResult_t (nccl.h) -> the signature that code stands for; an unknown code is NCCL's internal error.
NCCL_RESULT_KINDS = {1: "cuda_error", 2: "system_error", 3: "internal_error", 4: "invalid_usage", 5: "invalid_usage",
                     6: "remote_error"}
RESULT_TEXT = "result_text"  # a placeholder kind: classify() names the signature from ncclGetErrorString's words
# ncclGetErrorString's words for each failing ncclResult_t (init.cc, every NCCL 2.x; 2.18+ add "(run with
# NCCL_DEBUG=... for details)" or " - please report this issue to the NCCL developers" after the same words).
NCCL_RESULT_TEXTS = {"unhandled cuda error": 1, "unhandled system error": 2, "internal error": 3,
                     "invalid argument": 4, "invalid usage": 5,
                     "remote process exited or there was a network error": 6}
CUDA_TEXT = "cuda_text"  # a placeholder kind: classify() names the signature from CUDA's own error words or name
# How the frameworks raise a failed NCCL call: the words above after their own framing (docs/repertoire/
# framework-nccl.md). XLA/JAX "<file>:<line>: NCCL operation <expr> failed: " (nccl_utils.cc, nccl_api.cc,
# nccl_errors.h), its ncclMemAlloc "... from device collective memory: " and async checker "Aborting communicator:
# <comm> due to async NCCL error: "; cupy "NcclError: NCCL_ERROR_<NAME>: "; vLLM's pynccl "NCCL error: "; Horovod
# "<ncclCall> failed: " and "NCCL async error: "; TensorFlow's NcclManager "NCCL: " and "Error invoking NCCL: ";
# Paddle "NCCL error(<code>), "; torch's c10d "NCCL error in: <file>:<line>, " and 1.0's "NCCL Error <code>: ".
# An absl status code may sit between ("... async NCCL error: INTERNAL: ...").
_FRAMEWORK_RESULT = (r"(?:NCCL operation [^\n]{1,400}? failed|from device collective memory|async NCCL error"
                     r"|NCCL async error|Error invoking NCCL|\bnccl[A-Z]\w* failed|\bNCCL_ERROR_[A-Z_]+"
                     r"|\bNCCL error(?:\(\d+\))?|\bNCCL Error \d+|\bNCCL error in: \S{1,300}?:\d+|\bNCCL)"
                     r"[:,] (?:[A-Z_]+: )?"
                     r"(?P<text>unhandled (?:cuda|system) error|internal error|invalid (?:argument|usage)"
                     r"|remote process exited or there was a network error)\b")

# (kind, pattern): order matters, the first match classifies the line. Slurm's own lines (parsers/slurm_job.py) first:
# srun's "task 3: Segmentation fault" names the node and task, which the bare crash signature would not.
SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    *SLURM_SIGNATURES,
    # NCCL's proxy thread failed an operation for a rank ("[Proxy Service 8] Failed to execute operation Connect from
    # rank 8, retcode 2"): what failed is the ncclResult_t it returned, read by :data:`NCCL_RESULT_KINDS`.
    # Its service thread's own form of the same: "[Service thread] Error encountered progressing operation=Connect,
    # res=3, closing connection" (proxy.cc).
    (PROXY_RESULT, re.compile(r"(?:\[Proxy Service \d+\] Failed to execute operation \w+ from rank \d+, retcode "
                              r"|\[Service thread\] Error encountered progressing operation=\w+, res="
                              # group.cc's async job (an init or connect run on its own thread, 2.14+) and the
                              # proxy's calls over its Unix socket (2.19+) print the same code
                              r"|ncclAsyncJobComplete: job \S+ failed, job error "
                              r"|ncclProxy\w+ call to tpRank \d+\S*(?: handle 0x[0-9a-fA-F]+| localFd -?\d+)?"
                              r" failed : )"
                              r"(?P<code>\d+)")),
    # torch's heartbeat monitor ("ProcessGroupNCCL's watchdog got stuck for 600 seconds", "Heartbeat monitor timed
    # out!") kills ranks whose watchdog itself hung: the same incident, a rank that stopped making progress.
    ("watchdog_timeout", re.compile(r"Watchdog caught collective operation timeout|collective operation timeout"
                                    r"|NCCL (?:watchdog )?timeout|watchdog got stuck for \d+ seconds"
                                    r"|Heartbeat monitor timed out"
                                    # torch 2.2-2.3's watchdog dump names the work that never finished ("[PG 1 Rank
                                    # 11] Timeout at NCCL work: 15734, last enqueued NCCL work: 15735, ...")
                                    r"|Timeout at NCCL work: \d+"
                                    # torch 2.3+'s flight recorder on a rank told of (or that had) the timeout
                                    r"|Received a dump signal due to a collective timeout from"
                                    # a paste of the watchdog exception's frames alone: only a timeout raises there
                                    r"|ProcessGroupNCCL::WorkNCCL::checkTimeout|Exception raised from checkTimeout at "
                                    r"\S*ProcessGroupNCCL\.cpp"
                                    # gloo (docs/repertoire/torch-distributed.md): an operation that waited past its
                                    # timeout (transport/*/unbound_buffer.cc "Timed out waiting <N>ms for recv
                                    # operation to complete"), the pairs it closed for it, a socket's read/write timeout
                                    # (tcp/pair.cc); ProcessGroupGloo's monitoredBarrier naming the ranks that never
                                    # arrived ("[Rank 0]: Rank 6 failed to pass monitoredBarrier in 30000 ms", "Ranks 2,
                                    # 5 ..."): the rank it names is the one that stopped
                                    r"|Timed out waiting \d+ ?ms for (?:recv|send) operation to complete"
                                    r"|Application timeout caused pair closure"
                                    r"|gloo/[\w/.-]{1,300}:\d+\] (?:Read|Write) timeout"
                                    r"|\bRanks? (?P<culprit>\d+(?:, \d+)*) failed to pass monitoredBarrier",
                                    re.IGNORECASE)),
    ("duplicate_gpu", re.compile(r"Duplicate GPU detected\s*:\s*rank (?P<a>\d+) and rank (?P<b>\d+) both on "
                                 r"CUDA device (?P<dev>\S+)|Multiple Ranks are using the same GPU"
                                 # nvls.cc (2.30): "communicator has multiple ranks using the same NVML device"
                                 r"|has multiple ranks using the same NVML device")),
    # NET/IB, or a vendor's IB plugin that names itself after it (NET/IBP, NET/IBext). NCCL before 2.12 printed no
    # peer ("Got completion with error 4, opcode ...").
    # NCCL 2.30's resiliency path gives up on one ("NET/IB: The error is fatal (IBV_WC_...). Cannot continue.").
    # NCCL 2.19+ names the status ("with status=IBV_WC_RETRY_EXC_ERR(12)"), its GIN path says "NET/IB/GIN", and the
    # poller's own report of a failed work completion is "Got CQE with error (devIndex=0, ...)" (net_ib/p2p.cc).
    ("ib_completion_error", re.compile(r"NET/IB[\w/]*\s*:\s*(?:Got completion (?:from peer (?P<peer>\S+) )?with "
                                       r"(?:error|status)[ =](?:\w+\()?(?P<code>\d+)|Got CQE with error\b"
                                       r"|The error is fatal \()")),
    # NCCL 2.23-2.27 printed the non-fatal ones as "mlx5_0:1 Got async error event: port error".
    # The HCA itself reported an asynchronous event (port error: a flapping link; local catastrophic error: the
    # adapter failed; work queue errors): the fabric below NCCL, whatever the collective was doing.
    # net_ib/common.cc's forms: "Got async event : port error" (before 2.19), "mlx5_0:1 Got non-fatal async event:
    # port error(10)", "mlx5_0:1 async fatal event[ on QP (...) ...]: local catastrophic error"; then the
    # communicator it poisoned ("communicator encountered a fatal error (detected in ncclIbTest)") and the
    # resiliency path that ran out of devices ("NET/IB: Fatal error. Detected 2 failed devices out of 2").
    # The same "Got ... async ... event" line also reports events that are no error (every NCCL from 2.4 to 2.30
    # passes these ibv_event_type_str names through it: a port coming up, an SM handover or client reregistration,
    # a LID/P_Key change, a drained queue, a link speed change; a GID table change, which 2.19+ prints apart as "GID
    # table changed" and never as fatal): a healthy fabric prints them, so they are not this failure (a job that
    # then fails says so in its own line).
    ("ib_async_event", re.compile(r"NET/IB\s*:\s*(?:\S+:\d+ )?(?:Got (?:non-fatal )?async (?:error )?event"
                                  r"|async fatal event\b[^:\n]*)\s*:\s*"
                                  r"(?!\s*(?:port active|LID change|P_Key change|SM change|client reregistration"
                                  r"|send queue drained|path migrated|last WQE reached|SRQ limit reached"
                                  r"|communication established|Device link speed change|GID table change)\b)"
                                  r"(?P<why>[\w ]+)"
                                  r"|NET/IB\s*:\s*Fatal error\. Detected \d+ failed devices"
                                  r"|communicator encountered a fatal error \(detected in \w+\)")),
    ("ib_qp_error", re.compile(r"Call to ibv_modify_qp failed with (?:error )?(?:(?P<code>\d+) )?(?P<why>[^,.]+)"
                               r"(?:.*?curr state (?P<state>\w+), next state (?P<next>\w+))?", re.IGNORECASE)),
    # NCCL's socket layer gave up connecting to a peer: refused, timed out or unreachable ("Call to connect
    # returned ..., retrying" INFO lines are its retries, not a failure). A WARN cut right after its peer's
    # address (a paste that ends there) still names that failure.
    # NCCL before 2.3 said "Call to connect failed : Connection timed out" (include/socket.h).
    # Any errno after the peer: NCCL's socket layer (os/linux.cc: "ncclSocketConnect: connect to <peer> failed :
    # <strerror>", "ncclOsSocketPollConnect to <peer> failed with error <strerror>") prints whatever connect() said.
    # A bare "Connection refused" is the failure too, unless NCCL says it is retrying (INFO chatter).
    ("connection_refused", re.compile(r"Connect to (?P<peer>\S+?)\s+failed(?:\s*:| with error)\s*"
                                      r"(?!Connection reset by peer)\w"  # a peer that went away: remote_error
                                      r"|NCCL WARN (?:\w+: )?Connect "
                                      r"to \S+$|(?<!errno: 111 - )Connection refused(?!, retrying)"
                                      # c10d's socket.cpp: "[W socket.cpp:663] [c10d] The client socket has failed to
                                      # connect to [host]:port (errno: 111 - Connection refused)." is a retry (above);
                                      # its final error names the store it never reached. gloo's tcp/pair.h "Connect
                                      # timeout [ip]:port".
                                      r"|The client socket has failed to connect to any network address of "
                                      r"\((?P<store>[^,()\s]{1,300}), ?(?P<store_port>\d+)\)"
                                      r"|gloo/[\w/.-]{1,300}:\d+\] Connect timeout (?P<gpeer>\[[^\]\s]{1,300}\]:\d+)"
                                      # misc/socket.cc, os/linux.cc (2.16+): the connect that gave up
                                      # ("socketPollConnect: Connect to <peer> returned 111(Connection refused) errno
                                      # ...", "exceeded retries (N)" / "exceeded timeouts (N)", "<func>: connect [to
                                      # <peer>] returned <strerror>, exceeded error retry count")
                                      r"|socketPollConnect: Connect to \S+ returned \d+\("
                                      r"|socket(?:Start|Poll)Connect: exceeded (?:retries|timeouts) \(\d+\)"
                                      r"|: connect (?:to \S+ )?returned [^,\n]+, exceeded error retry count"
                                      r"|Call to connect failed\s*:\s*(?:Connection timed out"
                                      r"|No route to host|Network is unreachable)", re.IGNORECASE)),
    ("net_plugin_missing", re.compile(r"NCCL WARN .*network (?P<net>.+?) not found|Failed to initialize any NET "
                                      r"plugin|NET/Plugin\s*:\s*Plugin load returned error", re.IGNORECASE)),
    # aws-ofi-nccl's own WARN lines (NCCL's format, or the plugin's old "WARN: Function: f Line: n:" format) and
    # libfabric's provider warnings on a completion: the network below NCCL failed, not NCCL itself.
    ("net_plugin_error", re.compile(r"(?:NCCL WARN|^WARN: Function: \w+ Line: \d+:) NET/OFI\b"
                                    r"|^libfabric:\d+:\d+::\w+:(?:cq|ep_data|ep_ctrl|av):\S+<warn> err: \d+"
                                    # the EFA provider found no device: the plugin has no fabric to use
                                    r"|<warn> fi_getinfo: provider efa output empty list")),
    ("net_plugin_fallback", re.compile(r"NET/Plugin\s*:\s*(?:Could not find:?\s*(?P<plugin>.*?)\.?\s*Using internal"
                                       r"|No plugin found)", re.IGNORECASE)),
    # A framework's own report of a failed NCCL call (JAX/XLA, cupy, vLLM, Horovod, TensorFlow, Paddle, torch's
    # c10d): the ncclResult_t it names by ncclGetErrorString's words, read by :data:`NCCL_RESULT_TEXTS` as NCCL's own
    # return code is. It comes after the fabric, socket, watchdog and plugin signatures: a cause the same line quotes
    # (XLA appends NCCL's last warning) is read as that cause.
    (RESULT_TEXT, re.compile(_FRAMEWORK_RESULT)),
    ("remote_error", re.compile(r"remote process exited or there was a network error|ncclRemoteError"
                                r"|Connection closed by remote peer|Connection reset by peer"
                                # the proxy's socket to a peer failed mid-operation (the peer died or the link did)
                                r"|Socket recv failed while polling"
                                # a send or receive on a peer's socket failed (os/linux.cc), NET/Socket's poller
                                r"|Call to (?:send to|recv from) \S+ failed|NET/Socket\s*:\s*socket progress error"
                                # gloo's tcp/pair.cc: the peer closed its socket or it failed ("Connection closed by
                                # peer [ip]:port", "Socket closed", "Read error [ip]:port: <strerror>", "writev ...");
                                # c10d's TCPStore client whose server (the store's host) went away ("Failed to recv,
                                # got 0 bytes. Connection was likely closed. Did the remote server shutdown or
                                # crash?"); torchrun's rendezvous that another node's agent closed (the job is being
                                # torn down there: RendezvousClosedError)
                                r"|gloo/[\w/.-]{1,300}:\d+\] (?:Connection closed by peer"
                                r"|Socket (?:unexpectedly )?closed|Read error|writev) (?P<gpeer>\[[^\]\s]{1,300}\]:\d+)"
                                r"|Connection closed by peer|Connection was likely closed\. Did the remote server"
                                r"|RendezvousClosedError",
                                re.IGNORECASE)),
    # A message longer than the receiver posted ("Message truncated : received 256 bytes instead of 4" in bootstrap,
    # "NET/Socket : message truncated : receiving X bytes instead of Y"): ranks disagree on a collective's size or on
    # NCCL's settings; NCCL itself returns ncclInvalidUsage for it since 2.12.
    # NCCL's other refusals of its configuration (init.cc, bootstrap.cc, misc/argcheck.cc, net_ib): ranks on
    # different NCCL versions or NIC counts, a rank, device or config attribute out of range, a collective's
    # argument ("AllReduce : sendbuff argument is NULL"), no usable interface or address for its sockets, NICs
    # of two link types, a bootstrap root that two jobs share.
    # Ranks that disagree on a collective also show as NET/IB's size check on a receive ("NET/IB : req 0/1 tag 0 peer
    # <addr> collective mismatch error, local size X remote size Y", net_ib.cc, ncclInvalidUsage since 2.12; before,
    # "collective mismatch error local size X remote Y addr ...") and, in NCCL 2.4-2.6, as init.cc's opCount check
    # ("Mismatched collective detected, please check your collective calls at and around rank N").
    # ncclGetErrorString's words for ncclInvalidArgument (init.cc), what nccl-tests' failure line quotes: "invalid
    # argument (run with NCCL_DEBUG=WARN for details)"; a CUDA 'invalid argument' has no such tail.
    ("invalid_usage", re.compile(r"invalid usage|ncclInvalidUsage|collective mismatch error"
                                 r"|invalid argument \(run with NCCL_DEBUG=WARN"
                                 r"|Mismatched collective detected|caused by a collective mismatch around rank \d+"
                                 r"|Attempt to use communicator before the previous operation returned ncclSuccess"
                                 r"|Trying to (?:send|recv) to self without a matching"
                                 r"|Can't (?:merge|connect) net devices with different link_layer"
                                 r"|Trying to merge multiple devices together"
                                 r"|message truncated\s*:\s*(?:peer \S+ )?receiv(?:ed|ing) \d+(?:,\d+)? bytes instead "
                                 r"of \d+"
                                 r"|Mismatched NCCL version detected|Detected mixed local \w+ device counts"
                                 r"|Invalid (?:rank requested|device count requested|device \d+ \(totalnDev"
                                 r"|config \w+(?:/\w+)? attribute)|invalid device count \(\d+\) requested"
                                 r"|improper usage of nccl|\b\w+ : (?:invalid (?:root|type|reduction operation) "
                                 r"|\w+ argument is NULL|\w+ allocated on device \d+ mismatchs"
                                 r"|\w+ \S+ is not a valid pointer)"
                                 r"|Bootstrap : no socket interface found"
                                 r"|NET/Socket\s*:\s*(?:No usable listening interface"
                                 r"|no interface) found|no device found (?:matching|after excluding) .*verify NCCL_\w+"
                                 r"|NET/IB\s*:\s*(?:No IP interface found|Attempted to (?:connect|merge) incompatible "
                                 r"devices|Remote \w+ device is incompatible)|Invalid NCCL_COMM_ID"
                                 r"|Net : (?:No valid \S+ pair found|error encountered when getting address info)"
                                 r"|Bootstrap Root : (?:mismatch in (?:info|rank count) from procs"
                                 r"|rank \d+ of \d+ ranks has already checked in)"
                                 # torch's ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) found ranks running
                                 # different collectives ("... Rank 0 is running collective: CollectiveFingerPrint(...),
                                 # but Rank 1 is running collective: ..."): the job's ranks disagree, as above
                                 r"|Detected mismatch between collectives on ranks",
                                 re.IGNORECASE)),
    # A failed system call inside NCCL: its shared-memory segment (/dev/shm full or too small, a container's 64 MB
    # default), or a socket it could not create.
    ("system_error", re.compile(r"unhandled system error|ncclSystemError|Error while (?:creating|attaching to) shared "
                                r"memory segment|failed to extend /dev/shm/|Call to posix_fallocate failed"
                                r"|Socket creation failed"
                                # topology detection could not resolve a GPU's PCI path under /sys (graph/xml.cc,
                                # graph/topo.cc return ncclSystemError: a VM, WSL or a container without the PCI
                                # tree); NET/IB's own "of mlx5_0 (/sys/class/infiniband/...)" form is not fatal
                                r"|Could not find real path of /sys/class/pci_bus/"
                                # a verbs call NCCL's IB transport made (misc/ibvwrap.cc, mlx5dvwrap.cc,
                                # include/ibvwrap.h; NCCL returns ncclSystemError for them): memory it could not
                                # register (ulimit -l, peermem/DMA-BUF), a CQ or QP it could not create, a device
                                # it could not open
                                r"|Call to (?:ibv|mlx5dv)_\w+(?:\(\))? (?:failed|returned -?\d+)"
                                r"|\b(?:ibv|mlx5dv)_\w+\(\) failed with error"
                                r"|NET/IB\s*:\s*(?:mlx5dv_\w+ failed|Unable to (?:open|query) (?:device|port))"
                                # SYSCHECK's "Call to <syscall> failed: <strerror>" (include/checks.h), host memory,
                                # threads and the proxy's Unix domain socket
                                r"|Call to (?!connect\b)\w+ failed\s*:|Failed to malloc \d+ bytes"
                                r"|Unrecoverable error detected: malloc|Thread creation failed"
                                r"|UDS: [^\n]*? (?:failed|creation error)"
                                # shared memory the host refused (misc/shmutils.cc, os/linux.cc 2.12+), an accept
                                # on NCCL's listening socket that failed (misc/socket.cc), no transport between two
                                # ranks (transport.cc 2.12+, ncclSystemError), MNNVL without a working IMEX
                                # (mnnvl.cc 2.25+, ncclSystemError)
                                r"|failed to create shared memory file|\bCould not map \S*/dev/shm/"
                                r"|\b(?:socket|ncclOsSocket)TryAccept: (?:exceeded error retry count|Accept failed)"
                                r"|No transport found for rank \d+"
                                r"|MNNVL \(cliqueSize \d+\) is available but not (?:working|supported) on this system",
                                re.IGNORECASE)),
    # CUDA's own error words or enum name, where they say which fault it was (:data:`CUDA_ERRORS`): after the
    # NCCL signatures (a framework's 'unhandled cuda error' is NCCL's result), before any other CUDA error.
    (CUDA_TEXT, re.compile(_CUDA_TEXT)),
    # Any other CUDA error, and cupy's "<name>: <words>" of any runtime or driver error (out of memory aside).
    ("cuda_error", re.compile(r"unhandled cuda error|ncclUnhandledCudaError"
                              r"|CUDA error: (?!out of memory|CUBLAS_STATUS_ALLOC_FAILED)"
                              r"|\b(?:cudaError(?!MemoryAllocation)\w+|CUDA_ERROR_(?!OUT_OF_MEMORY)\w+): \w"
                              r"|NCCL WARN Cuda failure (?:\d+ )?'(?!out of memory)"
                              # a CUDA or NVML call under NCCL (transport/p2p.cc, nvls.cc, misc/nvmlwrap.cc)
                              r"|failed to peer with device|\bcuda\w+ failed\s*:|CUDA error \d+ '(?!out of memory)"
                              # P2P transport's IPC import (transport/p2p.cc, p2p.cu before 2.3: "failed to open CUDA
                              # IPC handle : 64 peer access is not supported ..."), returned as ncclUnhandledCudaError
                              r"|failed to open CUDA IPC handle\s*:\s*\d+"
                              r"|\bnvml\w+\([^)]*\) failed:"
                              # graph/paths.cc (2.12+), ncclUnhandledCudaError: NVML says P2P is off between two
                              # NVLink-connected GPUs, "probably due to a hardware issue"
                              r"|P2P is disabled between NVLINK connected GPUs"
                              # torch's cudaGetDeviceCount() that returned cudaErrorUnknown (CUDAFunctions.cpp)
                              r"|CUDA unknown error - this may be due to an incorrectly set up environment",
                              re.IGNORECASE)),
    # cuBLAS's allocation failure (torch's TORCH_CUDABLAS_CHECK: "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when
    # calling ...") and cupy's names of CUDA's own
    ("out_of_memory", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"
                                 r"|CUBLAS_STATUS_ALLOC_FAILED|\bcudaErrorMemoryAllocation: "
                                 r"|\bCUDA_ERROR_OUT_OF_MEMORY: "
                                 r"|NCCL WARN Cuda failure (?:\d+ )?'out of memory'|CUDA error \d+ 'out of memory'"
                                 r"|Failed to CUDA (?:calloc|malloc|host alloc)",
                                 re.IGNORECASE)),
    # graph/rings.cc's check that the ranks computed one ring ("Error : ring 0 does not loop back to start (13 !=
    # 15)"), which NCCL returns as ncclInternalError: ranks saw different topologies.
    # ncclGetErrorString's words for ncclInternalError, alone in nccl-tests' "Test NCCL failure ... 'internal error -
    # please report this issue to the NCCL developers / '" (no "NCCL error" before them).
    ("internal_error", re.compile(r"ncclInternalError|NCCL error[^\n]{0,500}?internal error"
                                  r"|internal error - please report this issue to the NCCL developers"
                                  r"|has no transport for (?:send|recv) peer \d+"
                                  r"|ring \d+ does not loop back to start|ring \d+ does not contain rank \d+"
                                  # init.cu/transport.cc before 2.12 (ncclInternalError); enqueue.cc 2.5+
                                  r"|No transport found !|no algorithm/protocol available", re.IGNORECASE)),
    # torch's watchdog saying a collective failed without saying why (ProcessGroupNCCL.cpp; the cause is an earlier
    # line or another rank's log): "Exception (either an error or timeout) detected by watchdog at work: N" (torch
    # 2.2-2.4), "failure detected by watchdog at work sequence id: N" (2.5+), "Some NCCL operations have failed or
    # timed out" and "... we are taking the entire process down" (WorkNCCL::handleException, 1.x-2.x), NCCLUtils'
    # "NCCL communicator was aborted on rank N.", "watchdog thread terminated with exception", the flight recorder's
    # "Observed flight recorder dump signal from another rank" and the abort that hung ("Future for ProcessGroup
    # abort timed out after N ms"). A line that names the cause is classified by it above.
    ("collective_failed", re.compile(r"detected by watchdog at work(?: sequence id)?: \d+"
                                     r"|Some NCCL operations have failed or timed out"
                                     r"|we are taking the entire process down"
                                     r"|NCCL communicator was aborted on rank \d+"
                                     r"|watchdog thread terminated with exception"
                                     r"|Observed flight recorder dump signal from another rank"
                                     r"|Future for ProcessGroup abort timed out after \d+ ?ms"
                                     # ProcessGroupGloo's monitoredBarrier on a rank other than 0 ("Rank 3 successfully
                                     # reached monitoredBarrier, but received errors while waiting for send/recv from
                                     # rank 0. Please check rank 0 logs for faulty rank.")
                                     r"|successfully reached monitoredBarrier, but received errors")),
    # torchrun's agent reports the first worker of its node that died (elastic/multiprocessing/api.py: "failed
    # (exitcode: -6) local_rank: 0 (pid: 970611) of binary: ..."; "of fn: ..." for a spawned function): the rank
    # that exited first on that node, whatever the frames above it were (an abort from the watchdog thread, -6).
    ("rank_exited", re.compile(r"\bfailed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: \d+\) "
                               r"of (?:binary|fn):")),
    ("rendezvous_timeout", re.compile(r"DistStoreError|RendezvousTimeoutError|Timed out after \d+ seconds waiting "
                                      r"for clients|TCPStore.*(?:timed out|Timeout)"
                                      # c10d's socket.cpp (SocketConnectOp::throwTimeoutError), the store at
                                      # MASTER_ADDR:MASTER_PORT never answered; torchrun's c10d rendezvous backend
                                      # that lost its store ("The connection to the C10d store has failed")
                                      r"|The client socket has timed out after \S+ while trying to connect to "
                                      r"\((?P<store>[^,()\s]{1,300}), ?(?P<store_port>\d+)\)"
                                      r"|RendezvousConnectionError", re.IGNORECASE)),
    # c10d's TCPStore server could not listen on its port (socket.cpp SocketListenOp, 1.x-2.x: "The server socket has
    # failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 -
    # Address already in use)."; TCPStoreLibUvBackend.cpp, 2.4+: "... port: 29500, useIpv6: false, code: -98, name:
    # EADDRINUSE, message: address already in use"): the rendezvous never started. The per-address bind warnings
    # before it are not read: a host without IPv6 prints one for [::] and listens on 0.0.0.0.
    ("store_listen_failed", re.compile(r"The server socket has failed to listen on any local network address")),
    # A process that crashed: UCX's and glibc's handlers ("Caught signal 11 (Segmentation fault: ...)"), or Open MPI's
    # ("[host:pid] *** Process received signal ***", which the signal's name follows on the next line).
    ("segfault", re.compile(r"Caught signal 11|Segmentation fault|SIGSEGV|\*\*\* Process received signal \*\*\*")),
    # NCCL's RAS report (ncclras, NCCL >= 2.24; ras/client_support.cc): what it lists under "Errors" (processes it
    # considers dead or has no data from, a communicator INCOMPLETE or in ERROR: "Asynchronous error on N ranks")
    # and what under "Warnings" (a communicator whose ranks disagree: MISMATCH of status or of collective counts;
    # timeouts while it gathered data). NCCL's own split is the verdict's: an error FAILs, a warning WARNs.
    ("ras_error", re.compile(r"^#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|ERROR)\b"
                             r"|^\d+ job process(?:es)? considered dead \(unreachable via the RAS network\)"
                             r"|^Missing communicator data from \d+ job process")),
    ("ras_warning", re.compile(r"^#\d+-\d+ \([0-9a-f]{16}\) MISMATCH\b"
                               r"|^Encountered \d+ communication timeouts? while gathering communicator data")),
    # Any other WARN NCCL printed: its source has some three hundred, and a line no signature above names is
    # still NCCL saying something went wrong (at most a warning: it may be a setting NCCL corrected and ran on).
    (UNCLASSIFIED_WARN, re.compile(r"NCCL WARN \S")),
)

# What a launcher or a paste puts before a log line: indentation, Open MPI's --tag-output ("[1,0]<stdout>:"),
# a line number ("[80746] "), srun --label ("0: "), pdsh/DeepSpeed's host ("10.0.87.143: "), Ray's actor
# ("(RayWorkerWrapper pid=4009) ", after the colour code it prints, or what is left of it once a paste lost the
# escape byte), kubectl logs --timestamps ("2019-06-02T16:13:44.884Z: "), a log console's ISO time column with
# an offset, after a "|" or glued to the message ("| 2025-05-16T16:39:51.208-07:00 | ", CloudWatch), a CI or
# syslog clock ("Nov 20 16:03:25 ") and pdsh's host name before NCCL's own host:pid:tid prefix
# ("worker-0: worker-0:19491:21059 [7] "); a plain date and time ("2024-05-11 14:10:52.224 ", Ray's log
# columns; a log console's with its UTC offset, "2025-11-09 15:39:31.043 +08:00 ", NVIDIA/nccl#1905), vLLM's
# logger prefix ("ERROR 01-29 07:44:33 worker_base.py:467] ", "INFO 08-26 09:12:24
# [shm_broadcast.py:289] ") and GitHub's quoting (a "> " quote, an inline-code backtick). Stripped before
# a line is read.
_LAUNCHER = re.compile(r"^(?:[ \t]+|`+|>[ \t]?|\[\d+,\d+\]<(?:stdout|stderr)>:|\[\d+\] (?=\[)|\d{1,5}: (?=\S)"
                       r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: (?:Z|[+-]\d{2}:?\d{2}))? "
                       r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? "
                       r"\[?[\w.-]+\.py:\d+\] "
                       r"|\d{1,3}(?:\.\d{1,3}){3}: |\x1b?\[[0-9;]{1,8}m|\((?:\w+ )?pid=\d+(?:, ip=[\w.:]+)?\) ?"
                       r"|\|[ \t]*(?=\d{4}-)"
                       r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}):?(?: \| ?| )?"
                       r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} |[\w.-]+: (?=[\w.-]+:\d+:\d+ \[\d+\]))+")
_NCCL_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*)?(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]")
_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:|\[Rank (?P<rank2>\d+)\]")
_HOST_PREFIX = re.compile(r"^(?P<host>[\w.-]+):\s+Test (?:NCCL|CUDA) failure")
_VERSION = re.compile(r"NCCL version[:\s]+(?P<v>\d+\.\d+\.\d+(?:\+\S+)?)")
_STARTS_ENTRY = re.compile(r"^(?:\[|\w[\w.-]*:\d+:\d+\s|[A-Z]\d{4}\s|#|\s*File |Traceback|\w+(?:Error|Exception)\b"
                           r"|terminate called|\s*what\(\)|NCCL|\w+:\s)")
# A row of the RAS report's communicator table ("Group Comms Nodes Ranks Ranks Ranks Status Errors"): group, comms in
# group, nodes per comm, ranks per node (a range "1-8" where they differ), ranks per comm, ranks in group, status.
_RAS_ROW = re.compile(r"^\d+\s+\d+\s+\d+\s+\S+\s+\d+\s+(?P<ranks>\d{1,9})\s+"
                      r"(?P<status>NOCOMM|INIT|RUNNING|FINALIZE|ABORT)\s+[A-Z,]+$")
_RAS_ENTRY = re.compile(r"^#\d+-\d+ \([0-9a-f]{16}\) [A-Z]")  # "#0-0 (fa93daea854b060b) MISMATCH": not a comment
# A communicator rank's init: "ncclCommInitRank comm 0x55fa rank 0 nranks 4 ... - Init START" (2.12+), then "...
# - Init COMPLETE" (every version; ncclCommSplit and ncclCommInitRankConfig too). Keyed by host, pid and comm.
_COMM_INIT = re.compile(r"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks \d+\b[^\n]{0,300}? - Init "
                        r"(?P<state>START|COMPLETE)\b")  # bounded: a 16 MiB line of "comm 0x.." must stay linear
# NCCL's own InfiniBand transport is in use: "No plugin found ... using internal implementation" before it is
# not a fall-back to sockets (the internal IB transport is NCCL's fast path on IB and RoCE).
_IB_IN_USE = re.compile(r"NET/IB\s*:\s*Using \[\d+\]|\bUsing network IB\b")
# A traceback frame's source line ("    raise RendezvousClosedError"): the exception line below it is the message.
_PY_RAISE = re.compile(r"^\s*raise [A-Za-z_][\w.]*(?:\(|$)")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)")
_ROOT_HOST = re.compile(r"^\s*host\s*:\s*(?P<host>\S+)")


def classify(text: str) -> tuple[str, re.Match[str]] | None:
    """The signature kind of one message and its match, or ``None`` (used by other parsers too)."""
    for kind, pattern in SIGNATURES:
        if kind == CUDA_TEXT and not _CUDA_SNIFF_GATE.search(text):
            continue  # no line without these letters names a CUDA error: the long alternation is not tried
        if m := pattern.search(text):
            if kind == PROXY_RESULT:
                kind = NCCL_RESULT_KINDS.get(int(m.group("code")), "internal_error")
            elif kind == RESULT_TEXT:
                kind = NCCL_RESULT_KINDS[NCCL_RESULT_TEXTS[m.group("text")]]
            elif kind == CUDA_TEXT:
                kind = CUDA_ERROR_KINDS[m.group("words") or m.group("name") or m.group("sentence")]
            return kind, m
    return None


# Lines only a log prints, at the start of a line: a prose document or source file that
# merely mentions "NCCL WARN" or torch.distributed does not carry them.
_LOG_LINES: tuple[tuple[int, re.Pattern[str]], ...] = (
    (85, re.compile(r"^(?:\[[^\]]*\]\s*)?[\w.-]+:\d+:\d+ \[\d+\] (?:\S+:\d+ )?NCCL (?:WARN|INFO)\b", re.M)),
    # old c10d's std::runtime_error text ("what(): NCCL Error 1: unhandled cuda error") included; c10's glog-like
    # tag has the month unpadded in some torch versions ("[E429 13:55:49.38 ProcessGroupNCCL.cpp:1743]").
    (80, re.compile(r"^\[[EWIF]\d{3,4} [^\]]*\]|^\[[EWIF] ProcessGroupNCCL\.cpp:\d+\]"
                    r"|^(?:what\(\):\s*)?NCCL Error \d+: \w"
                    r"|^\w*(?:Error|Exception): .*\bNCCL\b"
                    r"|^ncclRemoteError|^ncclSystemError|^ncclInvalidUsage|^ncclInternalError|^ncclUnhandledCudaError"
                    r"|^terminate called after throwing an instance of 'c10::DistBackendError'", re.M)),
    # NCCL's own WARN format (debug.cc: "<file>:<line> NCCL WARN"), whatever prefix a launcher or a redaction left.
    # The logger prints the caller's file (NCCL itself) or its function (a net plugin: aws-ofi-nccl passes
    # __func__, "register_rail_mr_buffer:617 NCCL WARN NET/OFI ..."); a hand-copied line may lose the number
    # ("ibvwrap.cc: NCCL WARN ..."). The name starts where a path token starts: tried from every character of a
    # long token, the match would be quadratic (64 KiB of "0." took 20 s).
    (70, re.compile(r"(?<![\w/.-])(?:[\w/.-]+:\d+|[\w/.-]+\.(?:c|cc|cpp|cu|h):?) NCCL WARN\b", re.M)),
    # NCCL before 2.3 printed "WARN"/"INFO" without "NCCL": after its host:pid:tid [dev] prefix
    # ("gpu-1:18553:18611 [0] include/socket.h:360 WARN Call to connect failed"), or alone with a path in NCCL's
    # source tree ("include/socket.h:344 WARN Socket creation failed").
    # A paste may shorten the prefix to the host and device ("machine [0] misc/ibvwrap.cu:269 WARN Call to
    # ibv_create_qp failed", NCCL 2.1): the path in NCCL's tree still names the line.
    (65, re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\] (?:[\w/.-]+\.(?:cc|cu|h):\d+ )?(?:WARN|INFO) \S"
                    r"|^(?:[\w.-]+ \[\d+\] )?(?:include|misc|transport|graph|collectives)/[\w/.-]+\.(?:cc|cu|h):\d+"
                    r" WARN \S", re.M)),
    # aws-ofi-nccl's old log format and libfabric's provider warnings (the network plugin below NCCL).
    (70, re.compile(r"^WARN: Function: \w+ Line: \d+: NET/OFI\b|^libfabric:\d+:\d+::\w+:\w+:\S+<warn> ", re.M)),
    # torchrun's agent naming the worker that exited ("api.py:826] failed (exitcode: -6) local_rank: 0 (pid: N) of
    # binary: ..."), which a paste may keep without the traceback under it.
    (60, re.compile(r"^torch\.distributed\.[\w.]+(?:Error|Exception)\b|^\s*Root Cause \(first observed failure\)"
                    r"|^\s*File \"[^\"]*/torch/distributed/\w+\.py\", line \d+"
                    r"|\bfailed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of (?:binary|fn)\b", re.M)),
    # c10d's store sockets and gloo's transport (docs/repertoire/torch-distributed.md): gloo's "[<path>/gloo/
    # transport/tcp/pair.cc:544] Connection closed by peer ..." after torch's "RuntimeError: ", c10d's socket.cpp
    # sentences, ProcessGroupGloo's monitoredBarrier, TCPStore's lost server.
    (60, re.compile(r"\[[^\]\s]{0,300}gloo/[\w/.-]{1,300}\.(?:cc|h):\d+\] \w"
                    r"|\bThe (?:server|client) socket has (?:failed to (?:listen|bind|connect)|timed out)\b"
                    r"|\b(?:failed to pass|successfully reached) monitoredBarrier\b"
                    r"|\bDetected mismatch between collectives on ranks\b"
                    r"|\bApplication timeout caused pair closure\b"
                    r"|Connection was likely closed\. Did the remote server", re.M)),
    # PyTorch's watchdog record alone, as a one-line paste, wherever the line holds it (after a "[BUG] " tag, an
    # issue title): "Watchdog caught collective operation timeout: WorkNCCL("; an IB transport's completion error
    # or async event alone, without NCCL's prefix ("NET/IBP:Got completion").
    (60, re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\("
                    r"|^NET/IB\w*\s*:\s*Got (?:completion (?:from peer|with)|async event)", re.M)),
    # An NCCL debug line whose host:pid:tid prefix a paste dropped ("NCCL WARN Call to ibv_modify_qp ..."), and
    # c10d's error text ("NCCL error in: .../ProcessGroupNCCL.cpp:410, unhandled system error, NCCL version 2.5.6").
    (75, re.compile(r"^NCCL (?:WARN|INFO) \S|^NCCL error in: \S+:\d+, \w", re.M)),
    # NCCL's own error texts wherever a line holds them (a framework's exception, a one-line paste, a terminal copy
    # whose lines ran together): c10d's "NCCL error ..., NCCL version x.y.z", ncclResult's name with its
    # ncclGetErrorString text, or an NCCL call "failed:" with that text (Horovod, TensorFlow).
    (70, re.compile(r"\bNCCL error\b[^\n]{0,400}?, NCCL version \d+\.\d+"
                    r"|\bnccl(?:Remote|Internal|System|UnhandledCuda)Error: (?:A call failed|Internal check failed"
                    r"|System call|Call to CUDA function failed)|\bncclInvalidUsage: This usually reflects"
                    r"|\bnccl[A-Z]\w+ failed: (?:unhandled (?:system|cuda) error|internal error"
                    r"|invalid (?:usage|argument)|remote process exited)", re.M)),
    # A framework's report of a failed NCCL call (JAX/XLA, cupy, vLLM, Horovod, TensorFlow, Paddle, torch's c10d:
    # :data:`_FRAMEWORK_RESULT`), on a line that is no author's ``#`` note: the reader skips those, and a text whose
    # only such line is a note is no log it can read.
    (70, re.compile(r"^(?!#)[^\n]*?" + _FRAMEWORK_RESULT, re.M)),
    # NCCL's RAS report (ncclras): its communicator table's header, as only it prints it.
    (80, re.compile(r"^Group\s+Comms\s+Nodes\s+Ranks\s+Ranks\s+Ranks\s+Status\s+Errors\s*$", re.M)),
    # A crash inside NCCL: the frames a signal handler printed (UCX's " 3  /opt/nccl/lib/libnccl.so(+0x120057)
    # [0x7ff1c18c1057]", Open MPI's "[host:pid] [ 3] .../libnccl.so.2(+0x...)[0x...]") name the library.
    (60, re.compile(r"^(?:\[[\w.-]+:\d+\] ?)?(?:\[ {0,3}\d{1,3}\]|\d{1,3}) +\S{0,300}libnccl\.so[\w.]{0,12}"
                    r"\([^()\n]{0,200}\) ?\[0x[0-9a-fA-F]{1,16}\]", re.M)),
    # torch's C++ exception from ProcessGroupNCCL pasted without its message: its frames and where it was raised.
    (60, re.compile(r"^(?:frame #\d+: )?c10d::ProcessGroupNCCL::\w+"
                    r"|^Exception raised from \w+ at \S*ProcessGroupNCCL\.cpp:\d+", re.M)),
)


# A CUDA error as a training job prints it (torch, cupy, JAX/XLA, TensorFlow, NCCL): CUDA's own words or names
# (:data:`CUDA_ERRORS`), the frameworks' sentences for a node without a usable GPU, or an exception whose message is
# torch's "CUDA error: <words>" (cuBLAS's "CUDA error: CUBLAS_STATUS_<NAME> when calling ..." too) or cupy's
# "<cudaError name>: <words>", on a line that is no author's note. Tried only on the lines a literal search finds
# (every such line names CUDA, cuInit or the NVIDIA driver): the long alternation at every character of a head
# without them made detection of every other kind a quarter slower.
_CUDA_SNIFF_GATE = re.compile(r"cuda|CUDA|Cuda|NVIDIA driver|cuInit")
_CUDA_SNIFF_LINE = re.compile(r"(?:" + _CUDA_TEXT + r"|CUDA unknown error - this may be due to an incorrectly)"
                              r"|^[\w.]*(?:Error|Exception): (?:CUDA error: \w|cudaError\w+: \w|CUDA_ERROR_\w+: \w)")
_CUDA_SNIFF_SCORE = 70


def _has_cuda_error_line(text: str) -> bool:
    """Whether a line of ``text`` that is no ``#`` note shows a CUDA error (:data:`_CUDA_SNIFF_LINE`)."""
    pos = 0
    while m := _CUDA_SNIFF_GATE.search(text, pos):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        line = text[start:] if end < 0 else text[start:end]
        if not line.startswith("#") and _CUDA_SNIFF_LINE.search(line):
            return True
        if end < 0:
            return False
        pos = end + 1
    return False


# torch's rank tag ("[rank3]:", "[rank3]:[E429 ...]"): any line a rank prints carries it, a Python traceback
# or a README pasted through torchrun as much as NCCL's own lines, so the sniffer reads what follows it.
_SNIFF_RANK_TAG = re.compile(r"^\[rank\d+\]:\s*")

# srun's and slurmstepd's error lines (parsers/slurm_job.py): tried after every NCCL and torch form, so a log with both
# scores as the NCCL log it also is, and after any tool whose own header is in the text.
_LOG_LINES += ((SLURM_SNIFF_SCORE, SLURM_SNIFF),)


def _message(line: str) -> str:
    """A line read past torch's rank tag and what a launcher put after it (``[rank3]:     libfabric:...``): the
    message a rank printed, where a signature anchored at the start of the tool's own line is looked for."""
    return _LAUNCHER.sub("", _SNIFF_RANK_TAG.sub("", line, count=1), count=1)


def sniff(text: str) -> int:
    """The score of the strongest log line in ``text``, read without the prefix a launcher or a paste put
    before each line (indentation, ``[1,0]<stdout>:``, ``[80746] ``, ``0: ``, torch's ``[rank3]:``)."""
    text = "\n".join(_message(line) for line in text.splitlines())
    for score, pattern in _LOG_LINES:
        if pattern.search(text):
            return score
    return _CUDA_SNIFF_SCORE if _has_cuda_error_line(text) else 0


@parser(KIND, sniff=sniff, title="NCCL / torch.distributed job log (failure signature triage)")
def parse(text: str) -> NcclLogRecord:
    """Classify every line of an NCCL / torch.distributed log into known failure signatures."""
    raw_lines = prepare(KIND, text)
    record = NcclLogRecord(lines=len(raw_lines))
    seen: dict[tuple[str, int | None, str | None, str], NcclSignature] = {}
    ranks: set[int] = set()
    hosts: set[str] = set()
    inits: dict[tuple[str | None, int | None, str], bool] = {}  # (host, pid, comm) -> Init COMPLETE seen
    ras_ranks = [0, 0]  # communicator ranks a RAS report shows past init, and still in init
    ib_in_use = False
    logical = _logical_lines(raw_lines)
    for number, line in logical:
        if line.lstrip().startswith("#") and not _RAS_ENTRY.match(line.lstrip()):
            continue
        if ras := _RAS_ROW.match(line.strip()):  # RAS's running communicators are initialised; INIT ones are not
            status = ras.group("status")
            ras_ranks[status == "INIT"] += int(ras.group("ranks")) if status != "NOCOMM" else 0
            if status == "ABORT":
                record.signatures.append(NcclSignature(kind="ras_error", rank=None, line=number,
                                                       detail=f"RAS: communicator group aborted: {line.strip()}"))
            continue
        if record.nccl_version is None and (v := _VERSION.search(line)):
            record.nccl_version = v.group("v")
        prefix = _NCCL_PREFIX.match(line)
        ib_in_use = ib_in_use or bool(_IB_IN_USE.search(line))
        if init := _COMM_INIT.search(line):
            key_init = (prefix.group("host") if prefix else None, int(prefix.group("pid")) if prefix else None,
                        init.group("comm"))
            inits[key_init] = inits.get(key_init, False) or init.group("state") == "COMPLETE"
        rank_m = _RANK.search(line)
        rank = int(rank_m.group("rank") or rank_m.group("rank2")) if rank_m else None
        if rank is not None:
            ranks.add(rank)
        host = prefix.group("host") if prefix else None
        if host is None and (h := _HOST_PREFIX.match(line)):
            host = h.group("host")
        if host:
            hosts.add(host)
        if _PY_RAISE.match(_message(line)):  # a traceback's source line: the exception's own line says it
            continue
        found = classify(_message(line) if rank_m else line)  # the rank is read; the message may follow its tag
        if found is None:
            continue
        kind, m = found
        groups = m.groupdict()
        host = groups.get("node") or host  # the node a Slurm line names
        if kind == "duplicate_gpu" and groups.get("a") is not None:
            rank = int(groups["a"])
        if groups.get("culprit"):  # monitoredBarrier names the ranks that never arrived, not the one that reports
            named = [int(r) for r in groups["culprit"].split(",")]
            ranks.update(named)
            rank = named[0] if len(named) == 1 else None
        detail = _detail(line) + (_exit_note(groups.get("code")) if kind == "rank_exited" else "")
        key = (kind, rank, host, detail)
        if key in seen:
            seen[key].count += 1
            continue
        sig = NcclSignature(kind=kind, rank=rank, detail=detail, line=number, host=host,
                            pid=int(prefix.group("pid")) if prefix else None,
                            device=int(prefix.group("dev")) if prefix else None,
                            peer=_peer(groups))
        seen[key] = sig
        record.signatures.append(sig)
    if ib_in_use:
        record.signatures = [s for s in record.signatures if s.kind != "net_plugin_fallback"]
    if any(s.kind != CONSEQUENCE for s in record.signatures):  # srun's step abort follows the failure named
        record.signatures = [s for s in record.signatures if s.kind != CONSEQUENCE]
    _judge_transport(record, logical)
    record.comms_initialised = sum(inits.values()) + ras_ranks[0]
    record.comms_unfinished = len(inits) - sum(inits.values()) + ras_ranks[1]
    root = _root_cause(raw_lines)
    if root is not None:  # the summary names the global rank its agent's "failed (exitcode ...)" line reported
        record.signatures = [s for s in record.signatures if s.kind != "rank_exited"]
        record.signatures.append(root)
        if root.rank is not None:
            ranks.add(root.rank)
    record.ranks_seen = sorted(ranks)
    record.hosts = sorted(hosts)
    if not record.signatures and not _looks_like_log(text):
        raise ParseError(KIND, "no NCCL or torch.distributed line")
    return record


def _logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    """Lines with NCCL's wrapped continuations joined to the prefixed line they continue."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, 1):
        indented = raw[:1].isspace()
        line = _LAUNCHER.sub("", raw.rstrip(), count=1)
        if not line.strip() or is_noise(line):
            continue
        if out and _NCCL_PREFIX.match(out[-1][1]) and not _STARTS_ENTRY.match(line) and not indented:
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}")
            continue
        out.append((number, line))
    return out


def _detail(line: str) -> str:
    """The message without launcher/NCCL prefixes, trimmed to a readable length."""
    text = re.sub(r"^\[rank\d+\]:\s*", "", line.strip())
    text = re.sub(r"^\[\d{4}-\d{2}-\d{2}[^\]]*\]\s*", "", text)
    text = re.sub(r"^\[[EWIF]\d{4} [^\]]*\]\s*", "", text)
    text = re.sub(r"^[\w.-]+:\d+:\d+\s+\[\d+\]\s*", "", text)
    text = re.sub(r"^\S+\.(?:cc|cpp|h|cu):\d+\s+", "", text)
    text = re.sub(r"^(?:NCCL )?(?:WARN|INFO)\s+", "", text)
    return text.strip()[:300]


def _root_cause(lines: list[str]) -> NcclSignature | None:
    """torchrun's ``Root Cause (first observed failure)`` block → the rank that died first."""
    start = next((i for i, line in enumerate(lines) if "Root Cause (first observed failure)" in line), None)
    if start is None:
        return None
    rank = code = host = None
    for line in lines[start + 1:start + 12]:
        if (m := _ROOT_RANK.match(line)) and rank is None:
            rank = int(m.group("rank"))
        elif (m := _ROOT_EXIT.match(line)) and code is None:
            code = m.group("code")
        elif (m := _ROOT_HOST.match(line)) and host is None:
            host = m.group("host")
    if rank is None:
        return None
    return NcclSignature(kind="rank_exited", rank=rank, host=host, line=start + 1,
                         detail=f"torchrun: rank {rank} exited first (exitcode {code}){_exit_note(code)}")


def _exit_note(code: str | None) -> str:
    """What torchrun's negative exit code says (elastic/multiprocessing: -N is the signal that ended the worker).
    SIGKILL is named with its usual sender as a lead, not as the finding: nothing in the log says who sent it."""
    if code is None or not code.startswith("-"):
        return ""
    number = int(code[1:])
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"; killed by signal {number}"
    if number == signal.SIGKILL:
        return (f"; killed by signal {number} ({name}): the log does not say by whom; the host's OOM killer is the "
                "usual sender (its kernel log: 'Out of memory: Killed process <pid>'), else the scheduler or an "
                "operator")
    return f"; killed by signal {number} ({name})"


def _peer(groups: dict[str, str | None]) -> str | None:
    """The peer a line names: NCCL's, gloo's ``[ip]:port``, or the c10d store's ``(host, port)`` as host:port."""
    if groups.get("store"):
        return f"{groups['store']}:{groups['store_port']}"
    return groups.get("peer") or groups.get("gpeer")


def _looks_like_log(text: str) -> bool:
    # c10d's log tag ("[W socket.cpp:663] [c10d] ..."): torch.distributed's own lines, a retry among them
    return bool(re.search(r"\bNCCL\b|torch[./]distributed|ProcessGroup|\[rank\d+\]|\[c10d\]", text))


# --- The transport NCCL chose, as its NCCL_DEBUG=INFO lines state it (docs/repertoire/nccl-info.md) -------------
# A healthy job's INFO log is no failure, but it says which transport carries each channel: a job across nodes on
# NCCL's socket transport runs, several times slower than on IB/RoCE or EFA, and nothing else in the log fails.
SOCKET_TRANSPORT = "net_socket_transport"  # channels between ranks on NET/Socket, or a job across nodes on Socket
P2P_UNAVAILABLE = "p2p_unavailable"  # GPUs of one node through host shared memory where the log says P2P is off
TRANSPORT_KINDS = (SOCKET_TRANSPORT, P2P_UNAVAILABLE)
# A channel's connection (transport/net.cc, p2p.cc, shm.cc): "Ring 00 : 0 -> 1 [send] via NET/Socket/0" (2.4),
# "Channel 00 : 0[1b000] -> 1[1b000] [send] via NET/IB/0/GDRDMA" (2.5-2.11), "Channel 00/0 : 0[0] -> 1[0] [send] via
# NET/Socket/0" (2.12+: /connIndex, 2.19+: the nvml device), "... via P2P/IPC", "... via SHM/direct/direct". The
# network's name is the plugin's own ("AWS Libfabric", "Libfabric", "OFI" for aws-ofi-nccl).
_CHANNEL = re.compile(r"\b(?:Ring|Channel) \d+(?:/\d+)? : \d+(?:\[[0-9a-fA-F]+\])? -> \d+(?:\[[0-9a-fA-F]+\])?"
                      r"(?: \[(?:send|receive)\])? via (?:NET/(?P<net>[^/\n]{1,40}?)/\d|(?P<shm>SHM)/|P2P/)")
# init.cc 2.20+: "comm 0x.. rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"; older versions state no
# node count (their "nranks" is the communicator's size), so a job across nodes is read from its channels only.
_NNODES = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank \d+ nRanks \d+ nNodes (?P<nodes>\d+)\b")
_USING_NETWORK = re.compile(r"\bUsing network (?P<net>[\w ]{1,40}?)\s*$")  # init.cc 2.6+, the comm's network
# aws-ofi-nccl's provider choice ("NET/OFI Selected Provider is efa", 1.x; "... provider is efa, fabric is efa (found
# 4 nics)", later): the plugin is in use.
_OFI_IN_USE = re.compile(r"NET/OFI Selected [Pp]rovider is \S")
# Why NCCL had no faster network, as it says: NET/IB found no HCA (net_ib.cc, every 2.x), no external plugin was
# loaded (net.cc / plugin/plugin_open.cc: "No plugin found (libnccl-net.so)", 2.19's "dlerror=... No plugin found",
# 2.23+'s "Could not find: libnccl-net.so. Using internal network plugin.", "Plugin load returned N : ..."), or the
# environment turned IB off (param.cc). "Failed to find ncclNetPlugin_vN symbol" is no cause: an older symbol of the
# same library may load on the next line.
_NO_IB_DEVICE = re.compile(r"NET/IB\s*:\s*No device found")
_NO_NET_PLUGIN = re.compile(r"NET/Plugin\s*:\s*(?:[^\n]{0,200}?No plugin found|Could not find:|Plugin load returned"
                            r"|Using internal network plugin)")
_IB_DISABLED = re.compile(r"\bNCCL_IB_DISABLE set by environment to [1-9]")
# P2P stated unavailable between GPUs of the node: cudaDeviceCanAccessPeer said no (p2p.cc 2.5+, "Could not enable
# P2P between dev 0(=1b000) and dev 1(=3d000)"), the topology ruled it out (graph/paths.cc 2.12+, "P2P is disabled
# between connected GPUs 0 and 1. You can repress ..."), or the environment did ("NCCL_P2P_DISABLE set by environment
# to 1.", param.cc).
_P2P_OFF = re.compile(r"Could not enable P2P between dev \d+|P2P is disabled between connected GPUs \d+ and \d+"
                      r"|\bNCCL_P2P_DISABLE set by environment to [1-9]")

_TRANSPORT_FACTS = (("no_ib", _NO_IB_DEVICE), ("no_plugin", _NO_NET_PLUGIN), ("ib_disabled", _IB_DISABLED),
                    ("p2p_off", _P2P_OFF), ("ofi", _OFI_IN_USE))


def _judge_transport(record: NcclLogRecord, lines: list[tuple[int, str]]) -> None:
    """Add what the log states about the transport NCCL chose: :data:`SOCKET_TRANSPORT` where a channel goes via
    NET/Socket, or a communicator across nodes (nNodes > 1) uses network Socket and no channel shows another; and
    :data:`P2P_UNAVAILABLE` where a channel goes via SHM and the log says P2P is off. Nothing is read from host
    names or rank counts: a log that states neither its node count nor a network channel is not judged on it.
    A plugin fall-back stated on one node, or one this finding already names as the cause, is no second warning."""
    first: dict[str, tuple[int, str]] = {}  # what was stated -> its first (line, text)
    nets: set[str] = set()  # networks the channels use
    nodes = 0
    for number, line in lines:
        if line.lstrip().startswith("#"):
            continue
        if " via " in line and (ch := _CHANNEL.search(line)):
            what = f"net:{ch.group('net').strip()}" if ch.group("net") else ("shm" if ch.group("shm") else "p2p")
            if what.startswith("net:"):
                nets.add(what[4:])
            first.setdefault(what, (number, line))
            continue
        if "nNodes" in line and (n := _NNODES.search(line)):
            nodes = max(nodes, int(n.group("nodes")))
        if "Using network" in line and (u := _USING_NETWORK.search(line)):
            first.setdefault(f"using:{u.group('net')}", (number, line))
        for key, pattern in _TRANSPORT_FACTS:
            if key not in first and pattern.search(line):
                first[key] = (number, line)
    using = {k[6:] for k in first if k.startswith("using:")}
    socket = first.get("net:Socket")
    if socket is None and nodes > 1 and using == {"Socket"} and nets <= {"Socket"} and "ofi" not in first:
        socket = first["using:Socket"]
    found: list[NcclSignature] = []
    if socket is not None:
        found.append(_transport_signature(SOCKET_TRANSPORT, socket, _socket_detail(socket[1], nodes, first)))
    if "shm" in first and "p2p_off" in first:
        shm, off = first["shm"], first["p2p_off"]
        found.append(_transport_signature(P2P_UNAVAILABLE, shm, f"{_detail(shm[1])}; P2P is off: {_detail(off[1])}"))
    if socket is not None or (nodes == 1 and not nets):
        record.signatures = [s for s in record.signatures if s.kind != "net_plugin_fallback"]
    record.signatures.extend(found)


def _socket_detail(line: str, nodes: int, first: dict[str, tuple[int, str]]) -> str:
    """The socket finding's words: the line that states it, the node count, and the causes the log states."""
    causes = [why for key, why in (("no_ib", "NET/IB found no device (no InfiniBand/RoCE HCA visible to NCCL)"),
                                   ("ib_disabled", "NCCL_IB_DISABLE is set"),
                                   ("no_plugin", "no external net plugin was loaded (aws-ofi-nccl on EFA)"))
              if key in first]
    across = f" ({nodes} nodes)" if nodes > 1 else ""
    return f"{_detail(line)}{across}; {'; '.join(causes) if causes else 'the log does not say why'}"


def _transport_signature(kind: str, at: tuple[int, str], detail: str) -> NcclSignature:
    """One transport finding at the line that states it, with NCCL's prefix read for where."""
    prefix = _NCCL_PREFIX.match(at[1])
    return NcclSignature(kind=kind, rank=None, detail=detail[:300], line=at[0],
                         host=prefix.group("host") if prefix else None,
                         pid=int(prefix.group("pid")) if prefix else None,
                         device=int(prefix.group("dev")) if prefix else None)

