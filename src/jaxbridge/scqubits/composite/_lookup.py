"""scqubits' labelling of dressed states by bare product states, as a JAX function.

`HilbertSpace.generate_lookup()` (ordering "DE", scqubits 4.3's
`SpectrumLookupMixin._generate_single_mapping_by_overlap`) walks the dressed states in order
of energy. For dressed state j it takes the bare product state b of largest `|<b|E_j>|` among
those not yet claimed; if `|<b|E_j>|^2 > settings.OVERLAP_THRESHOLD` (0.5), or
`ignore_low_overlap` is set, b is labelled j and claimed. Bare states never claimed have no
dressed state (scqubits' None, NaN energies). The walk is the same here, a `fori_loop` over
the dressed states on the eigenvectors without derivatives: the labels are discrete and the
energies they select carry the derivatives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def dressed_indices(evecs: jax.Array, threshold: float, ignore_low_overlap: bool) -> jax.Array:
    """For each bare product state (rows of `evecs`), the dressed index labelled by it.

    Args:
        evecs: `(D, k)`, the k lowest dressed eigenvectors in the bare product basis.
        threshold: scqubits' `settings.OVERLAP_THRESHOLD`.
        ignore_low_overlap: the `HilbertSpace`'s flag: label even below the threshold.

    Returns:
        `(D,)` int32: the dressed index, or -1 where no dressed state is labelled.
    """
    overlap = jnp.abs(jax.lax.stop_gradient(evecs))
    d, k = overlap.shape

    def step(j, carry):
        labels, free = carry
        row = jnp.where(free, overlap[:, j], 0.0)  # scqubits zeroes claimed columns
        at = jnp.argmax(row)  # the first maximum, as NumPy's argmax
        take = jnp.asarray(ignore_low_overlap) | (row[at] ** 2 > threshold)
        labels = jnp.where(take, labels.at[at].set(j), labels)
        free = jnp.where(take, free.at[at].set(False), free)
        return labels, free

    init = (jnp.full((d,), -1, jnp.int32), jnp.ones((d,), bool))
    labels, _ = jax.lax.fori_loop(0, k, step, init)
    return labels


def energy_at(evals: jax.Array, index: jax.Array) -> jax.Array:
    """`evals[index]`, NaN where `index` is -1; differentiable in `evals`."""
    safe = jnp.clip(index, 0, evals.shape[-1] - 1)
    picked = jnp.take_along_axis(evals, safe[..., None], axis=-1)[..., 0]
    return jnp.where(index >= 0, picked, jnp.nan)
