"""ONNX models to the graph IR (docs/graph.md "Import"): a file, bytes or a ``ModelProto`` of
any opset from ``MIN_OPSET`` to onnx's current one; initializers and ``Constant`` values become
numpy constants, attributes Python values (tensors as numpy arrays), each node keeps the opset
of its domain. Then the default passes run (``passes.DEFAULT``): constant folding of the
shape-only subgraphs, inference-mode Dropout and Identity removal, shape inference. Anything
malformed or outside ``ops.OPS`` raises GraphError naming the node."""
from __future__ import annotations

import os

import numpy as np

from .ir import Graph, GraphError, Node, TensorInfo
from .ops import OPS

MIN_OPSET = 6          # the oldest opset of onnx's shipped test data


def _onnx():
    import onnx
    return onnx


def load_model(source):
    """A ModelProto from a path, bytes or a ModelProto; GraphError for unreadable files."""
    onnx = _onnx()
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise GraphError(f"cannot read the model {str(source)!r}: {error.strerror}") from None
        where = f"{str(source)!r}"
    elif isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "the model bytes"
    else:
        raise GraphError(f"model must be a path, bytes or an onnx.ModelProto, got "
                         f"{type(source).__name__}")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as error:    # protobuf's DecodeError (its class differs by backend)
        raise GraphError(f"{where} is not a valid ONNX model (truncated or corrupt: "
                         f"{error})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise GraphError(f"{where} is not a valid ONNX model (no graph or no nodes; "
                         "truncated or corrupt?)")
    return model


def _array(tensor, where):
    from onnx import numpy_helper
    if tensor.data_location == 1:     # EXTERNAL
        raise GraphError(f"{where}: tensor {tensor.name!r} has external data, which is not "
                         "supported (save the model with its data inside)")
    try:
        return np.array(numpy_helper.to_array(tensor))
    except Exception as error:
        raise GraphError(f"{where}: tensor {tensor.name!r} cannot be read ({error})") from None


def _attribute(attr, where):
    from onnx import AttributeProto, helper
    if attr.type == AttributeProto.TENSOR:
        return _array(attr.t, where)
    if attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS,
                     AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS,
                     AttributeProto.TENSORS, AttributeProto.TYPE_PROTO,
                     AttributeProto.TYPE_PROTOS):
        raise GraphError(f"{where}: attribute {attr.name!r} is a "
                         f"{AttributeProto.AttributeType.Name(attr.type)}, not supported")
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if attr.type in (AttributeProto.INTS, AttributeProto.FLOATS, AttributeProto.STRINGS):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def _value_info(value, where, fixed=None) -> TensorInfo:
    """A graph input's TensorInfo; ``fixed``: its shape given by the caller."""
    from onnx.helper import tensor_dtype_to_np_dtype
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise GraphError(f"{where} {value.name!r} is a {kind}, not a tensor (not supported)")
    tensor = value.type.tensor_type
    dims = None if fixed is None else [int(d) for d in fixed]
    for dim in () if fixed is not None else tensor.shape.dim:
        if not dim.HasField("dim_value"):
            raise GraphError(f"{where} {value.name!r} has a symbolic or unknown dimension "
                             f"({dim.dim_param or '?'}); give fixed shapes (e.g. "
                             "batch=N)")
        dims = (dims or []) + [int(dim.dim_value)]
    try:
        dtype = np.dtype(tensor_dtype_to_np_dtype(tensor.elem_type))
    except Exception:
        raise GraphError(f"{where} {value.name!r} has an unknown element type "
                         f"{tensor.elem_type}") from None
    return TensorInfo(dtype, tuple(dims or ()))


def to_graph(model, *, shapes=None) -> Graph:
    """The IR of a ModelProto (no passes run). ``shapes`` (name -> shape) fixes graph inputs
    with symbolic dimensions."""
    opsets = {o.domain or "ai.onnx": int(o.version) for o in model.opset_import}
    if not opsets:
        opsets["ai.onnx"] = 1        # IR version 2 models carry no opset_import
    version = opsets.get("ai.onnx", 0)
    onnx = _onnx()
    if not MIN_OPSET <= version <= onnx.defs.onnx_opset_version():
        raise GraphError(f"the model's opset {version} is outside the supported "
                         f"{MIN_OPSET}..{onnx.defs.onnx_opset_version()}")
    g = model.graph
    initializers = {t.name: _array(t, "initializer") for t in g.initializer}
    inputs = {}
    for value in g.input:
        if value.name in initializers:
            continue
        inputs[value.name] = _value_info(value, "graph input", (shapes or {}).get(value.name))
    nodes = []
    for index, proto in enumerate(g.node):
        name = proto.name or f"{proto.op_type}_{index}"
        where = f"node {name!r} ({proto.op_type})"
        domain = proto.domain or "ai.onnx"
        if domain not in ("ai.onnx",):
            raise GraphError(f"{where}: domain {domain!r} is not supported (only the default "
                             "ONNX domain)")
        if proto.op_type not in OPS:        # training's operators are not ONNX's
            raise GraphError(f"{where}: operator {proto.op_type} is not implemented")
        attrs = {a.name: _attribute(a, where) for a in proto.attribute}
        nodes.append(Node(name, proto.op_type, list(proto.input), list(proto.output), attrs,
                          opsets.get(domain, version)))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        seen = set()
        for node in nodes:               # make node names unique (reports name them)
            base, k = node.name, 1
            while node.name in seen:
                node.name, k = f"{base}_{k}", k + 1
            seen.add(node.name)
    return Graph(g.name or "graph", nodes, inputs, [v.name for v in g.output], initializers)


def import_onnx(source, *, shapes=None, constants=None, passes=None) -> Graph:
    """Load (``load_model``), convert (``to_graph``) and run the passes (default
    ``passes.DEFAULT``) on an ONNX model; the Graph comes back with every tensor's info.
    ``constants`` (name -> array) binds graph inputs as initializers (e.g. a Reshape's target
    fed as an input, which must be known to infer shapes)."""
    from .passes import DEFAULT
    graph = to_graph(load_model(source), shapes=shapes)
    for name, value in (constants or {}).items():
        if name not in graph.inputs:
            raise GraphError(f"constants name {name!r}, which is not a graph input")
        del graph.inputs[name]
        graph.initializers[name] = np.asarray(value)
    for run in (DEFAULT if passes is None else passes):
        graph = run(graph)
    graph.infer()
    return graph
