"""Launch scripts for plans that span hosts, and for the serving engines.

- llama.cpp RPC: each other host runs `rpc-server` (one server offers every GPU it can
  see, llama.cpp #16276; the default port is 50052; `-c` caches received tensors under
  ~/.cache/llama.cpp/rpc/); this machine runs `llama-server --rpc host:port,…`. llama.cpp
  lists RPC devices before its own GPUs, so `--tensor-split` names them first. A draft
  model (-md) without -devd takes that whole list and split, RPC devices included
  (common/speculative.cpp common_base_params_to_speculative), as the plan counts it.
- vLLM multi-node: a Ray cluster (`ray start --head` here, `ray start --address` on the
  others), then `vllm serve` on the head with TP inside a host and PP across hosts
  (docs.vllm.ai, "Distributed inference and serving").
- SGLang: `python3 -m sglang.launch_server` on every node with `--nnodes`, `--node-rank`
  and `--dist-init-addr`.

Scripts come in start order; every line is built from an argv list with shlex, so a
name read from a file never runs as code.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.launch.beside_args import beside_args, draft_device_args, draft_pinned
from rigspark_gui.core.launch.cpu_loading import loading_args
from rigspark_gui.core.launch.engine import model_args
from rigspark_gui.core.launch.llama_layout import buffer_name, buffer_prefix, rpc_split
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    INPUT,
    DeviceLoad,
    Placement,
    gpu_device,
    gpu_index,
    llama_cpp_slots,
)
from rigspark_gui.core.rig import Rig, rpc_cpu_host
from rigspark_gui.core.serving import FORMATS, ServingPlan
from rigspark_gui.core.settings import PlanSettings

RPC_PORT = 50052
RAY_PORT = 6379
SGLANG_DIST_PORT = 5000
THIS_HOST = "this machine"


@dataclass(frozen=True, slots=True, kw_only=True)
class HostScript:
    # '' = this machine
    host: str
    address: str
    role: str
    # start order, 1 first
    order: int
    # shell lines to run there
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLaunch:
    engine: str
    supported: bool
    scripts: tuple[HostScript, ...] = ()
    explanation: str = ""
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Every script, each under a comment naming its host and order."""
        if not self.supported:
            return f"# {self.explanation}"
        parts = []
        for sc in self.scripts:
            where = sc.host or THIS_HOST
            at = "" if sc.address == where else f" ({sc.address})"
            head = _one_line(f"# {sc.order}. on {where}{at}: {sc.role}")
            parts.append(f"{head}\n{sc.text}")
        return "\n\n".join(parts)


def _one_line(text: str) -> str:
    """A comment line that stays one line whatever a rig file's names hold."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _line(env: Sequence[tuple[str, str]], argv: Sequence[str]) -> str:
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in env)
    cmd = shlex.join(argv)
    return f"{pre} {cmd}" if pre else cmd


HEAD_PLACEHOLDER = "HEAD_IP"


def _address(rig: Rig, host: str) -> str:
    if not host:
        return rig.address or HEAD_PLACEHOLDER
    h = next(x for x in rig.hosts if x.name == host)
    return h.address or h.name


def _host_of(rig: Rig, device: str) -> str:
    """The host of a GPU or of another host's CPU ('' = this machine)."""
    i = gpu_index(device)
    if i is not None:
        return rig.gpus[i].host
    return rpc_cpu_host(device) or ""


def _gpu_env(rig: Rig, ids: Sequence[int]) -> list[tuple[str, str]]:
    """Show a process only its GPUs (their numbers on their own host)."""
    if not ids:
        return []
    return [("CUDA_VISIBLE_DEVICES", ",".join(str(rig.gpus[i].index) for i in ids))]


def _refuse(engine: str, why: str) -> ClusterLaunch:
    return ClusterLaunch(engine=engine, supported=False, explanation=why)


def rpc_launch(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    loads: Sequence[DeviceLoad] = (),
    *,
    model_path: str | None = None,
) -> ClusterLaunch:
    """rpc-server on every other host the placement uses, then llama-server here."""
    engine = "llama.cpp RPC"
    if not (s.kv_k.llama_cpp and s.kv_v.llama_cpp):
        return _refuse(engine, "the fp8 KV cache is a vLLM option; llama.cpp has no such type")
    slots = [u.device for u in placement.units if u.unit != INPUT]
    used, counts = rpc_split(placement)
    n_gpu_slots = sum(counts)
    if any(u.experts_device not in (None, u.device) for u in placement.units) or (
        n_gpu_slots
        and llama_cpp_slots(len(slots) - 1, n_gpu_slots, [float(c) for c in counts], used) != slots
    ):
        return _refuse(
            engine,
            "over RPC each device must hold one run of layers, other hosts' first and this "
            "machine's last (llama.cpp's device order): reset the placement to run it",
        )
    remote_hosts = [h for h in rig.host_names[1:] if any(_host_of(rig, d) == h for d in used)]
    scripts: list[HostScript] = []
    endpoints: list[str] = []
    for n, host in enumerate(remote_hosts, start=1):
        ids = [i for d in used if _host_of(rig, d) == host and (i := gpu_index(d)) is not None]
        address = _address(rig, host)
        argv = ["rpc-server", "-H", "0.0.0.0", "-p", str(RPC_PORT), "-c"]
        # a host without a GPU serves its CPU (one device, no GPU to show)
        role = "rpc-server for its CPU"
        if ids:
            role = f"rpc-server for {len(ids)} GPU{'s' if len(ids) > 1 else ''}"
        env = _gpu_env(rig, ids)
        scripts.append(
            HostScript(host=host, address=address, role=role, order=n, text=_line(env, argv))
        )
        endpoints.append(f"{address}:{RPC_PORT}")
    local = [i for d in used if (i := gpu_index(d)) is not None and not rig.gpus[i].host]
    # a draft pinned (-devd) to a GPU here that the model leaves: shown too, the model
    # kept to its own devices with -dev (RPC devices are RPC0, RPC1 ... in --rpc order)
    shown = sorted({*local, *draft_pinned(spec, s)} & set(rig.local_gpus))
    prefix = buffer_prefix(rig)
    model, model_notes = model_args(spec, quant, model_path)
    argv = ["llama-server", *model, "-c", str(s.context), "-ngl", str(n_gpu_slots)]
    if endpoints:
        argv += ["--rpc", ",".join(endpoints)]
    if shown != local:
        n_rpc = len(used) - len(local)
        names = [f"RPC{k}" for k in range(n_rpc)]
        names += [buffer_name(gpu_device(shown.index(i)), prefix) for i in local]
        argv += ["-dev", ",".join(names) or "none"]
    if len(used) > 1:
        argv += ["--tensor-split", ",".join(str(c) for c in counts)]
    argv += ["-ctk", s.kv_k.value, "-ctv", s.kv_v.value]
    argv += ["-fa", "on" if s.flash_attn else "off", "-np", str(s.parallel)]
    argv += loading_args(placement, spec, quant, s, rig)  # --load-mode none / --no-repack
    argv += beside_args(spec, s, hf=model[0] == "-hf")  # --mmproj, -md ...
    # without -devd the draft takes the model's devices and split, RPC ones included
    # (common_base_params_to_speculative), as core/plan/draft.py plans it
    target = [-1 if (i := gpu_index(d)) is None else i for d in used]
    try:
        argv += draft_device_args(spec, s, shown, prefix, target)
    except InvalidPlacementError as err:
        return _refuse(engine, str(err))
    scripts.append(
        HostScript(
            host="",
            address=rig.address or "this machine",
            role="llama-server (the API, the input embedding and the last layers)",
            order=len(scripts) + 1,
            text=_line(_gpu_env(rig, shown) if shown else [("CUDA_VISIBLE_DEVICES", "")], argv),
        )
    )
    notes = [
        *model_notes,
        "--tensor-split lists the RPC devices first, in --rpc order, then this machine's GPUs",
        "never expose rpc-server to an open network: it runs whatever it is sent "
        "(llama.cpp tools/rpc/README.md); keep the hosts on a private link",
        "older llama.cpp builds offer one GPU per rpc-server: start one per GPU, each with "
        "its own CUDA_VISIBLE_DEVICES and port, and list each in --rpc",
    ]
    remote_bytes = sum(
        d.weights_bytes for d in loads if d.device != CPU and _host_of(rig, d.device)
    )
    if remote_bytes:
        seconds = remote_bytes / rig.link.bytes_per_s
        notes.append(
            f"the first load sends {remote_bytes / (1 << 30):.1f} GiB of weights over "
            f"{rig.link.label} (about {seconds:.0f} s); with -c each rpc-server keeps them "
            "and later loads skip the transfer"
        )
    return ClusterLaunch(engine=engine, supported=True, scripts=tuple(scripts), notes=tuple(notes))


def _serving_model(spec: ModelSpec) -> str:
    """What `vllm serve` / `--model-path` loads: a folder read from disk, else the
    model's Hugging Face repository."""
    if spec.checkpoint is not None and spec.checkpoint.path:
        return spec.checkpoint.path
    if spec.hf_repo:
        return spec.hf_repo
    src = spec.source.removesuffix("/config.json")
    return src if src.count("/") == 1 else spec.id


def serving_launch(
    sp: ServingPlan, spec: ModelSpec, s: PlanSettings, rig: Rig, gpu_ids: Sequence[int]
) -> ClusterLaunch:
    """vLLM or SGLang for a serving plan: one command, or a script per host in order."""
    hosts: list[str] = []
    for i in gpu_ids:
        if rig.gpus[i].host not in hosts:
            hosts.append(rig.gpus[i].host)
    # the head (the API) is this machine when it takes part, else the first host
    head = "" if "" in hosts else hosts[0]
    workers = [h for h in hosts if h != head]
    model = _serving_model(spec)
    fmt = FORMATS[sp.format]
    notes: list[str] = []
    if not sp.fits:
        engine_name = "vLLM" if sp.engine == "vllm" else "SGLang"
        fix = (
            f" (a max_model_len of {sp.largest_max_model_len} or less runs)"
            if sp.refusal_kind == "pool" and sp.largest_max_model_len
            else ""
        )
        notes.append(f"as planned, {engine_name} does not serve this{fix}: see its error")
    native = spec.checkpoint is not None and spec.checkpoint.format == fmt.name
    if native:
        pass  # the checkpoint named is already in this format
    elif fmt.name == "FP8":
        notes.append(
            "FP8: load a pre-quantized FP8 checkpoint of this model, or add --quantization "
            "fp8 to quantize the BF16 one as it loads"
        )
    elif fmt.name != "BF16":
        notes.append(
            f"{fmt.label}: the command needs a pre-quantized {fmt.label} checkpoint of this "
            "model (its repository name in place of the one shown)"
        )
    if sp.engine == "sglang":
        return _sglang(sp, s, rig, gpu_ids, hosts, head, model, notes)
    argv = ["vllm", "serve", model]
    argv += ["--tensor-parallel-size", str(sp.tensor_parallel)]
    argv += ["--pipeline-parallel-size", str(sp.pipeline_parallel)]
    argv += ["--max-model-len", str(sp.max_model_len)]
    argv += ["--gpu-memory-utilization", f"{sp.memory_utilization:g}"]
    argv += ["--max-num-seqs", str(sp.max_num_seqs)]
    argv += ["--kv-cache-dtype", "fp8" if s.kv_k is KvCacheType.FP8 else "auto"]
    if s.max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    if s.cpu_offload_gb:
        argv += ["--cpu-offload-gb", f"{s.cpu_offload_gb:g}"]
    if not workers:
        ids = [i for i in gpu_ids if rig.gpus[i].host == head]
        script = HostScript(
            host=head,
            address=_address(rig, head) if head else rig.address or "this machine",
            role="vllm serve",
            order=1,
            text=_line(_gpu_env(rig, ids), argv),
        )
        return ClusterLaunch(engine="vLLM", supported=True, scripts=(script,), notes=tuple(notes))
    argv += ["--distributed-executor-backend", "ray"]
    head_addr = _address(rig, head)

    def pinned(h: str, addr: str) -> tuple[list[tuple[str, str]], list[str]]:
        """Ray offers each host only the GPUs the plan puts there (env, --num-gpus)."""
        ids = [i for i in gpu_ids if rig.gpus[i].host == h]
        return [("VLLM_HOST_IP", addr), *_gpu_env(rig, ids)], [f"--num-gpus={len(ids)}"]

    env, gpus_arg = pinned(head, head_addr)
    scripts = [
        HostScript(
            host=head,
            address=head_addr,
            role="Ray head",
            order=1,
            text=_line(env, ["ray", "start", "--head", f"--port={RAY_PORT}", *gpus_arg]),
        )
    ]
    for n, h in enumerate(workers, start=2):
        addr = _address(rig, h)
        env, gpus_arg = pinned(h, addr)
        join = ["ray", "start", f"--address={head_addr}:{RAY_PORT}", *gpus_arg, "--block"]
        scripts.append(
            HostScript(
                host=h,
                address=addr,
                role="Ray worker",
                order=n,
                text=_line(env, join),
            )
        )
    scripts.append(
        HostScript(
            host=head,
            address=head_addr,
            role="vllm serve (after every worker has joined: ray status lists all GPUs)",
            order=len(scripts) + 1,
            text=_line([], argv),
        )
    )
    if head_addr == HEAD_PLACEHOLDER:
        notes.append(
            f"replace {HEAD_PLACEHOLDER} with this machine's address on the link between the "
            "hosts (or give the rig an address)"
        )
    tp = sp.tensor_parallel
    stages = [gpu_ids[i : i + tp] for i in range(0, len(gpu_ids), tp)]
    if any(len({rig.gpus[i].host for i in st}) > 1 for st in stages):
        notes.append(
            "tensor parallel spans hosts here: every layer's two all-reduces cross the "
            "network (vLLM advises tensor parallel inside a host, pipeline across hosts)"
        )
    else:
        notes.append(
            "tensor parallel inside each host, a pipeline stage per host (vLLM's advice "
            "when hosts are joined by a network)"
        )
    notes += [
        "if NCCL picks the wrong network, set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to "
        "the interface between the hosts on every node",
        "every host needs the model's files at the same path (or access to the Hub)",
    ]
    return ClusterLaunch(engine="vLLM", supported=True, scripts=tuple(scripts), notes=tuple(notes))


def _sglang(
    sp: ServingPlan,
    s: PlanSettings,
    rig: Rig,
    gpu_ids: Sequence[int],
    hosts: list[str],
    head: str,
    model: str,
    notes: list[str],
) -> ClusterLaunch:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", model]
    argv += ["--tp-size", str(sp.tensor_parallel)]
    if sp.pipeline_parallel > 1:
        argv += ["--pp-size", str(sp.pipeline_parallel)]
    argv += ["--context-length", str(sp.max_model_len)]
    argv += ["--mem-fraction-static", f"{sp.memory_utilization:g}"]
    if s.kv_k is KvCacheType.FP8:
        argv += ["--kv-cache-dtype", "fp8_e5m2"]
    if s.max_num_seqs:
        argv += ["--max-running-requests", str(s.max_num_seqs)]
    if s.max_num_batched_tokens:
        argv += ["--chunked-prefill-size", str(s.max_num_batched_tokens)]
    order = [head, *[h for h in hosts if h != head]]
    if len(order) == 1:
        ids = list(gpu_ids)
        script = HostScript(
            host=head, address=_address(rig, head) if head else rig.address or "this machine",
            role="SGLang server", order=1,
            text=_line(_gpu_env(rig, ids), argv),
        )  # fmt: skip
        return ClusterLaunch(engine="SGLang", supported=True, scripts=(script,), notes=tuple(notes))
    head_addr = _address(rig, head)
    scripts = []
    for rank, h in enumerate(order):
        node = [*argv, "--nnodes", str(len(order)), "--node-rank", str(rank)]
        node += ["--dist-init-addr", f"{head_addr}:{SGLANG_DIST_PORT}"]
        ids = [i for i in gpu_ids if rig.gpus[i].host == h]
        scripts.append(
            HostScript(
                host=h,
                address=_address(rig, h),
                role=f"SGLang node {rank}" + (" (serves the API)" if rank == 0 else ""),
                order=rank + 1,
                text=_line(_gpu_env(rig, ids), node),
            )
        )
    notes.append("--pp-size across nodes needs SGLang 0.5 or later")
    if head_addr == HEAD_PLACEHOLDER:
        notes.append(f"replace {HEAD_PLACEHOLDER} with this machine's address on the link")
    return ClusterLaunch(
        engine="SGLang", supported=True, scripts=tuple(scripts), notes=tuple(notes)
    )
