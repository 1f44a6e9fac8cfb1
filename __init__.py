"""swsim: a cycle-level emulator of the Sunway SW26010 core group, with an assembler,
hand-scheduled kernels and a DNN library.

Layers (each imports only the ones before it): ``isa`` (the instruction table) ← ``asm``
(assembler, linker, disassembler) ← ``vm`` (the core-group emulator) ← ``kernels`` /
``hostlib`` (assembly kernels and the host library).
"""
from swsim.errors import SwsimError  # absolute: pytest may import this file from the checkout root

__version__ = "0.1.0"

# Public API, resolved lazily so that `import swsim` stays cheap and layers load on demand.
_EXPORTS = {
    "assemble": "swsim.asm", "assemble_file": "swsim.asm", "link": "swsim.asm",
    "disassemble": "swsim.asm", "AsmError": "swsim.asm", "Program": "swsim.asm",
    "Machine": "swsim.vm", "VMFault": "swsim.vm", "Deadlock": "swsim.vm",
    "CycleLimit": "swsim.vm", "VMConfig": "swsim.vm",
}


# Imported before the export: the athread runtime registers itself with Machine.program, so
# swsim.Machine().run links it to a program that calls it, as `swsim run` does.
_PREPARE = {"Machine": "swsim.kernels.athread"}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib
        if name in _PREPARE:
            importlib.import_module(_PREPARE[name])
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'swsim' has no attribute {name!r}")


__all__ = ["SwsimError", *_EXPORTS]
