"""QingLong (define-compile-compute): nets of nodes compiled once into a data package, constants
copied to the device once, each compute only binding its I/O (docs/qinglong.md)."""
from .device import Block, Device, DeviceError, copy_cycles
from .net import BN, FC, Conv, Net, Package, QingLongError, ReLU, Scale

__all__ = ["BN", "Block", "Conv", "Device", "DeviceError", "FC", "Net", "Package",
           "QingLongError", "ReLU", "Scale", "copy_cycles"]
