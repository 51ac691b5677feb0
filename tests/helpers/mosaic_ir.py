"""Running a Mosaic GPU kernel's lowered IR on the CPU, thread by thread.

On a machine without a GPU, `jax.jit(f).trace(...).lower(lowering_platforms=
("cuda",))` still runs Mosaic GPU's lowering: the `mosaic_gpu` custom call
carries the kernel as MLIR (arith, vector, memref, scf, gpu and nvvm ops,
serialized with a `stable_mosaic_gpu.` prefix on every op name). That is the
code a GPU runs, `plgpu.inline_mgpu` blocks included, which Mosaic GPU's own
interpreter (`interpret=True`) replaces with jnp. `Kernel` runs it here: a
small interpreter of the ops those kernels use, one CUDA thread after another,
on numpy arrays.

Integers are held as their bit patterns (Python ints in [0, 2**width)), read
signed or unsigned by each op as MLIR says, so that a signedness slip shows.
Every memory access is bounds-checked. A program's threads run one at a
time in a fixed order, each to its next barrier (`bar.sync`) or its end
(`_Scheduler`), so that data passed between them through shared memory
arrives where a barrier orders it, and is missed, every time, where none
does; a warp shuffle must still move a value the whole warp holds alike.
An op it does not know raises NotImplementedError, never a guess.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading

import numpy as np
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib.mlir import ir

from helpers.lowering import backend_config, lower_for_cuda, mosaic_calls

_PREFIX = "stable_mosaic_gpu."
_DYNAMIC = -(2**63)  # MLIR's marker of a dynamic offset in a subview.
_SHARED_BYTES = 228 * 1024  # an H200 program's shared memory at most
# arith.cmpi predicates, by their enum value.
_CMPI = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge",
         6: "ult", 7: "ule", 8: "ugt", 9: "uge"}


def lowered_kernels(fn, *args):
    """The Mosaic GPU kernels (`Kernel`) that lowering `fn(*args)` for CUDA makes."""
    return [Kernel(ir.StringAttr(backend_config(call)["module"]).value_bytes)
            for call in mosaic_calls(lower_for_cuda(fn, *args))]


def _is(cls, x):
    """Whether MLIR type or attribute `x` is a `cls`."""
    try:
        cls(x)
    except ValueError:
        return False
    return True


def _width(type_):
    if _is(ir.VectorType, type_):
        type_ = ir.VectorType(type_).element_type
    if _is(ir.IndexType, type_):
        return 64
    if _is(ir.IntegerType, type_):
        return ir.IntegerType(type_).width
    return None


def _signed(x, width):
    return x - (1 << width) if x >> (width - 1) else x


def _elementwise(f):
    """`f` on scalars, or lane by lane on vectors (tuples)."""
    def apply(*xs):
        if any(isinstance(x, tuple) for x in xs):
            size = max(len(x) for x in xs if isinstance(x, tuple))
            lanes = [x if isinstance(x, tuple) else (x,) * size for x in xs]
            return tuple(f(*args) for args in zip(*lanes))
        return f(*xs)
    return apply


def _binary(f, signed=False):
    """The rule of an elementwise op `f(x, y, width)` on bits (on signed
    values with `signed`), its result masked to the result's width."""

    def rule(self, op, regions):
        width = _width(op.results[0].type)
        mask = (1 << width) - 1
        if signed:
            def g(x, y):
                return f(_signed(x, width), _signed(y, width), width) & mask
        else:
            def g(x, y):
                return f(x, y, width) & mask
        g = _elementwise(g)
        return lambda env, x, y: g(x, y)
    return rule


@dataclasses.dataclass
class _View:
    """A 1-D strided view of a numpy array of unsigned ints (memory as bits)."""
    array: np.ndarray
    offset: int
    stride: int
    size: int
    name: str

    def address(self, index):
        if not 0 <= index < self.size:
            raise IndexError(f"{self.name}[{index}] out of bounds (size {self.size})")
        return self.offset + index * self.stride


class _Stop(Exception):
    """A terminator: the values it yields."""

    def __init__(self, values):
        self.values = values


class _Scheduler:
    """Runs one program's threads one at a time, in a fixed order: the
    lowest-ranked thread that can run runs until it finishes or waits at a
    barrier, so that a thread that reads shared memory before the barrier
    that should order it after another thread's write reads it unwritten,
    every time. A barrier of `parties` threads lets them all go once the
    last arrives; a program whose threads all wait at barriers that cannot
    fill fails."""

    def __init__(self, threads):
        self._condition = threading.Condition()
        self._runnable = set(range(threads))
        self._waiting = {}  # barrier id: the ranks waiting there
        self._running = None
        self._errors = []
        self._failed = False

    def _schedule(self):
        self._running = min(self._runnable) if self._runnable else None
        if self._running is None and self._waiting and not self._failed:
            self._errors.append(AssertionError(f"threads wait at barriers no thread will "
                                               f"fill: {sorted(self._waiting)}"))
            self._failed = True
        self._condition.notify_all()

    def _wait_for_turn(self, rank):
        self._condition.wait_for(lambda: self._failed or self._running == rank)
        if self._failed:
            raise _Abandoned

    @contextlib.contextmanager
    def turn(self, rank):
        """The body of thread `rank`, run when its turn comes."""
        with self._condition:
            if rank == 0:
                self._schedule()
            try:
                self._wait_for_turn(rank)
            except _Abandoned:
                return
        try:
            yield
        except _Abandoned:
            pass
        except BaseException as error:  # noqa: BLE001 (raised by raise_first_error)
            with self._condition:
                self._errors.append(error)
                self._failed = True
                self._condition.notify_all()
        finally:
            with self._condition:
                self._runnable.discard(rank)
                if self._running == rank:
                    self._schedule()

    def barrier(self, rank, barrier_id, parties):
        """Thread `rank` waits at barrier `barrier_id` of `parties` threads."""
        with self._condition:
            waiting = self._waiting.setdefault(barrier_id, [])
            waiting.append(rank)
            self._runnable.discard(rank)
            if len(waiting) == parties:
                self._runnable.update(self._waiting.pop(barrier_id))
            self._schedule()
            self._wait_for_turn(rank)

    def raise_first_error(self):
        if self._errors:
            raise self._errors[0]


class _Abandoned(Exception):
    """Another thread of the program failed: this one stops."""


class Kernel:
    """One Mosaic GPU kernel, parsed from its serialized module.

    Attributes:
      grid, block: the launch's (x, y, z) programs and threads per program.
      arguments: per kernel argument (inputs, then outputs), its shape and
        MLIR element type (e.g. ((300,), "i32")).
      op_counts: how often each op (prefix stripped) occurs, for structural
        checks; "memref.load (shared)" counts the loads from shared memory.
    """

    def __init__(self, module_bytes):
        self._local = threading.local()  # the running thread's ids and program state
        self._slots = {}
        self.op_counts = {}
        context = jax_mlir.make_ir_context()
        context.allow_unregistered_dialects = True
        with context:
            module = ir.Module.parse(module_bytes)
            [func] = [op for op in module.body.operations
                      if op.regions and op.regions[0].blocks
                      and str(op.attributes["sym_name"]).strip('"').endswith("_mosaic_gpu")]
            self._compile_host(func.regions[0].blocks[0])

    # ------------------------------------------------------------ compiling

    def _slot(self, value):
        return self._slots.setdefault(value, len(self._slots))

    def _compile_host(self, block):
        """The host function: kernel arguments, launch dimensions, the launch."""
        constants, self.arguments, self._argument_slots = {}, [], {}
        launch = None
        for op in block.operations:
            name = op.name.removeprefix(_PREFIX)
            if name == "arith.constant":
                constants[op.results[0]] = ir.IntegerAttr(op.attributes["value"]).value
            elif name == "builtin.unrealized_conversion_cast" and \
                    "mosaic_gpu.from_kernel_arg_idx" in op.attributes:
                index = ir.IntegerAttr(op.attributes["mosaic_gpu.from_kernel_arg_idx"]).value
                memref = ir.MemRefType(op.results[0].type)
                self._argument_slots[index] = self._slot(op.results[0])
                self.arguments.append((tuple(memref.shape), str(memref.element_type)))
            elif name == "gpu.launch":
                launch = op
        self.arguments = [self.arguments[i] for i in sorted(self._argument_slots)]
        dims = [constants[launch.operands[i]] for i in range(1, 7)]
        self.grid, self.block = tuple(dims[:3]), tuple(dims[3:])
        body = launch.regions[0].blocks[0]
        self._launch_args = [self._slot(a) for a in body.arguments]
        self._body = self._compile_block(body)

    def _compile_block(self, block):
        return [self._compile_op(op) for op in block.operations]

    def _compile_op(self, op):
        name = op.name.removeprefix(_PREFIX)
        self.op_counts[name] = self.op_counts.get(name, 0) + 1
        ins = [self._slot(v) for v in op.operands]
        outs = [self._slot(v) for v in op.results]
        regions = [[(self._block_args(b), self._compile_block(b)) for b in r.blocks]
                   for r in op.regions]
        compile_ = getattr(self, "_op_" + name.replace(".", "_"), None)
        if compile_ is None:
            raise NotImplementedError(f"no interpreter rule for {name}: {op}")
        run = compile_(op, regions)
        return name, run, ins, outs

    def _block_args(self, block):
        return [self._slot(a) for a in block.arguments]

    # ------------------------------------------------------------ running

    def run(self, *arrays):
        """Runs the whole grid on `arrays` (one per kernel argument, outputs
        included, each as its kernel argument's shape); writes the outputs in
        place and returns them all."""
        assert len(arrays) == len(self.arguments)
        env = {}
        for index, (array, (shape, _)) in enumerate(zip(arrays, self.arguments)):
            assert array.shape == shape, (index, array.shape, shape)
            bits = array.reshape(-1).view(f"uint{8 * array.itemsize}")
            env[self._argument_slots[index]] = _View(bits, 0, 1, bits.size, f"arg{index}")
        for bz in range(self.grid[2]):
            for by in range(self.grid[1]):
                for bx in range(self.grid[0]):
                    self._run_program((bx, by, bz), env)
        return arrays

    def _run_program(self, block_id, env):
        """One program: its threads, sharing its shared memory, each in a
        Python thread of its own, one running at a time (`_Scheduler`)."""
        scheduler = _Scheduler(self.block[0] * self.block[1] * self.block[2])
        shared = np.zeros(_SHARED_BYTES, np.uint8)
        threads = [(tx, ty, tz) for tz in range(self.block[2]) for ty in range(self.block[1])
                   for tx in range(self.block[0])]

        def run_thread(rank, thread_id):
            self._local.thread = {"block_id": block_id, "thread_id": thread_id,
                                  "block_dim": self.block, "grid_dim": self.grid}
            self._local.shared, self._local.scheduler, self._local.rank = shared, scheduler, rank
            local = dict(env)
            for slot, value in zip(self._launch_args,
                                   (*block_id, *thread_id, *self.grid, *self.block)):
                local[slot] = value
            with scheduler.turn(rank):
                try:
                    self._run_block(self._body, local)
                except _Stop:  # gpu.terminator
                    pass

        workers = [threading.Thread(target=run_thread, args=(rank, t), daemon=True)
                   for rank, t in enumerate(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        scheduler.raise_first_error()

    def _run_block(self, ops, env):
        for _, run, ins, outs in ops:
            result = run(env, *[env[i] for i in ins])
            if len(outs) == 1:
                env[outs[0]] = result
            elif outs:
                env.update(zip(outs, result))
        return []

    def _run_region(self, region, env, args=()):
        [(params, ops)] = region
        env.update(zip(params, args))
        try:
            self._run_block(ops, env)
        except _Stop as stop:
            return stop.values
        raise AssertionError("a block ended without a terminator")

    # ------------------------------------------------------------ op rules
    # Each `_op_<dialect>_<op>(op, regions)` returns `run(env, *operands)`.

    def _op_arith_constant(self, op, regions):
        attr, width = op.attributes["value"], _width(op.results[0].type)
        if _is(ir.DenseIntElementsAttr, attr):
            dense = ir.DenseIntElementsAttr(attr)
            assert dense.is_splat, op
            value = (ir.IntegerAttr(dense.get_splat_value()).value % (1 << width),) * len(dense)
        elif _is(ir.BoolAttr, attr):
            value = int(ir.BoolAttr(attr).value)
        else:
            value = ir.IntegerAttr(attr).value % (1 << width)
        return lambda env: value

    _op_arith_addi = _binary(lambda x, y, w: x + y)
    _op_arith_subi = _binary(lambda x, y, w: x - y)
    _op_arith_muli = _binary(lambda x, y, w: x * y)
    _op_arith_andi = _binary(lambda x, y, w: x & y)
    _op_arith_ori = _binary(lambda x, y, w: x | y)
    _op_arith_xori = _binary(lambda x, y, w: x ^ y)
    _op_arith_shli = _binary(lambda x, y, w: x << y if y < w else 0)
    _op_arith_shrui = _binary(lambda x, y, w: x >> y if y < w else 0)
    _op_arith_divui = _binary(lambda x, y, w: x // y)
    _op_arith_remui = _binary(lambda x, y, w: x % y)
    _op_arith_minui = _binary(lambda x, y, w: min(x, y))
    _op_arith_maxui = _binary(lambda x, y, w: max(x, y))
    _op_arith_shrsi = _binary(lambda x, y, w: x >> min(y, w - 1), signed=True)
    _op_arith_minsi = _binary(lambda x, y, w: min(x, y), signed=True)
    _op_arith_maxsi = _binary(lambda x, y, w: max(x, y), signed=True)
    _op_arith_divsi = _binary(lambda x, y, w: int(x / y), signed=True)
    _op_arith_remsi = _binary(lambda x, y, w: x - y * int(x / y), signed=True)

    def _op_arith_cmpi(self, op, regions):
        predicate = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value]
        width = _width(op.operands[0].type)
        if predicate[0] == "s":
            def read(x):
                return _signed(x, width)
        else:
            def read(x):
                return x
        compare = {"eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__, "le": int.__le__,
                   "gt": int.__gt__, "ge": int.__ge__}[predicate.lstrip("su")
                                                       if predicate not in ("eq", "ne")
                                                       else predicate]
        g = _elementwise(lambda x, y: int(compare(read(x), read(y))))
        return lambda env, x, y: g(x, y)

    def _op_arith_select(self, op, regions):
        g = _elementwise(lambda c, x, y: x if c else y)
        return lambda env, c, x, y: g(c, x, y)

    def _cast(self, op, extend_signed):
        """index_cast, ext, trunc: sign- or zero-extension, or truncation."""
        source, target = _width(op.operands[0].type), _width(op.results[0].type)
        mask = (1 << target) - 1
        if extend_signed:
            g = _elementwise(lambda x: _signed(x, source) & mask)
        else:
            g = _elementwise(lambda x: x & mask)
        return lambda env, x: g(x)

    def _op_arith_index_cast(self, op, regions):
        return self._cast(op, True)  # Sign-extends, as MLIR's index_cast does.

    def _op_arith_index_castui(self, op, regions):
        return self._cast(op, False)

    def _op_arith_extsi(self, op, regions):
        return self._cast(op, True)

    def _op_arith_extui(self, op, regions):
        return self._cast(op, False)

    def _op_arith_trunci(self, op, regions):
        return self._cast(op, False)

    def _op_arith_bitcast(self, op, regions):
        assert _width(op.operands[0].type) == _width(op.results[0].type), op
        return lambda env, x: x

    def _op_llvm_mlir_undef(self, op, regions):
        type_ = op.results[0].type
        value = (0,) * ir.VectorType(type_).shape[0] if _is(ir.VectorType, type_) else 0
        return lambda env: value

    # vector

    def _op_vector_broadcast(self, op, regions):
        [size] = ir.VectorType(op.results[0].type).shape
        return lambda env, x: (x,) * size

    _op_vector_splat = _op_vector_broadcast

    def _position(self, op):
        assert not [o for o in op.operands[1 + (op.name.endswith("insert")):]], op  # static only
        [k] = ir.DenseI64ArrayAttr(op.attributes["static_position"])
        return k

    def _op_vector_extract(self, op, regions):
        k = self._position(op)
        return lambda env, v: v[k]

    def _op_vector_insert(self, op, regions):
        k = self._position(op)
        return lambda env, x, v: v[:k] + (x,) + v[k + 1:]

    def _op_vector_load(self, op, regions):
        [size] = ir.VectorType(op.results[0].type).shape

        def run(env, view, index):
            return tuple(int(view.array[view.address(index + k)]) for k in range(size))
        return run

    def _op_vector_store(self, op, regions):
        def run(env, value, view, index):
            for k, x in enumerate(value):
                view.array[view.address(index + k)] = x
        return run

    # memref

    def _op_memref_load(self, op, regions):
        if "workgroup" in str(op.operands[0].type):  # a per-lane load from shared memory
            self.op_counts["memref.load (shared)"] = \
                self.op_counts.get("memref.load (shared)", 0) + 1

        def run(env, view, index=0):  # No index: a 0-d memref.
            return int(view.array[view.address(index)])
        return run

    def _op_memref_store(self, op, regions):
        def run(env, value, view, index=0):
            view.array[view.address(index)] = value
        return run

    def _op_memref_subview(self, op, regions):
        [offset] = ir.DenseI64ArrayAttr(op.attributes["static_offsets"])
        [size] = ir.DenseI64ArrayAttr(op.attributes["static_sizes"])
        [stride] = ir.DenseI64ArrayAttr(op.attributes["static_strides"])
        assert size != _DYNAMIC and stride != _DYNAMIC, op

        def run(env, view, *dynamic):
            start = dynamic[0] if offset == _DYNAMIC else offset
            if size and not (0 <= start and start + (size - 1) * stride < view.size):
                raise IndexError(f"subview [{start}:+{size}] of {view.name} (size {view.size})")
            return _View(view.array, view.address(start) if size else view.offset,
                         view.stride * stride, size, view.name)
        return run

    def _op_memref_collapse_shape(self, op, regions):
        return lambda env, view: view

    def _op_memref_view(self, op, regions):
        # A typed view of the program's shared memory, at a byte offset.
        memref = ir.MemRefType(op.results[0].type)
        width, [size] = _width(memref.element_type), memref.shape

        def run(env, source, shift, *_):
            words = source.array[shift:shift + size * width // 8].view(f"uint{width}")
            return _View(words, 0, 1, size, "shared")
        return run

    # gpu and nvvm

    def _dimension(self, op, what):
        axis = "xyz".index(re.search(r"dim (\w)", str(op.attributes["dimension"])).group(1))
        return lambda env: self._local.thread[what][axis]

    def _op_gpu_thread_id(self, op, regions):
        return self._dimension(op, "thread_id")

    def _op_gpu_block_id(self, op, regions):
        return self._dimension(op, "block_id")

    def _op_gpu_block_dim(self, op, regions):
        return self._dimension(op, "block_dim")

    def _op_gpu_grid_dim(self, op, regions):
        return self._dimension(op, "grid_dim")

    def _noop(self, op, regions):
        return lambda env, *_: None

    _op_nvvm_fence_mbarrier_init = _noop

    def _op_gpu_barrier(self, op, regions):
        def run(env):  # every thread of the program
            threads = self._local.thread["block_dim"]
            self._local.scheduler.barrier(self._local.rank, "program",
                                          threads[0] * threads[1] * threads[2])
        return run
    # Threads see each other's shared-memory writes once past a barrier.
    _op_nvvm_fence_proxy = _noop

    def _op_gpu_dynamic_shared_memory(self, op, regions):
        return lambda env: _View(self._local.shared, 0, 1, _SHARED_BYTES, "shared")

    def _op_llvm_inline_asm(self, op, regions):
        asm = ir.StringAttr(op.attributes["asm_string"]).value
        match = re.fullmatch(r"bar\.sync \$0, (\d+);?", asm.strip())
        if match is None:
            raise NotImplementedError(f"no interpreter rule for inline assembly {asm!r}")
        parties = int(match.group(1))

        def run(env, barrier_id):  # a named barrier of `parties` threads
            self._local.scheduler.barrier(self._local.rank, barrier_id, parties)
        return run

    def _op_nvvm_elect_sync(self, op, regions):
        return lambda env, *_: int(self._local.thread["thread_id"][0] % 32 == 0)

    def _op_nvvm_shfl_sync(self, op, regions):
        # Only a value the whole warp holds alike (the warp index): its own.
        assert "idx" in str(op.attributes["kind"]), op
        return lambda env, mask, value, lane, clamp: value

    # scf and terminators

    def _terminator(self, op, regions):
        def run(env, *values):
            raise _Stop(list(values))
        return run

    _op_scf_yield = _terminator
    _op_gpu_terminator = _terminator
    _op_scf_condition = _terminator

    def _op_scf_if(self, op, regions):
        then, otherwise = regions

        def run(env, condition):
            branch = then if condition else otherwise
            values = self._run_region(branch, env) if branch else []
            return values[0] if len(values) == 1 else values
        return run

    def _op_scf_for(self, op, regions):
        [body] = regions
        width = _width(op.operands[0].type)

        def run(env, lower, upper, step, *carry):
            i, carry = _signed(lower, width), list(carry)
            while i < _signed(upper, width):
                carry = self._run_region(body, env, [i % (1 << width), *carry])
                i += _signed(step, width)
            return carry[0] if len(carry) == 1 else carry
        return run

    def _op_scf_while(self, op, regions):
        before, after = regions

        def run(env, *carry):
            while True:
                condition, *values = self._run_region(before, env, carry)
                if not condition:
                    return values[0] if len(values) == 1 else values
                carry = self._run_region(after, env, values)
        return run

    def _op_scf_index_switch(self, op, regions):
        cases = list(ir.DenseI64ArrayAttr(op.attributes["cases"]))
        default, *branches = regions

        def run(env, index):
            branch = branches[cases.index(index)] if index in cases else default
            values = self._run_region(branch, env)
            return values[0] if len(values) == 1 else values
        return run
