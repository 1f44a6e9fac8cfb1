"""QingLong's define-compile-compute (digest parax-swflowpro-qinglong.md §3): nodes bind their
constants (weights, scalars), ``Net.compile`` plans every launch ONCE into a data package
(the job records and weights as one constants image, the segment sizes and the relocations
that still name a segment or an I/O slot), ``copy_constant`` allocates the three segments and
copies the constants in one transfer, and ``compute`` only binds the I/O blocks and launches.

Addressing (§3.4): a relocation is a word of the constants image that holds an address. A
segment-direct one (a weight, a hidden tensor) is resolved by ``copy_constant``: segment base +
offset. An I/O one names a slot of the I/O-address table and is read through it on the
device: the kernels are the DNN library's (stream.s, activation.s, swgemm.s, conv_implicit.s)
built with ``QIO_BIND`` (kernels/include/dma.inc ``BIND_IO``), and each launch passes the
table and its bindings (record word, slot), so every CPE loads the slot's address into its copy
of the job record. The bindings' number and encoding are the kernel's symbols (``QIO_*`` of
dma.inc), read from each bound program (``binding_word``). ``compute`` writes the I/O table
and nothing else: nothing is re-planned, re-assembled, re-copied or patched (``Stats.details["io_words"]`` counts the bindings).
"""
from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass, field

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ...asm.program import IO_SLOT_BYTES
from ...vm import Machine
from ...kernels import source_path
from ...kernels.cache import cached_program
from ..blas.swgemm import InMemory, gemm_job, KERNEL as GEMM_KERNEL
from ..runtime import Kernel
from ...vm import HostError
from ..dnn import activation, batchnorm, stream
from ..dnn.conv import implicit as conv_implicit
from ..dnn.common import combined
from ..dnn.conv.common import as_pair, make_geometry
from ..dnn.layout_transform import swap_passes, swap_plan, transform
from .device import Block, Device

SEGMENTS = ("constants", "hidden", "io")
ALIGN = 128                   # every block of a segment starts on a DMA line
QIO_HEADER = "\tQIO_BIND = 1\n"


class QingLongError(ArgumentError):
    """A net, package or compute call QingLong does not accept."""


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


@dataclass(frozen=True)
class Ref:
    """Where an address points before the segments exist: `offset` bytes into `segment`
    ("constants" or "hidden"), or I/O slot `offset` ("io")."""
    segment: str
    offset: int


@functools.lru_cache(maxsize=None)
def _bound_program(sources: tuple):
    """The program of kernel `sources` each assembled with QIO_BIND defined (BIND_IO)."""
    from ...asm import assemble_object
    from ...kernels.athread import link_with_runtime

    def build():
        objects = []
        for name in sources:
            path = source_path(name)
            objects.append(assemble_object(QIO_HEADER + path.read_text(encoding="utf-8"),
                                           str(path)))
        return link_with_runtime(objects)
    return cached_program((QIO_HEADER, *sources), build)


@dataclass(frozen=True)
class BoundKernel(Kernel):
    """A DNN-library kernel whose launches read the I/O words of their job record through the
    I/O table (its sources built with QIO_BIND)."""

    @property
    def program(self):
        return _bound_program(self.sources)


def bound(kernel: Kernel) -> BoundKernel:
    return BoundKernel(kernel.sources, kernel.entry, kernel.ldm_end, kernel.stack)


def binding_word(program, slot: int, record_byte: int) -> int:
    """The word by which BIND_IO (kernels/include/dma.inc) stores the address I/O `slot` holds
    into byte `record_byte` of the job record, encoded with the symbols `program` exports."""
    shift, bias = (program.address_of(name) for name in ("QIO_SLOT_SHIFT", "QIO_SLOT_BIAS"))
    if not 0 <= record_byte < 1 << shift:
        raise QingLongError(f"compile: record byte {record_byte} is past the {1 << shift} bytes "
                            "a binding can address (QIO_SLOT_SHIFT)")
    return (slot * IO_SLOT_BYTES + bias) << shift | record_byte


@dataclass
class _Launch:
    kernel: object
    record: int               # byte offset of its job record in the constants image
    flops: int
    bindings: list            # BIND_IO words (binding_word), at most the kernel's QIO_BINDINGS


@dataclass
class Package:
    """What ``compile`` makes: the kernels' linked programs (`code_bytes` of instructions),
    the constants image (job records, then weights), the segment sizes, the launches and the
    relocations (byte offset in the image, Ref)."""
    code_bytes: int
    constants: np.ndarray
    sizes: dict
    launches: list
    relocations: list = field(default_factory=list)


def _check_package(package: Package) -> None:
    """Refuse a package whose relocations do not fit it: a word outside the constants image,
    an address past the end of its segment, a segment or an I/O slot it does not have."""
    sizes, image = package.sizes, package.constants.nbytes
    if sizes.get("constants") != image:
        raise QingLongError(f"package: the constants segment is {sizes.get('constants')} bytes "
                            f"but the image {image}")
    slots = sizes["io"] // IO_SLOT_BYTES
    for at, ref in package.relocations:
        if at % 8 or not 0 <= at <= image - 8:
            raise QingLongError(f"package: relocation at byte {at} is not an aligned word of "
                                f"the {image}-byte constants image")
        if ref.segment not in SEGMENTS:
            raise QingLongError(f"package: relocation at byte {at} names segment "
                                f"{ref.segment!r}, not one of {', '.join(SEGMENTS)}")
        limit = slots if ref.segment == "io" else sizes[ref.segment]
        if not 0 <= ref.offset < limit:
            what = "slot" if ref.segment == "io" else "offset"
            raise QingLongError(f"package: relocation at byte {at} overflows segment "
                                f"{ref.segment!r}: {what} {ref.offset} of its {limit}")


class Node:
    """One operator of a net, its constants bound at construction."""

    def output_shape(self, shape: tuple) -> tuple:
        return shape

    def constants(self, dtype, shape: tuple) -> list:
        """The arrays the node binds, for an input of `shape`."""
        return []

    def scratch(self, dtype, shape: tuple) -> list:
        """Bytes of each scratch block (in the hidden segment) the node's launches use."""
        return []

    def jobs(self, machine, dtype, shape, x: Ref, y: Ref, constants: list) -> list:
        """(kernel, int64 job words, {word index: Ref}, flops) per launch, in order, for input
        `x` of `shape`, output `y` and the Refs of the node's `constants` then its
        `scratch` blocks."""
        raise NotImplementedError


def _stream_job(config, plan: dict, inputs: list, outputs: list):
    """The launch of a streaming-driver job (``stream.job_records`` arguments `plan`, one core
    group) whose streams are the Refs `inputs` / `outputs` (None: a stream it does not move)."""
    kernel = bound(plan["kernel"])       # the records name its routines' code addresses
    (words,) = stream.job_records(config, 1, **dict(plan, kernel=kernel))
    refs = {stream.stream_field(kernel, direction, index): ref
            for direction, refs in (("in", inputs), ("out", outputs))
            for index, ref in enumerate(refs) if ref is not None}
    return kernel, words, refs, 0


class _Elementwise(Node):
    kernel = stream.KERNEL
    body = ""

    def params(self) -> list:
        return []

    def jobs(self, machine, dtype, shape, x, y, constants):
        plan = stream.elementwise_plan(machine.config, self.body, int(np.prod(shape)), dtype,
                                       [0], [0], self.params(), 1, self.kernel)
        return [_stream_job(machine.config, plan, [x], [y])]


class Scale(_Elementwise):
    """y = alpha x (``hostlib.dnn.scale``)."""
    body = "scale"

    def __init__(self, alpha):
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise ArgumentTypeError(f"Scale: alpha must be a real number, got {alpha!r}")
        self.alpha = float(alpha)

    def params(self):
        return [self.alpha]


class ReLU(_Elementwise):
    """y = max(x, 0) (``hostlib.dnn.activation_forward(mode="relu")``)."""
    kernel = activation.KERNEL
    body = "act_relu"


class FC(Node):
    """y = x wᵀ + bias for x (B, I), w (O, I), bias (O,) or None (``dnn.linear_forward``,
    the bias as its rank-1 GEMM). Rows of x, w and y must be whole DMA lines (I and O
    elements a multiple of 128 bytes), as swGEMM places them unpadded."""

    def __init__(self, w, bias=None):
        self.w = np.asarray(w)
        self.b = None if bias is None else np.asarray(bias)
        if self.w.ndim != 2 or (self.b is not None and self.b.shape != (self.w.shape[0],)):
            raise QingLongError(f"FC: w must be (O, I) and bias (O,), got w {self.w.shape}"
                                f"{'' if self.b is None else f' and bias {self.b.shape}'}")

    def output_shape(self, shape):
        if len(shape) < 2 or int(np.prod(shape[1:])) != self.w.shape[1]:
            raise QingLongError(f"FC: the input must be (B, {self.w.shape[1]}) (or (B, ...) "
                                f"of as many) for w {self.w.shape}, got {shape}")
        return (shape[0], self.w.shape[0])

    def constants(self, dtype, shape):
        arrays = [self.w.astype(dtype)]
        if self.b is not None:
            arrays += [np.ones((shape[0], 1), dtype), self.b.astype(dtype).reshape(1, -1)]
        return arrays

    def jobs(self, machine, dtype, shape, x, y, constants):
        config = machine.config
        batch, inputs, outputs = shape[0], self.w.shape[1], self.w.shape[0]
        shape = (batch, inputs)       # a 4-D input read flat: its C order is (B, I) already
        line = config.dma_transaction_bytes
        es = np.dtype(dtype).itemsize
        if (inputs * es) % line or (outputs * es) % line:
            raise QingLongError(f"FC: rows of {inputs} and {outputs} {np.dtype(dtype).name} "
                                f"must be multiples of the {line}-byte DMA line")
        out = InMemory(0, (batch, outputs), np.dtype(dtype))
        launches = []
        if self.b is not None:     # the bias row, broadcast by ones(B, 1) x b, as Caffe's
            ones = InMemory(0, (batch, 1), np.dtype(dtype))
            bias = InMemory(0, (1, outputs), np.dtype(dtype))
            words, fields, flops = gemm_job(ones, bias, out, config=config)
            launches.append((GEMM_KERNEL, words, {fields["A"]: constants[1],
                                                  fields["B"]: constants[2],
                                                  fields["C"]: y}, flops))
        a, w = InMemory(0, shape, np.dtype(dtype)), InMemory(0, self.w.shape, np.dtype(dtype))
        words, fields, flops = gemm_job(a, w, out, beta=1.0 if self.b is not None else 0.0,
                                        trans_b=True, config=config)
        launches.append((GEMM_KERNEL, words, {fields["A"]: x, fields["B"]: constants[0],
                                              fields["C"]: y}, flops))
        return launches


class BN(Node):
    """Inference batch normalisation of NCHW x with the bound running statistics
    (``hostlib.dnn.batchnorm_forward(training=False)``, its streaming scheme: each compute
    finishes the per-channel coefficients into a scratch of the constants segment, then
    applies them)."""

    def __init__(self, gamma, beta, running_mean, running_var, eps=1e-5):
        self.params = [np.asarray(a) for a in (gamma, beta, running_mean, running_var)]
        if any(a.ndim != 1 or a.shape != self.params[0].shape for a in self.params):
            raise QingLongError("BN: gamma, beta, running_mean and running_var must be one "
                                f"vector each of one length, got {[a.shape for a in self.params]}")
        self.eps = eps

    def output_shape(self, shape):
        channels = self.params[0].shape[0]
        if len(shape) != 4 or shape[1] != channels:
            raise QingLongError(f"BN: the input must be (B, {channels}, H, W), got {shape}")
        return shape

    def constants(self, dtype, shape):
        channels = self.params[0].shape[0]
        record = np.stack([a.astype(dtype) for a in self.params], axis=1)
        return [record, np.zeros((channels, 4), dtype),
                np.zeros(channels * batchnorm.APPLY_BYTES, np.uint8)]

    def jobs(self, machine, dtype, shape, x, y, constants):
        try:
            finish, apply = batchnorm.inference_plans(machine, shape, dtype, self.eps)
        except ArgumentError as exc:
            raise QingLongError(f"BN: {exc}") from None
        record, out, coefficients = constants
        return [_stream_job(machine.config, finish, [None, record], [out, coefficients]),
                _stream_job(machine.config, apply, [x, coefficients], [y])]


class Conv(Node):
    """y = conv(x, w) + bias of NCHW x, w (N_o, N_i, K_r, K_c), bias (N_o,) or None
    (``hostlib.dnn.conv2d_forward(algo="implicit")``: x to RCNB, the implicit-GEMM kernel,
    y back to NCHW, all on the VM). The weights are rearranged into the kernel's one matrix
    per tap once, at compile (``dnn.transform`` on a machine of their own)."""

    def __init__(self, w, bias=None, stride=1, padding=0):
        self.w = np.asarray(w)
        self.b = None if bias is None else np.asarray(bias)
        if self.w.ndim != 4 or (self.b is not None and self.b.shape != (self.w.shape[0],)):
            given = "" if self.b is None else f" and bias {self.b.shape}"
            raise QingLongError(f"Conv: w must be (N_o, N_i, K_r, K_c) and bias (N_o,), got w "
                                f"{self.w.shape}{given}")
        try:
            self.stride, self.padding = as_pair("stride", stride, 1), as_pair("padding", padding, 0)
        except HostError as exc:
            raise QingLongError(f"Conv: {exc}") from None

    def geometry(self, shape):
        if len(shape) != 4:
            raise QingLongError(f"Conv: the input must be NCHW (B, N_i, R_i, C_i), got {shape}")
        try:
            return make_geometry(shape, self.w.shape, self.stride, self.padding, "w")
        except HostError as exc:
            raise QingLongError(f"Conv: {exc}") from None

    def output_shape(self, shape):
        return self.geometry(shape).y_shape

    def constants(self, dtype, shape):
        taps, _ = transform(self.w.astype(dtype), "NCHW", "RCNB")
        bias = np.zeros(self.w.shape[0], dtype) if self.b is None else self.b.astype(dtype)
        return [taps, bias]

    def _passes(self, shape):
        geo = self.geometry(shape)
        return (swap_passes(geo.x_shape, "NCHW", "RCNB"),
                swap_passes((geo.r_o, geo.c_o, geo.n_o, geo.batch), "RCNB", "NCHW"))

    def scratch(self, dtype, shape):
        geo, (to_rcnb, to_nchw) = self.geometry(shape), self._passes(shape)
        es = np.dtype(dtype).itemsize
        y_bytes = int(np.prod(geo.y_shape)) * es
        return ([int(np.prod(geo.x_shape)) * es] * len(to_rcnb) + [y_bytes]
                + [y_bytes] * (len(to_nchw) - 1))

    def jobs(self, machine, dtype, shape, x, y, constants):
        config, es = machine.config, np.dtype(dtype).itemsize
        geo = self.geometry(shape)
        reason = conv_implicit.supports(geo, "forward", dtype, config)
        if reason:
            raise QingLongError(f"Conv: {reason}")
        taps, bias, *scratch = constants
        to_rcnb, to_nchw = self._passes(shape)
        x_rcnb, y_rcnb = scratch[len(to_rcnb) - 1], scratch[len(to_rcnb)]
        launches = _transform_jobs(config, es, to_rcnb, [x, *scratch[:len(to_rcnb)]])
        blocking = conv_implicit.choose(geo, es, config)
        layout = conv_implicit.ldm_layout(geo, es, blocking, config)
        names = ("x", "w", "y", "bias")
        words = conv_implicit.job_words(geo, es, blocking, layout, dict.fromkeys(names, 0),
                                   geo.n_i * geo.n_o * es)
        record = conv_implicit.KERNEL.record("J_", "JOB_BYTES")
        launches.append((conv_implicit.KERNEL, words,
                         {record.offset(name) // 8: ref
                          for name, ref in zip(names, (x_rcnb, taps, y_rcnb, bias))}, geo.flops))
        chain = [y_rcnb, *scratch[len(to_rcnb) + 1:], y]
        return launches + _transform_jobs(config, es, to_nchw, chain)


def _transform_jobs(config, es, passes, chain):
    """The launches of ``dnn.transform``'s `passes` (A, P, Q, D), pass k from chain[k] to
    chain[k + 1] (Refs)."""
    return [_stream_job(config, swap_plan(config, es, *swap, 0, 0), [source], [target])
            for swap, source, target in zip(passes, chain, chain[1:])]


class Net:
    """Nodes applied in order to one input of `input_shape` and `dtype` (float32 or float64)
    on `machine` (a new one by default): ``compile``, ``copy_constant`` once, then
    ``compute`` as often as wanted."""

    def __init__(self, nodes, input_shape, dtype=np.float32, *, machine=None, engine="c"):
        nodes = list(nodes)
        if not nodes or not all(isinstance(node, Node) for node in nodes):
            raise QingLongError("Net: nodes must be a non-empty list of qinglong nodes")
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise QingLongError(f"Net: dtype must be float32 or float64, got {dtype!r}")
        self.nodes, self.dtype, self.engine = nodes, np.dtype(dtype), engine
        self.machine = machine or Machine()
        self.device = Device(machine=self.machine)
        self.shapes = [tuple(int(d) for d in input_shape)]
        for node in nodes:
            self.shapes.append(tuple(node.output_shape(self.shapes[-1])))
        self.package = None
        self.segments = None      # segment -> Block, once copy_constant ran

    @property
    def input_shape(self):
        return self.shapes[0]

    @property
    def output_shape(self):
        return self.shapes[-1]

    def compile(self) -> Package:
        """Plan every launch once: the data package (REOFF: job records then weights in the
        constants image, offsets by prefix sums per segment, relocations kept to fill)."""
        weights, hidden, constant_bytes = [], 0, 0
        # tensors: slot 0 the input, slot 1 the output, the others hidden
        tensors = [Ref("io", 0)]
        for shape in self.shapes[1:-1]:
            tensors.append(Ref("hidden", hidden))
            hidden += _aligned(int(np.prod(shape)) * self.dtype.itemsize)
        tensors.append(Ref("io", 1))
        planned, code = [], {}
        for index, node in enumerate(self.nodes):
            const_refs = []
            for array in node.constants(self.dtype, self.shapes[index]):   # placed after the
                # records: the offset is an index into weights until then
                const_refs.append(Ref("weights", len(weights)))
                weights.append(array)
            for nbytes in node.scratch(self.dtype, self.shapes[index]):
                const_refs.append(Ref("hidden", hidden))
                hidden += _aligned(nbytes)
            for kernel, words, refs, flops in node.jobs(self.machine, self.dtype,
                                                        self.shapes[index],
                                                        tensors[index], tensors[index + 1],
                                                        const_refs):
                planned.append((kernel, words, refs, flops))
                code[kernel.sources] = kernel.program
        record_offsets = []
        for _, words, _, _ in planned:
            record_offsets.append(constant_bytes)
            constant_bytes += _aligned(words.nbytes)
        weight_offsets = []
        for array in weights:
            weight_offsets.append(constant_bytes)
            constant_bytes += _aligned(array.nbytes)
        image = np.zeros(constant_bytes, np.uint8)
        launches, relocations = [], []
        for (kernel, words, refs, flops), at in zip(planned, record_offsets):
            image[at:at + words.nbytes] = words.view(np.uint8)
            kernel = bound(kernel)
            bindings = [binding_word(kernel.program, ref.offset, 8 * word)
                        for word, ref in sorted(refs.items()) if ref.segment == "io"]
            most = kernel.symbol("QIO_BINDINGS")
            if len(bindings) > most:
                raise QingLongError(f"compile: a launch of {kernel.entry} reads {len(bindings)} "
                                    f"I/O slots; a launch binds at most {most} (QIO_BINDINGS)")
            launches.append(_Launch(kernel, at, flops, bindings))
            for word, ref in refs.items():
                if ref.segment == "weights":
                    ref = Ref("constants", weight_offsets[ref.offset])
                relocations.append((at + 8 * word, ref))
        for array, at in zip(weights, weight_offsets):
            image[at:at + array.nbytes] = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        code_bytes = sum(prog.code_end - prog.code_base for prog in code.values())
        self.package = Package(code_bytes=code_bytes, constants=image,
                               sizes=dict(constants=constant_bytes, hidden=hidden,
                                          io=2 * IO_SLOT_BYTES),
                               launches=launches, relocations=relocations)
        self.segments = None
        return self.package

    def copy_constant(self) -> None:
        """Allocate the constants, hidden and I/O segments, resolve the segment-direct
        relocations and copy the constants image in one transfer."""
        if self.package is None:
            raise QingLongError("copy_constant: compile the net first")
        if self.segments is not None:
            raise QingLongError("copy_constant: the constants are on the device already")
        _check_package(self.package)
        sizes = self.package.sizes
        segments = {name: self.device.malloc(max(1, sizes[name])) for name in SEGMENTS}
        image = self.package.constants.copy()
        words = image.view(np.int64)
        for at, ref in self.package.relocations:
            if ref.segment != "io":
                words[at // 8] = segments[ref.segment].address + ref.offset
        self.device.copy_in(segments["constants"], image)
        self.segments = segments

    def compute(self, inputs, outputs):
        """Run the net on device blocks: `inputs` = [the input's Block], `outputs` = [the
        output's Block]. Writes the I/O table, then launches the planned kernels, which read
        their I/O words through it; returns Stats (details: io_words bound, copy_cycles)."""
        if self.segments is None:
            raise QingLongError("compute: compile and copy_constant first")
        blocks = []
        for name, given, shape in (("inputs", inputs, self.input_shape),
                                   ("outputs", outputs, self.output_shape)):
            if not isinstance(given, (list, tuple)) or len(given) != 1:
                raise QingLongError(f"compute: {name} must be a list of one Block (slot "
                                    f"{len(blocks)}), got {given!r}")
            self.device.check(given[0], int(np.prod(shape)) * self.dtype.itemsize,
                              f"compute: {name}[0]")
            blocks.append(given[0])
        table = np.array([block.address for block in blocks], np.int64)
        unbound = sorted({ref.offset for _, ref in self.package.relocations
                          if ref.segment == "io" and ref.offset >= len(table)})
        if unbound:
            raise QingLongError(f"compute: I/O slot(s) {unbound} of the package are unbound "
                                f"(compute binds slots 0..{len(table) - 1}: the input, the output)")
        copy = self.device.copy_in(self.segments["io"], table)
        base, io_table = self.segments["constants"].address, self.segments["io"].address
        parts = []
        for launch in self.package.launches:
            unbound = [0] * (launch.kernel.symbol("QIO_BINDINGS") - len(launch.bindings))
            first, *rest = launch.bindings + unbound
            args = [base + launch.record, first, io_table, *rest]      # $16 .. $21
            parts.append(launch.kernel.launch_cgs(self.machine, [args], flops=launch.flops,
                                                  engine=self.engine))
        return combined(parts, op="qinglong_compute", copy_cycles=copy,
                        io_words=sum(len(launch.bindings) for launch in self.package.launches))

    def run(self, x):
        """One sample end to end: allocate the I/O blocks, copy x in, compute, copy out, free.
        Returns (y, Stats of compute)."""
        x = np.asarray(x, self.dtype)
        if x.shape != self.input_shape:
            raise QingLongError(f"run: x must be {self.input_shape}, got {x.shape}")
        device = self.device
        x_block = device.malloc(x.nbytes)
        y_block = device.malloc(int(np.prod(self.output_shape)) * self.dtype.itemsize)
        try:
            device.copy_in(x_block, x)
            stats = self.compute([x_block], [y_block])
            return device.copy_out(y_block, self.output_shape, self.dtype), stats
        finally:
            device.free(x_block)
            device.free(y_block)
