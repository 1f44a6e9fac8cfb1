"""Training imported graphs (docs/graph.md "Training"): the backward graph derived by
hostlib.graph.autodiff, run on the VM's CPEs through swHMAE's dispatch, checked against central
finite differences of a float64 numpy forward (ops.OPS's MPE functions, themselves checked
against onnxruntime in test_graph_run.py); the Solver training a GraphModel."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from graph_models import check_gradients, model, tensor
from swsim.hostlib import train
from swsim.hostlib.graph import GraphError, Session, import_onnx
from swsim.hostlib.graph.autodiff import derive_training, with_loss
from swsim.hostlib.graph.ops import OPS
from swsim.hostlib.train.graph_net import GraphModel
from swsim.hostlib.train.net import Run

h = helper


def convnet(batch=4, seed=3, fc_scale=0.2):
    """Conv (bias, pads 1) -> Relu -> MaxPool -> Flatten -> Gemm: logits of 10 classes."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
             h.make_node("Flatten", ["p"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], transB=1, name="fc")]
    inits = [tensor(rng, "w", 4, 1, 3, 3), tensor(rng, "b", 4, scale=0.1),
             tensor(rng, "fc_w", 10, 64, scale=fc_scale), tensor(rng, "fc_b", 10, scale=0.1)]
    return model(nodes, [("x", [batch, 1, 8, 8])], [("g", [batch, 10])], inits)


def branchy(batch=2, seed=4):
    """Average pooling, Sigmoid and Tanh branches added (a tensor read twice: a Sum of its
    gradients), GlobalAveragePool, and a Gemm with transB=0 (its backward on the MPE)."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             h.make_node("AveragePool", ["c"], ["a"], kernel_shape=[2, 2], strides=[2, 2],
                         name="avg"),
             h.make_node("Sigmoid", ["a"], ["s"], name="sigmoid"),
             h.make_node("Tanh", ["a"], ["t"], name="tanh"),
             h.make_node("Add", ["s", "t"], ["u"], name="add"),
             h.make_node("GlobalAveragePool", ["u"], ["gap"], name="gap"),
             h.make_node("Flatten", ["gap"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "fc_w"], ["g"], name="fc")]
    inits = [tensor(rng, "w", 3, 2, 3, 3), tensor(rng, "fc_w", 3, 5)]
    return model(nodes, [("x", [batch, 2, 6, 6])], [("g", [batch, 5])], inits)


def test_convnet_gradients_on_the_cpes_match_finite_differences():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    training, session = check_gradients(convnet(), x, np.array([1, 7, 3, 0]))
    ops = [node.op_type for node in training.graph.nodes[training.forward:]]
    assert ops == ["SoftmaxCrossEntropyLossGrad", "GemmGrad", "Reshape", "MaxPoolGrad",
                   "ReluGrad", "ConvGrad"]
    conv_grad = training.graph.nodes[-1]
    assert conv_grad.outputs[0] == ""            # the data's gradient: nobody reads it
    devices = {r.node: r.device for r in session.records}
    assert all(devices[n.name] in ("CPE", "view") for n in training.graph.nodes)
    assert all(r.cycles > 0 for r in session.records if r.device == "CPE")


def test_maxpool_with_asymmetric_pads_and_ceil_mode_hands_its_argmax_over():
    rng = np.random.default_rng(12)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             h.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 0, 0, 1], ceil_mode=1, name="pool"),
             h.make_node("Flatten", ["p"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "fc_w"], ["g"], transB=1, name="fc")]
    onnx_model = model(nodes, [("x", [2, 1, 8, 8])], [("g", [2, 5])],
                       [tensor(rng, "w", 3, 1, 3, 3), tensor(rng, "fc_w", 5, 27)])
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    training, session = check_gradients(onnx_model, x, np.array([1, 4]))
    records = {r.node: r for r in session.records}
    assert records["pool"].algorithm == "pool2d max (argmax kept)"
    assert records["pool/grad"].algorithm == "pool2d_backward max"


def test_a_loss_in_the_onnx_file_matches_onnxruntime():
    import onnxruntime
    onnx_model = convnet()
    onnx_model.graph.node.append(h.make_node("SoftmaxCrossEntropyLoss", ["g", "labels"],
                                             ["loss"], name="loss"))
    onnx_model.graph.input.append(h.make_tensor_value_info("labels", 7, [4]))
    del onnx_model.graph.output[:]
    onnx_model.graph.output.append(h.make_tensor_value_info("loss", 1, []))
    feeds = {"x": np.random.default_rng(11).standard_normal((4, 1, 8, 8)).astype(np.float32),
             "labels": np.array([3, 1, 4, 1])}
    want = onnxruntime.InferenceSession(onnx_model.SerializeToString()).run(None, feeds)[0]
    graph = import_onnx(onnx_model)
    got = Session(graph).run(feeds)["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    training = derive_training(graph, "loss")
    assert training.graph.nodes[training.forward].op_type == "SoftmaxCrossEntropyLossGrad"


def test_branches_sums_and_an_mpe_backward():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    training, session = check_gradients(branchy(), x, np.array([4, 1]))
    records = {r.node: r for r in session.records}
    assert records["grad/a/sum"].op_type == "Sum" and records["grad/a/sum"].device == "CPE"
    fc = records["fc/grad"]          # transB=0: no CPE backward, the MPE's time instead
    assert fc.device == "MPE" and "layer" in fc.reason and fc.cycles > 0
    for name in ("avg/grad", "sigmoid/grad", "tanh/grad", "gap/grad", "conv/grad"):
        assert records[name].device == "CPE", name


def batchnormed(batch=4, seed=9, channels=2, size=4, classes=3):
    """Conv -> BatchNormalization (training: the batch's statistics) -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"],
                         momentum=0.8, name="bn"),
             h.make_node("Relu", ["n"], ["r"], name="relu"),
             h.make_node("GlobalAveragePool", ["r"], ["gap"], name="gap"),
             h.make_node("Flatten", ["gap"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], transB=1, name="fc")]
    inits = [tensor(rng, "w", 4, channels, 3, 3), tensor(rng, "gamma", 4), tensor(rng, "beta", 4),
             tensor(rng, "mean", 4), tensor(rng, "fc_w", classes, 4), tensor(rng, "fc_b", classes)]
    inits.append(numpy_helper.from_array(np.full(4, 2.0, np.float32), "var"))
    return model(nodes, [("x", [batch, channels, size, size])], [("g", [batch, classes])], inits)


def test_batchnorm_trains_with_the_batch_statistics():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 2, 4, 4)).astype(np.float32)
    training, session = check_gradients(batchnormed(), x, np.array([0, 2, 1, 1]))
    assert sorted(training.parameters) == ["beta", "fc_b", "fc_w", "gamma", "w"]
    records = {r.node: r for r in session.records}
    assert records["bn"].algorithm == "batchnorm (training)"
    assert records["bn/grad"].device == "CPE"
    # the running statistics: 0.8 old + 0.2 the batch's (the variance unbiased)
    c = x.astype(np.float64)
    out = session.run({"x": x, "labels": np.array([0, 2, 1, 1])})
    conv = OPS["Conv"].mpe(training.graph.nodes[0], c, training.graph.initializers["w"])[0]
    batch_mean = conv.mean(axis=(0, 2, 3))
    np.testing.assert_allclose(out[training.state["mean"]], 0.8 * training.graph.initializers[
        "mean"] + 0.2 * batch_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[training.state["var"]], 0.8 * 2.0 + 0.2 * conv.var(
        axis=(0, 2, 3), ddof=1), rtol=1e-4)


def test_running_statistics_live_in_the_state_arena_and_checkpoints(tmp_path):
    def solver():
        return train.Solver(GraphModel(batchnormed(batch=8, channels=1, size=8, classes=10),
                                       source="sklearn:digits", batch_size=8, scale=1 / 16),
                            train.SolverSpec(base_lr=0.1, momentum=0.9, random_seed=1))
    first = solver()
    before = first.net.state.buffer.copy()
    first.step()
    mean, var = first.net.state["mean"], first.net.state["var"]
    assert not np.array_equal(first.net.state.buffer, before)
    assert np.isfinite(first.net.state.buffer).all() and (var > 0).all() and mean.shape == (4,)
    first.save(tmp_path)
    result = first.step()
    assert "bn/grad" in result.layer_seconds
    resumed = solver()
    resumed.restore(tmp_path)
    assert resumed.step().loss == result.loss
    assert np.array_equal(resumed.net.state.buffer, first.net.state.buffer)
    assert np.array_equal(resumed.net.params.buffer, first.net.params.buffer)


def test_debug_check_compares_every_backward_node():
    training = derive_training(with_loss(import_onnx(convnet(batch=2)), "g"), "loss")
    x = np.random.default_rng(7).standard_normal((2, 1, 8, 8)).astype(np.float32)
    session = Session(training.graph, minimum_work=False, check=True)
    session.run({"x": x, "labels": np.array([2, 9])})
    checked = [r for r in session.records if r.device == "CPE"]
    # the training graph's 10 nodes and the layout pass's 2 transforms (to and from CNHW)
    assert len(checked) == 12 and all(r.check_error <= 1e-3 for r in checked)
    assert sum(r.node.startswith("layout ") for r in checked) == 2


def digits_model(**options):
    return GraphModel(convnet(batch=16, seed=1, fc_scale=0.05), source="sklearn:digits",
                      batch_size=16, scale=1 / 16, **options)


def test_the_solver_trains_an_imported_graph_deterministically():
    spec = train.SolverSpec(base_lr=0.5, momentum=0.9, random_seed=1)
    solver = train.Solver(digits_model(), spec)
    first = solver.order.batch(0)
    results = [solver.step() for _ in range(10)]
    losses = [r.loss for r in results]
    assert np.mean(losses[-3:]) < 0.9 * np.mean(losses[:3])
    trained = solver.net.loss(solver.net.forward(Run(solver.chip), first))
    assert trained < 0.9 * losses[0]              # the first batch, seen once, fits better
    # each node's work shared by 2 core groups: the same bits, in less simulated time
    again = train.Solver(digits_model(), spec, cgs=2)
    shared = [again.step() for _ in range(3)]
    assert [r.loss for r in shared] == losses[:3]
    assert shared[0].sim_seconds < results[0].sim_seconds
    result = results[-1]
    assert {"conv", "conv/grad", "fc/grad", "(update)"} <= set(result.layer_seconds)
    assert result.sim_seconds == pytest.approx(sum(result.layer_seconds.values()))


def test_errors_name_the_node_or_argument():
    rng = np.random.default_rng(8)
    nodes = [h.make_node("Cast", ["x"], ["n"], to=1, name="cast"),
             h.make_node("Conv", ["n", "w"], ["c"], name="conv"),
             h.make_node("Flatten", ["c"], ["g"], name="flat")]
    cast_below = import_onnx(model(nodes, [("x", [2, 1, 4, 4])], [("g", [2, 4])],
                                  [tensor(rng, "w", 1, 1, 3, 3)]))
    derive_training(with_loss(cast_below, "g"), "loss")   # no gradient needed through it
    nodes[0:2] = [h.make_node("Conv", ["x", "w"], ["c0"], name="conv"),
                  h.make_node("Cast", ["c0"], ["c"], to=1, name="cast")]
    cast_above = import_onnx(model(nodes, [("x", [2, 1, 4, 4])], [("g", [2, 4])],
                                  [tensor(rng, "w", 1, 1, 3, 3)]))
    with pytest.raises(GraphError, match="node 'cast' .Cast.: no gradient for Cast"):
        derive_training(with_loss(cast_above, "g"), "loss")
    with pytest.raises(GraphError, match="loss 'g': not a float scalar"):
        derive_training(cast_above, "g")
    with pytest.raises(GraphError, match="parameter 'nope'"):
        derive_training(with_loss(cast_above, "g"), "loss", parameters=["nope"])
    grad_node = [h.make_node("ReluGrad", ["x", "x"], ["g"], name="sneaky")]
    with pytest.raises(GraphError, match="node 'sneaky' .ReluGrad.: operator ReluGrad is not"):
        import_onnx(model(grad_node, [("x", [2, 4])], [("g", [2, 4])]))   # not ONNX's
    with pytest.raises(train.TrainError, match="batch_size"):
        GraphModel(convnet(batch=16), source="sklearn:digits", batch_size=8)
    with pytest.raises(train.TrainError, match="node 'loss'.*labels must be in 0..2"):
        train.Solver(GraphModel(batchnormed(batch=8, channels=1, size=8),
                                source="sklearn:digits", batch_size=8)).step()
    with pytest.raises(train.TrainError, match="one shard"):
        train.Solver(digits_model(), train.SolverSpec(base_lr=0.1), shard=(0, 2))


def test_the_solver_trains_a_split_graph_on_the_dataflow_runtime():
    """split=2 on 2 CGs: the copies' gradients summed on the CPEs give the unsplit step's
    losses (the 4 filters' gradient, first dimension 4 like the batch, is a sum, not a
    slice); the step's time is the dataflow makespan."""
    spec = train.SolverSpec(base_lr=0.5, momentum=0.9, random_seed=1)

    def losses(**options):
        solver = train.Solver(GraphModel(convnet(batch=4, seed=1, fc_scale=0.05),
                                         source="sklearn:digits", batch_size=4, scale=1 / 16,
                                         split=options.pop("split", None)), spec, **options)
        results = [solver.step() for _ in range(2)]
        return [r.loss for r in results], results[-1], solver.net
    plain, _, _ = losses()
    parted, result, net = losses(split=2, cgs=2)
    np.testing.assert_allclose(parted, plain, rtol=1e-5)
    assert set(result.layer_seconds) == {"(dataflow)", "(update)"}
    assert {r.cg for r in net.records} == {0, 1}
    assert {"sum grad/w", "sum loss"} <= {r.node for r in net.records}
    with pytest.raises(train.TrainError, match="split: an integer >= 1 dividing batch_size 4"):
        GraphModel(convnet(batch=4), source="sklearn:digits", batch_size=4, split=3)


def test_split_batchnorm_uses_the_whole_batch_s_statistics():
    """split=2 on 2 CGs with BatchNormalization: each copy's per-channel sums of x and x^2
    summed across the copies, the statistics computed once, each copy normalised by the
    batch's; in the backward the copies' dscale and dbias summed before dx. Two steps give
    the unsplit run's losses, running statistics and parameters."""
    spec = train.SolverSpec(base_lr=0.5, momentum=0.9, random_seed=1)

    def run(**options):
        solver = train.Solver(GraphModel(batchnormed(batch=8, channels=1, size=8, classes=10),
                                         source="sklearn:digits", batch_size=8, scale=1 / 16,
                                         split=options.pop("split", None)), spec, **options)
        losses = [solver.step().loss for _ in range(2)]
        return losses, solver.net
    plain, whole = run()
    parted, net = run(split=2, cgs=2)
    np.testing.assert_allclose(parted, plain, rtol=1e-5)
    for name in ("mean", "var"):
        np.testing.assert_allclose(net.state[name], whole.state[name], rtol=1e-5, atol=1e-6)
    for name in ("gamma", "beta", "w"):
        np.testing.assert_allclose(net.params[name], whole.params[name], rtol=1e-4, atol=1e-6)
    names = [r.node for r in net.records]
    assert names.count("bn/statistics") == 1 and {"bn@0", "bn@1"} <= set(names)
    assert {"sum bn/moments", "sum grad/gamma", "sum grad/beta"} <= set(names)
