"""The phases of a HilbertSpace model's bases against scqubits', and the small programs that
read a dressed state's components.

scqubits keeps the phases its eigensolver returns for every bare and dressed eigenvector; the
model fixes its own (`fix_phases`). A matrix given in scqubits' bare eigenbasis (a `qobj=`
term, `op_in_dressed_eigenbasis(op_in_bare_eigenbasis=True)`) is taken to the model's phases
once, at the object's values, by the overlaps of the two sets of bare eigenvectors.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._terms import complex_of
from . import _hs_errors as _errors
from ._composite import MatrixTerm
from ._subsystems import Part, as_matrix


def _current(obj: Any, name: str, default: Any) -> Any:
    x = getattr(obj, name, default)
    return x if isinstance(x, int | float | complex | np.number) else default


def bare_phases(hs: Any, parts: list[Part], index: int | None) -> list[np.ndarray]:
    """Per subsystem, `d[l] = <v_model_l|v_scqubits_l>` at the object's values: the unit
    numbers that take scqubits' bare eigenbasis (its solver's phases) to the model's."""
    out = []
    with jax.enable_x64(True):
        for p, sub in zip(parts, hs):
            # At the object's current values: the basis scqubits' matrix refers to now.
            values = {k: jnp.asarray(_current(sub, k, v)) for k, v in p.defaults.items()}
            _, v = p.esys_at(values)
            if v is None:  # an oscillator: its Fock basis is its eigenbasis
                out.append(np.ones(p.dim))
                continue
            theirs = p.scqubits_eigenvectors(values)  # in the part's basis
            d = np.sum(np.asarray(v).conj() * np.asarray(theirs), axis=0)
            bad = np.abs(np.abs(d) - 1.0) > 1e-6
            if bad.any():
                level = int(np.argmax(bad))
                text = _errors.HS_QOBJ_PHASES if index is not None else _errors.HS_BARE_PHASES
                raise ValueError(
                    text.format(
                        index=index, level=level, id_str=p.id_str, overlap=float(abs(d[level]))
                    )
                )
            out.append(d / np.abs(d))
    return out


def matrix_term(q: Any, index: int, phases: list[np.ndarray], dims: list[int]) -> MatrixTerm:
    """A `qobj=` term in the model's bare phases: `D Q D^dagger`, `D` the kron of the phases."""
    m = as_matrix(q)
    dim = int(np.prod(dims))
    if m.shape != (dim, dim):
        raise ValueError(_errors.HS_QOBJ_SHAPE.format(index=index, got=m.shape, dim=dim, dims=dims))
    skew = float(np.max(np.abs(m - m.conj().T))) if m.size else 0.0
    if skew > 1e-10 * max(1.0, float(np.max(np.abs(m)))):
        raise ValueError(_errors.HS_QOBJ_HERMITIAN.format(index=index, got=skew))
    d = np.ones((1,))
    for ph in phases:
        d = (d[:, None] * ph[None, :]).reshape(-1)
    m = d[:, None] * m * d.conj()[None, :]
    if not np.iscomplexobj(m) or not np.any(np.imag(m)):
        m = np.real(m)
    return MatrixTerm(m, bool(np.iscomplexobj(m)))


@partial(jax.jit, static_argnums=(4, 5, 6))
def components(
    labels: jax.Array,
    v: jax.Array,
    position: jax.Array,
    dressed: jax.Array,
    dims: tuple[int, ...],
    c: int,
    prob: bool,
) -> tuple[jax.Array, jax.Array]:
    """`dressed_state_components` from the labels and states: the dressed index is `dressed`,
    or the label of bare `position` where that is >= 0; largest components first."""
    picked_label = jnp.take(labels, jnp.clip(position, 0, labels.shape[-1] - 1), axis=-1)
    index = jnp.where(position >= 0, picked_label, dressed)
    safe = jnp.clip(index, 0, v.shape[-1] - 1)
    amp = jnp.take_along_axis(v, safe[..., None, None], axis=-1)[..., 0]  # (*batch, D)
    order = jnp.argsort(-jax.lax.stop_gradient(jnp.abs(amp)), axis=-1, stable=True)[..., :c]
    picked = jnp.take_along_axis(amp, order, axis=-1)
    values = jnp.abs(picked) ** 2 if prob else picked
    found = index >= 0
    values = jnp.where(found[..., None], values, jnp.nan)
    bare = jnp.stack(jnp.unravel_index(order, dims), axis=-1)
    return jnp.where(found[..., None, None], bare, -1).astype(jnp.int32), values


def common(*xs: jax.Array) -> Any:
    """The complex dtype of the first's precision where any is complex (strict promotion)."""
    real = jnp.real(xs[0]).dtype
    return complex_of(real) if any(jnp.iscomplexobj(x) for x in xs) else real
