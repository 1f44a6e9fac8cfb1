"""swsim as an ONNX backend (``onnx.backend.base.Backend``'s interface, as onnxruntime.backend
and onnx's reference backend offer it): ``prepare``, ``run_model``, ``run_node``,
``supports_device``, ``is_compatible``, so ``onnx.backend.test.BackendTest(backend,
__name__)`` runs onnx's conformance suite on the VM. ``unsupported_reason(model)`` says why a
model is refused (``is_compatible`` is False then). Options of ``prepare`` are ``Session``'s
(machine, cgs, engine, check, minimum_work)."""
from __future__ import annotations

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from .ir import GraphError
from .onnx_import import import_onnx, load_model, to_graph
from .ops import CONSTANT_INPUTS, OPS
from .runtime import Session

DEVICES = ("CPU",)       # ONNX's device names; the emulator runs on the host's CPU


def _bound_inputs(model: ModelProto) -> list:
    """Graph inputs some node reads as a constant (a shape, axes): bound at run time."""
    inputs = {value.name for value in model.graph.input}
    return sorted({node.input[i] for node in model.graph.node
                   for i in CONSTANT_INPUTS.get(node.op_type, ()) if i < len(node.input)
                   and node.input[i] in inputs})


def unsupported_reason(model, device: str = "CPU"):
    """Why swsim cannot run `model` on `device` (None when it can)."""
    if not SwsimBackend.supports_device(device):
        return f"device {device!r} is not one of {DEVICES}"
    try:
        model = load_model(model)
        missing = sorted({n.op_type for n in model.graph.node if n.op_type not in OPS})
        if missing:
            return f"operators not implemented: {', '.join(missing)}"
        if not _bound_inputs(model):
            import_onnx(model)
        else:
            to_graph(model)
    except GraphError as error:
        return str(error)
    return None


class SwsimRep(BackendRep):
    """A prepared model: ``run(inputs)`` -> the outputs in the graph's order."""

    def __init__(self, model: ModelProto, options: dict):
        self.model, self.options = model, options
        self.bound = _bound_inputs(model)
        self.input_names = [v.name for v in model.graph.input
                            if v.name not in {t.name for t in model.graph.initializer}]
        self.session = None if self.bound else Session(import_onnx(model), **options)

    def run(self, inputs, **kwargs):
        """Outputs for `inputs`: a dict by name, or arrays (or TensorProtos) in the order
        of the graph's inputs."""
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = dict(zip(self.input_names, inputs))
        session = self.session
        if session is None:     # inputs read as constants: import with their values
            graph = import_onnx(self.model,
                                constants={n: _array(feeds.pop(n)) for n in self.bound})
            session = Session(graph, **self.options)
        outputs = session.run({k: _array(v) for k, v in feeds.items()})
        self.records = session.records
        return tuple(outputs[name] for name in session.graph.outputs)


def _array(value):
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


class SwsimBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs) -> bool:
        return unsupported_reason(model, device) is None

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).split(":")[0].upper() in DEVICES

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs) -> SwsimRep:
        if not cls.supports_device(device):
            raise GraphError(f"device {device!r} is not one of {DEVICES}")
        return SwsimRep(load_model(model), kwargs)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """One NodeProto on `inputs` (arrays in its input order); outputs_info, if given,
        (dtype, shape) per output, else float32 of unknown shape is declared."""
        names = [n for n in node.input if n]
        values = [np.asarray(v) for v in inputs]
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in zip(names, values)]
        graph_outputs = [helper.make_tensor_value_info(n, 1, None) for n in node.output if n]
        model = helper.make_model(helper.make_graph([node], "run_node", graph_inputs,
                                                    graph_outputs))
        return cls.run_model(model, dict(zip(names, values)), device, **kwargs)


prepare = SwsimBackend.prepare
run_model = SwsimBackend.run_model
run_node = SwsimBackend.run_node
supports_device = SwsimBackend.supports_device
is_compatible = SwsimBackend.is_compatible
