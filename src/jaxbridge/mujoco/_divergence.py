"""Divergence: which elements of a call MuJoCo warned on, reset, or fed a control it rejects.

MuJoCo does not fail a diverging simulation: it warns, resets the element to its initial
state (or stops a `mujoco.rollout` element) and carries on, and it replaces a bad control by
zero without a reset. A state that looks healthy and is wrong must not pass for a result, so
`Engine` flags those elements, in the fewest NumPy calls the healthy case allows (this runs on
every step), and replays an element only where its time cannot tell.
"""

from __future__ import annotations

import math

import numpy as np

from ._model import MjModel, mj
from ._state import FULLPHYSICS, MAXVAL, MAXVAL2, sum_of_squares
from ._worker import CTRL, Worker

__all__ = ["Divergence"]

_max_reduce, _min_reduce = np.maximum.reduce, np.minimum.reduce  # both propagate NaN

# `MAXVAL` is MuJoCo's bound on qpos, qvel, qacc and controls (`mju_isBad`): a control beyond
# it (after clamping to `ctrlrange`) is replaced by zero, with a warning that does not reset.
_AUTORESET = int(mj.mjtDisableBit.mjDSBL_AUTORESET)
_CLAMPCTRL = int(mj.mjtDisableBit.mjDSBL_CLAMPCTRL)


def _time_after(t0: np.ndarray, dt: float, N: int) -> np.ndarray:
    """`t0` after `N` additions of `dt`, rounded at each addition exactly as MuJoCo's
    `d->time += timestep` (or RK4's `time + h`) rounds it.

    `np.add.accumulate` is that same left-to-right recurrence, so the result is bit for bit
    MuJoCo's, in a fixed number of NumPy calls whatever `N` is.
    """
    if N <= 8:  # a few in-place additions cost less than building the accumulate's terms
        t = t0 + dt
        for _ in range(N - 1):
            t += dt
        return t
    terms = np.empty((t0.shape[0], N + 1))
    terms[:, 0] = t0
    terms[:, 1:] = dt
    return np.add.accumulate(terms, axis=1)[:, -1]


class Divergence:
    """The divergence flags of one model's calls; `Engine`'s checks, and its replays on a
    worker's first `MjData` where a time cannot tell.

    Args:
        model: the model (its `opt` is read live: flags changed later count).
        nstate: the length of its `mjSTATE_FULLPHYSICS` state.
    """

    def __init__(self, model: MjModel, nstate: int):
        self.model = model
        self._opt = model.opt  # a live view, cheaper to read than `model.opt`
        self._nstate = nstate

    def flags(
        self, warned: np.ndarray | None, state: np.ndarray, ctrl: np.ndarray
    ) -> np.ndarray | None:
        """The `(B,)` flags of a `mujoco.batch` call, or None where none is set: where MuJoCo
        warned in any of an element's steps (it reset, zeroed a bad control, or ran out of
        contact or constraint memory; `mujoco.batch` keeps each simulation's counters, so a
        warning in the last physics step, which `mujoco.rollout`'s path cannot see, counts
        too), where the state held a non-finite number, or where a control is one MuJoCo
        rejects (`_bad_ctrl`; `ctrl` `(B, ...)`)."""
        finite = math.isfinite(sum_of_squares(state))
        if warned is None and finite and sum_of_squares(ctrl) <= MAXVAL2:
            return None
        diverged = np.zeros(state.shape[0], bool) if warned is None else warned
        if not finite:
            diverged |= ~np.isfinite(state).all(axis=1)
        bad = self._bad_ctrl(ctrl)
        if bad is not None:
            diverged |= bad
        return diverged if diverged.any() else None

    def _bad_ctrl(self, ctrl: np.ndarray) -> np.ndarray | None:
        """Which elements of `ctrl` `(B, ...)` hold a control MuJoCo replaces by zero, or None
        where none does (two reductions: the common case).

        MuJoCo zeroes all controls of a step when one of them, after clamping to its
        `ctrlrange`, is NaN or beyond `MAXVAL` (`mjWARN_BADCTRL`), and carries on without a
        reset: the state looks healthy and is wrong. Non-finite controls are flagged even where
        clamping would make them harmless, as any non-finite input is.
        """
        if ctrl.size == 0 or (
            _min_reduce(ctrl, None) >= -MAXVAL and _max_reduce(ctrl, None) <= MAXVAL
        ):
            return None
        bad = ~np.isfinite(ctrl)
        if self._opt.disableflags & _CLAMPCTRL:
            bad |= np.abs(ctrl) > MAXVAL
        else:
            bad |= (np.abs(ctrl) > MAXVAL) & ~self.model.actuator_ctrllimited.astype(bool)
        return np.asarray(bad.reshape(ctrl.shape[0], -1).any(axis=1))

    def rejected_controls(self, ctrl: np.ndarray) -> np.ndarray:
        """`(B,)` flags of the elements of `ctrl` `(B, ...)` that hold a control MuJoCo
        replaces by zero (see `_bad_ctrl`)."""
        bad = self._bad_ctrl(ctrl)
        return np.zeros(ctrl.shape[0], bool) if bad is None else bad

    def diverged(
        self,
        w: Worker,
        parallel: bool,
        state: np.ndarray,
        full: np.ndarray,
        ctrl: np.ndarray,
        out_state: np.ndarray,
        N: int,
        warmstart: np.ndarray | None,
    ) -> np.ndarray | None:
        """The `(B,)` flags of a call of `N` physics steps, or None where none diverged.

        mujoco.rollout stops an element at its first warning (filling the rest with the state
        it stopped at), and the divergence warnings also reset it to time 0, so its final time
        is not the time `N` steps on. The common case, nothing wrong, takes `N + 6` NumPy
        calls (this runs on every step): the times, a sum of squares of the states (finite only
        if every entry is) and of the controls (at most `MAXVAL**2` only if no control is
        beyond `MAXVAL`), and the earliest time reached (a time `dt` can hide a reset).
        """
        dt = self._opt.timestep
        t_out = out_state[:, -1, 0]
        wrong = t_out != _time_after(state[:, 0], dt, N)  # NaN compares unequal too
        finite = math.isfinite(sum_of_squares(state))
        if (
            finite
            and sum_of_squares(ctrl) <= MAXVAL2
            and _min_reduce(t_out) > dt
            and not wrong.any()
        ):
            return None
        diverged = wrong
        if not finite:
            diverged |= ~np.isfinite(state).all(axis=1)
        bad = self._bad_ctrl(ctrl)
        if bad is not None:
            diverged |= bad
        # A reset at the only step from time 0 ends at time dt too, as a healthy step does:
        # MuJoCo's warning counters, the state a reset leads to, or a replay decide those.
        ambiguous = t_out == dt
        if ambiguous.any():
            ambiguous &= ~diverged
            last = state.shape[0] - 1
            if not parallel and ambiguous[last]:  # the serial path's MjData ran this one last
                diverged[last] = w.first_warned()  # (read before any replay reuses it)
                ambiguous[last] = False
            todo = np.flatnonzero(ambiguous)
            if todo.size > 2 and N == 1 and not self._opt.disableflags & _AUTORESET:
                todo = self._resolve_resets(w, todo, state, ctrl, out_state[:, 0], warmstart)
            for i in todo:
                warm = None if warmstart is None else warmstart[i]
                diverged[i] = self.replay_warns(w, state[i], full[i], warm)
        return diverged

    def _resolve_resets(
        self,
        w: Worker,
        todo: np.ndarray,
        state: np.ndarray,
        ctrl: np.ndarray,
        final: np.ndarray,
        warmstart: np.ndarray | None,
    ) -> np.ndarray:
        """Of the one-step elements `todo` that started at time 0 and ended at time dt, those
        whose warnings must still be replayed.

        A resetting warning (bad qpos, qvel or qacc) puts the element in `mj_resetData`'s
        state, with zero controls and warm start, and the step goes on from there: whatever the
        input, it ends where one healthy step from that reset state ends (found here with one
        physics step). An element that ended anywhere else did not reset. One that started
        from the reset state itself, with zero controls and warm start, ends there without a
        reset, and is healthy as that step was. Only elements that reached the reset state's
        successor from elsewhere are replayed: a reset, or a coincidence. Where the reset
        state's own step warns, every element is replayed.
        """
        m, d, nstate = self.model, w.first[0], self._nstate
        if int(m.nq) + int(m.nv) == 0:  # nothing to reset: only replays can tell
            return todo
        mj.mj_resetData(m, d)
        origin = np.empty(nstate)
        mj.mj_getState(m, d, origin, FULLPHYSICS)
        out = np.empty((1, 1, nstate))
        zero = np.zeros((1, 1, int(m.nu)))
        w.serial.rollout(w.one, w.first, 1, CTRL, origin[None], None, zero, out, None)
        if w.first_warned():
            return todo
        todo = todo[(final[todo] == out[0, 0]).all(axis=1)]  # the others did not reset
        if todo.size == 0:
            return todo
        from_origin = (state[todo] == origin).all(axis=1) & (
            ctrl[todo].reshape(todo.size, -1) == 0
        ).all(axis=1)
        if warmstart is not None:
            from_origin &= (warmstart[todo] == 0).all(axis=1)
        return todo[~from_origin]

    def diverged_one(
        self, w: Worker, state: np.ndarray, ctrl: np.ndarray, t_out: float, N: int
    ) -> bool:
        """`diverged` of one element, in Python floats (the same IEEE double additions):
        `state` `(1, nstate)`, `ctrl` `(1, ..., nu)` (C-contiguous), the time MuJoCo reached
        after `N` steps. It ran serially, on `w.first[0]`: its counters are this element's."""
        dt = self._opt.timestep
        values = state.tolist()[0]  # Python floats: cheaper here than any NumPy call
        expected = values[0]
        for _ in range(N):
            expected += dt
        if t_out != expected:  # NaN compares unequal too
            return True
        # Python's sum of two short lists costs less than one NumPy reduction; a sum is
        # finite only if every term is, and an overflowing one is sorted out exactly.
        u = ctrl.ravel().tolist()
        if not math.isfinite(sum(values, sum(u))) and not (
            np.isfinite(state).all() and np.isfinite(ctrl).all()
        ):
            return True
        if u and not (min(u) >= -MAXVAL and max(u) <= MAXVAL):
            bad = self._bad_ctrl(ctrl)
            if bad is not None and bad[0]:
                return True
        # Its counters are this element's (`mujoco.rollout` clears them per element): any
        # warning counts, one in the last physics step that neither resets nor stops
        # included (a time tells nothing of those).
        return w.first_warned()

    def replay_warns(
        self, w: Worker, state: np.ndarray, full: np.ndarray, warmstart: np.ndarray | None
    ) -> bool:
        """Whether MuJoCo warns when it rolls out this one element (on the calling thread)."""
        out = np.empty((1, full.shape[0], self._nstate))
        warm = None if warmstart is None else warmstart[None]
        w.serial.rollout(
            w.models(1), w.first, full.shape[0], CTRL, state[None], warm, full[None], out, None
        )
        return w.first_warned()
