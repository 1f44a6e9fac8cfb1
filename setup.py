"""Build glue: the repository root *is* the ``swsim`` package (isa/, asm/, vm/, ... are its
subpackages), and the VM's C core is compiled by cffi during the normal install."""
from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """Leave this build script out of the installed package (it sits in the package root)."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if (m[0], m[1]) != ("swsim", "setup")]


LAYERS = ["isa", "asm", "vm", "kernels", "hostlib"]

setup(
    packages=["swsim"] + [f"swsim.{p}" for p in find_namespace_packages(include=[f"{layer}*"
                                                                        for layer in LAYERS])],
    package_dir={"swsim": "."},
    package_data={"swsim.kernels": ["**/*.s", "**/*.inc"], "swsim.vm": ["core/*.c", "core/*.h"],
                  "swsim.hostlib.train": ["caffe.proto", "examples/*.prototxt"],
                  "swsim.hostlib.autodnn": ["examples/*.sched"]},
    cffi_modules=["vm/build_core.py:ffibuilder"],
    cmdclass={"build_py": BuildPy},
)
