"""What the network adds to a token when layers run on other hosts (llama.cpp RPC).

Per token, each run of layers on a remote device costs about one round trip: the input
activation goes out with SET_TENSOR (no reply since llama.cpp #12943), GRAPH_COMPUTE
has no reply either (a 4-byte GRAPH_RECOMPUTE once the graph is reused, #15405), and
the client waits on GET_TENSOR for the output. Activations between two remote hosts
pass through the main host. Each crossing carries one float32 row of n_embd.
"""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.rig import Rig

CPU_DEVICE = "cpu"


def remote_runs(ranges: Sequence[tuple[str, int, int]], rig: Rig) -> int:
    """Runs of layers (contiguous ranges) on devices of another host."""
    n = 0
    for device, lo, hi in ranges:
        if device == CPU_DEVICE or hi <= lo:
            continue
        if not device.startswith("gpu:") or rig.gpus[int(device.split(":")[1])].host:
            n += 1
    return n


def rpc_seconds(runs: int, rig: Rig, n_embd: int, tokens: int = 1) -> float:
    """Seconds the network adds to one step of `tokens` tokens over `runs` remote runs."""
    if runs == 0:
        return 0.0
    link = rig.link
    return runs * (link.round_trip_s + 2 * tokens * n_embd * 4 / link.bytes_per_s)


def weights_transfer_seconds(remote_bytes: int, rig: Rig) -> float:
    """Load time to send the remote hosts' weights (without rpc-server's -c cache)."""
    return remote_bytes / rig.link.bytes_per_s if remote_bytes else 0.0
