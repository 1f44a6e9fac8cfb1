"""Bench results as JSON: `swsim bench X --json FILE` writes what the table shows."""
from __future__ import annotations

import dataclasses
import json

import numpy as np


def jsonable(value):
    """`value` as plain JSON data: dataclasses become objects of their fields and their
    properties (derived columns like a speedup), dict keys strings, tuples lists, numpy scalars
    and arrays numbers and lists, numpy dtypes their names; anything else its str()."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        derived = {name: getattr(value, name) for name, attr in vars(type(value)).items()
                   if isinstance(attr, property)}
        return jsonable({**fields, **derived})
    if isinstance(value, dict):
        return {key if isinstance(key, str) else str(key): jsonable(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def dump(path: str, data) -> None:
    """Write `data` (see jsonable) as indented JSON to `path`; "-" prints it."""
    text = json.dumps(jsonable(data), indent=2)
    if path == "-":
        print(text)
        return
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
