"""A device's name and its memory as a plan counts it (this machine's CPU, a GPU, another
host's CPU or unified chip under rpc-server)."""

from __future__ import annotations

from rigspark_gui.core.placement.verdict import CPU
from rigspark_gui.core.rig import Rig, rpc_cpu_host

__all__ = ["device_capacity", "device_name"]


def device_name(rig: Rig, device: str) -> str:
    if device == CPU:
        return rig.cpu.name
    host = rpc_cpu_host(device)
    if host is not None:
        h = rig.host(host)
        return f"{h.cpu.name if h else 'CPU'} on {host}"
    gpu = rig.gpus[int(device.split(":")[1])]
    return f"{gpu.name} on {gpu.host}" if gpu.host else gpu.name


def device_capacity(rig: Rig, device: str) -> tuple[int, int]:
    """(memory a plan may use before reserve, reserve) of one device."""
    if device == CPU:
        return rig.ram_usable_bytes, 0
    cpu_host = rpc_cpu_host(device)
    if cpu_host is not None:
        # another host's CPU under rpc-server: that host's usable RAM
        h = rig.host(cpu_host)
        return (h.ram_usable_bytes if h else 0), 0
    gpu = rig.gpus[int(device.split(":")[1])]
    if gpu.unified and gpu.host:
        # another host's unified chip (served by rpc-server): no more than that host's
        # usable RAM, which its CPU side (rpc-server, the OS) shares
        host = next((h for h in rig.hosts if h.name == gpu.host), None)
        if host is not None and host.ram_total_bytes > 0:
            return min(gpu.memory_bytes, host.ram_usable_bytes), gpu.reserve_bytes
    return gpu.memory_bytes, gpu.reserve_bytes
