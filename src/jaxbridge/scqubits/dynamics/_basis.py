"""The static Hamiltonian and drive operators in a model's (dressed) eigenbasis, `levels` kept.

Everything here is a JAX function of the model's `params`, built from the models' public
methods only (`eigensys`, `matrixelements`, `bare_eigensys`): a qubit's eigenbasis is the one
its `Model.eigensys` returns, a `HilbertSpace`'s the dressed states of
`HilbertSpaceModel.eigensys`, each fixed up to a phase (a sign for real Hamiltonians) as in
scqubits. Energies keep the model's units (GHz in scqubits' default); `solve` multiplies by
2 pi, so times are in ns.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import HilbertSpaceModel
from .. import model as _model_of
from . import _errors

ParamsArg = Mapping[str, Any] | None

# A subsystem's own `Model`, made once per `HilbertSpaceModel` and subsystem (read from the
# object when first needed, as `jaxbridge.scqubits.model` reads it), and dropped with the
# `HilbertSpaceModel`. None: a subsystem no model describes (an oscillator), whose operators
# are its fixed matrices in its eigenbasis.
_SUBSYSTEM_MODELS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def is_hilbertspace(model: Any) -> bool:
    """Whether `model` is a `HilbertSpaceModel` (dressed states) rather than one qubit's."""
    return isinstance(model, HilbertSpaceModel)


def check_levels(model: Any, levels: Any, method: str) -> int:
    """`levels` as an int between 1 and the model's dimension, else a clear error."""
    most = int(model.dim)
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)):
        raise ValueError(_errors.LEVELS.format(method=method, most=most, got=levels))
    if not 1 <= int(levels) <= most:
        raise ValueError(_errors.LEVELS.format(method=method, most=most, got=levels))
    return int(levels)


def static_hamiltonian(model: Any, params: ParamsArg = None, levels: int = 4) -> Any:
    """The static Hamiltonian in the model's eigenbasis: `diag(E_k - E_0)`, k < `levels`.

    Args:
        model: a `jaxbridge.scqubits` `Model` or `HilbertSpaceModel`.
        params: the model's params (as its `eigenvals` takes them); None keeps its values.
        levels: how many of the lowest (dressed) levels to keep (static).

    Returns:
        `(*batch, levels, levels)`, real, in the model's energy units (GHz). Differentiable in
        `params` under `jit`, `vmap` and `grad` (float64 with `jax_enable_x64`).

    Example:
        >>> import scqubits, jaxbridge.scqubits as jbq
        >>> from jaxbridge.scqubits import dynamics
        >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
        >>> dynamics.static_hamiltonian(m, levels=3).shape
        (3, 3)
    """
    k = check_levels(model, levels, "static_hamiltonian")
    e = model.eigenvals(params, evals_count=k)
    e = e - e[..., :1]
    return e[..., :, None] * jnp.eye(k, dtype=e.dtype)


def subsystem_model(model: HilbertSpaceModel, subsystem: Any, method: str) -> tuple[str, Any]:
    ids = [name for name in model.params if name != "g"]  # `{id_str: ..., "g": [...]}`
    id_str = getattr(subsystem, "id_str", None)
    if id_str not in ids or not hasattr(subsystem, "hilbertdim"):
        raise ValueError(_errors.HS_SUBSYSTEM.format(method=method, got=subsystem, known=ids))
    known = _SUBSYSTEM_MODELS.setdefault(model, {})
    if id_str not in known:
        try:
            known[id_str] = _model_of(subsystem)
        except TypeError:  # an oscillator: its basis is its eigenbasis
            known[id_str] = None
    return id_str, known[id_str]


def subsystem_params(model: HilbertSpaceModel, id_str: str, params: ParamsArg) -> dict:
    """The subsystem's params as the composite sees them: its values, then those given.

    The subsystem's own `Model` then describes the same qubit as the `HilbertSpaceModel`
    (even if the scqubits object changed since), so their eigenvectors overlap by a phase.
    """
    given = None if params is None else params.get(id_str)
    return {**model.params[id_str], **dict(given or {})}


def bare_operator(
    model: HilbertSpaceModel, subsystem: Any, operator: Any, params: ParamsArg, method: str
) -> Any:
    """A subsystem's operator between its kept bare levels, in the phases of the composite.

    `HilbertSpaceModel.bare_eigensys` fixes each bare eigenvector's phase; the subsystem's
    own `Model.matrixelements` has LAPACK's. The overlap of the two eigenvectors, a phase,
    maps one to the other, so a parameter-dependent operator (a fluxonium's `n_operator`)
    follows `params` too.
    """
    id_str, sub = subsystem_model(model, subsystem, method)
    s = list(model.params).index(id_str)
    t = int(model.subsystem_dims[s])
    if sub is None:
        matrix = getattr(subsystem, operator)() if isinstance(operator, str) else operator
        return jnp.asarray(np.asarray(matrix.full() if hasattr(matrix, "full") else matrix))
    sub_params = subsystem_params(model, id_str, params)
    _, v_bare = model.bare_eigensys(id_str, params, evals_count=t)
    _, v_own = sub.eigensys(sub_params, evals_count=t)
    elements = sub.matrixelements(operator, sub_params, evals_count=t)
    phase = jnp.einsum("...ni,...ni->...i", v_own.conj(), v_bare)  # b_i = phase_i own_i
    return phase.conj()[..., :, None] * elements * phase[..., None, :]


def embed(model: HilbertSpaceModel, subsystem: Any, bare: Any) -> Any:
    """A subsystem's `(t, t)` matrix as an operator on the bare product basis (`dim`)."""
    s = list(model.params).index(subsystem.id_str)
    out = jnp.ones((1, 1), dtype=bare.dtype)
    for r, d in enumerate(model.subsystem_dims):
        out = jnp.kron(out, bare if r == s else jnp.eye(int(d), dtype=bare.dtype))
    return out


def dressed(model: HilbertSpaceModel, matrix: Any, params: ParamsArg, levels: int) -> Any:
    """`<i|O|j>` between the `levels` lowest dressed states, `O` on the bare product basis."""
    _, u = model.eigensys(params, evals_count=levels)
    if jnp.iscomplexobj(matrix) or jnp.iscomplexobj(u):
        dtype = jnp.result_type(matrix.dtype, u.dtype, jnp.complex64)
        u, matrix = u.astype(dtype), matrix.astype(dtype)
    return jnp.swapaxes(u.conj(), -1, -2) @ matrix @ u


def drive_operator(model: Any, operator: Any, params: ParamsArg = None, levels: int = 4) -> Any:
    """A drive operator between the `levels` lowest (dressed) eigenstates.

    Args:
        model: a `Model` or a `HilbertSpaceModel`.
        operator: for a `Model`, what its `matrixelements` takes (an operator name such as
            `"n_operator"`, an `(N, N)` matrix, or for a `Circuit` a SymPy expression); for a
            `HilbertSpaceModel`, `(subsystem, name_or_matrix)` with `subsystem` the scqubits
            object in the `HilbertSpace` (its operator, recomputed at that subsystem's params
            where it depends on them, acts on it alone), or a `(levels, levels)` matrix already
            in the dressed basis.
        params: the model's params; None keeps its values.
        levels: how many levels to keep (static).

    Returns:
        `(*batch, levels, levels)`, in the same eigenbasis (same phases) as
        `static_hamiltonian` and `jump_operators` at the same params.

    Raises:
        ValueError: an operator the model cannot compute, a subsystem not in the
            `HilbertSpace`, or a wrong shape.

    Example:
        >>> import scqubits, jaxbridge.scqubits as jbq
        >>> from jaxbridge.scqubits import dynamics
        >>> m = jbq.model(scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10))
        >>> dynamics.drive_operator(m, "n_operator", levels=3).shape
        (3, 3)
    """
    k = check_levels(model, levels, "drive_operator")
    if not is_hilbertspace(model):
        return model.matrixelements(operator, params, evals_count=k)
    if isinstance(operator, tuple) and len(operator) == 2:
        subsystem, op = operator
        bare = bare_operator(model, subsystem, op, params, "drive_operator")
        return dressed(model, embed(model, subsystem, bare), params, k)
    if not isinstance(operator, (tuple, str)) and np.shape(operator) == (k, k):
        return jnp.asarray(operator)
    raise ValueError(
        _errors.HS_OPERATOR.format(method="drive_operator", dim=k, got=type(operator).__name__)
    )
