"""The rig panel's device list: its columns and a row per device, each figure with its basis.

`add_device_rows` fills a `QTreeWidget` with a rig's GPUs in device order, then the CPU
and system RAM; a rig of several hosts gets a heading per host with that host's devices
under it. Every cell reads "figure · basis", and its tooltip gives the exact bytes and
where the figure came from. The rows only show the rig; the panel (rig_panel.py) edits it.
`plain_note` words a detection note for someone who has never heard of the driver's API.
"""

from __future__ import annotations

import re
import textwrap

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem

from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    DEFAULT_RAM_RESERVE_BYTES,
    GIB,
    MIB,
    VM_FEATURE,
    Basis,
    Gpu,
    Provenance,
    Rig,
    Vendor,
)
from rigspark_gui.ui.rig_document import NO_DRIVER_NOTE

COL_DEVICE, COL_MEMORY, COL_BANDWIDTH, COL_COMPUTE, COL_RESERVE = range(5)
HEADERS = ("Device", "Memory", "Bandwidth", "Compute", "Overhead")
HEADER_TIPS = (
    "GPUs in device order, then the CPU and system RAM",
    "GPU: total memory on the board (Apple: the Metal working set). CPU: RAM total, and "
    "the part a plan may use",
    "Memory bandwidth; decode speed is bound by it",
    "GPU: dense FP16 TFLOPS (bounds prompt processing). CPU: physical cores",
    "What the device loses before any buffer, and every plan subtracts: the CUDA, ROCm or "
    "Vulkan context (none for Metal), plus any margin you add; hover a figure for its source",
)
_CPU_ROW = -1
_HOST_ROW = -2  # a host heading, or a remote host's RAM: nothing to edit

# Words drivers put in front of the board name; the full name stays in the tooltip.
_NAME_PREFIXES = ("NVIDIA ", "GeForce ", "AMD ", "Radeon ", "Intel(R) ")
# Marketing tails of CPU model strings ("16-Core Processor", "CPU @ 3.60GHz").
_CPU_NOISE = re.compile(r"\s+\d+-Core Processor$|\s+(?:CPU\s+)?@\s*[\d.]+\s*GHz$|\s+Processor$")


# Detection notes in the words of someone who does not know the probes' libraries.
_PLAIN_NOTES = {NO_DRIVER_NOTE: "no NVIDIA driver found on this computer"}


def plain_note(note: str) -> str:
    """A rig note as the window shows it: without library names."""
    return _PLAIN_NOTES.get(note, note)


def _gib_number(n: int) -> str:
    return f"{n // GIB}" if n % GIB == 0 else f"{n / GIB:.1f}"


def _gib(n: int) -> str:
    return f"{_gib_number(n)} GiB"


def mib_text(n: int) -> str:
    return f"{round(n / MIB)} MiB"


def _rate(value: float, unit: str) -> str:
    # Three significant figures at most: 936 GB/s, 51.2 GB/s, 3350 GB/s.
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def _short_name(name: str) -> str:
    short = name
    changed = True
    while changed:
        changed = False
        for prefix in _NAME_PREFIXES:
            if short.startswith(prefix) and len(short) > len(prefix):
                short = short[len(prefix) :]
                changed = True
    return short.replace("(TM) ", "").replace("(TM)", "")


def _short_cpu_name(name: str) -> str:
    """'AMD Ryzen 9 5950X 16-Core Processor' -> 'Ryzen 9 5950X'; the tooltip keeps it all."""
    short = _CPU_NOISE.sub("", name.replace("(R)", "").replace("(TM)", ""))
    short = " ".join(short.split())
    for prefix in ("AMD ", "Intel "):
        short = short.removeprefix(prefix)
    return short or name


def _basis_text(prov: Provenance) -> str:
    return str(prov.basis)


def _basis_line(prov: Provenance) -> str:
    # sourced sentences run long: wrapped, since a plain-text tooltip does not wrap
    line = f"Basis: {prov.basis}" + (f" — {prov.source}" if prov.source else "")
    return textwrap.fill(line, 100, break_on_hyphens=False)


def _cell(value: str | None, prov: Provenance) -> str:
    if value is None:
        return "unknown"
    return f"{value} · {_basis_text(prov)}"


def _rig_basis(rig: Rig, field: str) -> Provenance:
    if field in rig.provenance:
        return rig.provenance[field]
    if getattr(rig, field, None) is None:
        return Provenance(basis=Basis.UNKNOWN, source="not reported")
    return Provenance(basis=Basis.USER)


def _reserve_basis(gpu: Gpu) -> tuple[str, str]:
    """Short basis text and its explanation; an unsourced figure is an assumption."""
    prov = gpu.provenance.get("reserve_bytes")
    if prov is None:
        if gpu.reserve_bytes == DEFAULT_GPU_RESERVE_BYTES:
            return "default", "Basis: default — assumed driver/context footprint per GPU"
        return "user", "Basis: user"
    if prov.basis is Basis.UNKNOWN:
        return "assumed", textwrap.fill(
            f"Basis: assumed — {prov.source}", 100, break_on_hyphens=False
        )
    return _basis_text(prov), _basis_line(prov)


def add_device_rows(tree: QTreeWidget, rig: Rig) -> None:
    """Add a row per device of `rig` to `tree`: GPUs in device order, then the CPU;
    under a heading per host when the rig has several."""
    if rig.hosts:
        _add_host_groups(tree, rig)
    else:
        for gpu_position, gpu in enumerate(rig.gpus):
            tree.addTopLevelItem(_gpu_item(gpu_position, gpu))
        tree.addTopLevelItem(_cpu_item(rig))


def _gpu_item(position: int, gpu: Gpu) -> QTreeWidgetItem:
    item = QTreeWidgetItem()
    item.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, position)
    unknown = gpu.memory_total_bytes is None or gpu.bandwidth_gbps is None
    flags = [" (display)" if gpu.display_attached else ""]
    label = f"{'⚠ ' if unknown else ''}GPU {gpu.index} · {_short_name(gpu.name)}"
    item.setText(COL_DEVICE, label + "".join(flags))
    details = [gpu.name, f"Vendor: {gpu.vendor}"]
    if gpu.uuid:
        details.append(f"UUID: {gpu.uuid}")
    if gpu.compute_capability:
        details.append(f"Compute capability: {gpu.compute_capability}")
    if gpu.pcie_generation and gpu.pcie_width:
        details.append(f"PCIe: gen {gpu.pcie_generation} x{gpu.pcie_width}")
    if gpu.display_attached:
        details.append("A display is attached: raise its reserve to keep the desktop's memory")
    if gpu.unified:
        details.append("Shares system memory (unified)")
    if unknown:
        details.append("Some figures are unknown; plans for this GPU are less certain")
    item.setToolTip(COL_DEVICE, "\n".join(details))

    memory = gpu.basis_of("memory_total_bytes")
    total = gpu.memory_total_bytes
    working_set = gpu.unified and gpu.vendor is Vendor.APPLE
    size = None if total is None else _gib(total) + (" working set" if working_set else "")
    item.setText(COL_MEMORY, _cell(size, memory))
    memory_tip = [
        "Metal working set: the part of unified memory the GPU may use, which llama.cpp "
        "takes as this device's memory"
        if working_set
        else "Total memory on the board"
    ]
    if total is not None:
        memory_tip.append(f"{total:,} bytes")
    if gpu.memory_free_bytes is not None:
        memory_tip.append(f"Free when detected: {gpu.memory_free_bytes:,} bytes")
    memory_tip.append(
        f"A plan may use {gpu.capacity_bytes:,} bytes ({_gib(gpu.capacity_bytes)}): "
        "free (or total) less reserve"
    )
    memory_tip.append(_basis_line(memory))
    item.setToolTip(COL_MEMORY, "\n".join(memory_tip))

    bandwidth = gpu.basis_of("bandwidth_gbps")
    bw = gpu.bandwidth_gbps
    item.setText(COL_BANDWIDTH, _cell(_rate(bw, "GB/s") if bw else None, bandwidth))
    bw_tip = ["Memory bandwidth; each generated token reads the weights once"]
    if bw:
        bw_tip.append(f"{bw:g} GB/s = {bw * 1e9:,.0f} bytes per second")
    bw_tip.append(_basis_line(bandwidth))
    item.setToolTip(COL_BANDWIDTH, "\n".join(bw_tip))

    compute = gpu.basis_of("fp16_tflops")
    tflops = gpu.fp16_tflops
    item.setText(COL_COMPUTE, _cell(_rate(tflops, "TFLOPS") if tflops else None, compute))
    compute_tip = ["Dense FP16 throughput; bounds prompt processing (prefill)"]
    if tflops:
        compute_tip.append(f"{tflops:g} TFLOPS = {tflops * 1e12:,.0f} FLOP/s")
    compute_tip.append(_basis_line(compute))
    item.setToolTip(COL_COMPUTE, "\n".join(compute_tip))

    basis, basis_line = _reserve_basis(gpu)
    # an unsourced context (Vulkan's) reads unknown; the tooltip gives what is assumed
    unsourced = basis == "assumed"
    item.setText(
        COL_RESERVE, "unknown" if unsourced else f"{mib_text(gpu.reserve_bytes)} · {basis}"
    )
    item.setToolTip(
        COL_RESERVE,
        "What this GPU loses before any buffer, which every plan subtracts: the backend's "
        "context (and the desktop's share or any margin you add)\n"
        f"{gpu.reserve_bytes:,} bytes\n{basis_line}",
    )
    return item


def _cpu_item(rig: Rig) -> QTreeWidgetItem:
    cpu = rig.cpu
    item = QTreeWidgetItem()
    item.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _CPU_ROW)
    item.setText(COL_DEVICE, f"CPU · {_short_cpu_name(cpu.name)}")
    item.setToolTip(COL_DEVICE, f"{cpu.name}\nThe CPU path and offloaded layers use system RAM")

    total = _rig_basis(rig, "ram_total_bytes")
    usable = rig.ram_usable_bytes
    ram_known = rig.ram_total_bytes > 0 or total.basis is not Basis.UNKNOWN
    ram_text = f"{_gib(rig.ram_total_bytes)} ({_gib_number(usable)} usable)" if ram_known else None
    item.setText(COL_MEMORY, _cell(ram_text, total))
    ram_tip = [
        "System RAM: total, and what a plan may use",
        f"Total: {rig.ram_total_bytes:,} bytes — {_basis_line(total)}",
    ]
    if rig.ram_available_bytes is not None:
        available = _rig_basis(rig, "ram_available_bytes")
        ram_tip.append(f"Usable (available): {usable:,} bytes — {_basis_line(available)}")
    else:
        ram_tip.append(f"Usable: {usable:,} bytes (total less the operating system reserve)")
    item.setToolTip(COL_MEMORY, "\n".join(ram_tip))

    bandwidth = cpu.basis_of("memory_bandwidth_gbps")
    bw = cpu.memory_bandwidth_gbps
    item.setText(COL_BANDWIDTH, _cell(_rate(bw, "GB/s") if bw else None, bandwidth))
    bw_tip = ["RAM bandwidth; bounds decode speed of layers on the CPU"]
    if bw:
        bw_tip.append(f"{bw:g} GB/s = {bw * 1e9:,.0f} bytes per second")
    bw_tip.append(_basis_line(bandwidth))
    item.setToolTip(COL_BANDWIDTH, "\n".join(bw_tip))

    cores = cpu.basis_of("cores")
    vm = VM_FEATURE in cpu.features
    unit = "vCPUs" if vm else "cores"
    text = f"{cpu.cores} {unit}" if cpu.cores else None
    if text and cpu.compute_cores is not None and cpu.compute_cores < cpu.cores:
        plural = "" if cpu.compute_cores == 1 else "s"
        text += f" ≈ {cpu.compute_cores:g} core{plural}"
    item.setText(COL_COMPUTE, _cell(text, cores))
    cores_tip = ["Virtual CPUs of a virtual machine" if vm else "Physical CPU cores"]
    if cpu.threads:
        cores_tip.append(f"{cpu.threads} threads")
    cores_tip.append(_basis_line(cores))
    if cpu.compute_cores is not None:
        cores_tip.append(
            f"Together they do {cpu.compute_cores:g} {_worth(cpu.compute_cores)} of vector work "
            "(two hyperthreads of one core do about one); CPU speed counts that — "
            + _basis_line(cpu.basis_of("compute_cores"))
        )
    elif vm:
        cores_tip.append(
            "Whether these vCPUs are whole cores or hyperthread pairs is not measured yet "
            "(View ▸ Measure RAM bandwidth, Ctrl+B, measures both)"
        )
    item.setToolTip(COL_COMPUTE, "\n".join(cores_tip))

    if rig.ram_available_bytes is None:
        default = rig.ram_reserve_bytes == DEFAULT_RAM_RESERVE_BYTES
        item.setText(
            COL_RESERVE, f"{_gib(rig.ram_reserve_bytes)} · {'default' if default else 'user'}"
        )
        item.setToolTip(
            COL_RESERVE,
            "RAM left to the operating system, since available RAM is unknown\n"
            f"{rig.ram_reserve_bytes:,} bytes",
        )
    else:
        item.setText(COL_RESERVE, "—")
        item.setToolTip(COL_RESERVE, "Usable RAM is the available memory: nothing to reserve")
    return item


def _add_host_groups(tree: QTreeWidget, rig: Rig) -> None:
    """A rig of several machines: each host's devices under it, this machine first."""
    link = rig.link.label
    for host in rig.host_names:
        h = next((x for x in rig.hosts if x.name == host), None)
        if h is None:
            title, tip = "This machine", "Runs llama-server or the serving engine's head"
        else:
            where = f" · {h.address}" if h.address else ""
            title = f"{h.name}{where} · {link}"
            tip = (
                f"Joined over {link}: {rig.link.gbit_s:g} Gbit/s, round trip "
                f"{rig.link.round_trip_s * 1e6:g} µs. Its layers cost a network hop per "
                "token (llama.cpp RPC) or run as a pipeline stage (vLLM, SGLang)."
            )
        group = QTreeWidgetItem([title])
        group.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _HOST_ROW)
        group.setToolTip(COL_DEVICE, tip)
        font = group.font(COL_DEVICE)
        font.setBold(True)
        group.setFont(COL_DEVICE, font)
        tree.addTopLevelItem(group)
        for position, gpu in enumerate(rig.gpus):
            if gpu.host == host:
                group.addChild(_gpu_item(position, gpu))
        if h is None:
            group.addChild(_cpu_item(rig))
        elif h.ram_total_bytes:
            ram = QTreeWidgetItem([f"RAM · {_gib(h.ram_total_bytes)}"])
            ram.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _HOST_ROW)
            group.addChild(ram)
        group.setExpanded(True)


def _worth(cores: float) -> str:
    return "core's worth" if cores == 1 else "cores' worth"
