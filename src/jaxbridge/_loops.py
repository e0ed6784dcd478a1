"""`loops_as_kernels`: XLA:CPU compiles small `while` loops into one kernel each.

XLA's CPU runtime runs a compiled program as a graph of thunks, one a fusion or library call,
and hands independent thunks to its thread pool. For a loop whose iteration is a hundred
microsecond-sized operations (an adaptive ODE step on a few-level system, a physics step of
a small model written in JAX) the thunks' own cost, not the arithmetic, sets the time
(measured on a gate's gradient: ~30% of the samples in the pool's search for work; running
the thunks in order in the calling thread did not help, compiling the loop into one kernel
made it 2 to 3x faster; docs/dynamics.md).

XLA has a pass for such loops (`SmallWhileLoopHoistingPass`): a `while` loop that reads and
writes at most a threshold of bytes an iteration, and contains no library call (`dot`,
convolution, custom call, scatter), is compiled into one kernel with its control flow inside.
Its threshold is 1 KB by default, an XLA option with no per-program setting (a map field of
XLA's debug options, which `jax.jit(..., compiler_options=...)` cannot set), read from the
`XLA_FLAGS` environment variable when JAX starts its backend. This module raises it, on
request, before that; nothing in jaxbridge sets it on its own.
"""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
from jax._src import xla_bridge

#: The XLA backend option and the flag that carries it.
OPTION = "xla_cpu_small_while_loop_byte_threshold"
_FLAG = "--xla_backend_extra_options="

#: The default threshold: a loop iteration's bytes read and written (64 MiB). The gates of
#: `benchmarks/gates.py` need ~1 MiB (a transmon, whose loop reads its step-end record) and
#: ~16 MiB (a fluxonium's master equation); larger loops keep XLA's multi-threaded kernels.
DEFAULT_MAX_BYTES = 64 * 2**20

BACKEND_STARTED = (
    "jaxbridge.loops_as_kernels must run before JAX's first computation: XLA reads its "
    "options (XLA_FLAGS) once, when JAX starts its backend, and it has started. Call it at "
    "the top of the program, before any array is made, or set the variable before Python "
    "starts: XLA_FLAGS='{flag}{option}={max_bytes}'."
)
NOT_TAKEN = (
    "jaxbridge.loops_as_kernels: XLA did not take the option {option}={max_bytes} (a small "
    "test loop still runs as separate kernels): its options were read before this call. Set "
    "XLA_FLAGS='{flag}{option}={max_bytes}' before Python starts."
)
BAD_BYTES = "jaxbridge.loops_as_kernels: max_bytes must be a positive integer, got {got!r}."


def _with_option(flags: str, max_bytes: int) -> str:
    """`flags` (an `XLA_FLAGS` value) with the option set to `max_bytes` in its backend
    options, every other flag and option kept."""
    entry = f"{OPTION}={max_bytes}"
    tokens = flags.split()
    for i, token in enumerate(tokens):
        if token.startswith(_FLAG):
            options = [o for o in token[len(_FLAG) :].split(",") if o]
            options = [o for o in options if not re.match(rf"{OPTION}=", o)] + [entry]
            tokens[i] = _FLAG + ",".join(options)
            return " ".join(tokens)
    return " ".join([*tokens, _FLAG + entry])


def _loop_is_one_kernel() -> bool:
    """Whether a while loop of a few KB an iteration (over XLA's default 1 KB) compiles into
    one kernel: XLA tags such a loop's call `xla_cpu_small_call`."""

    def loop(x: jax.Array) -> jax.Array:
        return jax.lax.fori_loop(0, 3, lambda i, c: c + jnp.sin(c), x)

    x = jnp.zeros(512, dtype=jnp.float32)
    text = jax.jit(loop).lower(x).compile().as_text()
    return text is not None and "xla_cpu_small_call" in text


def loops_as_kernels(max_bytes: int = DEFAULT_MAX_BYTES, *, check: bool = True) -> None:
    """Have XLA:CPU compile every `while` loop of at most `max_bytes` an iteration into one kernel.

    Opt-in, for the whole process, and only before JAX's first computation. It adds the XLA
    option `xla_cpu_small_while_loop_byte_threshold=max_bytes` to `XLA_FLAGS` (kept flags and
    options as they are). XLA's pass then compiles each small `while` loop (`lax.while_loop`,
    `scan`, `fori_loop`: diffrax's adaptive solvers, `jaxbridge.scqubits.dynamics`) without
    a library call inside into one kernel, where its operations otherwise run one thunk each
    on XLA's thread pool. Results are the same operations in the same order; on the gates of
    `benchmarks/gates.py` their gradients took about half the time (docs/dynamics.md).

    The cost: such a loop runs on one thread, so a loop over large arrays that XLA would
    spread over its threads can be slower; `max_bytes` bounds the loops it applies to. A
    loop with a matrix product (`dot`) or a host call inside is never compiled this way.
    Processes started afterwards (`jaxbridge.Processes`' workers) inherit `XLA_FLAGS`, and so
    compile the same way.

    Args:
        max_bytes: the largest loop iteration, in bytes read and written (XLA's cost
            analysis), compiled as one kernel; default 64 MiB.
        check: compile a small loop afterwards and raise if XLA did not take the option.
            This starts JAX's backend: make any other backend set-up (`jax_platforms`,
            `jax_num_cpu_devices`) first.

    Raises:
        RuntimeError: JAX's backend has started (the option would have no effect), or
            `check` found that XLA did not take it.
        ValueError: `max_bytes` is not a positive integer.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(BAD_BYTES.format(got=max_bytes))
    words = {"flag": _FLAG, "option": OPTION, "max_bytes": max_bytes}
    if xla_bridge.backends_are_initialized():
        raise RuntimeError(BACKEND_STARTED.format(**words))
    before = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = _with_option(before or "", max_bytes)
    if check and not _loop_is_one_kernel():
        if before is None:  # as it was: the option did not take here, nor should it elsewhere
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = before
        raise RuntimeError(NOT_TAKEN.format(**words))
