"""Every configuration parameter declares the values it may take; VMConfig refuses others with a
message naming the parameter, its value and the rule, and the C core's own check is generated
from the same ranges."""
import numpy as np
import pytest

from swsim.cli import main
from swsim.errors import SwsimError
from swsim.vm import Machine, VMConfig
from swsim.vm.config import PARAMETERS, ConfigError
from swsim.vm.engine_api import EngineJob

from swsim.vm import cengine   # the C core must be built: a missing one fails here

HALT = ".text\n.globl kernel\nkernel:\n\thalt\n"


@pytest.mark.parametrize("name, value, rule", [
    ("clock_hz", 0, "at least 1 Hz"),
    ("clock_hz", -5, "at least 1 Hz"),
    ("clock_hz", float("inf"), "finite"),
    ("spawn_cycles", -100, "0..1099511627776 cycles"),
    ("lat_fp", -3, "1..1048576 cycles"),
    ("ldm_bytes", 3, "64..1048576 B"),
    ("ldm_bytes", 100, "multiple of 32"),
    ("ldm_bytes", 1.5, "must be an integer, got float"),
    ("num_cgs", 0, "1..64"),
    ("mesh_rows", 9, "1..8"),
    ("mesh_cols", 0, "1..8"),
    ("mem_align", 96, "power of two"),
    ("dma_channel_depth", 0, "1..1024"),
    ("barrier_cycles", True, "must be an integer, got bool"),
])
def test_a_value_outside_the_declared_range_is_refused_by_name(name, value, rule):
    for make in (lambda: VMConfig.preset(**{name: value}),
                 lambda: VMConfig.preset().replace(**{name: value}),
                 lambda: Machine(**{name: value}),
                 lambda: Machine(VMConfig.preset(), **{name: value})):
        with pytest.raises(SwsimError) as error:   # Machine reports it as a HostError
            make()
        assert f"{name}={value!r}" in str(error.value) and rule in str(error.value)


def test_unknown_parameter_and_preset_are_refused():
    with pytest.raises(ConfigError, match="unknown configuration parameter 'ldm_size'"):
        VMConfig.preset(ldm_size=1)
    with pytest.raises(ConfigError, match="unknown machine preset"):
        VMConfig.preset(None)


def test_every_default_and_preset_value_is_in_range():
    for p in PARAMETERS:
        assert p.problem(p.default) is None, p.name
    VMConfig.preset("sw26010pro")


def test_static_data_must_fit_in_the_memory_limit():
    with pytest.raises(ConfigError, match="static_data_bytes=16777216: must not exceed "
                                          "mem_limit=4096"):
        VMConfig.preset(mem_limit=4096)


@pytest.mark.parametrize("setting, message", [
    ("clock_hz=0", "clock_hz=0.0: must be at least 1 Hz"),
    ("spawn_cycles=-100", "spawn_cycles=-100: must be 0.."),
    ("num_cgs=0", "num_cgs=0: must be 1..64"),
    ("lat_fp=-3", "lat_fp=-3: must be 1..1048576 cycles"),
])
def test_cli_set_names_the_parameter(tmp_path, capsys, setting, message):
    kernel = tmp_path / "k.s"
    kernel.write_text(HALT)
    assert main(["run", str(kernel), "--cpes", "1", "--set", setting]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_refuses_a_negative_cycle_limit(tmp_path, capsys):
    kernel = tmp_path / "k.s"
    kernel.write_text(HALT)
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(kernel), "--max-cycles", "-5"])
    assert exit_.value.code == 2
    assert "--max-cycles: expected an integer >= 0, got -5" in capsys.readouterr().err


def test_the_c_core_checks_the_same_ranges():
    """A configuration built around VMConfig's check reaches the C core's generated check."""
    values = dict(VMConfig.preset().values)
    values["mesh_rows"] = 9
    bad = VMConfig(tuple(values.items()))
    job = EngineJob(config=bad, code=np.zeros(1, np.uint32), spawned=np.zeros(72, bool),
                    entry_pc=bad.code_base, regs=np.zeros((72, 32, 4), np.uint64),
                    ldm=np.zeros((72, bad.ldm_bytes), np.uint8), mem=np.zeros(8, np.uint8))
    with pytest.raises(ValueError, match="outside the parameters' ranges"):
        cengine.run(job)
