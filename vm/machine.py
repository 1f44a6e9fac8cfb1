"""The host side (MACHINE.md §9): main memory, loading a program, spawning kernels on the core
groups of the chip and joining them, and turning each engine's result into a ``RunResult`` or a
fault report. Each spawned core group is simulated on its own host thread (docs/vm.md "Chip")."""
from __future__ import annotations

import difflib
import importlib
import numbers
import os
import threading
from concurrent.futures import Future
from typing import Callable, Iterable, Optional, Union

import numpy as np

from ..isa.table import CODE_BASE, REG_ALIASES
from .config import VMConfig
from .engine_defs import MAX_CYCLES
from .engine_api import STOP_CYCLE_LIMIT, STOP_DEADLOCK, EngineJob, EngineResult
from .faults import CycleLimit, Deadlock, HostError, VMFault, instruction_at
from .floats import double_to_bits
from .memory import Memory
from .results import RunResult

ENGINES = {"c": "swsim.vm.cengine", "python": "swsim.vm.pyengine"}
ARGUMENT_REGISTERS = [REG_ALIASES[f"a{i}"] for i in range(6)]
STACK_POINTER, RETURN_ADDRESS = REG_ALIASES["sp"], REG_ALIASES["ra"]
# A program that defines START_SYMBOL (a runtime's start routine, docs/runtime.md) starts there,
# with the entry's address in pv and the CG number in at; the routine then jumps to the entry.
START_SYMBOL = "__swsim_start"
START_ENTRY, START_CG = REG_ALIASES["pv"], REG_ALIASES["at"]
ARGUMENT_SLOT_BYTES = 8
STACK_ALIGN = 32
NUM_REGISTERS, LANES = 32, 4
EMULATED_VECTOR_BYTES = LANES * 8   # both engines model 256-bit registers of 4 64-bit lanes

# Libraries (asm.Library) linked to what Machine.program builds from sources or objects when
# they use them: a higher layer registers the one it provides (kernels/athread: the athread
# runtime), so that Machine.run links it exactly as `swsim run` does.
_LIBRARY_PROVIDERS: list[Callable[[], object]] = []


def register_library(provider: Callable[[], object]) -> None:
    """Link the library ``provider()`` (an asm.Library) to programs built by Machine.program."""
    if provider not in _LIBRARY_PROVIDERS:
        _LIBRARY_PROVIDERS.append(provider)


class Machine:
    """One SW26010 chip: ``config.num_cgs`` core groups sharing main memory ``mem``.

    ``spawn`` starts a kernel on one core group and returns at once (the CG is simulated on its
    own host thread); ``join`` on the returned ``CgRun`` waits for it. ``run`` is spawn + join.
    ``core_group(k)`` is CG k alone, as a machine of one core group sharing ``mem``.
    """

    def __init__(self, config: Union[str, VMConfig] = "sw26010", **overrides):
        if isinstance(config, VMConfig):
            self.config = config.replace(**overrides) if overrides else config
        else:
            try:
                self.config = VMConfig.preset(config, **overrides)
            except (ValueError, TypeError) as exc:
                raise HostError(str(exc)) from None
        if self.config.vector_bytes != EMULATED_VECTOR_BYTES:
            raise HostError(
                f"config.vector_bytes is {self.config.vector_bytes}, but both engines emulate "
                f"{EMULATED_VECTOR_BYTES}-byte (256-bit, {LANES} x 64-bit lane) registers "
                f"only; wider vectors (the sw26010pro's 512 bits) are not emulated. To run "
                f"256-bit code with the other parameters, pass vector_bytes="
                f"{EMULATED_VECTOR_BYTES} (and flops_per_cycle={2 * LANES}, one {LANES}-lane FMA, "
                "for the 256-bit peak)")
        self.mem = Memory(self.config)
        self.last_jobs: dict[int, EngineJob] = {}   # CG -> its last joined job: regs and LDM
        self.last_job: Optional[EngineJob] = None   # the job of the most recent join (any CG)
        self._spawned: dict[int, CgRun] = {}        # CG -> its run, until joined
        self._lock = threading.Lock()               # guards _spawned for host threads

    @property
    def num_cgs(self) -> int:
        """The core groups host code may spawn on (``config.num_cgs``)."""
        return self.config.num_cgs

    def core_group(self, cg: int) -> "CoreGroup":
        """Core group ``cg`` as a machine of its own: its ``run``/``spawn`` go to CG ``cg``
        (numbered 0 there), its ``mem`` is this chip's. Host threads each driving their own
        CG's view run the CGs concurrently (allocating while others run needs
        ``mem.reserve``)."""
        self._check_cg(cg)
        return CoreGroup(self, int(cg))

    def run(self, program, entry: str = "kernel", args: Iterable = (), cg: int = 0,
            cpes: Iterable[int] = None, max_cycles: Optional[int] = None, engine: str = "c",
            trace: bool = False, progress: Optional[Callable[[int], None]] = None) -> RunResult:
        """Spawn ``entry`` on core group ``cg`` and join it: ``spawn(...).join()``, simulated
        on the calling thread (starting a thread would cost more than a short kernel)."""
        return self._spawn(program, entry, args, cg, cpes, max_cycles, engine, trace, progress,
                           here=True).join()

    def spawn(self, program, entry: str = "kernel", args: Iterable = (), cg: int = 0,
              cpes: Iterable[int] = None, max_cycles: Optional[int] = None, engine: str = "c",
              trace: bool = False,
              progress: Optional[Callable[[int], None]] = None, *,
              here: bool = False) -> "CgRun":
        """Start ``entry`` on ``cpes`` (default all) of core group ``cg`` and return its
        ``CgRun`` without waiting; the CG is simulated on a host thread of its own
        (``here=True``: on the calling thread, before returning — the last of several CGs
        started together, which would otherwise wait idle for the others' threads).

        ``args``: ints (passed as 64-bit two's complement), floats (their IEEE double bits)
        or arrays previously given to ``mem.put`` (their address). ``max_cycles`` limits the
        kernel cycles (spawn excluded). ``progress(cycle)`` is called now and then by either
        engine, from the CG's thread. A CG runs one kernel at a time: join it before spawning
        on it again. Wrong calls raise ``HostError`` here; the run's own stops come from
        ``CgRun.join``.
        """
        return self._spawn(program, entry, args, cg, cpes, max_cycles, engine, trace, progress,
                           here=bool(here))

    def _spawn(self, program, entry: str = "kernel", args: Iterable = (), cg: int = 0,
               cpes: Iterable[int] = None, max_cycles: Optional[int] = None, engine: str = "c",
               trace: bool = False, progress: Optional[Callable[[int], None]] = None, *,
               here: bool) -> "CgRun":
        """``spawn``; `here`: simulate on this thread before returning, not on a new one."""
        config = self.config
        program = self.program(program)
        if program.code_base != config.code_base:
            raise HostError(f"the program is linked at {program.code_base:#x}, the machine runs "
                            f"code at config.code_base={config.code_base:#x}: a machine runs "
                            f"programs linked for its code_base (the assembler's is "
                            f"{CODE_BASE:#x})")
        run_engine = self._engine(engine)
        self._check_run_options(max_cycles, trace, progress)
        self._check_cg(cg)
        spawned = np.ones(config.num_cpes, dtype=bool) if cpes is None else \
            self._spawn_set(cpes)
        entry_pc = self._entry_address(program, entry)
        values = [self._argument(a, i) for i, a in enumerate(args)]
        stack_args = values[len(ARGUMENT_REGISTERS):]
        arg_area = -(-len(stack_args) * ARGUMENT_SLOT_BYTES // STACK_ALIGN) * STACK_ALIGN
        self._check_ldm_fits(program, arg_area, len(stack_args))
        # built outside the lock (other host threads spawn on other CGs meanwhile); the memory
        # it runs on is taken under it, after the program's data is in place
        job = self._job(program, entry_pc, cg, spawned, values, stack_args, arg_area,
                        max_cycles, trace)
        with self._lock:
            if cg in self._spawned:
                raise HostError(f"CG {cg} is busy: a kernel spawned on it has not been "
                                "joined; join it before spawning again")
            if program.data_image:
                self.mem.load_static(program.data_base, program.data_image)
            job.mem = self.mem.view()
            handle = CgRun(self, cg, engine, program, job, np.flatnonzero(spawned))
            self._spawned[cg] = handle
            self.mem.pin(cg)
        if here:
            handle._simulate(run_engine, progress)
        else:
            threading.Thread(target=handle._simulate, args=(run_engine, progress),
                             name=f"swsim-cg{cg}", daemon=True).start()
        return handle

    def join_all(self, runs: Optional[Iterable["CgRun"]] = None) -> dict[int, RunResult]:
        """Join ``runs`` (default: every spawned core group); returns {cg: RunResult}. If some
        stopped early (or failed), every CG is joined first and then the error of the lowest
        CG is raised. Host code sharing the chip with other threads joins its own runs."""
        with self._lock:
            handles = sorted(self._spawned.values() if runs is None else runs,
                             key=lambda handle: handle.cg)
        results, first_error = {}, None
        for handle in handles:
            try:
                results[handle.cg] = handle.join()
            except Exception as exc:   # noqa: BLE001 - re-raised below, after every join
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return results

    @property
    def running(self) -> list[int]:
        """The core groups spawned and not yet joined."""
        with self._lock:
            return sorted(self._spawned)

    def _job(self, program, entry_pc, cg, spawned, values, stack_args, arg_area, max_cycles,
             trace) -> EngineJob:
        config = self.config
        regs = np.zeros((config.num_cpes, NUM_REGISTERS, LANES), dtype=np.uint64)
        ldm = np.zeros((config.num_cpes, config.ldm_bytes), dtype=np.uint8)
        sp = config.ldm_bytes - arg_area
        image = np.frombuffer(program.ldm_image, dtype=np.uint8)
        stack = np.array(stack_args, dtype=np.uint64).view(np.uint8)
        start = program.symbols.get(START_SYMBOL)
        cpes = np.flatnonzero(spawned)[:, None]             # every spawned CPE at once
        registers = ARGUMENT_REGISTERS[:len(values)] + [STACK_POINTER, RETURN_ADDRESS]
        initial = values[:len(ARGUMENT_REGISTERS)] + [sp, config.code_base - 4]
        if start is not None:
            registers, initial = registers + [START_ENTRY, START_CG], initial + [entry_pc, cg]
        regs[cpes, registers, 0] = np.array(initial, dtype=np.uint64)
        ldm[cpes, :len(image)] = image
        ldm[cpes, sp:sp + len(stack)] = stack
        return EngineJob(config=config, code=np.asarray(program.code, dtype=np.uint32),
                         spawned=spawned,
                         entry_pc=entry_pc if start is None else start.value, regs=regs, ldm=ldm,
                         mem=None, max_cycles=max_cycles, trace=trace)   # mem: set by spawn

    def _joined(self, handle: "CgRun") -> None:
        with self._lock:
            if handle._joined:   # a second join, perhaps from another host thread
                raise HostError(f"the run on CG {handle.cg} was already joined")
            handle._joined = True
            del self._spawned[handle.cg]
            self.mem.unpin(handle.cg)
            self.last_jobs[handle.cg] = self.last_job = handle.job

    # -- checks --------------------------------------------------------------------------------
    @staticmethod
    def program(program, include_dirs: tuple[str, ...] = (), symbols=None):
        """The Program to run, from a Program, an ObjectFile or a list of them, assembly source
        text, or the path of a .s file or a .swo (object or program): sources and objects are
        linked with the registered libraries they use (the athread runtime) and ``symbols``
        ({name: address}: data the host defines, as ``extern double A[]`` of a host array
        ``m.mem.put(a)``). ``swsim run`` builds its program here too."""
        from ..asm import ObjectFile, Program, build, build_files, link
        if isinstance(program, Program):
            if symbols:
                raise HostError("symbols are linked into objects or sources; this program is "
                                "linked already")
            return program
        libraries = tuple(provider() for provider in _LIBRARY_PROVIDERS)
        if isinstance(program, ObjectFile) or isinstance(program, (list, tuple)) and program \
                and all(isinstance(obj, ObjectFile) for obj in program):
            objects = [program] if isinstance(program, ObjectFile) else list(program)
            return link(objects, libraries, symbols)
        if isinstance(program, os.PathLike) or isinstance(program, str) and "\n" not in program \
                and program.strip().lower().endswith((".s", ".swo")):
            path = os.fspath(program).strip()
            if isinstance(program, str) and not os.path.isfile(path):  # a PathLike is a path
                raise HostError(f"program {path!r} looks like a path to a .s/.swo file, but "
                                "there is no such file (to run source text, pass the text)")
            return build_files([path], tuple(include_dirs), libraries, symbols)
        if isinstance(program, str):
            return build([(program, "<input>")], tuple(include_dirs), libraries, symbols)
        raise HostError(f"program must be a Program (swsim.assemble), an ObjectFile or a list "
                        f"of them, assembly source text or the path of a .s/.swo file, got "
                        f"{type(program).__name__}")

    @staticmethod
    def _check_run_options(max_cycles, trace, progress) -> None:
        if max_cycles is not None and (isinstance(max_cycles, bool) or not isinstance(
                max_cycles, numbers.Integral) or not 0 <= max_cycles <= MAX_CYCLES):
            raise HostError(f"max_cycles must be None or an int 0..2**62, got {max_cycles!r}")
        if not isinstance(trace, (bool, np.bool_)):
            raise HostError(f"trace must be True or False, got {trace!r}")
        if progress is not None and not callable(progress):
            raise HostError(f"progress must be None or a function of the cycle, got "
                            f"{progress!r}")

    @staticmethod
    def _engine(name: str) -> Callable:
        if name not in ENGINES:
            raise HostError(f"unknown engine {name!r}; expected one of {sorted(ENGINES)}")
        try:
            module = importlib.import_module(ENGINES[name])
        except ImportError as exc:
            raise HostError(f"the {name!r} engine is not available ({exc}); "
                            "use engine='python'") from None
        return module.run

    def _check_cg(self, cg) -> None:
        if isinstance(cg, bool) or not isinstance(cg, numbers.Integral) \
                or not 0 <= cg < self.config.num_cgs:
            raise HostError(f"cg must be a core group number 0..{self.config.num_cgs - 1}, "
                            f"got {cg!r}")

    def _spawn_set(self, cpes) -> np.ndarray:
        if isinstance(cpes, numbers.Integral) or isinstance(cpes, (str, bytes)):
            raise HostError(f"cpes must be a collection of CPE ids such as range(8), "
                            f"got {cpes!r}")
        ids = list(cpes)
        num = self.config.num_cpes
        bad = [] if isinstance(cpes, range) and cpes.step > 0 and 0 <= cpes.start \
            and cpes.stop <= num else \
            [i for i in ids if not isinstance(i, numbers.Integral) or not 0 <= i < num]
        if bad or not ids or len(set(ids)) != len(ids):
            raise HostError(f"cpes must be distinct CPE ids 0..{num - 1} (at least one); "
                            f"got {ids!r}")
        spawned = np.zeros(num, dtype=bool)
        spawned[ids] = True
        return spawned

    @staticmethod
    def _entry_address(program, entry: str) -> int:
        if not isinstance(entry, str):
            raise HostError(f"entry must be the name of a code label (a str), got {entry!r}")
        symbol = program.symbols.get(entry)
        if symbol is None:
            code_labels = [s.name for s in program.symbols.values()
                           if program.code_base <= s.value < program.code_end]
            close = difflib.get_close_matches(entry, code_labels, n=5, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else \
                f"; code labels: {', '.join(sorted(code_labels)[:20]) or 'none'}"
            raise HostError(f"unknown entry {entry!r}{hint}")
        if not program.code_base <= symbol.value < program.code_end:
            raise HostError(f"entry {entry!r} ({symbol.value:#x}) is not in the code image")
        return symbol.value

    def _argument(self, value, index: int) -> int:
        if isinstance(value, (bool, np.bool_)):
            raise HostError(f"argument {index}: booleans are not arguments; pass 0 or 1")
        if isinstance(value, numbers.Integral):
            value = int(value)
            if not -(1 << 63) <= value < (1 << 64):
                raise HostError(f"argument {index}: {value} does not fit 64 bits")
            return value & ((1 << 64) - 1)
        if isinstance(value, numbers.Real):
            return double_to_bits(float(value))
        if isinstance(value, np.ndarray):
            return self.mem.address_of(value)
        raise HostError(f"argument {index}: expected an int, a float or an array in memory, "
                        f"got {type(value).__name__}")

    def _check_ldm_fits(self, program, arg_area: int, stack_args: int) -> None:
        need = len(program.ldm_image) + program.stack_bytes + arg_area
        if need > self.config.ldm_bytes:
            raise HostError(
                f"the kernel does not fit in LDM: {len(program.ldm_image)} B of LDM data + "
                f"{program.stack_bytes} B of stack + {arg_area} B for {stack_args} stack "
                f"arguments = {need} B > {self.config.ldm_bytes} B (config.ldm_bytes)")

    # -- stops ---------------------------------------------------------------------------------
    def _stop_error(self, raw: EngineResult, result: RunResult, program, cg: int):
        stop = raw.stop
        if stop.kind in (STOP_DEADLOCK, STOP_CYCLE_LIMIT):
            # A CPE waiting at a barrier has issued its synr/sync: name that, not the next one.
            blocked = tuple((cpe, pc, reason,
                             instruction_at(program, pc - 4 if reason == "barrier" else pc))
                            for cpe, pc, reason in stop.blocked)
            lines = [f"CG {cg}: {stop.message()} (cycle {stop.cycle})"]
            lines += [f"  CPE {cpe:2d} pc {pc:#x} waits: {reason:<10} {text}"
                      for cpe, pc, reason, text in blocked]
            error = Deadlock if stop.kind == STOP_DEADLOCK else CycleLimit
            return error("\n".join(lines), cg, stop, result, reason=stop.message(),
                         blocked=blocked)
        text = instruction_at(program, stop.pc)
        report = (f"CG {cg}, CPE {stop.cpe}, pc {stop.pc:#x}, cycle {stop.cycle}: {text}\n"
                  f"  fault: {stop.message()}")
        return VMFault(report, cg, stop, result, cpe=stop.cpe, pc=stop.pc, instruction=text,
                       reason=stop.message())


class CoreGroup:
    """One core group of a ``Machine`` (``Machine.core_group(k)``) as host code written for "a
    machine" sees it: ``run``, ``spawn`` and ``join_all`` on its one core group (``cg=0``
    here is the chip's CG k), ``mem`` and ``config`` the chip's (the CG is timed as on the
    chip), ``num_cgs`` 1."""

    num_cgs = 1

    def __init__(self, chip: Machine, cg: int):
        self.chip, self.cg = chip, cg
        self.mem, self.config = chip.mem, chip.config

    def run(self, program, entry: str = "kernel", args: Iterable = (), cg: int = 0, *more,
            **options) -> RunResult:
        """``Machine.run`` on this core group (simulated on the calling thread)."""
        self._check_cg_zero(cg)
        return self.chip._spawn(program, entry, args, self.cg, *more, here=True,
                                **options).join()

    def spawn(self, program, entry: str = "kernel", args: Iterable = (), cg: int = 0, *more,
              here: bool = False, **options) -> "CgRun":
        """``Machine.spawn`` on this core group (``cg`` must be 0)."""
        self._check_cg_zero(cg)
        return self.chip._spawn(program, entry, args, self.cg, *more, here=bool(here),
                                **options)

    def _check_cg_zero(self, cg) -> None:
        if isinstance(cg, bool) or not isinstance(cg, numbers.Integral) or cg != 0:
            raise HostError(f"cg must be 0: this is core group {self.cg} of the chip on its "
                            f"own (Machine.core_group), with one core group; got {cg!r}")

    def join_all(self, runs: Optional[Iterable["CgRun"]] = None) -> dict[int, RunResult]:
        """``Machine.join_all`` on this core group: joins its run (or ``runs``, which must be
        its own) and returns {0: RunResult}, or {} if there is none."""
        if runs is None:
            with self.chip._lock:
                runs = [self.chip._spawned[self.cg]] if self.cg in self.chip._spawned else []
        runs = list(runs)
        if any(run.machine is not self.chip or run.cg != self.cg for run in runs):
            raise HostError(f"core group {self.cg}'s join_all joins its own runs only")
        return {0: result for result in self.chip.join_all(runs).values()}

    @property
    def running(self) -> list[int]:
        """[0] while a kernel spawned on this core group is not joined, else []."""
        return [0] if self.cg in self.chip.running else []

    def __repr__(self) -> str:
        return f"<CoreGroup {self.cg} of {self.chip!r}>"


class CgRun:
    """A kernel spawned on one core group (``Machine.spawn``). ``job`` is its ``EngineJob``
    (final registers ``job.regs[cpe, reg, lane]`` and LDM ``job.ldm[cpe]`` once joined),
    ``result`` its ``RunResult`` once joined."""

    def __init__(self, machine: Machine, cg: int, engine: str, program, job: EngineJob,
                 cpes: np.ndarray):
        self.machine, self.cg, self.engine, self.program, self.job = \
            machine, cg, engine, program, job
        self._cpes = cpes
        self._future: Future = Future()
        self._joined = False
        self.result: Optional[RunResult] = None   # set by join, also when the run stopped

    def _simulate(self, run_engine: Callable, progress) -> None:
        try:
            self._future.set_result(run_engine(self.job, progress=progress))
        except BaseException as exc:   # noqa: BLE001 - handed to join()
            self._future.set_exception(exc)

    def done(self) -> bool:
        """True once the simulation has ended (``join`` then returns without waiting)."""
        return self._future.done()

    def join(self) -> RunResult:
        """Wait for the run's end and release the CG. Returns its ``RunResult``; raises
        ``VMFault``, ``Deadlock`` or ``CycleLimit`` (with the CG's number) as ``run`` does."""
        self._future.exception()   # waits; the outcome is read below
        self.machine._joined(self)   # refuses a second join
        raw = self._future.result()   # re-raises what the engine raised
        config = self.machine.config
        result = self.result = RunResult.from_engine(raw, self.cg, self.engine, config,
                                                     self._cpes)
        if raw.stop is not None:
            raise self.machine._stop_error(raw, result, self.program, self.cg)
        return result

    def __repr__(self) -> str:
        state = "joined" if self._joined else "done" if self.done() else "running"
        return f"<CgRun CG {self.cg}, {len(self._cpes)} CPEs, engine {self.engine}: {state}>"
