"""The C core and the Python side agree by construction: its enums, sizes and configuration
struct are generated from the Python definitions, it reads every engine parameter and no
host-only one, and its semantic dispatch has an explicit case for every instruction."""
import functools
import importlib.util
import os
import re

import numpy as np
import pytest

from swsim import isa
from swsim.vm import VMConfig, engine_defs
from swsim.vm.config import ENGINE_PARAMETERS, PARAMETERS
from swsim.vm.engine_api import EngineJob

from swsim.vm import cengine  # noqa: E402  (the suite needs the built C core)
ffi, lib = cengine.ffi, cengine.lib

VM_DIR = os.path.join(os.path.dirname(isa.__file__), os.pardir, "vm")
CORE_DIR = os.path.join(VM_DIR, "core")
# the cycle loop and its strategies (docs/vm.md "Engines": the C core's files)
ENGINE = ("engine.h", "execute.h", "engine_step.h", "engine_instep.h", "engine.c",
          "engine_ahead.c", "engine_batch.c", "engine_blocks.c", "engine_skip.c", "trace.c")


@functools.cache
def generated_header():
    """isa_tables.h as vm/build_core.py generates it from the ISA table (built once)."""
    spec = importlib.util.spec_from_file_location("build_core", os.path.join(VM_DIR,
                                                                             "build_core.py"))
    build_core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_core)
    return build_core.generate_header(build_core.load_isa_table())


def source(*names):
    """The C core's files `names`, after the generated isa_tables.h."""
    return "\n".join([generated_header()] + [open(os.path.join(CORE_DIR, n)).read()
                                              for n in names])


def id_list(text, name):
    """The I_ names of the X-macro list `name` (`#define NAME(X) X(A) OTHER(X) ...`), lists it
    names expanded."""
    body = re.search(rf"#define {name}\(X\)((?:[^\n]*\\\n)*[^\n]*)", text).group(1)
    names = []
    for macro, item in re.findall(r"(\w+)\(X\)|X\((\w+)\)", body):
        names += id_list(text, macro) if macro else [item]
    return names


def function_body(text, name):
    """The body of the C function ``name`` (from its opening brace to the matching one)."""
    start = text.index("{", re.search(rf"\b{name}\([^;{{]*\)\s*\{{", text).start())
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start:end + 1]
    raise AssertionError(f"no end of {name}")


# ---- enums and sizes -----------------------------------------------------------------------

def test_core_sizes_and_enums_come_from_engine_defs():
    assert lib.SWSIM_NUM_REASONS == len(engine_defs.STALL_REASONS)
    assert lib.SWSIM_NUM_CPE_COUNTERS == len(engine_defs.CPE_COUNTERS)
    assert lib.SWSIM_NUM_CG_COUNTERS == len(engine_defs.CG_COUNTERS)
    assert lib.SWSIM_MAX_CPES == engine_defs.MAX_CPES
    assert lib.SWSIM_LANES == engine_defs.LANES
    assert lib.SWSIM_NUM_REGS == isa.NUM_REGS
    assert engine_defs.SPAN_KINDS[lib.SWSIM_SPAN_ISSUE] == "issue"
    assert engine_defs.SPAN_KINDS[lib.SWSIM_SPAN_DMA] == "dma"
    assert lib.SWSIM_STATE_RUNNING == engine_defs.STATE_RUNNING
    assert [ffi.string(lib.swsim_reason_name(i)).decode()
            for i in range(lib.SWSIM_NUM_REASONS)] == list(engine_defs.STALL_REASONS)
    result = ffi.new("SwResult *")
    assert len(result.cpe_counters) == engine_defs.MAX_CPES * len(engine_defs.CPE_COUNTERS)
    assert len(result.cg_counters) == len(engine_defs.CG_COUNTERS)
    assert len(result.last_state) == len(result.pcs) == engine_defs.MAX_CPES


def test_no_hand_written_copy_of_the_shared_enums_in_the_core():
    text = source("core.h", "core_api.h", *ENGINE, "dma.c", "barrier.c", "comm.c")
    for name in ("REASON_RAW", "CG_DMA_REQUESTS", "STOP_ACCESS", "DMA_BAD_OP",
                 "BARRIER_NOT_IN_MASK", "SWSIM_NUM_REASONS", "COUNTER_ACTIVE"):
        assert not re.search(rf"(#define\s+{name}\b|\b{name}\s*=)", text), name


# ---- the configuration struct ----------------------------------------------------------------

def test_swconfig_has_a_field_for_exactly_the_engine_parameters():
    fields = [name for name, _ in ffi.typeof("SwConfig").fields]
    assert fields == [*ENGINE_PARAMETERS, "mem_bytes", "max_cycles", "trace", "skip"]
    assert set(ENGINE_PARAMETERS) == {p.name for p in PARAMETERS if p.engine}


def test_every_engine_parameter_reaches_c_with_its_value():
    config = VMConfig.preset()
    by_name = {p.name: p for p in PARAMETERS}

    def other_value(name, k):   # a value the parameter may take, other than its default
        p = by_name[name]
        if p.power_of_two:   # twice or half (the caches' sizes, ways and line stay consistent)
            double = getattr(config, name) * 2
            return double if p.maximum is None or double <= p.maximum else double // 4
        value = getattr(config, name) + p.multiple * (1 + k)
        if p.maximum is None or value <= p.maximum:
            return value
        span = int((p.maximum - p.minimum) // p.multiple) + 1      # values in range, e.g. 0..1
        picks = (p.minimum + p.multiple * ((k + i) % span) for i in range(span))
        return next(v for v in picks if v != getattr(config, name))
    changed = config.replace(**{name: other_value(name, k)
                                for k, name in enumerate(ENGINE_PARAMETERS)})
    job = EngineJob(config=changed, code=np.zeros(1, np.uint32), spawned=np.zeros(64, bool),
                    entry_pc=changed.code_base, regs=np.zeros((64, 32, 4), np.uint64),
                    ldm=np.zeros((64, 1), np.uint8), mem=np.zeros(3, np.uint8))
    struct = cengine._config_struct(job, skip=True)
    for name in ENGINE_PARAMETERS:
        assert getattr(struct, name) == getattr(changed, name), name
    assert struct.mem_bytes == 3


def _read_by_c(name):
    text = source("core.h", *ENGINE, "comm.c", "dma.c", "barrier.c", "decode.c", "icache.c")
    if name.startswith("lat_"):   # read through SWSIM_CONFIG_LATENCIES
        return name[4:] in isa.LATENCY_CLASSES and "SWSIM_CONFIG_LATENCIES" in text
    return re.search(rf"cfg(\.|->){name}\b", text) is not None


def _read_by_python_engine(name):
    text = "".join(open(os.path.join(VM_DIR, f)).read()
                   for f in ("pyengine.py", "semantics.py", "issue.py", "icache.py"))
    if name.startswith("lat_"):   # read through config.latency(class)
        return name[4:] in isa.LATENCY_CLASSES and "config.latency(" in text
    return re.search(rf"config\.{name}\b", text) is not None


@pytest.mark.parametrize("param", PARAMETERS, ids=[p.name for p in PARAMETERS])
def test_every_parameter_is_read_by_both_engines_or_by_neither(param):
    """An engine parameter the C core did not read would be ignored there; a host-only one
    an engine read would be 0 in C."""
    assert _read_by_c(param.name) == param.engine, \
        f"{param.name}: engine={param.engine} but the C core reads it: {_read_by_c(param.name)}"
    assert _read_by_python_engine(param.name) == param.engine, \
        f"{param.name}: engine={param.engine} but the Python engine reads it: " \
        f"{_read_by_python_engine(param.name)}"


# ---- the semantic dispatch -----------------------------------------------------------------

def _dispatch_cases():
    """The ids of execute()'s cases, with its lists of ids expanded: FLOAT_ARITH_LIST
    (`X(I_FADDS, FP_ADD, 1, 1) ...`) and the name lists (`#define INTEGER_IDS(X) X(ADDW) ...`)
    used as INTEGER_IDS(CASE_OF)."""
    text = source("semantics.h", *ENGINE)
    body = function_body(text, "execute")
    macro = re.search(r"#define FLOAT_ARITH_LIST\(X\)(.*?)\n\n", text, re.S).group(1)
    body, uses = re.subn(r"FLOAT_ARITH_LIST\(\w+\)",
                         " ".join(f"case {i}:" for i in re.findall(r"X\((I_\w+)", macro)), body)
    assert uses == 1
    for name in set(re.findall(r"\b(\w+_IDS)\(CASE_OF\)", body)):
        body = body.replace(f"{name}(CASE_OF)",
                            " ".join(f"case I_{i}:" for i in id_list(text, name)))
    return re.findall(r"case (I_\w+):", body)


def test_every_instruction_has_its_own_case_in_the_dispatch():
    cases = _dispatch_cases()
    expected = ["I_INVALID"] + [f"I_{i.name.upper()}" for i in isa.INSTRUCTIONS]
    assert sorted(cases) == sorted(expected)   # each exactly once, no stranger
    assert "default:" not in function_body(source("execute.h"), "execute")


def test_the_id_lists_are_their_classes():
    """The C core dispatches by lists of ids: INTEGER_IDS (CPEs in step, engine_instep.h
    execute_for_all), LOAD_IDS, STORE_IDS and BRANCH_IDS are generated from the ISA table's
    classes; FLOAT_ARITH_LIST, which also says each one's operation, precision and lanes, is
    written by hand and must be exactly classes fp and fdiv."""
    text = source("semantics.h")
    floats = re.search(r"#define FLOAT_ARITH_LIST\(X\)(.*?)\n\n", text, re.S).group(1)
    for found, classes in ((re.findall(r"X\(I_(\w+)", floats), ("fp", "fdiv")),
                           (id_list(text, "INTEGER_IDS"), ("alu", "imul")),
                           (id_list(text, "LOAD_IDS"), ("load",)),
                           (id_list(text, "STORE_IDS"), ("store",)),
                           (id_list(text, "BRANCH_IDS"), ("branch",))):
        assert sorted(found) == sorted(i.name.upper() for i in isa.INSTRUCTIONS
                                       if i.cls in classes), classes


def test_no_default_arm_gives_an_instruction_a_neighbours_behaviour():
    """Every default arm of a switch over instruction ids is the never-taken one."""
    text = source("semantics.h", *ENGINE)
    for match in re.finditer(r"switch \(([^{]*)\) \{", text):
        if "id" not in match.group(1):
            continue
        start = match.end() - 1
        depth, end = 0, start
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        for default in re.finditer(r"default:\s*(\S.*)", text[start:end]):
            assert default.group(1).strip().startswith("NOT_DISPATCHED_HERE"), \
                f"switch ({match.group(1)}): default:{default.group(1)}"
