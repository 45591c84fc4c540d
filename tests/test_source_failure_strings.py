"""Failure lines the tools' own source can print, judged alone and inside a realistic surrounding.

The field corpus teaches the readers one example at a time; the tools' source says what they can
print. Each line below is a format string from that source (the file and commit are cited per group)
rendered with plausible values (host, pid, device, file:line, ranks, addresses, errno texts). Each is
judged through the real ``gpu-preflight judge`` path (bench_field's :func:`judge`), pasted (a) alone
and (b) inside what the tool prints around it (an NCCL INFO preamble, an nccl-tests header, a
perftest banner, a dcgmi command line), and must be: recognised as its tool (the kinds listed per
tool), never PASS (exit 0), and of the status the message means: a transport or hardware failure
FAIL, a refusal to run ERROR (a job log that stopped on a configuration error is a failed job:
FAIL, as NCCL's invalid usage always was), a hint at most WARN.

Sources (``fetch``ed snapshots; the commit is the snapshot's HEAD):

- NCCL: github.com/NVIDIA/nccl @ 5067397c2676d5aed50042fc39e5c8ee96eb0027 (BSD-3-Clause)
- nccl-tests: github.com/NVIDIA/nccl-tests @ a0b82b2260cf5152b9f8c061bbf7eaf0ba096432 (BSD-3-Clause)
- perftest: github.com/linux-rdma/perftest @ 00b55b6660d0170dabe2c1b49193e8fbe265086e (BSD-2 / GPL-2.0)
- DCGM: github.com/NVIDIA/DCGM @ 72fa3feaa67d716a75323a8f47c34ff3ee73f824 (Apache-2.0)

Lines deliberately not judged (debug chatter, not a failure) are in :data:`NOT_JUDGED` with the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_field import Case, Outcome, judge

FAIL = frozenset({"FAIL"})
REFUSED = frozenset({"ERROR"})  # a tool that refused to run: nothing measured
JOB_REFUSED = frozenset({"FAIL", "ERROR"})  # a job (or test) that stopped on its configuration
HINT = frozenset({"WARN"})

# NCCL's debug prefix (debug.cc: "%s:%d:%d [%d] %s:%d NCCL WARN "): host:pid:tid [cudaDev] file:line.
_NCCL = "gpu-node-07:48213:48390 [3] {where} NCCL WARN {msg}"

# (source file:line, where the WARN's __FILE__ renders, message as rendered, statuses allowed)
NCCL_WARNS: tuple[tuple[str, str, str, frozenset[str]], ...] = (
    # src/transport/net_ib/p2p.cc:688 and gin.cc:749 (completion errors) @5067397c
    ("net_ib/p2p.cc:688", "transport/net_ib/p2p.cc:688",
     "NET/IB: Got completion from peer 10.12.0.8<45112> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) "
     "vendor_err=129 localGid ::ffff:10.12.0.7 remoteGids::ffff:10.12.0.8 hca mlx5_2", FAIL),
    ("net_ib/p2p.cc:688", "transport/net_ib/p2p.cc:688",
     "NET/IB: Got completion from peer 10.12.0.8<45112> with status=IBV_WC_REM_ACCESS_ERR(10) "
     "opcode=IBV_WC_RDMA_WRITE(1) vendor_err=136 hca mlx5_0", FAIL),
    ("net_ib/gin.cc:749", "transport/net_ib/gin.cc:749",
     "NET/IB/GIN: Got completion from peer 10.12.0.8<45112> with status=5 opcode=0 len=0 vendor err 249 "
     "(Recv) hca mlx5_1", FAIL),
    ("net_ib/p2p.cc:854", "transport/net_ib/p2p.cc:854",
     "NET/IB: Got CQE with error (devIndex=0, req=0x7f3a2c001200, comm=0x7f3a2c000e00 (recv), wr_id=17, qp_num=4711)",
     FAIL),
    ("net_ib/p2p_resiliency.cc:47", "transport/net_ib/p2p_resiliency.cc:47",
     "NET/IB: Fatal error. Detected 2 failed devices out of 2 devices on the send communicator (comm=0x55d0c4a1e0). "
     "No device left to use", FAIL),
    # src/transport/net_ib/common.cc:123-184 (async events) @5067397c
    ("net_ib/common.cc:123", "transport/net_ib/common.cc:123",
     "NET/IB : mlx5_0:1 async fatal event: local catastrophic error", FAIL),
    ("net_ib/common.cc:140", "transport/net_ib/common.cc:140",
     "NET/IB : mlx5_3:1 async fatal event on QP (0x55d0c4a1e0) qpn=4711 handle=3 send_cq=12 recv_cq=12 state=6 "
     "sq_psn=0: local work queue catastrophic error", FAIL),
    ("net_ib/common.cc:179", "transport/net_ib/common.cc:179",
     "NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)", FAIL),
    ("net_ib/common.cc:32", "transport/net_ib/common.cc:32",
     "communicator encountered a fatal error (detected in ncclIbTest)", FAIL),
    # src/misc/ibvwrap.cc:42-88, 376; src/include/ibvwrap.h:63-90; src/misc/mlx5dvwrap.cc:40 (verbs calls) @5067397c
    ("misc/ibvwrap.cc:376", "misc/ibvwrap.cc:376",
     "Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR, "
     "local GID index 3, local GID ::ffff:10.12.0.7, remote GID ::ffff:10.12.0.8", FAIL),
    ("misc/ibvwrap.cc:42", "misc/ibvwrap.cc:42", "Call to ibv_reg_mr failed with error Cannot allocate memory", FAIL),
    ("misc/ibvwrap.cc:68", "misc/ibvwrap.cc:68",
     "Call to ibv_reg_dmabuf_mr failed with error Bad address errno 14", FAIL),
    ("misc/ibvwrap.cc:51", "misc/ibvwrap.cc:51", "Call to ibv_create_cq failed", FAIL),
    ("include/ibvwrap.h:63", "include/ibvwrap.h:63", "Call to ibv_poll_cq() returned -1", FAIL),
    ("include/ibvwrap.h:80", "include/ibvwrap.h:80",
     "ibv_post_send() failed with error Cannot allocate memory, Bad WR 0x7f3a2c001200, First WR 0x7f3a2c001200", FAIL),
    ("misc/mlx5dvwrap.cc:40", "misc/mlx5dvwrap.cc:40",
     "NET/MLX5: Call to mlx5dv_reg_dmabuf_mr failed with error Operation not supported", FAIL),
    ("net_ib/connect.cc:372", "transport/net_ib/connect.cc:372",
     "NET/IB: mlx5dv_create_qp failed to create QP: Cannot allocate memory", FAIL),
    # src/transport/net_ib/init.cc:307-360, connect.cc:987/1034 (devices NCCL cannot use) @5067397c
    ("net_ib/init.cc:334", "transport/net_ib/init.cc:334", "NET/IB : Unable to open device mlx5_4", FAIL),
    ("net_ib/init.cc:350", "transport/net_ib/init.cc:350", "NET/IB : Unable to query device mlx5_4", FAIL),
    ("net_ib/init.cc:307", "transport/net_ib/init.cc:307", "NET/IB : No IP interface found.", JOB_REFUSED),
    ("net_ib/connect.cc:987", "transport/net_ib/connect.cc:987",
     "NET/IB : Attempted to connect incompatible devices: [0]mlx5_0:1/IB and [1]mlx5_1:1/RoCE. Try selecting NICs of "
     "only one link type using NCCL_IB_HCA", JOB_REFUSED),
    ("net_ib/connect.cc:1034", "transport/net_ib/connect.cc:1034",
     "NET/IB : Remote IB device is incompatible with the local [0]mlx5_0:1/RoCE. Try selecting NICs of only one link "
     "type using NCCL_IB_HCA", JOB_REFUSED),
    # src/os/linux.cc:302-362, src/misc/socket.cc:58, src/transport/net_socket.cc:325/636 (sockets) @5067397c
    ("os/linux.cc:302", "os/linux.cc:302",
     "ncclSocketConnect: connect to 10.12.0.8<43125> failed : Connection refused", FAIL),
    ("os/linux.cc:302", "os/linux.cc:302",
     "ncclSocketConnect: connect to 10.12.0.8<43125> failed : Software caused connection abort", FAIL),
    ("os/linux.cc:328", "os/linux.cc:328",
     "ncclOsSocketPollConnect to 10.12.0.8<43125> failed with error Connection timed out", FAIL),
    ("os/linux.cc:362", "os/linux.cc:362",
     "ncclOsSocketProgressOpt: Call to recv from 10.12.0.8<43125> failed : Connection reset by peer", FAIL),
    ("os/linux.cc:362", "os/linux.cc:362",
     "ncclOsSocketProgressOpt: Call to send to 10.12.0.8<43125> failed : Broken pipe", FAIL),
    ("misc/socket.cc:58", "misc/socket.cc:58",
     "socketProgress: Connection closed by remote peer gpu-node-08.cluster<43125>", FAIL),
    ("net_socket.cc:325", "transport/net_socket.cc:325", "NET/Socket : socket progress error", FAIL),
    ("net_socket.cc:636", "transport/net_socket.cc:636",
     "NET/Socket : peer 10.12.0.8<43125> message truncated : receiving 1048576 bytes instead of 65536. If you believe "
     "your socket network is in a healthy state, there may be a mismatch in collective sizes or environment settings "
     "(e.g. NCCL_PROTO, NCCL_ALGO) between ranks", FAIL),
    ("proxy.cc:1385", "proxy.cc:1385", "Socket recv failed while polling for opId=0x7f3a2c001200", FAIL),
    # src/bootstrap.cc:114-579, src/misc/socket.cc:246-290 (bootstrap and its interface) @5067397c
    ("bootstrap.cc:126", "bootstrap.cc:126", "Bootstrap : no socket interface found", JOB_REFUSED),
    ("bootstrap.cc:120", "bootstrap.cc:120", "NET/Socket : No usable listening interface found", JOB_REFUSED),
    ("net_socket.cc:61", "transport/net_socket.cc:61", "NET/Socket : no interface found", JOB_REFUSED),
    ("bootstrap.cc:577", "bootstrap.cc:577",
     "no device found matching exactly ens9f0, verify NCCL_OOB_NET_IFNAME", JOB_REFUSED),
    ("bootstrap.cc:114", "bootstrap.cc:114",
     "Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or [<ipv6>]:<port> or <hostname>:<port>", JOB_REFUSED),
    ("misc/socket.cc:257", "misc/socket.cc:257",
     "Net : error encountered when getting address info : Name or service not known", JOB_REFUSED),
    ("bootstrap.cc:224", "bootstrap.cc:224", "Message truncated : received 256 bytes instead of 4", JOB_REFUSED),
    ("bootstrap.cc:348", "bootstrap.cc:348",
     "Bootstrap Root : rank 3 of 16 ranks has already checked in", JOB_REFUSED),
    # src/proxy.cc:1861-1905 (the proxy thread's failures; res/retcode is an ncclResult_t) @5067397c
    ("proxy.cc:1905", "proxy.cc:1905",
     "[Proxy Service 8] Failed to execute operation Connect from rank 8, retcode 6", FAIL),
    ("proxy.cc:1861", "proxy.cc:1861",
     "[Service thread] Error encountered progressing operation=Connect, res=3, closing connection", FAIL),
    ("proxy.cc:585", "proxy.cc:585", "Rank 3 has no transport for send peer 11 on channel 0/1", FAIL),
    # src/init.cc (communicator setup refused) @5067397c
    ("init.cc:1043", "init.cc:1043",
     "Mismatched NCCL version detected : rank 0 version 22105 rank 8 version 21903", JOB_REFUSED),
    ("init.cc:1057", "init.cc:1057",
     "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this feature",
     JOB_REFUSED),
    ("init.cc:1339", "init.cc:1339",
     "Detected mixed local Net device counts across ranks (min 4, max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to ignore",
     JOB_REFUSED),
    ("init.cc:2501", "init.cc:2501", "Invalid rank requested : 8/8", JOB_REFUSED),
    ("init.cc:2314", "init.cc:2314", "Invalid config blocking attribute value 2", JOB_REFUSED),
    # src/misc/argcheck.cc:16-223 (a collective's arguments) @5067397c
    ("misc/argcheck.cc:204", "misc/argcheck.cc:204",
     "Broadcast : invalid root 9 (root should be in the 0..7 range)", JOB_REFUSED),
    ("misc/argcheck.cc:32", "misc/argcheck.cc:32", "AllReduce : sendbuff argument is NULL", JOB_REFUSED),
    ("misc/argcheck.cc:24", "misc/argcheck.cc:24",
     "AllGather : recvbuff allocated on device 1 mismatchs with NCCL device 0", JOB_REFUSED),
    # src/include/checks.h:18-271, alloc.h:159-520, cudawrap.h:37 (CUDA, memory, system calls) @5067397c
    ("include/checks.h:18", "include/checks.h:18", "Cuda failure 'an illegal memory access was encountered'", FAIL),
    ("include/cudawrap.h:37", "include/cudawrap.h:37", "Cuda failure 2 'out of memory'", FAIL),
    ("include/alloc.h:462", "include/alloc.h:462", "Failed to CUDA malloc 2097152 bytes", FAIL),
    ("include/alloc.h:159", "include/alloc.h:159", "Failed to CUDA host alloc 4194304 bytes", FAIL),
    ("include/alloc.h:178", "include/alloc.h:178", "Failed to malloc 1048576 bytes", FAIL),
    ("include/checks.h:63", "include/checks.h:63",
     "Call to posix_fallocate failed: No space left on device", FAIL),
    ("include/checks.h:242", "include/checks.h:242", "Thread creation failed: Resource temporarily unavailable", FAIL),
    ("os/linux.cc:842", "os/linux.cc:842",
     "Error while creating shared memory segment /dev/shm/nccl-Xb3k2a (size 9637888), error: No space left on device "
     "(28)", FAIL),
    ("os/linux_ipcsocket.cc:68", "os/linux_ipcsocket.cc:68",
     "UDS: Binding to socket /tmp/nccl-socket-3-5f2a failed : Address already in use (98)", FAIL),
    ("misc/utils.cc:318", "misc/utils.cc:318",
     "Unrecoverable error detected: malloc(size=1048576) returned null.", FAIL),
    ("transport/p2p.cc:355", "transport/p2p.cc:355",
     "failed to peer with device 1(=1b000): 217 peer access is not supported between these two devices", FAIL),
    ("transport/p2p.cc:250", "transport/p2p.cc:250", "cudaIpcGetMemHandle failed : invalid argument", FAIL),
    ("transport/nvls.cc:376", "transport/nvls.cc:376",
     "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1073741824 : CUDA error 2 'out of memory'.", FAIL),
    # src/misc/nvmlwrap.cc:142-209 (NVML under NCCL) @5067397c
    ("misc/nvmlwrap.cc:142", "misc/nvmlwrap.cc:142", "nvmlInit_v2() failed: Driver Not Loaded", FAIL),
    ("misc/nvmlwrap.cc:166", "misc/nvmlwrap.cc:166", "nvmlDeviceGetHandleByIndex(3) failed: Unknown Error", FAIL),
    # src/plugin/net.cc:349 @5067397c
    ("plugin/net.cc:349", "plugin/net.cc:349", "Failed to initialize any NET plugin", FAIL),
    # hints: NCCL corrected a setting and went on (src/transport/net_socket.cc:353) @5067397c
    ("net_socket.cc:353", "transport/net_socket.cc:353",
     "NET/Socket : NCCL_SOCKET_NTHREADS is greater than the maximum allowed, setting to 16", HINT),
)

# NCCL_DEBUG=INFO's preamble of a job that got as far as its transports (init.cc, bootstrap.cc, net_ib/init.cc).
NCCL_PREAMBLE = """\
gpu-node-07:48213:48213 [3] NCCL INFO Bootstrap : Using ens9f0:10.12.0.7<0>
gpu-node-07:48213:48213 [3] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
gpu-node-07:48213:48390 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ens9f0:10.12.0.7<0>
gpu-node-07:48213:48390 [3] NCCL INFO Using network IB
gpu-node-07:48213:48390 [3] NCCL INFO comm 0x55d0c4a1e0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 5d000 commId \
0x8f3c2a1b4d5e6f70 - Init START
gpu-node-07:48213:48390 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/0
"""

# nccl-tests' abort lines: src/common.h:34 (CUDACHECK), :47 (NCCLCHECK >= 2.13), :61 (older), :86 (TESTCHECK),
# src/common.cu:523 (timeout), :1060/1408/1414 (refusals) @a0b82b22
NCCL_TESTS_LINES: tuple[tuple[str, frozenset[str]], ...] = (
    ("gpu-node-07: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / "
     "Call to ibv_reg_mr failed with error Cannot allocate memory'", FAIL),
    ("gpu-node-07: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / NET/IB: Got "
     "completion from peer 10.12.0.8<45112> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129'",
     FAIL),
    ("gpu-node-07: Test NCCL failure common.cu:1005 'internal error - please report this issue to the NCCL "
     "developers / '", FAIL),
    ("gpu-node-07: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / "
     "Cuda failure 'an illegal memory access was encountered''", FAIL),
    ("gpu-node-07: Test NCCL failure common.cu:1005 'invalid usage (run with NCCL_DEBUG=WARN for details) / "
     "Invalid rank requested : 8/8'", JOB_REFUSED),
    ("gpu-node-07: Test NCCL failure common.cu:955 'unhandled system error'", FAIL),
    ("gpu-node-07: Test CUDA failure common.cu:891 'out of memory'", FAIL),
    ("gpu-node-07: Test CUDA failure all_reduce.cu:44 'an illegal memory access was encountered'", FAIL),
    (" .. gpu-node-07 pid 48213: Test failure common.cu:401", FAIL),
    ("gpu-node-07: Test timeout (600s) common.cu:523", FAIL),
    ("Incompatible NCCL versions. nccl-tests was compiled with NCCL 2.28, but is running with NCCL 22105. Please "
     "recompile nccl-tests against the NCCL version you are running.", JOB_REFUSED),
    ("invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 8", JOB_REFUSED),
    ("device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)", JOB_REFUSED),
)

NCCL_TESTS_HEADER = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  48213 on gpu-node-07 device  0 [0x1b] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  48214 on gpu-node-07 device  1 [0x43] NVIDIA H100 80GB HBM3
"""

# perftest's stderr failure lines: src/perftest_communication.c, perftest_resources.c, perftest_parameters.c,
# write_bw.c / send_bw.c / read_bw.c (fprintf(stderr, ...)) @00b55b66
PERFTEST_LINES: tuple[tuple[str, frozenset[str]], ...] = (
    (" Couldn't get context for the device", FAIL),
    (" Failed to exchange data between server and clients", FAIL),
    (" Unable to set up socket connection", FAIL),
    (" Unable to init the socket connection", FAIL),
    ("Couldn't connect to 10.12.0.8:18515", FAIL),
    (" Unable to Connect the HCA's through the link", FAIL),
    (" Couldn't create IB resources", FAIL),
    (" Unable to find the Infiniband/RoCE device", FAIL),
    ("IB device mlx5_9 not found", FAIL | REFUSED),
    ("No such device ID (9) exists in system", FAIL | REFUSED),
    ("\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n", FAIL),
    (" Unable to create RDMA_CM resources", FAIL),
    ("poll CQ failed 1", FAIL),
    ("Poll Receive CQ failed -1", FAIL),
    (" Bad wc status 12", FAIL),
    ("Bad wc status -- 12 -- 0 ", FAIL),
    ("Completion with error at client\nFailed status 12: wr_id 0 syndrom 0x81\nscnt=128, ccnt=0", FAIL),
    ("Couldn't post send: qp 0 scnt=128 || err=12 tx_depth=128", FAIL),
    ("Couldn't post recv Qp=0 rcnt=0", FAIL),
    (" Failed to post receive recv_wqes", FAIL),
    ("Couldn't allocate MR", FAIL),
    ("Couldn't create CQ", FAIL),
    ("Couldn't request CQ notification", FAIL),
    ("Problem in resolving basic address and port", FAIL),
    ("rdma_resolve_addr failed", FAIL),
    (" Unable to read from socket/rdma_cm", FAIL),
    ("Failed to sync between server and client between different msg sizes", FAIL),
    (" Failed to complete run_iter_bw function successfully", FAIL),
    ("Problems with warm up", FAIL),
    (" Couldn't set the link layer", FAIL),
    (" Port number 1 state is Down", FAIL),
    ("Error: BW result is below bw limit", FAIL | HINT),
    ("Couldn't init GPU context: 100", FAIL),
    ("DMA-BUF is not supported on this GPU", FAIL | REFUSED),
    (" Parser function exited with Error", FAIL | REFUSED),
)

PERFTEST_BANNER = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : mlx5_0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 TX depth        : 128
 CQ Moderation   : 1
 Mtu             : 4096[B]
 Link type       : IB
---------------------------------------------------------------------------------------
"""

# dcgmi's refusals: dcgmi/Command.cpp:60-105 (connection), dcgmi/Diag.cpp:392-1431 (diag), dcgmi/Group.cpp,
# dcgmi/Health.cpp, dcgmi/ProcessStats.cpp, dcgmi/DeviceMonitor.cpp ("Error: ... Return: <errorString>") @72fa3fea
DCGMI_LINES: tuple[tuple[str, str], ...] = (
    ("dcgmi diag -r 3", "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."),
    ("dcgmi discovery -l", "Error: unable to establish a connection to the specified host: 10.12.0.7"),
    ("dcgmi diag -r 1", "Error: unable to initialize DCGM"),
    ("dcgmi diag -r 3", "Error: Unable to start an embedded host engine. Host engine is not valid."),
    ("dcgmi diag -r 3", "Error: Diagnostic can only be performed on a homogeneous group of GPUs."),
    ("dcgmi diag -r 3", "Error: Diagnostic could not be run while DCGM is paused."),
    ("dcgmi diag -r 3", "Error: Unable to install diagnostic signal handlers."),
    ("dcgmi diag -r 3",
     "Error: Unable to complete diagnostic for group 2147483647. Return: (-29) : Couldn't find the nvvs binary"),
    ("dcgmi diag -r 3 -i 0", "Error: Unable to complete diagnostic for entities 0. Return: (-3) : Bad parameter passed "
     "to function"),
    ("dcgmi diag -r 3", "Error: Unsupported entities are indicated."),
    ("dcgmi discovery -l", "Error: dcgmGetAllSupportedDevices() returned 0 devices"),
    ("dcgmi group -c mygpus", "Error: could not create group with name: mygpus. Return: Host engine connection "
     "invalid/disconnected"),
    ("dcgmi health -c", "Error: could not check Health information for group: 0. Return: No data is available"),
    ("dcgmi health -s a", "Error: Unable to set health watches. Return: This request is serviced by a module of DCGM "
     "that is not currently loaded"),
    ("dcgmi stats -j 7", "Error: Unable to retrieve job statistics. Return: No data is available"),
    ("dcgmi discovery -i a", "Error: Unable to get GPU info. Return: Host engine connection invalid/disconnected."),
    ("dcgmi nvlink -e -g 0", "Error: Unable to retreive latest value for nvlink error counts. Return: No data is "
     "available"),
)

# What the tools print that is no failure of theirs and is not judged (the reason stated).
NOT_JUDGED: tuple[tuple[str, str, str], ...] = (
    ("NCCL", "gpu-node-07:48213:48390 [3] NCCL INFO Call to connect returned Connection refused, retrying",
     "misc/socket.cc's retry chatter: NCCL retries until NCCL_SOCKET_RETRY_CNT runs out and only then WARNs"),
    ("NCCL", "gpu-node-07:48213:48213 [3] NCCL INFO NET/IB : No device found.",
     "INFO: a host without InfiniBand uses sockets by design; only a profile that expects IB can call it a fault"),
    ("NCCL", "gpu-node-07:48213:48390 [3] NCCL INFO NCCL_IB_HCA set to mlx5_0",
     "an environment setting echoed at init"),
    ("nccl-tests", " rank=3 elt[12]: want=0x3f800000 got=0x40000000",
     "common.cu:465 prints it only in a debug build's element dump; the '#wrong' column is what a run reports"),
    ("perftest", " Changing to this MTU", "perftest adjusted its own parameter and ran on"),
)


def _judge(tmp_path: Path, name: str, text: str) -> Outcome:
    """``gpu-preflight judge FILE`` on ``text`` (bench_field's in-process command)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return judge(Case("source", path, "source-strings", "rendered from the tool's source", "FAIL"))


def _check(outcome: Outcome, kinds: set[str], allowed: frozenset[str], what: str) -> None:
    assert outcome.exit_code != 0, (what, outcome.summaries)
    assert outcome.kind in kinds, (what, outcome.kind, outcome.summaries)
    assert outcome.got in allowed, (what, outcome.got, sorted(allowed), outcome.summaries)


@pytest.mark.parametrize(("origin", "where", "msg", "allowed"), NCCL_WARNS, ids=[f"{o}:{m[:40]}" for o, _, m, _
                                                                                   in NCCL_WARNS])
def test_nccl_warn(tmp_path: Path, origin: str, where: str, msg: str, allowed: frozenset[str]) -> None:
    line = _NCCL.format(where=where, msg=msg)
    _check(_judge(tmp_path, "alone.log", line + "\n"), {"nccl-log"}, allowed, f"alone: {line}")
    _check(_judge(tmp_path, "job.log", NCCL_PREAMBLE + line + "\n"), {"nccl-log"}, allowed, f"in a log: {line}")


@pytest.mark.parametrize(("line", "allowed"), NCCL_TESTS_LINES, ids=[t[:50] for t, _ in NCCL_TESTS_LINES])
def test_nccl_tests_abort(tmp_path: Path, line: str, allowed: frozenset[str]) -> None:
    kinds = {"nccl-tests", "nccl-log"}  # an abort that names NCCL's failure is triaged as the job log it is
    _check(_judge(tmp_path, "alone.txt", line + "\n"), kinds, allowed, f"alone: {line}")
    _check(_judge(tmp_path, "run.txt", NCCL_TESTS_HEADER + line + "\n"), kinds, allowed, f"in a run: {line}")


@pytest.mark.parametrize(("line", "allowed"), PERFTEST_LINES, ids=[t.strip()[:50] for t, _ in PERFTEST_LINES])
def test_perftest_failure(tmp_path: Path, line: str, allowed: frozenset[str]) -> None:
    _check(_judge(tmp_path, "alone.txt", line + "\n"), {"perftest"}, allowed, f"alone: {line}")
    _check(_judge(tmp_path, "run.txt", "$ ib_write_bw -d mlx5_0 10.12.0.8\n" + PERFTEST_BANNER + line + "\n"),
           {"perftest"}, allowed, f"in a run: {line}")


@pytest.mark.parametrize(("command", "line"), DCGMI_LINES, ids=[t[:50] for _, t in DCGMI_LINES])
def test_dcgmi_refusal(tmp_path: Path, command: str, line: str) -> None:
    _check(_judge(tmp_path, "alone.txt", line + "\n"), {"dcgmi-diag"}, REFUSED, f"alone: {line}")
    _check(_judge(tmp_path, "run.txt", f"$ {command}\n{line}\n"), {"dcgmi-diag"}, REFUSED, f"after {command}: {line}")


def test_the_table_covers_the_four_tools() -> None:
    """At least 60 distinct source strings across NCCL, nccl-tests, perftest and DCGM."""
    strings = {m for _, _, m, _ in NCCL_WARNS} | {t for t, _ in NCCL_TESTS_LINES} | {t for t, _ in PERFTEST_LINES} \
        | {t for _, t in DCGMI_LINES}
    assert len(strings) >= 60
    assert min(len(NCCL_WARNS), len(NCCL_TESTS_LINES), len(PERFTEST_LINES), len(DCGMI_LINES)) >= 10


@pytest.mark.parametrize(("tool", "line", "why"), NOT_JUDGED, ids=[t[1][:50] for t in NOT_JUDGED])
def test_chatter_is_no_failure(tmp_path: Path, tool: str, line: str, why: str) -> None:
    """Debug chatter alone is never a FAIL: it states no failure (it may be unrecognised or unjudged)."""
    outcome = _judge(tmp_path, "chatter.txt", line + "\n")
    assert outcome.got != "FAIL", (tool, line, why, outcome.summaries)


def test_a_relay_after_the_results_is_the_final_check_not_another_failure(tmp_path: Path) -> None:
    """TESTCHECK's relay ends every run whose final check failed (common.cu exits on #wrong or on an average
    bandwidth below -c): with result rows it adds no finding of its own; without them it is the failure."""
    table = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
             "   busbw  #wrong\n"
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)"
             "  (GB/s)\n"
             "    33554432       8388608     float     sum      -1    25.70  1305.8  1305.8       0    25.19  1332.0"
             "  1332.0       0\n"
             "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1318.9\n#\n")
    relay = " .. gpu-node-07 pid 48213: Test failure common.cu:1126\n"
    with_rows = _judge(tmp_path, "rows.txt", NCCL_TESTS_HEADER + table + relay)
    assert not any("relay" in s for s in with_rows.summaries), with_rows.summaries
    alone = _judge(tmp_path, "alone.txt", NCCL_TESTS_HEADER + relay)
    assert alone.got == "FAIL" and any("relay" in s for s in alone.summaries), alone.summaries


def test_a_connect_reset_by_its_peer_is_the_peer_that_went_away(tmp_path: Path) -> None:
    """Any errno after 'connect to <peer> failed' is a failed connection, but a reset is the peer going away."""
    line = _NCCL.format(where="misc/socket.cc:484", msg="Net : Connect to 10.12.0.8<40537> failed : Connection reset "
                                                         "by peer")
    outcome = _judge(tmp_path, "reset.log", line + "\n")
    assert outcome.got == "FAIL" and any("remote_error" in s or "peer rank died" in s for s in outcome.summaries), \
        outcome.summaries
