"""``nvidia-smi nvlink -c``/``--capabilities``: what each link supports, not whether it is up.

nvidia-smi prints, under each ``GPU <n>: <name> (UUID: ...)`` line, six lines a link
(``Link 0, P2P is supported: true``, ``Link 0, Access to system memory supported: true``, ...,
``Link 0, Link is supported: false``). Before, the first such line made the paste unreadable
(exit 3). It is a listing: the GPUs are listed, and ``gpu.nvlink`` SKIPs each (nothing said
about link state), as for counters the driver keeps to administrators.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FLAGS = ("P2P is supported", "Access to system memory supported", "P2P atomics supported",
         "System memory atomics supported", "SLI is supported", "Link is supported")


def capabilities(gpus: int = 2, links: int = 2, prompt: str = "$ nvidia-smi nvlink --capabilities") -> str:
    out = [prompt] if prompt else []
    for g in range(gpus):
        out.append(f"GPU {g}: NVIDIA A100-SXM4-80GB (UUID: GPU-{g:08d}-0000-0000-0000-000000000000)")
        out += [f"         Link {n}, {flag}: {'false' if flag.startswith('SLI') else 'true'}"
                for n in range(links) for flag in FLAGS]
    return "\n".join(out) + "\n"


def test_the_listing_is_read_with_each_gpu_noted() -> None:
    text = capabilities()
    assert detect_kind(text) == "nvidia-smi-nvlink"
    record = parse_text(text)[1]
    assert [(g.index, g.nvlink_note, g.links) for g in record.gpus] == [(0, "capabilities", []),
                                                                          (1, "capabilities", [])]


def test_the_gpus_are_listed_and_their_links_not_judged() -> None:
    findings = judge_text(capabilities(gpus=3, prompt=""), Config(), source="n1")
    nvlink = [(f.subject, f.status, f.code) for f in findings if f.check_id == "gpu.nvlink"]
    assert nvlink == [(f"n1/gpu{g}", Status.SKIP, "capabilities_only") for g in range(3)]
    [listed] = [f for f in findings if f.check_id == "nvidia_smi.gpu"]
    assert listed.status == Status.PASS and listed.observed == 3
    assert not [f for f in findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]


def test_a_state_listing_beside_it_is_still_judged() -> None:
    """``nvlink -s`` and ``-c`` pasted together: the states FAIL where a link is down."""
    states = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
              "         Link 0: 25 GB/s\n         Link 1: <inactive>\n")
    findings = judge_text(states + capabilities(gpus=1, prompt=""), Config(), source="n1")
    assert ("gpu.nvlink", Status.FAIL, "nvlink_down") in [(f.check_id, f.status, f.code) for f in findings]


def test_gpu_lines_whose_uuid_the_poster_cut_are_read_under_nvlink_only() -> None:
    """The Microway article's DGX-1 listing: 'GPU 0: Tesla V100-SXM2-32GB' (UUID removed), its links, and
    the author's '[snip]'. The link lines say the tool; a UUID-less line alone is no ``-L`` listing."""
    text = ("nvidia-smi nvlink --capabilities\n\nGPU 0: Tesla V100-SXM2-32GB\n"
            "\t Link 0, P2P is supported: true\n\t Link 0, Link is supported: false\n\t \n         [snip]\n\n"
            "\t Link 5, P2P is supported: true\n")
    assert detect_kind(text) == "nvidia-smi-nvlink"
    record = parse_text(text)[1]
    assert [(g.index, g.name, g.uuid, g.nvlink_note) for g in record.gpus] == [
        (0, "Tesla V100-SXM2-32GB", None, "capabilities")]
    assert record.elided
    assert detect_kind("GPU 0: Tesla V100-SXM2-32GB\nGPU 1: Tesla V100-SXM2-32GB\n") is None
