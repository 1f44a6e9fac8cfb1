"""Hostile and careless assembler input ends in located errors, in bounded time and memory, all
reported in one run in line order (issue 14), and mnemonic suggestions count a transposition as
one edit (issue 13)."""
import time

import pytest

from swsim.asm import AsmError, assemble, assemble_file
from swsim.asm.assembler import MAX_SECTION_BYTES, edit_distance
from swsim.asm import preprocess
from swsim.asm.preprocess import MAX_EXPANDED_STATEMENTS
from swsim.asm.program import TEXT
from swsim.asm.syntax import MAX_TREE_DEPTH
from swsim.isa import BY_NAME, ZERO_REG, encode

NOP = encode(BY_NAME["bis"], {"ra": ZERO_REG, "rb": ZERO_REG, "rc": ZERO_REG})


def errors(text, filename="bad.s"):
    with pytest.raises(AsmError) as info:
        assemble(text, filename)
    return info.value.diagnostics


def only_error(text):
    (diag,) = errors(text)
    return diag


def quick_error(text):
    """The only error of ``text``, found within a second."""
    start = time.perf_counter()
    diag = only_error(text)
    assert time.perf_counter() - start < 1
    return diag


def timed(function, *args):
    """The shorter of two runs (the machine is shared)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return min(times)


# ---- expressions --------------------------------------------------------------------------
def test_long_and_deep_expressions_give_a_located_error():
    for expression in ["+".join(["1"] * 500), "(" * 5000 + "1" + ")" * 5000]:
        diag = only_error(f"\tnop\n\tldi $1, {expression}\n")
        assert (diag.line, diag.col) == (2, 10), str(diag)
        assert f"nested too deeply (more than {MAX_TREE_DEPTH} levels" in diag.message


def test_expressions_below_the_depth_limit_evaluate():
    count = MAX_TREE_DEPTH // 2
    program = assemble(f"\t.data\n\t.quad {'+'.join(['3'] * count)}, {'(' * count}7{')' * count}\n")
    assert program.data_image == (3 * count).to_bytes(8, "little") + (7).to_bytes(8, "little")


def test_a_missing_operand_is_located():
    diag = only_error("\taddl $1,,$2\n")
    assert (diag.col, diag.message) == (10, "missing operand")


# ---- sizes and repetitions are bounded by what fits the machine ----------------------------
@pytest.mark.parametrize("count", [100_000_000, 1_000_000, MAX_EXPANDED_STATEMENTS + 1])
def test_huge_rept_is_refused_at_once(count):
    diag = quick_error(f"\tnop\n\t.rept {count}\n\tnop\n\t.endr\n")
    assert (diag.line, diag.col) == (2, 2)
    assert f".rept {count} would expand this file to more than {MAX_EXPANDED_STATEMENTS}" \
        in diag.message


def test_nested_and_macro_expansions_share_the_budget(monkeypatch):
    monkeypatch.setattr(preprocess, "MAX_EXPANDED_STATEMENTS", 1000)
    diag = only_error("\t.data\n\t.rept 30\n\t.rept 40\n\t.byte 1\n\t.endr\n\t.endr\n")
    assert diag.line == 3 and ".rept 40 would expand this file to more than 1000" \
        in diag.message
    diag = only_error("\t.macro m\n\t.rept 600\n\tnop\n\t.endr\n\t.endm\n\tm\n\tm\n")
    assert diag.line == 2 and ".rept 600 would expand" in diag.message
    diag = only_error("\t.macro m\n\tnop\n\tnop\n\t.endm\n" + "\tm\n" * 501)
    assert diag.line == 505 and "macro m would expand" in diag.message


def test_the_largest_allowed_rept_assembles(monkeypatch):
    monkeypatch.setattr(preprocess, "MAX_EXPANDED_STATEMENTS", 1000)
    assert len(assemble("\t.rept 500\n\tnop\n\tnop\n\t.endr\n").code) == 1000


@pytest.mark.parametrize("section, limit", [(".text", MAX_SECTION_BYTES[TEXT][0]),
                                            (".data", 256 << 20), (".bss", 1 << 20),
                                            (".ldm", 1 << 20)])
def test_sections_larger_than_the_machine_are_refused(section, limit):
    diag = quick_error(f"\t{section}\n\t.skip 0x7fffffff\n")
    assert (diag.line, diag.col) == (2, 8)
    assert f"section {section} would grow to 2147483647 bytes, more than the {limit}" \
        in diag.message
    diag = only_error(f"\t{section}\n\t.skip 16\n\t.org {limit + 8}\n")
    assert (diag.line, diag.col) == (3, 7) and f"grow to {limit + 8} bytes" in diag.message


def test_statements_on_one_line_cost_what_they_cost_on_separate_lines():
    statements = [f"addl $1, {i % 256}, $2" for i in range(8000)]  # parsed once (cached)
    one_line = timed(assemble, "; ".join(statements))
    separate = timed(assemble, "\n".join(statements))
    assert one_line < 3 * separate + 0.2, (one_line, separate)


# ---- alignment ----------------------------------------------------------------------------
def test_code_is_aligned_with_nops_and_refuses_a_fill():
    program = assemble("\tnop\n\t.p2align 4,,15\n\tldi $1, 1\n")
    assert program.words[:4] == [NOP] * 4 and program.symbols == program.symbols
    diag = only_error("\tnop\n\t.align 3, 0x7\n")
    assert (diag.line, diag.col) == (2, 12)
    assert "code is padded with nop: no fill value in a code section" in diag.message
    assert "no fill value" in only_error("\t.skip 8, 1\n").message


def test_p2align_fill_and_max_in_data():
    program = assemble("\t.data\n\t.byte 1\n\t.p2align 3, 0xee\n\t.byte 2\n"
                       "\t.p2align 4,,3\n\t.byte 3\n")
    # the second alignment would need 7 bytes, more than its maximum 3: skipped
    assert program.data_image == bytes([1] + [0xEE] * 7 + [2, 3])


# ---- strings ------------------------------------------------------------------------------
def test_non_ascii_strings_are_utf8_and_bad_escapes_are_located():
    program = assemble('\t.data\n\t.ascii "h\u00e9\\n"\n\t.byte \'\\t\'\n')
    assert program.data_image == "h\u00e9\n\t".encode()
    diag = only_error('\t.data\n\t.ascii "ok", "a\\x"\n')
    assert (diag.line, diag.col) == (2, 15) and "bad escape sequence" in diag.message
    diag = only_error('\t.data\n\t.ascii "a\\qb"\n')
    assert diag.col == 9 and 'bad escape sequence in "a\\qb"' in diag.message
    diag = only_error("\t.data\n\t.byte '\u00e9'\n")
    assert diag.col == 8 and "is not one byte" in diag.message


# ---- every error, in line order -----------------------------------------------------------
def test_errors_of_both_passes_and_undefined_symbols_come_in_line_order():
    diags = errors("\tldl $1, 40000($2)\n"     # pass 2: displacement range
                   "\tvmda $1, $2, $3, $4\n"   # pass 1: unknown mnemonic
                   "\tbr $31, nowhere\n"        # link: undefined symbol
                   "\t.data\n\t.byte 300\n"     # pass 2
                   "\t.algin 3\n")              # pass 1
    assert [d.line for d in diags] == [1, 2, 3, 5, 6], "\n".join(map(str, diags))
    assert "did you mean vmad?" in diags[1].message
    assert "undefined symbol nowhere" in diags[2].message
    assert "did you mean .align?" in diags[4].message


def test_errors_of_several_files_in_file_order(tmp_path):
    from swsim.asm import build_files
    (tmp_path / "a.s").write_text("\tbr $31, missing\n\tfoo\n")
    (tmp_path / "b.s").write_text("\tbar\n\tldi $1, also_missing\n")
    with pytest.raises(AsmError) as info:
        build_files([str(tmp_path / "a.s"), str(tmp_path / "b.s")])
    where = [(d.file.rsplit("/", 1)[-1], d.line) for d in info.value.diagnostics]
    assert where == [("a.s", 1), ("a.s", 2), ("b.s", 1), ("b.s", 2)]


def test_recursive_include_names_the_recursion(tmp_path):
    (tmp_path / "main.s").write_text('start:\tnop\n\t.include "part.inc"\n')
    (tmp_path / "part.inc").write_text('\tnop\n\t.include "main.s"\n')
    with pytest.raises(AsmError) as info:
        assemble_file(str(tmp_path / "main.s"))
    (diag,) = info.value.diagnostics
    assert diag.file.endswith("part.inc") and (diag.line, diag.col) == (2, 2)
    assert "recursive .include: main.s -> part.inc -> main.s" in diag.message


# ---- suggestions --------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, distance", [
    ("vmda", "vmad", 1), ("ca", "ac", 1), ("kitten", "sitting", 3), ("", "abc", 3),
    ("abc", "abc", 0), ("ca", "abc", 3),  # optimal string alignment: no edit of a swapped pair
])
def test_edit_distance_counts_a_transposition_as_one_edit(a, b, distance):
    assert edit_distance(a, b) == distance == edit_distance(b, a)


@pytest.mark.parametrize("wrong, suggestion", [
    ("vmda", "vmad"), ("addll", "addl"), ("bsi", "bis or bsr"), ("xyzzy", None),
])
def test_mnemonic_suggestions(wrong, suggestion):
    message = only_error(f"\t{wrong} $1, $2, $3\n").message
    if suggestion:
        assert message.endswith(f"(did you mean {suggestion}?)")
    else:
        assert "did you mean" not in message


def test_an_error_in_a_long_line_shows_the_part_around_the_caret():
    statements = ["nop"] * 3000 + ["addl $1, 300, $2"] + ["nop"] * 3000
    diag = only_error("; ".join(statements))
    assert diag.col == 3000 * 5 + 10
    source, caret = str(diag).split("\n")[1:3]
    assert source.startswith("...") and source.endswith("...") and len(source) < 200
    assert source[len(caret) - 1:].startswith("300, $2")


def test_a_label_on_a_bad_line_is_still_defined():
    (diag,) = errors("loop:\tldi $1, 3(\n\tbr $31, loop\n")
    assert diag.line == 1 and "unexpected end of statement" in diag.message


def test_a_misspelt_dollar_register_in_a_literal_slot():
    diag = only_error("\taddl $1, $sq, $2\n")
    assert diag.col == 11 and diag.message.startswith("unknown register $sq")
