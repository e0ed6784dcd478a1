"""Dormand-Prince 8(7) written out for the linear systems `y' = G(t) y` of `_solve`.

diffrax's Runge-Kutta step is generic: its stages run in a loop over a `(14, 14)` tableau,
each stage a dynamic slice, a tableau row times all fourteen stored stages, a vector field
call and a dynamic update. For a few-level system every one of those is a microsecond-sized
XLA operation, and the operations, not the arithmetic, set the time. Here the step is the
same method unrolled: the generator `G(t)` once at each of the step's twelve distinct stage
times (one fused operation each; one batch of them, sliced a stage each, was slower under
reverse mode, whose slices' cotangents are padded to the batch), then for each stage one
sum of the earlier stages with the tableau's constants and one product. Same tableau,
same stage times, same embedded error estimate, the same FSAL stage and the same dense
output (`k`, the stages times `dt`), so diffrax's step-size controller and interpolation act
on it as on its own `Dopri8`: the steps it takes and the states agree to rounding (pinned
in the tests).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np


class _Tableau:
    """diffrax's Dopri8 tableau in the form the written step reads (diffrax imported here,
    when the first solver is made: `jaxbridge.scqubits.dynamics` imports without it)."""

    def __init__(self, tableau: Any) -> None:
        #: `a[i]`: stage `i`'s weights on stages `0..i-1` (stage 0 is `f(t0, y0)`).
        self.a = [np.zeros(0)] + [np.asarray(row, dtype=np.float64) for row in tableau.a_lower]
        c = np.concatenate([[0.0], tableau.c])
        #: The distinct stage times, as fractions of the step: stages 11 to 13 all sit at `t1`.
        self.nodes = np.unique(c)
        self.node_of_stage = [int(np.searchsorted(self.nodes, x)) for x in c]
        self.b_error = np.asarray(tableau.b_error, dtype=np.float64)
        #: 14: the last, at (t1, y1), is the next step's first (FSAL)
        self.stages = int(tableau.num_stages)


#: Up to this many rows of `y` a stage's product is written elementwise (multiply, sum):
#: XLA fuses it with the stage's sum into one loop, where a `dot` is a library call.
SMALL = 4


def _elementwise(g: Any, z: Any) -> Any:
    return jnp.sum(g[:, :, None] * z[None, :, :], axis=1)


def _combine(weights: np.ndarray, fs: list[Any]) -> Any:
    """`sum_j weights[j] fs[j]` over the nonzero weights, Python constants (folded by XLA)."""
    terms = [float(w) * f for w, f in zip(weights, fs, strict=False) if w != 0.0]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


@functools.cache
def _linear_dopri8_class() -> Any:
    import diffrax
    import equinox as eqx

    tab = _Tableau(diffrax.Dopri8.tableau)

    class LinearDopri8(diffrax.Dopri8):
        """diffrax's `Dopri8` for `y' = G(t) y`, its step written out (`linear_dopri8`)."""

        generator: Callable[[Any, Any], Any] = eqx.field(static=True, kw_only=True)
        nodes: ClassVar[np.ndarray] = tab.nodes

        def step(
            self,
            terms: Any,
            t0: Any,
            t1: Any,
            y0: Any,
            args: Any,
            solver_state: Any,
            made_jump: Any,
        ) -> tuple[Any, Any, dict[str, Any], Any, Any]:
            """One step from `t0` to `t1` (either direction): diffrax's `AbstractSolver.step`."""
            del terms
            first_step, f_fsal = solver_state
            dt = t1 - t0
            # As diffrax does: a stage at c = 1 is at t1 exactly, not t0 + dt. One generator a
            # node, not one batch of them sliced a stage each: under reverse mode the slices'
            # cotangents would be padded to the whole batch, thirteen (12, K, K) arrays a step.
            gs = [self.generator(t1 if c == 1 else t0 + float(c) * dt, args) for c in tab.nodes]
            product = _elementwise if y0.shape[0] <= SMALL else jnp.matmul
            cdt = jnp.asarray(dt).astype(y0.dtype)
            # The first stage is the previous step's last (FSAL), except on the first step and
            # after a jump of a pulse (the field is discontinuous there), as in diffrax.
            f0 = jnp.where(first_step | made_jump, product(gs[0], y0), f_fsal)
            fs = [f0]
            z = y0
            for i in range(1, tab.stages):
                z = y0 + cdt * _combine(tab.a[i], fs)
                fs.append(product(gs[tab.node_of_stage[i]], z))
            y_error = cdt * _combine(tab.b_error, fs)
            ks = cdt * jnp.stack(fs)
            f1 = fs[-1]
            y1 = z  # the last stage's state is the solution (diffrax's "ssal")
            dense_info = {"y0": y0, "y1": y1, "k": ks}
            return y1, y_error, dense_info, (False, f1), diffrax.RESULTS.successful

    return LinearDopri8


def linear_dopri8(generator: Callable[[Any, Any], Any]) -> Any:
    """A `LinearDopri8` (a diffrax `Dopri8`, its step written out for `y' = G(t) y`).

    `generator(t, args)` returns `G(t)`, `(K, K)`, the same `G` as the term's vector field
    (which diffrax still calls to choose the first step). A stage's `G y` is written
    elementwise for `K <= SMALL` rows (one fused loop with the stage's sum) and a matrix
    product above (measured: 1.4x faster a step for 3 levels, 3x slower for 16).
    """
    return _linear_dopri8_class()(generator=generator)
