"""The on-disk cache of linked kernels (kernels/cache.py): a second process loads what the
first built, bit for bit; the key follows every input; corrupt entries are rebuilt; the
directory follows SWSIM_CACHE_DIR / XDG_CACHE_HOME."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swsim.asm.objfile import objects_bytes
from swsim.asm.swo import program_bytes
from swsim.kernels import cache, object_file, program
from swsim.kernels.athread import link_with_runtime

NAMES = ("gemm/gemm_prim.s",)
# the subprocess imports this checkout's swsim, as pytest does
PYTHONPATH = os.pathsep.join([str(cache.PACKAGE_DIR.parent), os.environ.get("PYTHONPATH", "")])


def _build():
    return link_with_runtime([object_file(name) for name in NAMES])


def _refuse():
    raise AssertionError("built although the cache holds the program")


@pytest.fixture
def cache_in(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "programs"))
    return tmp_path / "programs"


def test_a_later_process_loads_the_same_program(cache_in):
    built = cache.cached_program(NAMES, _build)
    assert cache.entry_path(cache_in, NAMES) in set(cache_in.iterdir())
    loaded = cache.cached_program(NAMES, _refuse)
    assert program_bytes(loaded) == program_bytes(built)
    assert loaded.symbols == built.symbols and loaded.lines == built.lines


def test_program_goes_through_the_cache(cache_in):
    program.cache_clear()
    try:
        first = program(*NAMES)
        assert cache.entry_path(cache_in, NAMES).is_file()
        program.cache_clear()
        assert program_bytes(program(*NAMES)) == program_bytes(first)
        with pytest.raises(FileNotFoundError, match="no kernel 'nosuch.s'"):
            program("nosuch.s")
    finally:
        program.cache_clear()


def test_object_files_go_through_the_cache(cache_in, monkeypatch):
    """A source's object (what launches read its REQ_* requirements from) is kept on disk
    beside the programs: a later process gets the same object without assembling."""
    import swsim.asm
    object_file.cache_clear()
    try:
        first = object_file(NAMES[0])
        path = cache.entry_path(cache_in, NAMES, "object")
        assert path.is_file() and path != cache.entry_path(cache_in, NAMES)
        object_file.cache_clear()
        monkeypatch.setattr(swsim.asm, "assemble_object", lambda *a, **k: _refuse())
        loaded = object_file(NAMES[0])
        assert objects_bytes([loaded]) == objects_bytes([first])
        assert loaded.symbols == first.symbols
        path.write_bytes(b"junk")                    # corrupt: assembled again
        object_file.cache_clear()
        monkeypatch.undo()
        monkeypatch.setenv(cache.CACHE_ENV, str(cache_in))
        assert objects_bytes([object_file(NAMES[0])]) == objects_bytes([first])
    finally:
        object_file.cache_clear()


@pytest.mark.parametrize("damage", [lambda b: b[:len(b) // 2], lambda b: b"junk",
                                    lambda b: b[:-1] + bytes([b[-1] ^ 1])],
                         ids=["truncated", "junk", "one bit"])
def test_a_corrupt_entry_is_ignored_and_rebuilt(cache_in, damage):
    good = cache.cached_program(NAMES, _build)
    path = cache.entry_path(cache_in, NAMES)
    path.write_bytes(damage(path.read_bytes()))
    rebuilt = cache.cached_program(NAMES, _build)
    assert program_bytes(rebuilt) == program_bytes(good)
    assert program_bytes(cache.cached_program(NAMES, _refuse)) == program_bytes(good)


@pytest.mark.parametrize("changed", ["kernels/gemm/gemm_prim.s", "kernels/include/dma.inc",
                                     "asm/linker.py", "isa/table.py"])
def test_changing_an_input_changes_the_key(tmp_path, monkeypatch, changed):
    for tree, _ in cache.INPUT_TREES:
        shutil.copytree(cache.PACKAGE_DIR / tree, tmp_path / tree)
    monkeypatch.setattr(cache, "PACKAGE_DIR", tmp_path)
    cache.inputs_digest.cache_clear()
    try:
        before = cache.entry_path(tmp_path, NAMES)
        assert cache.entry_path(tmp_path, ("other.s",)) != before
        path = tmp_path / changed
        assert path.is_file(), changed
        path.write_bytes(path.read_bytes() + b"\n")
        cache.inputs_digest.cache_clear()
        assert cache.entry_path(tmp_path, NAMES) != before
    finally:
        cache.inputs_digest.cache_clear()


def test_another_checkout_has_its_own_entries(tmp_path, monkeypatch):
    """Same sources in another directory: other keys (entries record their sources' paths)."""
    for tree, _ in cache.INPUT_TREES:
        shutil.copytree(cache.PACKAGE_DIR / tree, tmp_path / tree)
    here = cache.entry_path(tmp_path, NAMES)
    monkeypatch.setattr(cache, "PACKAGE_DIR", tmp_path)
    cache.inputs_digest.cache_clear()
    try:
        assert cache.entry_path(tmp_path, NAMES) != here
    finally:
        cache.inputs_digest.cache_clear()


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "swsim" / "programs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "swsim" / "programs"
    monkeypatch.setenv(cache.CACHE_ENV, "")
    assert cache.cache_dir() is None
    assert program_bytes(cache.cached_program(NAMES, _build)) == program_bytes(_build())


def test_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / "programs"))
    assert program_bytes(cache.cached_program(NAMES, _build)) == program_bytes(_build())



def test_importing_the_library_does_not_assemble():
    """Once a process has filled the cache, importing the DNN library (which reads kernels'
    symbols and requirements for its constants) neither assembles nor imports lark."""
    code = ("import sys, swsim.hostlib.dnn; "
            "print(sorted(m for m in sys.modules if m in ('lark', 'swsim.asm.assembler')))")
    for _ in range(2):    # the first may fill the cache
        run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": PYTHONPATH})
    assert run.stdout.strip() == "[]"
