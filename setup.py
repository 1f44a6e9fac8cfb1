"""Build glue: the repository root *is* the ``swsim`` package (isa/, asm/, vm/, ... are its
subpackages), and the VM's C core is compiled by cffi during the normal install."""
from setuptools import setup

SUBPACKAGES = ["isa", "asm", "vm", "kernels", "hostlib"]

setup(
    packages=["swsim"] + [f"swsim.{p}" for p in SUBPACKAGES],
    package_dir={"swsim": "."},
    package_data={"swsim.kernels": ["*.s", "*.inc"], "swsim.vm": ["core/*.c", "core/*.h"]},
    cffi_modules=["vm/build_core.py:ffibuilder"],
)
