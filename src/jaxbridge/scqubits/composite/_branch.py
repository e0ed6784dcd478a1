"""scqubits' branch-analysis labellings ("LX" and "BE" of `generate_lookup`), on the host.

Both walk the bare product states in a fixed order, lexical over the permuted labels ("LX",
scqubits 4.3's `_branch_analysis_LX`) or by bare energy ("BE", `_branch_analysis_BE`); the
first is the bare ground state, labelled by dressed state 0. Every other bare state `b` has a
source, `b` with one excitation less in the last subsystem of `subsys_priority` where `b` has
one; the dressed state labelled by the source is excited in that subsystem (`a^dagger` for an
oscillator, `sum_j |j+1><j|` in the bare eigenbasis otherwise) and `b` takes the unclaimed
dressed state of largest overlap with it. Both walks are one loop here, as NumPy on the host:
the labels are discrete and carry no derivative.

scqubits takes the excitation of a non-oscillator subsystem in its bare eigenbasis with the
phases its eigensolver happened to return, and the overlaps depend on them wherever a dressed
state mixes bare states. The model's bare phases are its own (`fix_phases`), so each choice
is checked to be the same for every choice of phases: the chosen state's overlap, at its
smallest over the phases, must exceed every other candidate's at its largest. Where it does
not, or where the bare energies "BE" sorts tie, scqubits' label is decided by those phases or
by rounding, and the walk raises `LabelAmbiguityError` instead of guessing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from . import _hs_errors as _errors

# Overlaps are of unit vectors; a margin below this is rounding, not a decision.
MARGIN = 1e-9


class LabelAmbiguityError(ValueError):
    """scqubits' branch-analysis label at a parameter point depends on its eigenvector phases
    or on rounding; the model cannot reproduce it."""


def lexical_order(dims: Sequence[int], priority: Sequence[int]) -> list[int]:
    """The raveled bare states in "LX" order: lexical over the labels permuted by priority."""
    out = []
    for t in itertools.product(*[range(dims[s]) for s in priority]):
        label = [0] * len(dims)
        for s, level in zip(priority, t):
            label[s] = level
        out.append(int(np.ravel_multi_index(tuple(label), tuple(dims))))
    return out


def energy_order(bare_evals: Sequence[np.ndarray], count: int) -> list[int]:
    """The `count` raveled bare states of lowest bare energy ("BE"), ties refused."""
    total = np.zeros((1,))
    for w in bare_evals:
        total = (total[:, None] + np.asarray(w)[None, :]).reshape(-1)
    order = np.argsort(total, kind="stable")
    shown = total[order[: count + 1]]
    gaps = np.diff(shown)
    scale = max(1.0, float(np.max(np.abs(total))))
    if np.any(gaps <= 1e-9 * scale):
        i = int(np.argmax(gaps <= 1e-9 * scale))
        dims = [len(w) for w in bare_evals]
        a, b = (tuple(int(x) for x in np.unravel_index(order[j], dims)) for j in (i, i + 1))
        raise LabelAmbiguityError(_errors.HS_BE_TIE.format(a=a, b=b, energy=float(shown[i])))
    return [int(x) for x in order[:count]]


def branch_labels(
    evecs: np.ndarray,
    dims: Sequence[int],
    order: Sequence[int],
    priority: Sequence[int],
    oscillator: Sequence[bool],
    phased: Sequence[bool],
    ordering: str,
) -> np.ndarray:
    """The dressed index labelled by each bare product state, -1 where none.

    Args:
        evecs: `(D, k)` dressed eigenvectors in the model's bare product basis.
        dims: the subsystems' truncated dimensions.
        order: the raveled bare states in the order they are labelled; `order[0]` is 0.
        priority: scqubits' `subsys_priority`.
        oscillator: per subsystem, whether scqubits excites it with `a^dagger`.
        phased: per subsystem, whether its bare eigenvectors carry a phase convention (all but
            an oscillator in its Fock basis).
        ordering: "LX" or "BE", for the error texts.

    Returns:
        `(D,)` int32.

    Raises:
        LabelAmbiguityError: a choice depends on the bare phases or is a tie.
    """
    d, k = evecs.shape
    labels = np.full((d,), -1, np.int32)
    free = np.ones((k,), bool)
    labels[order[0]] = 0
    free[0] = False
    shape = tuple(dims)
    for raveled in order[1:]:
        if not free.any():
            raise LabelAmbiguityError(_errors.HS_LX_INCOMPLETE.format(ordering=ordering, k=k))
        bare = list(np.unravel_index(raveled, shape))
        s = next(s for s in reversed(priority) if bare[s] > 0)
        bare[s] -= 1
        source = labels[int(np.ravel_multi_index(tuple(bare), shape))]
        if source < 0:  # scqubits indexes its eigenvectors with None here and fails
            raise LabelAmbiguityError(_errors.HS_LX_INCOMPLETE.format(ordering=ordering, k=k))
        terms = _terms(evecs, evecs[:, source], shape, s, oscillator[s])  # (k, levels)
        exact = np.abs(terms.sum(axis=1))
        exact = np.where(free, exact, -1.0)
        chosen = int(np.argmax(exact))
        if phased[s]:
            upper = np.abs(terms).sum(axis=1)
            lower = max(0.0, 2 * np.abs(terms[chosen]).max() - upper[chosen])
        else:
            upper, lower = exact, exact[chosen]
        rivals = np.where(free, upper, -1.0)
        rivals[chosen] = -1.0
        if lower - rivals.max() <= MARGIN:
            label = tuple(int(x) for x in np.unravel_index(raveled, shape))
            raise LabelAmbiguityError(
                _errors.HS_LX_PHASES.format(
                    ordering=ordering,
                    label=label,
                    subsystem=s,
                    chosen=chosen,
                    rival=int(np.argmax(rivals)),
                    why="its bare eigenvectors' phases" if phased[s] else "rounding",
                )
            )
        labels[raveled] = chosen
        free[chosen] = False
    return labels


def _terms(evecs: np.ndarray, v: np.ndarray, shape: tuple, s: int, osc: bool) -> np.ndarray:
    """`T[j, l]`: the part of `<E_j| X_s |v>` that comes from level l of subsystem s.

    Changing the phases of subsystem s's bare eigenvectors multiplies each `T[:, l]` by one
    unit number, the same for every j; no other phase enters.
    """
    n = shape[s]
    k = evecs.shape[1]
    w = np.sqrt(np.arange(1.0, n)) if osc else np.ones(n - 1)
    vs = np.moveaxis(v.reshape(shape), s, 0).reshape(n, -1)  # (levels, rest)
    es = np.moveaxis(evecs.reshape(*shape, k), s, 0).reshape(n, -1, k)
    x = w[:, None] * vs[:-1]  # level l moved to l + 1, weighted
    norm = np.linalg.norm(x)
    x = x / norm if norm > 0 else x  # scqubits' `.unit()`
    out = np.zeros((k, n), dtype=np.result_type(evecs.dtype, x.dtype))
    out[:, :-1] = np.einsum("lrk,lr->kl", es[1:].conj(), x)
    return out
