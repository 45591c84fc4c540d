"""``nvidia-smi -L`` at the head of a paste that goes on with something else (``parsers/nvidia_smi/listing.py``).

Before, ``-L`` was recognised only when every line was a GPU or MIG line: ``-L`` pasted above a CSV query
(which, after another tool's output, is rightly no CSV header) left the paste recognised by nobody, and
tests/test_detect_fragments.py's concatenation property failed for exporter-L-l40s-595.80 +
exporter-csv-h100-mig-590.48.01-load. Now such a head is the listing's, less surely than a listing alone:
another tool whose sniffer recognises the rest still wins.
"""

from __future__ import annotations

from gpu_preflight.parsers.detect import detect_kind

LISTING = ("GPU 0: NVIDIA L40S (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)\n"
           "GPU 1: NVIDIA L40S (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445556)\n")
CSV = ("name, pci.bus_id, temperature.gpu, power.draw [W]\n"
       "NVIDIA H100 80GB HBM3, 00000000:0A:00.0, 35, 70.12\n")
NVLINK = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)\n"
          "\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n")


def test_a_listing_alone_is_the_listing() -> None:
    assert detect_kind(LISTING) == "nvidia-smi-list"


def test_a_listing_followed_by_what_no_sniffer_claims_is_still_the_listing() -> None:
    assert detect_kind(LISTING + CSV) == "nvidia-smi-list"


def test_a_surer_tool_after_the_listing_still_wins() -> None:
    assert detect_kind(NVLINK) == "nvidia-smi-nvlink"
    assert detect_kind(LISTING + NVLINK) == "nvidia-smi-nvlink"


def test_text_that_does_not_start_with_a_gpu_line_is_not_a_listing() -> None:
    assert detect_kind(CSV + LISTING) != "nvidia-smi-list"
