"""swFLOWpro's two-level parallelism: the placement rules (node states, FIFO queues dealt
round robin, the successor-first locality rule) as the estimate, the split pass, and the real
runtime over several core groups (docs/graph.md "Two-level parallelism")."""
import numpy as np
import pytest
from swsim.hostlib.graph import DataflowSession, Graph, GraphError, Node, Session, TensorInfo
from swsim.hostlib.graph import import_onnx
from swsim.hostlib.graph.dataflow import schedule, split

from graph_models import convnet, two_branch_net

F32 = np.dtype(np.float32)


def chain_graph(*names, branches=(), batch=4):
    """a -> b -> ... (each Relu), plus `branches`: (name, source) nodes reading `source`."""
    nodes, previous = [], "x"
    for name in names:
        nodes.append(Node(name, "Relu", [previous], [name]))
        previous = name
    nodes += [Node(name, "Relu", [source], [name]) for name, source in branches]
    outputs = [previous] + [name for name, _ in branches]
    return Graph("g", nodes, {"x": TensorInfo(F32, (batch, 3))}, outputs)


def test_a_chain_gains_nothing_from_more_core_groups():
    g = chain_graph("a", "b", "c")
    cycles = {"a": 10, "b": 20, "c": 30}
    assert schedule(g, cycles, 1).makespan == 60
    s = schedule(g, cycles, 4)
    assert s.makespan == 60
    assert {cg for cg, _, _ in s.placed.values()} == {0}     # successor-first: one CG


def test_a_fork_runs_its_branches_side_by_side():
    # a -> b, and c, d read a: after a, b follows on a's CG, c and d on the others
    g = chain_graph("a", "b", branches=[("c", "a"), ("d", "a")])
    cycles = {"a": 10, "b": 50, "c": 50, "d": 50}
    one, three = schedule(g, cycles, 1), schedule(g, cycles, 3)
    assert one.makespan == 160 and three.makespan == 60
    assert three.placed["a"][0] == three.placed["b"][0]
    assert sorted(three.busy) == [50, 50, 60]


def test_split_copies_fill_the_core_groups():
    g = chain_graph("a", "b", "c", batch=6)
    plan = split(g, 4)
    copies = plan.graph
    assert len(copies.nodes) == 13 and copies.outputs == ["c"]
    assert [copies.inputs[f"x@{i}"].shape for i in range(4)] == [(2, 3), (2, 3), (1, 3), (1, 3)]
    assert copies.info["c"].shape == (6, 3)
    cost = {"a": 10, "b": 20, "c": 30, "merge c": 5}
    s = schedule(copies, lambda node: cost[node.name.split("@")[0]], 4)
    assert s.makespan == 65                                  # 4 x 60 cycles on 4 CGs, merge
    for i in range(4):                                       # each copy stays on one CG
        assert len({s.placed[f"{n}@{i}"][0] for n in "abc"}) == 1
    assert schedule(copies, lambda node: cost[node.name.split("@")[0]], 2).makespan == 125
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    feeds = plan.feeds({"x": x})
    assert np.array_equal(np.concatenate([feeds[f"x@{i}"] for i in range(4)]), x)


def test_bad_arguments():
    g = chain_graph("a")
    with pytest.raises(GraphError, match="no measured cycles"):
        schedule(g, {}, 2)
    with pytest.raises(GraphError, match="cgs must be"):
        schedule(g, {"a": 1}, 0)
    with pytest.raises(GraphError, match="slices must be"):
        split(g, 0)
    with pytest.raises(GraphError, match="5 slices of a batch of 4"):
        split(g, 5)
    with pytest.raises(GraphError, match="sums or reduce names .nothing."):
        split(g, 2, sums=["nothing"])
    with pytest.raises(GraphError, match="cgs must be an integer in 1..4"):
        DataflowSession(g, cgs=5)


def test_split_refuses_what_mixes_the_batch():
    flat = Graph("g", [Node("flat", "Reshape", ["x", "all"], ["f"]),
                       Node("back", "Reshape", ["f", "shape"], ["y"])],
                 {"x": TensorInfo(F32, (4, 3))}, ["y"], {"all": np.array([-1], np.int64),
                                                         "shape": np.array([4, 3], np.int64)})
    with pytest.raises(GraphError, match="split: node 'back@0' .* cannot reshape .* does not "
                       "keep the batch"):
        split(flat, 2)
    summed = Graph("g", [Node("flat", "Flatten", ["x"], ["f"], {"axis": 0}),
                         Node("r", "Relu", ["x"], ["y"])],
                   {"x": TensorInfo(F32, (4, 3))}, ["y", "f"])
    with pytest.raises(GraphError, match="node 'flat' .* shape \\[1, 6\\] on slice 0, not "
                       "\\[1, 12\\]"):
        split(summed, 2, sums=["f"])
    moved = Graph("g", [Node("t", "Transpose", ["x"], ["y"], {"perm": [1, 0]})],
                  {"x": TensorInfo(F32, (4, 3))}, ["y"])
    with pytest.raises(GraphError, match="output 'y' of shape \\[3, 4\\] does not carry"):
        split(moved, 2)


def linear_training_step(batch=8):
    """y = x wᵀ; with the loss ½‖y‖², dy = y and dW = dyᵀ x; the update w' = w - lr dW."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 32)).astype(np.float32)
    nodes = [Node("fc", "Gemm", ["x", "w"], ["y"], {"transB": 1}, 13),
             Node("dw", "Gemm", ["y", "x"], ["dW"], {"transA": 1}, 13),
             Node("step", "Mul", ["dW", "lr"], ["delta"], {}, 13),
             Node("update", "Sub", ["w", "delta"], ["w_new"], {}, 13)]
    return Graph("train", nodes, {"x": TensorInfo(F32, (batch, 32))}, ["y", "w_new"],
                 {"w": w, "lr": np.array([0.01], np.float32)})


def test_split_sums_the_gradients_before_the_update():
    g = linear_training_step()
    plan = split(g, 2, sums=["dW"])
    ops = [n.name for n in plan.graph.nodes]
    assert ops == ["fc@0", "dw@0", "fc@1", "dw@1", "sum dW", "step", "update", "merge y"]
    x = np.random.default_rng(4).standard_normal((8, 32)).astype(np.float32)
    whole = Session(g, minimum_work=False).run({"x": x})
    parts = DataflowSession(plan.graph, cgs=2, minimum_work=False)
    got = parts.run(plan.feeds({"x": x}))
    assert np.array_equal(got["y"], whole["y"])      # each row of y from its own slice
    assert np.allclose(got["w_new"], whole["w_new"], rtol=1e-5, atol=1e-6)
    assert {r.node: r.device for r in parts.records}["sum dW"] == "CPE"
    assert parts.schedule.placed["fc@0"][0] != parts.schedule.placed["fc@1"][0]
    with pytest.raises(GraphError, match="does not carry the batch on axis 0 \\(name it in "):
        split(linear_training_step(), 2, sums=[])
    reads_slice = linear_training_step()          # a second gradient, not summed
    reads_slice.nodes[1:3] = [Node("dw", "Gemm", ["y", "x"], ["dW"], {"transA": 1}, 13),
                              Node("dw2", "Gemm", ["y", "x"], ["dW2"], {"transA": 1}, 13),
                              Node("step", "Add", ["dW", "dW2"], ["delta"], {}, 13)]
    with pytest.raises(GraphError, match="node 'step' .* reads 'dW2', a tensor of each slice"):
        split(reads_slice, 2, sums=["dW"])


def test_the_runtime_gives_the_one_cg_result_and_the_estimates_schedule():
    g = import_onnx(two_branch_net())
    x = {"x": np.random.default_rng(7).standard_normal((2, 8, 8, 8)).astype(np.float32)}
    one = Session(g)
    want = one.run(x)["y"]
    cycles = {r.node: r.cycles for r in one.records}
    for cgs in (1, 2, 4):
        runtime = DataflowSession(g, cgs=cgs)
        assert np.array_equal(runtime.run(x)["y"], want)
        assert {r.node: r.cycles for r in runtime.records} == cycles
        assert runtime.schedule.placed == schedule(runtime.graph, cycles, cgs).placed
        assert [(r.cg, r.start) for r in runtime.records] == \
            [p[:2] for p in runtime.schedule.placed.values()]
    placed = runtime.schedule.placed                 # the branches side by side
    assert placed["conv_a"][0] != placed["conv_b"][0] and \
        placed["conv_b"][1] == placed["conv_a"][1]
    assert runtime.cycles < one.cycles
    assert runtime.cycles == max(end for _, _, end in placed.values())
    assert "4 CGs: makespan" in runtime.report()


def test_split_on_four_core_groups_matches_one():
    g = import_onnx(convnet(batch=4))
    x = {"x": np.random.default_rng(8).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    one = Session(g)
    want = one.run(x)["y"]
    plan = split(g, 4)
    runtime = DataflowSession(plan.graph, cgs=4)
    got = runtime.run(plan.feeds(x))["y"]
    assert np.allclose(got, want, rtol=1e-5, atol=1e-7)
    busy = runtime.schedule.busy
    assert min(busy) > 0 and runtime.cycles < one.cycles   # every CG ran its slice
    again = DataflowSession(plan.graph, cgs=4)
    assert np.array_equal(again.run(plan.feeds(x))["y"], got)
    assert again.schedule == runtime.schedule              # deterministic
