"""Jacobians of a batched host function by differences that do not reach over contact changes.

MuJoCo's contact force jumps where a contact appears or disappears, so a difference quotient
whose step reaches over such a point is not a derivative of anything (with a step of 1e-6 this
happens at most ground states of the humanoids). As `jaxbridge.mujoco` does for its step (issue
13, "Derivatives through contact" in docs/mujoco.md), each direction is differenced on both sides
with a small step, and:

- where the two one-sided quotients agree, their mean (the central difference) is used;
- where they disagree, the direction is differenced again with an eighth of the step: if the
  sides now agree, the jump lay between the two steps and the finer mean is used; if neither
  side changed, the point is a kink and the mean of the sides is used; otherwise the side that
  changed reached over a jump, and the other side alone is used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["STEP", "jacobian"]

#: The step, relative to `max(|x|, 1)`: small enough that few differences reach over a
#: contact change, large enough that rounding (MuJoCo computes in float64) stays near 1e-9.
STEP = 1e-7
_REFINE = 8.0
#: Two quotients agree when they differ by at most this times the column's size (at least 1).
_TOL = 1e-3

# `f(points, rows)`: the `(M, nout)` outputs at `(M, n)` points, each a perturbation of row
# `rows[m]` of the caller's batch (whose other inputs it keeps).
Evaluate = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _sides(f: Evaluate, x: np.ndarray, center: np.ndarray, h: np.ndarray, index: np.ndarray):
    """The one-sided quotients of `f` at rows `x[r]` along coordinates `index[:, 1]` of
    `index[:, 0]` rows, with steps `h`: `(k, nout)` each."""
    rows, cols = index[:, 0], index[:, 1]
    base = x[rows]
    k = len(rows)
    step = h[rows, cols]
    pts = np.concatenate([base, base])
    xi = base[np.arange(k), cols]
    up, down = (xi + step) - xi, xi - (xi - step)  # as the floats actually moved
    pts[np.arange(k), cols] += up
    pts[k + np.arange(k), cols] -= down
    out = f(pts, np.concatenate([rows, rows]))
    plus = (out[:k] - center[rows]) / up[:, None]
    minus = (center[rows] - out[k:]) / down[:, None]
    return plus, minus


def jacobian(f: Evaluate, x: np.ndarray) -> np.ndarray:
    """`(B, nout, n)` derivatives of `f` at each row of `(B, n)` `x`, in three batched calls
    of `f` at most: the rows, both sides of every direction, and (only where sides disagree)
    both sides again at an eighth of the step."""
    B, n = x.shape
    h = STEP * np.maximum(np.abs(x), 1.0)
    center = f(x, np.arange(B))
    index = np.stack(np.meshgrid(np.arange(B), np.arange(n), indexing="ij"), -1).reshape(-1, 2)
    plus, minus = _sides(f, x, center, h, index)
    size = np.maximum(1.0, np.maximum(np.abs(plus).max(1), np.abs(minus).max(1)))
    D = 0.5 * (plus + minus)
    bad = np.abs(plus - minus).max(1) > _TOL * size
    if bad.any():
        p8, m8 = _sides(f, x, center, h / _REFINE, index[bad])
        p, m, s = plus[bad], minus[bad], size[bad, None]
        agree = np.abs(p8 - m8).max(1, keepdims=True) <= _TOL * s
        p_same = np.abs(p8 - p).max(1, keepdims=True) <= _TOL * s
        m_same = np.abs(m8 - m).max(1, keepdims=True) <= _TOL * s
        # The side that changed reached over the jump: keep the other one (where both
        # changed, the one that changed less).
        keep_minus = ~p_same & (m_same | (np.abs(p8 - p).max(1) > np.abs(m8 - m).max(1))[:, None])
        choice = np.where(
            agree,
            0.5 * (p8 + m8),
            np.where(p_same & m_same, 0.5 * (p + m), np.where(keep_minus, m8, p8)),
        )
        D[bad] = choice
    return np.swapaxes(D.reshape(B, n, -1), 1, 2)
