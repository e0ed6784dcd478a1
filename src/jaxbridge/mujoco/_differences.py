"""Difference quotients that do not reach over a contact change: the package's one rule.

MuJoCo's contact force jumps where a contact appears or disappears, so a difference quotient
whose step reaches over such a point is not a derivative of anything. Every Jacobian that
`jaxbridge.mujoco` takes by differences (the step's, `forward`'s, the warm start's, and the
field calls' of `_fieldcalls`) differences each direction on both sides with a small step and
combines the sides with `straddle_safe`; `jacobian` does the whole of it for a batched host
function of plain coordinates. NumPy only: no MuJoCo, no JAX.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["EPS", "REFINE", "STRADDLE_RTOL", "Evaluate", "jacobian", "straddle_safe"]

# The difference step, in tangent coordinates and controls. MuJoCo computes in float64 whatever
# the caller's dtype, so a quotient's rounding error is about 1e-16 |f| / EPS (1e-9 of |f|;
# PGS's forces, which stop short of convergence, carry more), while the chance that a step
# reaches over a contact activation grows with it: at 1e-6 (the customary step) most ground
# states of the gymnasium humanoids had one (issue 13), and `straddle_safe` finds the ones at
# this step. At 1e-8 the rounding showed: small entries of PGS humanoid gradients up to 50%
# off (a -4.21 entry of a gradient whose others are 1e4 to 1e5 came out -2.08), at 1e-7 6e-3.
EPS = 1e-7
# Two one-sided quotients that differ by more than this (relative to the column's size, at
# least 1) straddle a discontinuity. Smooth dynamics differ by about EPS |f''| plus rounding.
STRADDLE_RTOL = 1e-3
REFINE = 8  # flagged columns are differenced again at EPS / REFINE


def _size(a: np.ndarray) -> np.ndarray:
    return np.abs(a).max(axis=-1, initial=0.0)


def straddle_safe(
    plus: np.ndarray,
    minus: np.ndarray,
    refine: Callable[[tuple[np.ndarray, ...]], tuple[np.ndarray, np.ndarray]],
) -> np.ndarray:
    """Difference quotients that do not reach over a jump, from one-sided ones.

    `plus` and `minus` are the forward and backward quotients `(f(x + h e_j) - f(x)) / h` and
    `(f(x) - f(x - h e_j)) / h`, shape `(..., nout, ndir)`, at `h = EPS`. Where the two sides
    agree (to `STRADDLE_RTOL` of the column's size, at least 1), their mean, the central
    difference, is returned. Where they do not, `refine(index)` gives both sides again at
    `EPS / REFINE` for the flagged columns (`index` as from `np.nonzero` over the leading and
    direction axes; each side `(K, nout)`), and:

    - if those agree, the jump (or kink) lay between `EPS / REFINE` and `EPS`: their mean;
    - if neither side changed, `f` has a kink at `x` (one-sided derivatives differ): their mean,
      which is what central differences of any step give;
    - otherwise the side that changed crossed a jump inside the step (it adds `J / h` to that
      side's quotient): the other side alone, the derivative of the piece that holds `x`.

    Example:
        >>> f = lambda x: np.where(x > 1e-9, 1.0, 0.0) + 2 * x  # a jump just right of 0
        >>> def sides(h):
        ...     return np.array([[(f(h) - f(0.0)) / h]]), np.array([[(f(0.0) - f(-h)) / h]])
        >>> refine = lambda index: tuple(s[0][None] for s in sides(EPS / REFINE))
        >>> float(straddle_safe(*sides(EPS), refine)[0, 0])
        2.0
    """
    out = (plus + minus) / 2
    gap = _size(np.swapaxes(plus - minus, -1, -2))
    scale = np.maximum(
        np.maximum(_size(np.swapaxes(plus, -1, -2)), _size(np.swapaxes(minus, -1, -2))), 1.0
    )
    index = np.nonzero(gap > STRADDLE_RTOL * scale)
    if not len(index[0]):
        return out
    p1, m1 = np.swapaxes(plus, -1, -2)[index], np.swapaxes(minus, -1, -2)[index]  # (K, nout)
    p2, m2 = refine(index)
    tol = STRADDLE_RTOL * np.maximum.reduce(
        [_size(p1), _size(m1), _size(p2), _size(m2), np.ones(len(p1))]
    )
    moved_p, moved_m = _size(p1 - p2), _size(m1 - m2)
    mean = (_size(p2 - m2) <= tol) | ((moved_p <= tol) & (moved_m <= tol))
    value = np.where(mean[:, None], (p2 + m2) / 2, np.where((moved_p <= moved_m)[:, None], p2, m2))
    np.swapaxes(out, -1, -2)[index] = value  # a view: writes into `out`
    return out


#: `f(points, rows)`: the `(M, nout)` outputs at `(M, n)` points, each a perturbation of row
#: `rows[m]` of the caller's batch (whose other inputs it keeps).
Evaluate = Callable[[np.ndarray, np.ndarray], np.ndarray]


def jacobian(f: Evaluate, x: np.ndarray) -> np.ndarray:
    """`(B, nout, n)` derivatives of `f` at each row of `(B, n)` `x`, by `straddle_safe`.

    The step of coordinate `j` of row `b` is `EPS * max(|x[b, j]|, 1)`, and the quotients
    divide by how far the floats actually moved. `f` is called three times at most, each
    time on one batch of points: at the rows, on both sides of every direction, and (only for
    the directions whose sides disagree) on both sides again at `1 / REFINE` of the step.

    Example:
        >>> f = lambda p, rows: np.stack([p[:, 0] ** 2, 3 * p[:, 1]], axis=1)
        >>> np.round(jacobian(f, np.array([[2.0, 5.0]])), 6).tolist()
        [[[4.0, 0.0], [0.0, 3.0]]]
    """
    B, n = x.shape
    h = EPS * np.maximum(np.abs(x), 1.0)
    center = f(x, np.arange(B))

    def sides(rows: np.ndarray, cols: np.ndarray, scale: float) -> tuple[np.ndarray, ...]:
        """The one-sided quotients along coordinates `cols` of rows `rows`: `(k, nout)`."""
        k = len(rows)
        base = x[rows]
        xi = base[np.arange(k), cols]
        step = h[rows, cols] * scale
        up, down = (xi + step) - xi, xi - (xi - step)
        points = np.concatenate([base, base])
        points[np.arange(k), cols] += up
        points[k + np.arange(k), cols] -= down
        out = f(points, np.concatenate([rows, rows]))
        return (out[:k] - center[rows]) / up[:, None], (center[rows] - out[k:]) / down[:, None]

    rows, cols = (a.ravel() for a in np.meshgrid(np.arange(B), np.arange(n), indexing="ij"))
    plus, minus = sides(rows, cols, 1.0)
    # `straddle_safe` takes `(B, nout, n)` sides; `refine` gets (row, direction) indices.
    plus = np.swapaxes(plus.reshape(B, n, -1), 1, 2)
    minus = np.swapaxes(minus.reshape(B, n, -1), 1, 2)

    def refine(index: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        p, m = sides(index[0], index[1], 1.0 / REFINE)
        return p, m

    return straddle_safe(plus, minus, refine)
