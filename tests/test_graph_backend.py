"""swsim as an ONNX backend: onnx's own node test cases (built in Python by
``collect_testcases``) for the operators the graph declares (``ops.OPS``) pass, or are reported
unsupported with a reason; a selection runs with every suitable node forced onto the CPEs and
the debug check on. The full forced-CPE run and onnx's ``BackendTest`` over the shipped model
data are marked slow (docs/graph.md "ONNX backend")."""
import unittest
import warnings

import numpy as np
import pytest
from onnx import helper

from swsim.hostlib.graph import GraphError, backend
from swsim.hostlib.graph.ops import OPS

# cases that must stay supported (a regression to "unsupported" fails the test)
CORE = ("test_conv_with_strides_padding", "test_conv_with_strides_and_asymmetric_padding",
        "test_conv_with_autopad_same", "test_basic_conv_with_padding", "test_relu",
        "test_gemm_all_attributes", "test_gemm_default_vector_bias", "test_matmul_2d",
        "test_globalaveragepool", "test_batchnorm_example",
        "test_softmax_axis_1", "test_logsoftmax_default_axis", "test_lrn", "test_concat_3d_axis_1",
        "test_add_bcast", "test_sum_example", "test_flatten_negative_axis1",
        "test_reshape_negative_dim", "test_transpose_all_permutations_3",
        "test_dropout_default_mask", "test_unsqueeze_negative_axes", "test_leakyrelu",
        "test_sigmoid", "test_tanh", "test_sce_mean", "test_lstm_defaults",
        "test_lstm_with_initial_bias", "test_lstm_with_peepholes", "test_lstm_batchwise",
        "test_lstm_reverse", "test_lstm_bidirectional")
# run with every suitable node on the CPEs (check=True): one or more per CPE operator
ON_CPES = ("test_conv_with_strides_and_asymmetric_padding", "test_gemm_all_attributes",
           "test_gemm_default_vector_bias", "test_matmul_2d", "test_globalmaxpool",
           "test_batchnorm_epsilon", "test_relu", "test_sigmoid", "test_sum_two_inputs",
           "test_sub_bcast", "test_leakyrelu", "test_lstm_with_initial_bias",
           "test_lstm_batchwise", "test_lstm_bidirectional")


SLOW_MODULES = {"MaxPool", "AveragePool"}


def _cases(every_operator=False):
    """The node cases that use the declared operators. By default only the case modules of
    those operators are imported (each builds its cases, with their expected outputs, when
    imported; all of them take ``collect_testcases`` tens of seconds), less MaxPool's and
    AveragePool's (their 3-D references take ~5 s; the slow tests run them)."""
    import importlib

    from onnx.backend.test.case import node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if every_operator:
            found = node.collect_testcases(None)
        else:
            for op in set(OPS) - SLOW_MODULES:
                module = {"BatchNormalization": "batch_normalization",
                          "SoftmaxCrossEntropyLoss": "softmax_cross_entropy_loss"
                          }.get(op, op.lower())
                importlib.import_module(f"{node.__name__}.{module}")
            found = node._NodeTestCases
    return [c for c in found if {n.op_type for n in c.model.graph.node} & set(OPS)]


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in _cases()}


def _passes(case, **options):
    rep = backend.prepare(case.model, **options)
    for inputs, outputs in case.data_sets:
        got = rep.run(inputs)
        assert len(got) == len(outputs)
        for g, w in zip(got, outputs):
            np.testing.assert_allclose(g, backend._array(w), rtol=case.rtol, atol=case.atol,
                                       err_msg=case.name)
    return rep


def test_node_cases_pass_or_are_reported_unsupported(cases):
    supported, refused = [], {}
    for name, case in cases.items():
        reason = backend.unsupported_reason(case.model)
        if reason is None:
            _passes(case)
            supported.append(name)
        else:
            assert isinstance(reason, str) and reason
            assert not backend.is_compatible(case.model)
            refused[name] = reason
    assert set(CORE) <= set(supported), sorted(set(CORE) - set(supported))
    assert len(supported) >= 150
    assert "training_mode" in refused["test_training_dropout"]
    assert "sequence_type" in refused["test_identity_sequence"]


@pytest.mark.parametrize("name", ON_CPES)
def test_selected_node_cases_on_the_cpes(cases, name):
    rep = _passes(cases[name], minimum_work=False, check=True)
    assert any(r.device == "CPE" for r in rep.records), [r.reason for r in rep.records]


@pytest.mark.slow
def test_every_supported_node_case_on_the_cpes():
    cases = _cases(every_operator=True)
    supported = [c for c in cases if backend.unsupported_reason(c.model) is None]
    for case in supported:
        _passes(case, minimum_work=False, check=True)
    names = {c.name for c in supported}
    assert {"test_maxpool_2d_ceil", "test_maxpool_2d_same_lower", "test_averagepool_2d_pads",
            "test_averagepool_2d_ceil"} <= names and len(names) >= 190


@pytest.mark.slow
def test_onnx_backend_test_over_the_shipped_model_data():
    import onnx.backend.test
    tests = onnx.backend.test.BackendTest(backend, __name__)
    tests.include(r"^test_(Conv2d|ReLU|MaxPool2d|AvgPool2d|Linear|Softmax|LogSoftmax|Sigmoid|"
                  r"Tanh|BatchNorm|operator_[a-z_0-9]+)[a-z_0-9]*_cpu$")
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case)
                               for case in tests.test_cases.values())
    result = unittest.TextTestRunner(stream=open("/dev/null", "w")).run(suite)
    ran = result.testsRun - len(result.skipped)
    assert not result.failures and not result.errors and ran >= 40


def test_backend_interface():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    node = helper.make_node("Relu", ["x"], ["y"])
    (y,) = backend.run_node(node, [np.array([-1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(y, [0, 2])
    unknown = helper.make_graph([helper.make_node("Frob", ["x"], ["y"])], "g",
                                [helper.make_tensor_value_info("x", 1, [2])],
                                [helper.make_tensor_value_info("y", 1, [2])])
    model = helper.make_model(unknown)
    assert backend.unsupported_reason(model) == "operators not implemented: Frob"
    assert "device 'CUDA'" in backend.unsupported_reason(model, "CUDA")
    with pytest.raises(GraphError, match="device"):
        backend.prepare(model, "CUDA")
