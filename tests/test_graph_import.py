"""The graph IR and the ONNX importer: folding, inference mode, shape inference, opsets, and
clear errors naming the node for bad models (docs/graph.md)."""
import numpy as np
import pytest
from onnx import helper

from swsim.errors import ArgumentError
from swsim.hostlib.graph import Graph, GraphError, Node, PassManager, TensorInfo, import_onnx
from swsim.hostlib.graph.onnx_import import to_graph, load_model
from swsim.hostlib.graph.passes import fold_constants

from graph_models import constant, convnet, model, resblock, tensor


def test_convnet_imports_with_the_shape_subgraph_folded_and_dropout_removed():
    graph = import_onnx(convnet().SerializeToString())
    assert [n.op_type for n in graph.nodes] == ["Conv", "Relu", "MaxPool", "Reshape", "Gemm",
                                                "Softmax"]
    assert graph.initializers["target"].tolist() == [2, -1]   # Shape -> Gather -> Concat
    assert graph.info["f"] == TensorInfo(np.dtype(np.float32), (2, 128))
    assert graph.info["y"].shape == (2, 10)


@pytest.mark.parametrize("opset", [6, 9, 11, 13, 17])
def test_resblock_shapes_in_several_opsets(opset):
    graph = import_onnx(resblock(opset=opset))
    assert graph.info["y"].shape == (2, 8)
    assert graph.info["c1"].shape == (2, 8, 8, 8)


def test_unsqueeze_axes_attribute_before_opset_13_and_input_from_13():
    old = model([helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3])],
                [("x", [2, 3])], [("y", [1, 2, 3, 1])], opset=11)
    new = model([constant("axes", np.array([0, 3], np.int64)),
                 helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
                [("x", [2, 3])], [("y", [1, 2, 3, 1])], opset=13)
    assert import_onnx(old).info["y"].shape == (1, 2, 3, 1)
    assert import_onnx(new).info["y"].shape == (1, 2, 3, 1)


def test_graph_output_of_a_folded_constant():
    m = model([constant("c", np.ones((2, 2), np.float32)),
               helper.make_node("Identity", ["c"], ["y"])], [], [("y", [2, 2])])
    graph = import_onnx(m)
    assert graph.nodes == [] and graph.initializers["y"].tolist() == [[1, 1], [1, 1]]


def _error(m, *fragments):
    with pytest.raises(GraphError) as info:
        import_onnx(m if isinstance(m, bytes) else m.SerializeToString())
    assert isinstance(info.value, ArgumentError)
    for fragment in fragments:
        assert fragment in str(info.value)
    return str(info.value)


def test_unknown_operator_names_the_node():
    m = model([helper.make_node("Frobnicate", ["x"], ["y"], name="weird")],
              [("x", [2])], [("y", [2])])
    _error(m, "'weird'", "Frobnicate", "not implemented")


def test_missing_initializer_names_the_node_and_the_input():
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c0")],
              [("x", [1, 3, 4, 4])], [("y", [1, 2, 2, 2])])
    _error(m, "'c0'", "'w'", "not defined")


def test_wrong_shapes_name_the_node():
    rng = np.random.default_rng(0)
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c0")],
              [("x", [1, 3, 4, 4])], [("y", [1, 2, 2, 2])], [tensor(rng, "w", 2, 5, 3, 3)])
    _error(m, "'c0'", "channels")
    g = model([helper.make_node("Gemm", ["x", "w"], ["y"], name="fc")],
              [("x", [2, 3])], [("y", [2, 2])], [tensor(rng, "w", 4, 2)])
    _error(g, "'fc'", "do not match")
    a = model([helper.make_node("Add", ["x", "z"], ["y"], name="plus")],
              [("x", [2, 3]), ("z", [4])], [("y", [2, 3])])
    _error(a, "'plus'", "do not fit")


def test_cycle_names_a_node():
    graph = Graph("g", [Node("a", "Relu", ["y"], ["x"]), Node("b", "Relu", ["x"], ["y"])],
                  {}, ["y"])
    with pytest.raises(GraphError, match="cycle through node 'a'"):
        graph.order()


def test_duplicate_output_and_unproduced_graph_output():
    graph = Graph("g", [Node("a", "Relu", ["x"], ["x"])],
                  {"x": TensorInfo(np.dtype(np.float32), (2,))}, ["x"])
    with pytest.raises(GraphError, match="'a'.*already defined"):
        graph.check()
    graph = Graph("g", [], {}, ["nothing"])
    with pytest.raises(GraphError, match="'nothing' is not produced"):
        graph.check()


def test_truncated_and_malformed_files(tmp_path):
    data = convnet().SerializeToString()
    _error(data[:len(data) // 2], "not a valid ONNX model")
    _error(b"\xff\xfe garbage", "not a valid ONNX model")
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:100])
    with pytest.raises(GraphError, match="cut.onnx"):
        import_onnx(str(path))
    with pytest.raises(GraphError, match="cannot read"):
        import_onnx(str(tmp_path / "missing.onnx"))
    with pytest.raises(GraphError, match="path, bytes or an onnx.ModelProto"):
        load_model(3)


def test_unsupported_attributes_and_opsets_are_refused():
    training = model([constant("on", np.array(True)),
                      helper.make_node("Dropout", ["x", "", "on"], ["y"], name="d")],
                     [("x", [2])], [("y", [2])], opset=13)
    _error(training, "'d'", "inference only")
    m = convnet()
    m.opset_import[0].version = 5
    _error(m, "opset 5")
    pool = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], name="p1")],
                 [("x", [1, 1, 4])], [("y", [1, 1, 3])])
    _error(pool, "'p1'", "2-D")


def test_symbolic_batch_needs_a_fixed_shape():
    m = convnet()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    _error(m, "symbolic")
    graph = import_onnx(m, shapes={"x": (3, 3, 8, 8)})
    assert graph.info["y"].shape == (3, 10)


def test_pass_manager_logs_each_pass():
    graph = to_graph(convnet())
    manager = PassManager([fold_constants])
    manager(graph)
    assert manager.log == [("fold_constants", 12, 7)]
