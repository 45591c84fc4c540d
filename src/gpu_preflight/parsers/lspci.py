"""``lspci`` (plain, ``-nn``, ``-vvv``): PCI devices and, with ``-vvv``, their link state.

Each device starts at column 0 with its address (``0000:04:00.0``, or ``04:00.0``
without a domain), class and name; ``-nn`` adds ``[0302]`` class and ``[10de:20b2]``
vendor:device ids. Under ``-vvv`` the PCIe capability prints ``LnkCap:`` (what the link
can do: ``Speed 32GT/s, Width x16``) and ``LnkSta:`` (what it trained to: ``Speed 16GT/s
(downgraded), Width x16 (ok)``; older pciutils print no annotation). ``downgraded`` is
true when the trained speed or width is below the capability — pciutils' own
``(downgraded)`` mark, or the numbers, whichever says so; ``None`` when the device shows
no link at all.

People paste the link lines without the device line above them: ``lspci -vv | grep -E
'LnkCap:|LnkSta:'``, two lines quoted in a sentence, a slice of one device's capabilities. Such
a text (no device line, a ``LnkSta: Speed ...`` line) is a fragment of one device whose address
and class are not shown: it is read as that one device (``record.fragment``), judged on the link
lines it shows, and nothing it does not show (which device, its class) is made up.

The rest of what ``lspci -vv`` prints that a judgement needs (docs/repertoire/lspci.md): the AER
capability's ``UESta``/``UEMsk``/``UESvrt`` bits (one line up to pciutils 3.12, three lines from 3.13),
``Capabilities: <access denied>`` (not run as root: no capability was read), and a device whose config
space reads all ones (``(rev ff)``, ``!!! Unknown header type 7f``: it does not answer). pcilib's
warnings (``pcilib: sysfs_read_vpd: read failed: ...``) and ``-x`` hex dump rows pasted with the listing
are read past; the warnings are kept. A Root Port, Downstream Port or PCI/PCI-X-to-PCIe bridge trains
to whatever sits below it (an empty slot reads x0): as pciutils 3.8+ does, its link is shown, not judged
(``downgraded`` None); the device below it shows its own.
"""

from __future__ import annotations

import re

from ..records.pci import LspciRecord as LspciRecord
from ..records.pci import PciDevice as PciDevice
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare

KIND = "lspci"

# ``-P``/``-PP`` print the bridge path before the device: ``00:01.0/00.0`` or ``00:01.0/01:00.0`` (lspci.c
# show_slot_path); the whole path is the address.
_DEVICE = re.compile(r"^(?P<address>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
                     r"(?:/(?:[0-9a-fA-F]{2}:)?[0-9a-fA-F]{2}\.[0-7])*)\s+"
                     r"(?P<class>[^:\[]+?)(?:\s+\[(?P<class_id>[0-9a-fA-F]{4})\])?:\s+(?P<name>.*)$")
_IDS = re.compile(r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")
# ``-n`` prints numbers only: ``18:00.0 0302: 10de:2330 (rev a1)`` (the class id where the class name goes).
_CLASS_NUMBER = re.compile(r"^[0-9a-fA-F]{4}$")
_NUMERIC_IDS = re.compile(r"^(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\b")
_SPEED = re.compile(r"Speed\s+(?P<speed>[\d.]+)GT/s(?P<note>\s*\((?:downgraded|ok)\))?", re.IGNORECASE)
_WIDTH = re.compile(r"Width\s+x(?P<width>\d+)(?P<note>\s*\((?:downgraded|ok)\))?", re.IGNORECASE)
_LNKSTA = re.compile(r"^\s*LnkSta:\s*Speed\s+[\d.]+GT/s")
# A capability line: indented under its device, or a key such as ``LnkSta:`` quoted at column 0.
_CAPABILITY_LINE = re.compile(r"^(?:\s|[A-Z][A-Za-z0-9]*:\s)")
_UNSHOWN = "(device line not shown)"
# ``Capabilities: [60] Express (v2) Root Port (Slot+), MSI 00`` (ls-caps.c cap_express; ``-v`` prints no version).
_EXPRESS = re.compile(r"^Capabilities: \[[0-9a-fA-F]+\] Express (?:\(v\d+\) )?"
                      r"(?P<type>[^,(]+?)\s*(?:\(Slot[+-]\))?(?:,|$)")
# Ports that train to whatever sits below them: pciutils 3.8+ (ls-caps.c link_compare) prints no
# ``(downgraded)`` for them, since the device below shows its own link; an empty slot reads x0.
_PARTNER_PORTS = ("Root Port", "Downstream Port", "PCI/PCI-X to PCI-Express Bridge")
# pcilib's warnings and lspci's own errors go to stderr (lib/init.c pci_generic_warn, common.c die).
_WARNING = re.compile(r"^(?:(?:pcilib|lspci): \S|WARNING: Cannot show hex-dump)")
_HEXDUMP = re.compile(r"^[0-9a-f]{2,3}:(?: [0-9a-f]{2}){1,16}\s*$")
# The AER capability's uncorrectable-error registers (ls-ecaps.c cap_aer); their bits go on on
# continuation lines from pciutils 3.13.
_AER_KEYS = {"UESta:": "ue_status", "UEMsk:": "ue_masked", "UESvrt:": "ue_fatal"}
_FLAG = re.compile(r"([A-Za-z][A-Za-z0-9_]*)([+-])(?=\s|$)")
_FLAGS_ONLY = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_]*[+-]\s*)+$")


def sniff(text: str) -> int:
    lines = [line for line in text.splitlines()[:200] if line.strip() and not is_noise(line)
             and not _WARNING.match(line) and not _HEXDUMP.match(line)]
    if not lines:
        return 0
    if "LnkSta:" in text and _DEVICE.match(lines[0]):
        return 90
    if _is_link_fragment(lines):
        return 60
    hits = sum(1 for line in lines if _DEVICE.match(line))
    return 75 if hits >= max(1, len([x for x in lines if not x.startswith(("\t", " "))]) * 0.8) else 0


@parser(KIND, sniff=sniff, title="lspci, lspci -nn, lspci -vvv (LnkCap/LnkSta)")
def parse(text: str) -> LspciRecord:
    """Parse lspci output; with ``-vvv`` also each device's link capability and status."""
    record = LspciRecord()
    current: PciDevice | None = None
    lines = list(prepare(KIND, text))
    if _is_link_fragment([line for line in lines if line.strip() and not is_noise(line)]):
        current = PciDevice(address="?", device_class="", name=_UNSHOWN)
        record.devices.append(current)
        record.fragment = 1
    aer: str | None = None  # the UE register whose bits a continuation line carries on
    for number, raw in enumerate(lines, 1):
        if not raw.strip() or is_noise(raw):
            continue
        if _WARNING.match(raw):
            record.warnings.append(raw.strip())
            continue
        if _HEXDUMP.match(raw):
            continue
        if not raw[0].isspace() and record.fragment is None:
            m = _DEVICE.match(raw.rstrip())
            if m is None:
                raise ParseError(KIND, f"not an lspci device line: {raw.strip()[:60]!r}", number)
            device_class = m.group("class").strip()
            numeric = _CLASS_NUMBER.match(device_class) is not None and m.group("class_id") is None
            ids = (_NUMERIC_IDS if numeric else _IDS).search(m.group("name"))
            current = PciDevice(address=m.group("address"), device_class=device_class,
                                name=m.group("name").strip(),
                                class_id=device_class if numeric else m.group("class_id"),
                                vendor_id=ids.group("vendor") if ids else None,
                                device_id=ids.group("device") if ids else None)
            current.config_unreadable = current.name.endswith("(rev ff)")
            record.devices.append(current)
            aer = None
            continue
        if current is None:
            continue
        line = raw.strip()
        record.verbose = True
        if line.startswith("Capabilities: ["):
            # a capability list was read: the config space answers, whatever the revision byte says (a design
            # may set it to ff); a device off the bus shows '!!! Unknown header type 7f' and no capability
            current.config_unreadable = False
        if aer is not None and _FLAGS_ONLY.match(line):
            _add_flags(current, aer, line)
            continue
        aer = next((field for key, field in _AER_KEYS.items() if line.startswith(key)), None)
        if aer is not None:
            _add_flags(current, aer, line.split(":", 1)[1])
        elif line == "Capabilities: <access denied>":
            current.capabilities_denied = True
        elif line.startswith("!!! Unknown header type 7f"):
            current.config_unreadable = True
        elif line.startswith("LnkCap:"):
            current.cap_speed_gts, current.cap_width, _, _ = _link(line)
        elif (express := _EXPRESS.match(line)) is not None:
            current.port_type = express.group("type")
        elif line.startswith("LnkSta:") and current.port_type in _PARTNER_PORTS:
            current.sta_speed_gts, current.sta_width, _, _ = _link(line)  # shown, not judged: see _PARTNER_PORTS
        elif line.startswith("LnkSta:"):
            current.sta_speed_gts, current.sta_width, speed_note, width_note = _link(line)
            current.speed_downgraded = _below(current.sta_speed_gts, current.cap_speed_gts, speed_note)
            current.width_downgraded = _below(current.sta_width, current.cap_width, width_note)
            flags = [f for f in (current.speed_downgraded, current.width_downgraded) if f is not None]
            current.downgraded = any(flags) if flags else None
    if not record.devices:
        raise ParseError(KIND, "no lspci device line")
    return record


def _add_flags(device: PciDevice, field: str, text: str) -> None:
    """The bits an AER register line shows set (``CmpltTO+``); a UESta line shown makes the status read."""
    set_bits = [name for name, sign in _FLAG.findall(text) if sign == "+"]
    if field == "ue_status":
        device.ue_status = (device.ue_status or []) + set_bits
    else:
        setattr(device, field, getattr(device, field) + set_bits)


def _is_link_fragment(lines: list[str]) -> bool:
    """Link lines without a device line: a ``LnkSta: Speed ...`` line, and every line a capability line."""
    return (any(_LNKSTA.match(line) for line in lines) and not any(_DEVICE.match(line) for line in lines)
            and all(_CAPABILITY_LINE.match(line) for line in lines))


def _link(line: str) -> tuple[float | None, int | None, str | None, str | None]:
    """Speed, width and pciutils' ``(ok)``/``(downgraded)`` notes of a LnkCap/LnkSta line."""
    speed, width = _SPEED.search(line), _WIDTH.search(line)
    return (float(speed.group("speed")) if speed else None, int(width.group("width")) if width else None,
            _note(speed), _note(width))


def _note(m: re.Match[str] | None) -> str | None:
    return (m.group("note") or "").strip(" ()") or None if m else None


def _below(status: float | None, capability: float | None, note: str | None) -> bool | None:
    if note == "downgraded":
        return True
    if status is None or capability is None:
        return None if note is None else False
    return status < capability
