"""The graph layer (docs/graph.md), above ``hostlib.dnn``: a graph IR (``ir``) with the ONNX
operators' shape functions and MPE implementations (``ops``), passes (``passes``), the ONNX
importer (``onnx_import``), swHMAE's dispatch of each node to a CPE operator or the timed MPE
path (``cpe``, ``dispatch``) and the runtime (``runtime.Session``)."""
from . import batch_statistics, gradients, recurrent, tensor_gradients  # noqa: F401 (register the training operators)
from .ir import Graph, GraphError, Node, TensorInfo
from .onnx_import import import_onnx, load_model
from .passes import PassManager
from .runtime import DataflowSession, Session

__all__ = ["DataflowSession", "Graph", "GraphError", "Node", "PassManager", "Session", "TensorInfo", "import_onnx",
           "load_model"]
