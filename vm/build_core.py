"""cffi build script of the VM's C core (run by the normal install through setup.py)."""
from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef("int swsim_core_version(void);")
ffibuilder.set_source("swsim.vm._core", "int swsim_core_version(void) { return 1; }")

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
