"""A replay of how llama.cpp b11434 sizes its compute buffers, for graphs whose peak the
per-phase formulas cannot place: the graph's tensors (shapes, strides, views), the
scheduler's backend assignment and split inputs (ggml/src/ggml-backend.cpp,
ggml_backend_sched_split_graph) and ggml-alloc's best-fit placement
(ggml/src/ggml-alloc.c, ggml_gallocr_alloc_graph_impl and ggml_dyn_tallocr_alloc).

Only what decides where a tensor lands is kept: sizes and layouts (in-place reuse
needs the same layout), the graph's order (ggml_visit_parents: depth first, sources
left to right), which sources a node reads (a parent is freed after its last child)
and which backend runs each node (a source from another backend is copied into the
split that reads it, allocated at the split's start and kept for every later split of
that backend). A builder (graph_deepseek2) describes the model's graph with `Graph`."""

from __future__ import annotations

from collections.abc import Sequence

# ggml types (ggml.h enum ggml_type) and their element sizes
F32, F16, I32, I64 = 0, 1, 26, 27
_TYPE_SIZE = {F32: 4, F16: 2, I32: 4, I64: 8}
FLAG_INPUT, FLAG_OUTPUT = 1, 2
# ggml_op_can_inplace (ggml-alloc.c): ops whose result may take a parent's memory
_INPLACE = frozenset(
    {"ADD", "ADD1", "SUB", "MUL", "DIV", "SCALE", "RMS_NORM", "ROPE", "SOFT_MAX", "UNARY"}
)
_VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
ALIGNMENT = 32  # the CPU buffer type's alignment, which an RPC server reports


class Tensor:
    __slots__ = (
        "copy",
        "flags",
        "home",
        "name",
        "nb",
        "ne",
        "op",
        "src",
        "type",
        "view_src",
        "weight",
    )

    def __init__(
        self,
        name: str,
        type_: int,
        ne: Sequence[int],
        nb: Sequence[int] | None = None,
        op: str = "NONE",
        src: Sequence[Tensor] = (),
        view_src: Tensor | None = None,
    ) -> None:
        self.name, self.type, self.op = name, type_, op
        self.ne = tuple(ne) + (1,) * (4 - len(ne))
        self.nb = tuple(nb) if nb is not None else _contiguous(type_, self.ne)
        self.src = list(src)
        self.view_src = view_src
        self.home: int | None = None  # backend of a pre-allocated buffer (weights, KV)
        self.weight = False
        self.copy = False  # a split's input copy: a node of the scheduler's graph
        self.flags = 0

    @property
    def nbytes(self) -> int:
        if any(n <= 0 for n in self.ne):
            return 0
        return _TYPE_SIZE[self.type] + sum(
            (n - 1) * b for n, b in zip(self.ne, self.nb, strict=True)
        )

    def layout(self) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        return self.type, self.ne, self.nb


def _contiguous(type_: int, ne: tuple[int, ...]) -> tuple[int, ...]:
    nb = [_TYPE_SIZE[type_]]
    for n in ne[:3]:
        nb.append(nb[-1] * n)
    return tuple(nb)


class Graph:
    """The ops a builder uses, with ggml's result shapes, and the graph's node order."""

    def __init__(self) -> None:
        self.nodes: list[Tensor] = []
        self.leafs: list[Tensor] = []
        self._seen: set[int] = set()
        self.pinned: dict[int, int] = {}  # ggml_backend_sched_set_tensor_backend

    def expand(self, t: Tensor) -> None:
        """ggml_build_forward_expand: sources depth first, left to right."""
        stack: list[tuple[Tensor, int]] = [(t, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in self._seen:
                continue
            if i < len(node.src):
                stack.append((node, i + 1))
                if id(node.src[i]) not in self._seen:
                    stack.append((node.src[i], 0))
                continue
            self._seen.add(id(node))
            (self.leafs if node.op == "NONE" else self.nodes).append(node)

    # leafs
    def new(
        self, name: str, type_: int, *ne: int, flags: int = 0, home: int | None = None
    ) -> Tensor:
        t = Tensor(name, type_, ne)
        t.flags, t.home = flags, home
        return t

    def weight(self, name: str, home: int, *ne: int) -> Tensor:
        t = self.new(name, F16, *ne, home=home)  # the type of a weight does not matter here
        t.weight = True
        return t

    # views
    def view(self, a: Tensor, ne: Sequence[int], nb: Sequence[int], name: str = "") -> Tensor:
        """ggml_view_Nd: `ne` and all four strides `nb` given (the offset does not matter:
        while sizing, every tensor's data is NULL, so a view and its source compare equal)."""
        return Tensor(name or a.name + " (view)", a.type, ne, nb, "VIEW", [a], _root(a))

    def reshape(self, a: Tensor, *ne: int, name: str = "") -> Tensor:
        return Tensor(name or a.name + " (reshaped)", a.type, ne, None, "RESHAPE", [a], _root(a))

    def permute(self, a: Tensor, *axes: int, name: str = "") -> Tensor:
        ne, nb = [0] * 4, [0] * 4
        for i, ax in enumerate(axes):
            ne[ax], nb[ax] = a.ne[i], a.nb[i]
        return Tensor(name or a.name + " (permuted)", a.type, ne, nb, "PERMUTE", [a], _root(a))

    # ops
    def op(
        self,
        op: str,
        name: str,
        src: Sequence[Tensor],
        ne: Sequence[int] | None = None,
        type_: int = F32,
    ) -> Tensor:
        return Tensor(name, type_, src[0].ne if ne is None else ne, None, op, src)

    def mul_mat(self, w: Tensor, x: Tensor, name: str) -> Tensor:
        return self.op("MUL_MAT", name, [w, x], (w.ne[1], x.ne[1], x.ne[2], x.ne[3]))

    def mul_mat_id(self, w: Tensor, x: Tensor, ids: Tensor, name: str) -> Tensor:
        return self.op("MUL_MAT_ID", name, [w, x, ids], (w.ne[1], ids.ne[0], x.ne[2], 1))

    def get_rows(self, a: Tensor, ids: Tensor, name: str) -> Tensor:
        return self.op("GET_ROWS", name, [a, ids], (a.ne[0], ids.ne[0], ids.ne[1], ids.ne[2]))

    def concat(self, a: Tensor, b: Tensor, name: str) -> Tensor:
        return self.op("CONCAT", name, [a, b], (a.ne[0] + b.ne[0], *a.ne[1:]))

    def set_rows(self, dst: Tensor, rows: Tensor, idx: Tensor) -> Tensor:
        t = Tensor(
            dst.name + " (view)", dst.type, dst.ne, dst.nb, "SET_ROWS", [rows, idx, dst], _root(dst)
        )
        return t


def _root(a: Tensor) -> Tensor:
    return a.view_src if a.view_src is not None else a


def _is_view_op(t: Tensor) -> bool:
    return t.op in _VIEW_OPS


Placed = list[tuple[Tensor, int]]


def split_graph(g: Graph, n_backends: int, n_copies: int = 1) -> tuple[Placed, Placed]:
    """ggml_backend_sched_split_graph: each node's backend, then the graph the allocator
    sees as (leafs, nodes), each with its backend, in order. Each split's input copies
    (and the views that keep their sources alive) open it. With pipeline parallelism
    (`n_copies` > 1, GGML_SCHED_MAX_COPIES) every input has that many copies, graph
    inputs and outputs at once: leafs, allocated before any node and never freed.
    Backends are the devices in order and the CPU last; every backend runs every op.
    The graph's nodes read the copies afterwards: build it again for another split."""
    cpu = n_backends - 1
    bid: dict[int, int] = {}

    def get(t: Tensor) -> int:
        return bid.get(id(t), -1)

    def from_cur(t: Tensor) -> int:
        if t.home is not None:
            return t.home
        if t.view_src is not None and t.view_src.home is not None:
            return t.view_src.home
        if t.flags & FLAG_INPUT:
            return cpu
        if t.op not in ("ROPE", "FLASH_ATTN_EXT"):
            for s in t.src:
                if s.weight and s.home is not None:
                    return s.home
        return -1

    for t in g.leafs:
        bid[id(t)] = from_cur(t)
    for t in g.nodes:
        bid[id(t)] = g.pinned.get(id(t), -1)
        if bid[id(t)] == -1:
            bid[id(t)] = from_cur(t)
    nodes = [t for t in g.nodes if not _is_view_op(t)]
    # pass 2: GPU backends spread down and up past unassigned nodes (the CPU stops
    # them), then any backend does
    for seq, gpu_only in ((nodes, True), (nodes[::-1], True), (nodes, False), (nodes[::-1], False)):
        cur = -1
        for t in seq:
            b = get(t)
            if b != -1:
                cur = -1 if gpu_only and b == cpu else b
            elif cur != -1:
                bid[id(t)] = cur

    def buffer_backend(t: Tensor) -> int:
        root = _root(t)
        if root.home is not None:
            return root.home
        b = get(t)
        return get(t.view_src) if b == -1 and t.view_src is not None else b

    # pass 3: a node still unassigned goes where most of its sources are
    for t in nodes:
        if get(t) == -1:
            best, best_n = -1, -1
            for b in range(n_backends):
                n = sum(1 for s in t.src if buffer_backend(s) == b)
                if n > best_n:
                    best, best_n = b, n
            bid[id(t)] = best
    # pass 4: views and unassigned sources
    for t in g.nodes:
        if t.view_src is not None and get(t) == -1:
            bid[id(t)] = get(t.view_src)
        for s in t.src:
            if get(s) == -1:
                bid[id(s)] = get(s.view_src) if s.view_src is not None else get(t)
        if get(t) == -1:
            bid[id(t)] = 0
    # pass 5: splits and their input copies
    copies: dict[tuple[int, int], Tensor] = {}
    leafs: Placed = []
    out: Placed = []
    split: Placed = []
    inputs: list[tuple[Tensor, Tensor]] = []
    cur = next((get(t) for t in g.nodes if not _is_view_op(t)), 0)

    def close() -> None:
        for src, cpy in inputs:
            dep = Tensor(src.name + " (view)", src.type, src.ne, src.nb, "NONE", [src], _root(src))
            out.append((dep, get(src)))
            out.append((cpy, cur))
            if n_copies > 1:
                leafs.append((cpy, cur))
                leafs.extend(
                    (_copy(src, cur, FLAG_INPUT | FLAG_OUTPUT), cur) for _ in range(n_copies - 1)
                )
        out.extend(split)

    for t in g.nodes:
        if not _is_view_op(t):
            b = get(t)
            if b != cur:
                close()
                split, inputs, cur = [], [], b
            for j, s in enumerate(t.src):
                if get(s) != cur and buffer_backend(s) != cur:
                    key = (id(s), cur)
                    cpy = copies.get(key)
                    if cpy is None:
                        cpy = _copy(s, cur, FLAG_INPUT | FLAG_OUTPUT if n_copies > 1 else 0)
                        copies[key] = cpy
                        inputs.append((s, cpy))
                    t.src[j] = cpy
        split.append((t, get(t)))
    close()
    return leafs, out


def _copy(src: Tensor, backend: int, flags: int) -> Tensor:
    """ggml_dup_tensor_layout: the same shape and strides, in the split's backend."""
    t = Tensor(f"{src.name}#{backend}", src.type, src.ne, src.nb)
    t.copy, t.flags = True, flags
    return t


class _Tallocr:
    """ggml_dyn_tallocr: free blocks by offset; the best fit among all but the last, else
    the last (the end of the buffer, which grows)."""

    def __init__(self) -> None:
        self.blocks: list[list[int]] = [[0, 1 << 62]]
        self.max = 0

    def alloc(self, size: int) -> int:
        size = _align(size)
        best, best_size = -1, 0
        for i, (_, z) in enumerate(self.blocks[:-1]):
            if z >= size and (best == -1 or z <= best_size):
                best, best_size = i, z
        if best == -1:
            best = len(self.blocks) - 1
        block = self.blocks[best]
        off = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.max = max(self.max, off + size)
        return off

    def free(self, off: int, size: int) -> None:
        size = _align(size)
        b = self.blocks
        for i, (o, z) in enumerate(b):
            if o + z == off:
                b[i][1] += size
                if i + 1 < len(b) and b[i][0] + b[i][1] == b[i + 1][0]:
                    b[i][1] += b[i + 1][1]
                    del b[i + 1]
                return
            if off + size == o:
                b[i][0], b[i][1] = off, z + size
                if i > 0 and b[i - 1][0] + b[i - 1][1] == off:
                    b[i - 1][1] += b[i][1]
                    del b[i]
                return
        j = 0
        while j < len(b) and b[j][0] < off:
            j += 1
        b.insert(j, [off, size])


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class _Node:
    __slots__ = ("allocated", "buffer", "n_children", "n_views", "offset")

    def __init__(self) -> None:
        self.n_children = self.n_views = 0
        self.allocated = False
        self.buffer = -1
        self.offset = 0


def allocate(sched: tuple[Placed, Placed]) -> dict[int, int]:
    """ggml_gallocr_alloc_graph_impl over the scheduler's graph (`split_graph`): the peak
    bytes of each backend's buffer (the CPU's own inputs are left out)."""
    leafs, graph = sched
    hn: dict[int, _Node] = {}
    bufs: dict[int, _Tallocr] = {}

    def h(t: Tensor) -> _Node:
        n = hn.get(id(t))
        if n is None:
            n = hn[id(t)] = _Node()
        return n

    def alloc(t: Tensor, buffer: int) -> None:
        n = h(t)
        if t.home is not None or n.allocated or t.view_src is not None:
            return
        if t.op == "NONE" and not t.copy:
            return  # the CPU's inputs: not in any device's buffer
        n.allocated = True
        if t.op in _INPLACE:
            # a parent this allocator placed (never a view), not an output, laid out
            # alike and read by this node alone
            for p in t.src:
                pn = hn.get(id(p))
                if pn is None or not pn.allocated or p.flags & FLAG_OUTPUT:
                    continue
                if p.layout() != t.layout() or pn.n_children != 1 or pn.n_views != 0:
                    continue
                n.buffer, n.offset = pn.buffer, pn.offset
                pn.allocated = False
                _free_extra(bufs[pn.buffer], pn.offset, p.nbytes, t.nbytes)
                return
        n.buffer = buffer
        n.offset = bufs.setdefault(buffer, _Tallocr()).alloc(t.nbytes)

    def free(t: Tensor) -> None:
        if t.flags & FLAG_OUTPUT:
            return
        n = h(t)
        bufs[n.buffer].free(n.offset, t.nbytes)
        n.allocated = False

    for t, b in leafs:
        alloc(t, b)
    for t, _ in graph:
        if t.view_src is not None and t.op != "NONE":
            h(t.view_src).n_views += 1
        for s in t.src:
            h(s).n_children += 1
    for t, b in graph:
        for s in t.src:
            alloc(s, b)
        alloc(t, b)
        for s in t.src:
            sn = h(s)
            sn.n_children -= 1
            if sn.n_children == 0 and sn.n_views == 0:
                if s.view_src is not None:
                    vn = h(s.view_src)
                    vn.n_views -= 1
                    if vn.n_views == 0 and vn.n_children == 0 and vn.allocated:
                        free(s.view_src)
                elif sn.allocated:
                    free(s)
    return {b: a.max for b, a in bufs.items()}


def _free_extra(buf: _Tallocr, offset: int, parent: int, node: int) -> None:
    """ggml_gallocr_free_extra_space: a smaller in-place result frees the parent's tail."""
    p, n = _align(parent), _align(node)
    if p > n:
        buf.free(offset + n, p - n)
