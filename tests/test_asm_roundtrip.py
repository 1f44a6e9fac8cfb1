"""Property tests: random instructions drawn from the ISA table assemble to the words the table's
encoder gives, and text -> words -> text -> words is the identity on words."""
import hypothesis.strategies as st
from hypothesis import given, settings

from swsim import isa
from swsim.asm import assemble, disassemble
from swsim.isa import IMMEDIATE_RANGES
from swsim.asm.disasm import disassemble_word

CODE_BASE = isa.CODE_BASE
EXAMPLES = settings(max_examples=150, deadline=None)


def register_spellings(number):
    names = [f"${number}", f"$f{number}"]
    for alias, value in isa.REG_ALIASES.items():
        if value == number:
            names += [f"${alias}", alias]
    return st.sampled_from(names)


def number_text(value):
    return st.sampled_from([str(value), hex(value) if value >= 0 else f"-{hex(-value)}"])


@st.composite
def instruction(draw, labels):
    """(text, field values, literal form, label name or None) of one random instruction."""
    instr = draw(st.sampled_from(isa.INSTRUCTIONS))
    literal = instr.has_literal_form and draw(st.booleans())
    values, parts, label = {}, [], None
    for template in instr.operands:
        if template in ("ra", "rb", "rc", "r3"):
            values[template] = draw(st.integers(0, 31))
            parts.append(draw(register_spellings(values[template])))
        elif isa.register_or_immediate(template) and not literal:
            register = isa.register_or_immediate(template)[0]
            values[register] = draw(st.integers(0, 31))
            parts.append(draw(register_spellings(values[register])))
        elif template == "disp(rb)":
            values["disp16"] = draw(st.integers(*isa.field_range("disp16")))
            values["rb"] = draw(st.integers(0, 31))
            if instr.name == "ldi" and values["rb"] == 31 and draw(st.booleans()):
                parts.append(draw(number_text(values["disp16"])))  # base defaults to $31
            else:
                base = draw(register_spellings(values["rb"]))
                parts.append(f"{draw(number_text(values['disp16']))}({base})")
        elif template == "(rb)":
            values["rb"] = draw(st.integers(0, 31))
            parts.append(f"({draw(register_spellings(values['rb']))})")
        elif template == "label":
            label = draw(st.sampled_from(labels))
            parts.append(label)
        else:  # an immediate, also that of a reg|imm template's literal form
            immediate = (isa.register_or_immediate(template) or (None, template))[1]
            value = draw(st.integers(*IMMEDIATE_RANGES[immediate]))
            values.update(isa.split_immediate(immediate, value))
            parts.append(draw(number_text(value)))
    return f"{instr.name} {', '.join(parts)}", instr, values, literal, label


@st.composite
def programs(draw):
    labels = [f"L{i}" for i in range(draw(st.integers(1, 4)))]
    body = draw(st.lists(instruction(labels), min_size=1, max_size=12))
    positions = {name: draw(st.integers(0, len(body))) for name in labels}
    return body, positions


def expected_words(body, positions):
    words = []
    for index, (_, instr, values, literal, label) in enumerate(body):
        if label is not None:
            values = {**values, "disp21": positions[label] - (index + 1)}
        words.append(isa.encode(instr, values, literal))
    return words


def source(body, positions):
    lines = ["\t.text"]
    for index in range(len(body) + 1):
        lines += [f"{name}:" for name, at in positions.items() if at == index]
        if index < len(body):
            lines.append("\t" + body[index][0])
    return "\n".join(lines) + "\n"


@EXAMPLES
@given(programs())
def test_text_words_text_words(case):
    body, positions = case
    program = assemble(source(body, positions))
    assert program.words == expected_words(body, positions)
    again = assemble(disassemble(program))
    assert again.words == program.words


@EXAMPLES
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=16))
def test_any_words_round_trip(words):
    program = assemble("".join(f"\t.word {w:#x}\n" for w in words))
    assert program.words == words
    assert assemble(disassemble(program)).words == words


@EXAMPLES
@given(st.integers(0, 2**32 - 1))
def test_disassemble_word_is_the_instruction_or_a_word_directive(word):
    text = disassemble_word(word, CODE_BASE)
    decoded = isa.decode(word)
    assert text.startswith(".word") or text.split()[0] == decoded[0].name


def test_disassembly_of_a_program_round_trips_any_words():
    # Non-canonical words (stray bits outside the operand fields), words no instruction
    # encodes and branches out of the code come back as .word.
    words = [0x00000000, isa.encode(isa.BY_NAME["halt"], {}) | 1 << 16,
             isa.encode(isa.BY_NAME["br"], {"ra": 31, "disp21": 1000}),
             isa.encode(isa.BY_NAME["putr"], {"ra": 1, "imm8": 200}, literal=True),
             isa.encode(isa.BY_NAME["addl"], {"ra": 1, "rb": 2, "rc": 3})]
    program = assemble("".join(f"\t.word {w:#x}\n" for w in words))
    text = disassemble(program)
    assert text.count(".word") == 4 and "addl\t$1, $2, $3" in text
    assert assemble(text).words == words


def test_branch_targets_print_as_labels():
    program = assemble("\t.text\nstart:\tnop\nloop:\tbne $1, loop\n\tbr start\n\tbeq $2, .+8\n"
                       "\tnop\n\tnop\n")
    text = disassemble(program)
    assert "bne\t$1, loop" in text and "br\t$31, start" in text and "beq\t$2, .+8" in text
    assert assemble(text).words == program.words


def test_vector_logic_mnemonics_are_vlog_with_their_truth_table():
    vlog = isa.BY_NAME["vlog"]
    for name, truth in isa.table.VECTOR_LOGIC.items():
        words = assemble(f"\t.text\n\t{name} $1, $2, $3\n").words
        assert words == [isa.encode(vlog, {"ra": 1, "rb": 2, "r3": 31, "rc": 3,
                                           **isa.split_immediate("truth", truth)})]


def test_register_and_immediate_operands_choose_the_form():
    text = "\t.text\n\tputr $1, $2\n\tputr $1, 2\n\tsynr $3\n\tsynr 0xff\n\tvshff $1, $2, 0x44, $3\n"
    register, immediate = isa.BY_NAME["putr"], isa.BY_NAME["synr"]
    words = assemble(text).words
    assert [isa.decode(w)[2] for w in words] == [False, True, False, True, True]
    assert isa.decode(words[0])[:2] == (register, {"ra": 1, "rb": 2})
    assert isa.decode(words[3])[:2] == (immediate, {"imm8": 0xFF})
    assert assemble(disassemble(assemble(text))).words == words
