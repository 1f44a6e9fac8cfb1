"""The SW26010 CPE instruction subset: one table (``table``) and its encoder/decoder."""
from .table import (INSTRUCTIONS, BY_NAME, FIELDS, FORMATS, REG_ALIASES, NUM_REGS, ZERO_REG,
                    LATENCY_CLASSES, CLASSES, CODE_BASE, MEM_BASE, LDM_BASE, PSEUDO_INSTRUCTIONS, Instr, dest_field,
                    source_fields, register_fields)
from .encoding import encode, decode, lookup, get_field, field_range, operand_fields

__all__ = ["INSTRUCTIONS", "BY_NAME", "FIELDS", "FORMATS", "REG_ALIASES", "NUM_REGS", "ZERO_REG", "CODE_BASE", "MEM_BASE", "LDM_BASE",
           "LATENCY_CLASSES", "CLASSES", "PSEUDO_INSTRUCTIONS", "Instr", "dest_field",
           "source_fields", "register_fields", "encode", "decode", "lookup", "get_field",
           "field_range", "operand_fields"]
