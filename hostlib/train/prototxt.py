"""The model definition: Caffe's prototxt (``caffe.proto``, parsed by protobuf's text format)
and an equivalent Python API that builds the same messages.

    net = parse_net(open("lenet.prototxt").read())
    net = Net("mlp", [Data("data", source="sklearn:digits", batch_size=64),
                      InnerProduct("ip1", "data", num_output=32), ReLU("relu1", "ip1"), ...])
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from google.protobuf import text_format

from . import caffe_pb2
from .common import TrainError

NetParameter = caffe_pb2.NetParameter
SolverParameter = caffe_pb2.SolverParameter
LayerParameter = caffe_pb2.LayerParameter


def _parse(text: str, message, what: str, origin: str):
    try:
        return text_format.Parse(text, message)
    except text_format.ParseError as exc:
        raise TrainError(f"{origin}: not a valid {what}: {exc}") from None


def _read(source) -> tuple:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and (source.endswith(".prototxt") or
                                         os.path.isfile(source))):
        path = Path(source)
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise TrainError(f"cannot read {path}: {exc.strerror}") from None
    return source, "<prototxt>"


def parse_net(source) -> NetParameter:
    """A NetParameter from prototxt text or a ``.prototxt`` path."""
    text, origin = _read(source)
    return _parse(text, NetParameter(), "net (NetParameter)", origin)


def parse_solver(source) -> SolverParameter:
    """A SolverParameter from prototxt text or a ``.prototxt`` path."""
    text, origin = _read(source)
    return _parse(text, SolverParameter(), "solver (SolverParameter)", origin)


def example(name: str) -> Path:
    """The path of a shipped example prototxt (``lenet``, ``resnet``, ``mlp``, ...)."""
    path = resources.files(__package__) / "examples" / f"{name}.prototxt"
    if not path.is_file():
        shipped = sorted(p.name[:-len(".prototxt")] for p in
                         (resources.files(__package__) / "examples").iterdir()
                         if p.name.endswith(".prototxt"))
        raise TrainError(f"no example net {name!r}; shipped: {', '.join(shipped)}")
    return Path(str(path))


# The Python API: one function per layer type, each returning a LayerParameter.

def _layer(kind: str, name: str, bottoms, tops, **params) -> LayerParameter:
    layer = LayerParameter(name=name, type=kind)
    layer.bottom.extend([bottoms] if isinstance(bottoms, str) else list(bottoms))
    layer.top.extend([tops] if isinstance(tops, str) else list(tops or [name]))
    for field, values in params.items():
        getattr(layer, field).MergeFrom(values)
    return layer


def _filler(kind="xavier", **values):
    return caffe_pb2.FillerParameter(type=kind, **values)


def Data(name, source, batch_size, tops=("data", "label"), scale=1.0):
    """A Data layer: batches of `batch_size` from `source` (``data_param``)."""
    return _layer("Data", name, (), tops, data_param=caffe_pb2.DataParameter(
        source=source, batch_size=batch_size, scale=scale))


def InnerProduct(name, bottom, num_output, bias=True, top=None, weight_filler="xavier"):
    """An InnerProduct (fully connected) layer (``inner_product_param``)."""
    return _layer("InnerProduct", name, bottom, top, inner_product_param=caffe_pb2.
                  InnerProductParameter(num_output=num_output, bias_term=bias,
                                        weight_filler=_filler(weight_filler)))


def Convolution(name, bottom, num_output, kernel_size, stride=1, padding=0, bias=True,
                top=None, weight_filler="xavier"):
    """A Convolution layer (``convolution_param``: ``padding`` is Caffe's ``pad``)."""
    return _layer("Convolution", name, bottom, top, convolution_param=caffe_pb2.
                  ConvolutionParameter(num_output=num_output, kernel_size=[kernel_size],
                                       stride=[stride], pad=[padding], bias_term=bias,
                                       weight_filler=_filler(weight_filler)))


def Pooling(name, bottom, kernel_size, stride=None, padding=0, mode="MAX", top=None):
    """A Pooling layer (``pooling_param``: ``mode`` "MAX" or "AVE" is Caffe's ``pool``,
    ``padding`` its ``pad``)."""
    return _layer("Pooling", name, bottom, top, pooling_param=caffe_pb2.PoolingParameter(
        pool=caffe_pb2.PoolingParameter.PoolMethod.Value(mode), kernel_size=kernel_size,
        stride=stride or kernel_size, pad=padding))


def _activation(kind):
    def build(name, bottom, top=None):
        """An activation layer, in place by default."""
        return _layer(kind, name, bottom, top or bottom)   # in place by default, as Caffe
    build.__name__ = kind
    return build


ReLU, Sigmoid, TanH = _activation("ReLU"), _activation("Sigmoid"), _activation("TanH")


def BatchNorm(name, bottom, top=None, eps=1e-5, moving_average_fraction=0.999):
    """A BatchNorm layer (``batch_norm_param``)."""
    return _layer("BatchNorm", name, bottom, top, batch_norm_param=caffe_pb2.
                  BatchNormParameter(eps=eps, moving_average_fraction=moving_average_fraction))


def Scale(name, bottom, bias=True, top=None):
    """A Scale layer: a per-channel scale, and a bias when `bias`."""
    return _layer("Scale", name, bottom, top,
                  scale_param=caffe_pb2.ScaleParameter(bias_term=bias))


def SequenceTranspose(name, bottom, top=None):
    """A SequenceTranspose layer: swaps the time and batch axes of a blob."""
    return _layer("SequenceTranspose", name, bottom, top)


def LSTM(name, bottom, num_output, top=None, weight_filler="xavier"):
    """An LSTM layer (``recurrent_param``)."""
    return _layer("LSTM", name, bottom, top, recurrent_param=caffe_pb2.RecurrentParameter(
        num_output=num_output, weight_filler=_filler(weight_filler)))


def Eltwise(name, bottoms, mode="SUM", coeff=(), top=None):
    """An Eltwise layer (``eltwise_param``: ``mode`` "SUM", "PROD" or "MAX" is Caffe's
    ``operation``)."""
    return _layer("Eltwise", name, bottoms, top, eltwise_param=caffe_pb2.EltwiseParameter(
        operation=caffe_pb2.EltwiseParameter.EltwiseOp.Value(mode), coeff=list(coeff)))


def SoftmaxWithLoss(name, bottoms, top=None):
    """A SoftmaxWithLoss layer: the mean cross-entropy of softmax(logits)."""
    return _layer("SoftmaxWithLoss", name, bottoms, top)


def EuclideanLoss(name, bottoms, top=None):
    """A EuclideanLoss layer: ||a - b||² / (2 N)."""
    return _layer("EuclideanLoss", name, bottoms, top)


def Accuracy(name, bottoms, top=None, top_k=1):
    """An Accuracy layer: the share of the labels among the top_k scores."""
    return _layer("Accuracy", name, bottoms, top,
                  accuracy_param=caffe_pb2.AccuracyParameter(top_k=top_k))


def NetSpec(name, layers) -> NetParameter:
    """A NetParameter from the layers built by the functions above."""
    net = NetParameter(name=name)
    net.layer.extend(layers)
    return net


def SolverSpec(**fields) -> SolverParameter:
    """A SolverParameter: ``SolverSpec(base_lr=0.01, momentum=0.9, lr_policy="step", ...)``."""
    try:
        return SolverParameter(**fields)
    except (ValueError, TypeError) as exc:
        raise TrainError(f"bad solver field: {exc}") from None
