"""`_numpy_eval.batched`: a jaxpr run by NumPy over a batch equals JAX's own vmap of it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scqubits_cases import KINDS, make

import jaxbridge.scqubits as jbq
from jaxbridge.scqubits import _numpy_eval


@pytest.fixture(autouse=True)
def _x64(x64):
    yield


def _check(fn, xs, batched_args):
    """NumPy's evaluation of `fn`'s jaxpr on `xs` (each `(B,)` where `batched_args[i]`, else
    one value) against `jax.vmap(fn)` of the same."""
    avals = [jax.ShapeDtypeStruct(np.shape(x)[1:] if b else np.shape(x), np.asarray(x).dtype)
             for x, b in zip(xs, batched_args)]  # fmt: skip
    closed = jax.make_jaxpr(fn)(*avals)
    evaluate = _numpy_eval.batched(closed)
    assert evaluate is not None
    B = next(np.shape(x)[0] for x, b in zip(xs, batched_args) if b)
    got = evaluate(B, *[np.asarray(x) for x in xs])
    axes = tuple(0 if b else None for b in batched_args)
    want = jax.tree_util.tree_leaves(jax.vmap(fn, in_axes=axes)(*xs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-13, atol=1e-13)


def test_elementwise_structural_and_dot_rules():
    rng = np.random.default_rng(0)
    v = np.linspace(-1.0, 1.0, 7)
    m = rng.normal(size=(3, 7))

    def fn(a, b, c):
        s = jnp.sqrt(8.0 * a * b) + jnp.cos(a * v + 2 * jnp.pi * c) ** 2 - jnp.sin(b) / a
        t = jnp.where(s > 0.1, jnp.exp(-s), jnp.log1p(jnp.abs(s))) ** 3
        u = jnp.concatenate([t[:3], jnp.array([a, b]), t[::2]])
        w = m @ t + jnp.tanh(c) * jnp.arange(3.0)
        x = jnp.stack([a, b, c]).reshape(3, 1) * jnp.ones((3, 4))
        return u, w, x.T.sum(axis=0), jnp.maximum(a, c), (a > b).astype(jnp.float64)

    a = np.linspace(0.5, 2.0, 5)
    b = np.linspace(1.5, 0.7, 5)
    c = np.linspace(0.0, 0.5, 5)
    _check(fn, (a, b, c), (True, True, True))
    _check(fn, (a, 1.3, c), (True, False, True))  # a shared argument


def test_derivative_jaxprs():
    def fn(a, b):
        return jnp.sqrt(a / b) * jnp.cos(b * np.arange(4.0)), a**0.25 * jnp.arange(1.0, 3.0)

    def along(a, b):
        def one(t):
            return jax.jvp(fn, (a, b), (t[0], t[1]))

        return jax.vmap(one, out_axes=((None, None), (1, 1)))(jnp.eye(2))

    _check(along, (np.linspace(1, 2, 4), np.linspace(3, 1, 4)), (True, True))


def test_unsupported_primitive_is_refused():
    closed = jax.make_jaxpr(lambda x: jnp.sort(x))(jnp.zeros(3))
    assert _numpy_eval.batched(closed) is None


@pytest.mark.parametrize("kind", KINDS)
def test_every_qubits_coefficients_and_derivatives(kind):
    """Each qubit's Hamiltonian coefficients, and their forward-mode derivatives in every
    parameter, at a few parameter points: NumPy's values equal JAX's."""
    spec = jbq.model(make(kind)[0])._spec
    names = sorted(spec.defaults)
    base = {n: float(np.real(spec.defaults[n])) + 0.1 for n in names}

    def coefficients(*xs):
        return spec.terms.flat_coefficients(dict(zip(names, xs)))

    def along(*xs):
        def one(t):
            return jax.jvp(coefficients, xs, tuple(t))

        return jax.vmap(one, out_axes=(None, 1))(jnp.eye(len(xs)))

    xs = tuple(np.asarray([base[n] * s for s in (0.9, 1.0, 1.1)]) for n in names)
    for fn in (coefficients, along):
        closed = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct((), np.float64) for _ in names])
        if _numpy_eval.batched(closed) is None:
            pytest.skip(f"{kind}'s coefficients use a primitive without a NumPy rule")
        _check(fn, xs, (True,) * len(xs))


@pytest.mark.parametrize("kind", KINDS)
def test_host_levels_equal_the_jax_eigensolver_to_second_order(kind):
    """`HostLevels` (the coefficients on NumPy, Hellmann-Feynman and second-order perturbation
    theory on the host) against `eigvalsh_k` of the JAX-assembled matrix, whose derivatives
    are JAX's own: values, gradients and hessians in every parameter, batched."""
    from jaxbridge.scqubits._eigen import HostLevels, eigvalsh_k

    obj, box = make(kind)
    spec = jbq.model(obj)._spec
    names = sorted(box)
    mid = {n: 0.5 * (lo + hi) for n, (lo, hi) in box.items()}
    fixed = {n: float(np.real(v)) for n, v in spec.defaults.items() if n not in box}
    host = HostLevels(spec.terms, 3)
    if host({**fixed, **mid}) is None:  # complex coefficients: the JAX path serves them
        assert jnp.iscomplexobj(spec.terms.flat_coefficients({**fixed, **mid}))
        return

    def ours(x):
        return host({**fixed, **dict(zip(names, x))})

    def jax_path(x):
        return eigvalsh_k(spec.terms.dense({**fixed, **dict(zip(names, x))}), 3)

    f = lambda g: lambda x: jnp.dot(g(x), jnp.array([1.0, -2.0, 0.5]))
    x = jnp.array([mid[n] for n in names])
    xs = jnp.stack([x, x * 1.01])
    for transform in (lambda g: g, jax.grad, jax.hessian):
        got = jax.jit(jax.vmap(transform(f(ours))))(xs)
        want = jax.jit(jax.vmap(transform(f(jax_path))))(xs)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * float(jnp.abs(want).max()))
