"""CUDA's own error words and names, as a training job prints them: which say more about the node than "a
CUDA call failed" (docs/repertoire/cuda-errors.md). Data only: the job-log reader (:mod:`.nccl_log`) matches
:data:`CUDA_TEXT_PATTERN` and names the signature by :data:`CUDA_ERROR_KINDS`.
"""

from __future__ import annotations

import re

__all__ = ["CUDA_ERRORS", "CUDA_ERROR_KINDS", "CUDA_TEXT_PATTERN", "SENTENCES"]

# The CUDA errors that say more about the node than "a CUDA call failed" (docs/repertoire/cuda-errors.md): (the
# signature, cudaError_t's name (driver_types.h), CUresult's name (cuda.h), cudaGetErrorString/cuGetErrorString's
# words, CUDA 11-13). An uncorrectable ECC or NVLink error is the hardware fault of Xid 48/94/95 and 74; no device,
# a driver older than the runtime or a forward-compatibility library on a GPU that has none are the node's driver
# state (nvidia-smi's no_devices/nvml_init_failed); the kernel faults (Xid 13/31/43's kind) are the job's own code.
# Any other CUDA error stays ``cuda_error``; "out of memory" is ``out_of_memory``.
CUDA_ERRORS: tuple[tuple[str, str, str, str], ...] = (
    ("cuda_ecc_uncorrectable", "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
     "uncorrectable ECC error encountered"),
    ("cuda_nvlink_uncorrectable", "cudaErrorNvlinkUncorrectable", "CUDA_ERROR_NVLINK_UNCORRECTABLE",
     "uncorrectable NVLink error detected during the execution"),
    ("cuda_no_device", "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
    ("cuda_driver_mismatch", "cudaErrorInsufficientDriver", "",  # the driver API has no such result
     "CUDA driver version is insufficient for CUDA runtime version"),
    ("cuda_driver_mismatch", "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"),
    ("cuda_driver_mismatch", "cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"),
    ("cuda_kernel_fault", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"),
    ("cuda_kernel_fault", "cudaErrorAssert", "CUDA_ERROR_ASSERT", "device-side assert triggered"),
    ("cuda_kernel_fault", "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"),
    ("cuda_kernel_fault", "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
     "an illegal instruction was encountered"),
    ("cuda_kernel_fault", "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"),
    ("cuda_kernel_fault", "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"),
    ("cuda_kernel_fault", "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", "invalid program counter"),
    ("cuda_kernel_fault", "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
    ("cuda_kernel_fault", "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT",
     "the launch timed out and was terminated"),
    ("cuda_kernel_fault", "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"),
)
CUDA_ERROR_KINDS = {key: kind for kind, runtime, driver, words in CUDA_ERRORS for key in (runtime, driver, words)
                    if key}
# The frameworks' own sentences for the same states: torch's (c10/cuda/CUDAFunctions.cpp device_count_impl,
# torch/cuda/__init__.py): no driver at all, a driver older than the build's CUDA, cudaErrorInitializationError at
# cudaGetDeviceCount, no GPU; TensorFlow/XLA's cuInit that could not load libcuda (stream_executor cuda_driver.cc:
# "failed call to cuInit: UNKNOWN ERROR (303)", since 2024 after "INTERNAL: CUDA error: Failed call to cuInit: ").
SENTENCES = (("cuda_no_device", "Found no NVIDIA driver on your system"),
              ("cuda_driver_mismatch", "The NVIDIA driver on your system is too old"),
              ("cuda_no_device", "CUDA driver initialization failed, you might not have a CUDA gpu"),
              ("cuda_no_device", "No CUDA GPUs are available"),
              ("cuda_no_device", "all to cuInit: UNKNOWN ERROR (303)"))
CUDA_ERROR_KINDS.update({words: kind for kind, words in SENTENCES})
# Where CUDA's words are printed: torch's C10_CUDA_CHECK "CUDA error: ", THC's "cuda runtime error (N) : " and
# "THCudaCheck FAIL file=... line=... error=N : ", its cudaGetDeviceCount failure "Error N: ", NCCL's "Cuda failure
# [N] '", TensorFlow's "cudaGetDevice() failed. Status: ", cupy's "cudaError<Name>: " and "CUDA_ERROR_<NAME>: "
# (which XLA, TensorFlow and the driver API's users print too), or the name alone ("failed call to cuInit:
# CUDA_ERROR_NO_DEVICE"; not a header's "= 100" or a list's ","). Bounded alternations: linear.
CUDA_TEXT_PATTERN = (r"(?:(?:\bCUDA error|\bcuda runtime error \(\d+\)|\berror=\d+|\bCuda failure(?: \d+)?|\bError \d+"
                     r"|\bcuda\w+\(\) failed\. Status|\bcudaError\w+|\bCUDA_ERROR_\w+)\s?:?\s?'?"
                     r"(?P<words>" + "|".join(re.escape(w) for _k, _r, _d, w in CUDA_ERRORS) + r")"
                     r"|\b(?P<name>" + "|".join(n for _k, r, d, _w in CUDA_ERRORS for n in (r, d) if n)
                     + r")\b(?!\s*[=,(])"
                     r"|(?P<sentence>" + "|".join(re.escape(w) for _k, w in SENTENCES) + r"))")
