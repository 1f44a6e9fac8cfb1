"""The SW26010 CPE instruction subset: one table (``table``), its encoder/decoder and the
text of one instruction word (``disasm``)."""
from .table import (INSTRUCTIONS, BY_NAME, FIELDS, FORMATS, REG_ALIASES, NUM_REGS, ZERO_REG,
                    LATENCY_CLASSES, CLASSES, CODE_BASE, MEM_BASE, LDM_BASE, PSEUDO_INSTRUCTIONS, Instr, dest_field,
                    source_fields, register_fields, field_range, operand_fields,
                    immediate_fields, immediate_value, split_immediate, encoding_forms,
                    register_or_immediate, IMMEDIATE_RANGES)
from .encoding import encode, decode, lookup, get_field
from .disasm import format_instruction, disassemble_word

__all__ = ["INSTRUCTIONS", "BY_NAME", "FIELDS", "FORMATS", "REG_ALIASES", "NUM_REGS", "ZERO_REG", "CODE_BASE", "MEM_BASE", "LDM_BASE",
           "LATENCY_CLASSES", "CLASSES", "PSEUDO_INSTRUCTIONS", "Instr", "dest_field",
           "source_fields", "register_fields", "encode", "decode", "lookup", "get_field",
           "field_range", "operand_fields", "immediate_fields", "immediate_value", "split_immediate",
           "encoding_forms", "register_or_immediate", "IMMEDIATE_RANGES",
           "format_instruction", "disassemble_word"]
