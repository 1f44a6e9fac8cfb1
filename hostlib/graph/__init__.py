"""The graph layer (docs/graph.md), above ``hostlib.dnn``: a graph IR (``ir``) with the ONNX
operators' shape functions and MPE implementations (``ops``), passes (``passes``), the ONNX
importer (``onnx_import``)."""
from .ir import Graph, GraphError, Node, TensorInfo
from .onnx_import import import_onnx, load_model
from .passes import PassManager

__all__ = ["Graph", "GraphError", "Node", "PassManager", "TensorInfo", "import_onnx",
           "load_model"]
