"""The training stack (swCaffe on the VM, thesis chapter 7; docs/train.md), above
``hostlib.dnn``: Caffe's prototxt model definition (``caffe.proto``) and a Python API for it,
the ``Net`` (static graph, shape inference, operator selection, packed aligned buffers), the
``Solver`` (learning-rate policies, SGD on the CPEs, checkpoints) and the data pipeline."""
from .common import TrainError
from .data import load_digits
from .prototxt import (LSTM, Accuracy, BatchNorm, Convolution, Data, Eltwise, EuclideanLoss,
                       InnerProduct, NetParameter, NetSpec, Pooling, ReLU, SequenceTranspose,
                       Scale, Sigmoid, SolverParameter, SolverSpec, SoftmaxWithLoss, TanH, example,
                       parse_net, parse_solver)
from .net import Net
from .solver import Solver, batch_accuracy, learning_rate

__all__ = ["Accuracy", "BatchNorm", "Convolution", "Data", "Eltwise", "EuclideanLoss",
           "InnerProduct", "LSTM", "Net", "NetParameter", "NetSpec", "Pooling", "ReLU",
           "SequenceTranspose", "Scale",
           "Sigmoid", "Solver", "SolverParameter", "SolverSpec", "SoftmaxWithLoss", "TanH",
           "TrainError", "batch_accuracy", "example", "learning_rate", "load_digits",
           "parse_net", "parse_solver"]
