"""Which transitions `ParameterSweep.transitions` lists, as static Python (scqubits 4.3.1's
`param_sweep.py`: `_process_subsystems_option`, `_process_initial_option`,
`_process_final_option`, `_get_final_states_list`). The energies are the model's lookups of
the states these name; this module only decides the list, in scqubits' order.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _hs_errors as _errors
from ._lookup import energy_at

#: A state: a bare product label (tuple) or a dressed index (int).
State = tuple[int, ...] | int

#: scqubits 4.3.1's two warnings on a bare initial state (`_validate_bare_initial`), word for word.
HYBRIDIZED = (
    "The initial state undergoes significant hybridization. "
    "Identification with a bare product state was not (fully) "
    "successful. Consider running ParameterSweep with "
    "`ignore_low_overlap=True` or specify `initial` as a dressed-state "
    "index (integer) instead of a bare product state.\n"
)
NOT_GROUND = (
    "The state (0,0, ...,0) may not be dispersively connected "
    "to the true ground state. Specifying `initial=0` (dressed-state "
    "index) may be preferable.\n"
)


def _is_index(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


class Planner:
    """The transition list of one model: its subsystems and truncations."""

    def __init__(self, ids: Sequence[str], objects: Sequence[Any], dims: Sequence[int]) -> None:
        self.ids = list(ids)
        self.objects = list(objects)
        self.dims = list(dims)

    def subsystems(self, given: Any) -> list[int]:
        """`subsystems=`: None (all), one subsystem, or a list; by `id_str` or object."""
        if given is None:
            return list(range(len(self.ids)))
        items = given if isinstance(given, list | tuple) else [given]
        out = []
        for item in items:
            hit = [
                i for i, (n, o) in enumerate(zip(self.ids, self.objects)) if item is o or item == n
            ]
            if not hit:
                raise ValueError(
                    _errors.HS_SUBSYSTEMS.format(method="transitions", got=item, known=self.ids)
                )
            out.append(hit[0])
        return out

    def _bad(self, what: str, got: Any, k: int) -> ValueError:
        return ValueError(
            _errors.HS_LEVEL.format(
                method="transitions", what=what, got=got, n=len(self.dims), dims=self.dims, k=k
            )
        )

    def _bare(self, state: Any, what: str, k: int, active: list[int] | None) -> tuple[int, ...]:
        n = len(self.dims)
        if not isinstance(state, tuple | list) or not all(_is_index(b) for b in state):
            raise self._bad(what, state, k)
        state = tuple(int(b) for b in state)
        if active is not None and len(state) != n and len(state) == len(active):
            full = [0] * n  # scqubits' `_complete_state`: zeros for the inactive subsystems
            for level, s in zip(state, active):
                full[s] = level
            state = tuple(full)
        if len(state) != n or not all(0 <= b < d for b, d in zip(state, self.dims)):
            raise self._bad(what, state, k)
        return state

    def _dressed(self, state: Any, what: str, k: int) -> int:
        if not 0 <= state < k:
            raise self._bad(what, state, k)
        return int(state)

    def plan(
        self, subsystems: Any, initial: Any, final: Any, sidebands: bool, k: int
    ) -> list[tuple[State, State]]:
        """The `(initial, final)` pairs scqubits tries, in its order (all-NaN ones included)."""
        active = self.subsystems(subsystems)
        initials = initial if isinstance(initial, list) else [initial]
        finals = final if isinstance(final, list) else [final]
        pairs: list[tuple[State, State]] = []
        for start in initials:
            if _is_index(start):
                start_state: State = self._dressed(start, "initial state", k)
            elif start is None:
                start_state = (0,) * len(self.dims)
            else:
                start_state = self._bare(start, "initial state", k, active)
            for end in finals:
                pairs += [
                    (start_state, f) for f in self._finals(end, start_state, active, sidebands, k)
                ]
        return pairs

    def bare_initials(self, subsystems: Any, initial: Any, final: Any, k: int) -> list:
        """The bare initial state of each `(initial, final)` combination scqubits checks, in
        its order (one entry per final given, as its loop warns once for each)."""
        active = self.subsystems(subsystems)
        initials = initial if isinstance(initial, list) else [initial]
        finals = final if isinstance(final, list) else [final]
        out = []
        for start in initials:
            if _is_index(start):
                continue
            state = (
                (0,) * len(self.dims)
                if start is None
                else self._bare(start, "initial state", k, active)
            )
            out += [state] * len(finals)
        return out

    def _finals(
        self, end: Any, start: State, active: list[int], sidebands: bool, k: int
    ) -> list[State]:
        if end is None:
            if isinstance(start, int):  # scqubits: every bare state
                return list(np.ndindex(*self.dims))
            if not sidebands:
                out: list[State] = []
                for s in active:
                    for level in range(self.dims[s]):
                        state = list(start)
                        state[s] = level
                        if tuple(state) != start:
                            out.append(tuple(state))
                return out
            ranges: list[Any] = [range(d) for d in self.dims]
            for s in range(len(self.dims)):
                if s not in active:
                    ranges[s] = [start[s]]
            return [tuple(x) for x in itertools.product(*ranges)]
        if _is_index(end) and end == -1:
            return list(range(k))
        if _is_index(end):
            return [self._dressed(end, "final state", k)]
        return [self._bare(end, "final state", k, None)]


@partial(jax.jit, static_argnums=(2, 3, 4))
def columns(
    labels: jax.Array, w: jax.Array, spec: Any, photon_number: Any, make_positive: bool
) -> jax.Array:
    """Transition energies: `spec[i]` is `((dressed?, index), (dressed?, index))`, a bare
    state by its raveled position; the batch leads."""

    def energy(state: tuple[bool, int]) -> jax.Array:
        dressed, i = state
        return w[..., i] if dressed else energy_at(w, labels[..., i])

    out = [(energy(b) - energy(a)) / photon_number for a, b in spec]
    out = [jnp.abs(x) if make_positive else x for x in out]
    return jnp.stack(out, axis=-1) if out else jnp.zeros((*w.shape[:-1], 0), w.dtype)


def warn_hybridized(initials: list, labels: Any, w: Any, dims: Sequence[int]) -> None:
    """scqubits' warnings on each bare initial state, from concrete lookups: its energy is NaN
    somewhere in the sweep (no dressed state has it), or the bare ground state is not the
    lowest dressed state everywhere. Under a transformation the values are not known when
    the list is made, and the NaN columns themselves say it."""
    try:
        labels, w = np.asarray(labels), np.asarray(w)
    except jax.errors.TracerArrayConversionError:
        return
    for state in initials:
        index = labels[..., int(np.ravel_multi_index(state, dims))]
        energies = np.where(
            index >= 0,
            np.take_along_axis(w, np.clip(index, 0, None)[..., None], -1)[..., 0],
            np.nan,
        )
        if np.isnan(energies).any():
            warnings.warn(HYBRIDIZED, UserWarning, stacklevel=3)
        elif sum(state) == 0 and not np.all(energies == w[..., 0]):
            warnings.warn(NOT_GROUND, UserWarning, stacklevel=3)
