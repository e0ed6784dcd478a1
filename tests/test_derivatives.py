"""Derivative rules against JAX-native twins, in every mode, in float64.

Each rule kind gets its host-side derivative functions from the twin (as a user would write
them by hand), then `check_grads` and the twin's own derivatives judge the result.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import CASES
from jax.test_util import check_grads

import jaxbridge

FLOAT_CASES = [c for c in CASES if c.name != "mixed_int"]
TOL = {"jacobian": 1e-8, "pair": 1e-8, "central": 1e-6, "forward": 1e-4}


def _np(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def _f64(args):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), args)


def wrap(case, kind, n_args):
    ref = case.reference
    argnums = 0 if n_args == 1 else tuple(range(n_args))
    # The host-side rules come from the twin, jitted once (a host function may call JAX).
    if kind == "jacobian":
        jac = jax.jit(jax.jacfwd(ref, argnums))
        return jaxbridge.host(case.host_fn, jacobian=lambda *a: _np(jac(*a)))
    jvp_twin = jax.jit(lambda p, t: jax.jvp(ref, p, t)[1])
    vjp_twin = jax.jit(lambda p, ct: jax.vjp(ref, *p)[1](ct))
    jvp = lambda *a: _np(jvp_twin(a[:n_args], a[n_args:]))  # noqa: E731
    vjp = lambda *a: _np(vjp_twin(a[:n_args], a[n_args]))  # noqa: E731
    if kind == "pair":
        return jaxbridge.host(case.host_fn, jvp=jvp, vjp=vjp)
    if kind == "jvp":
        return jaxbridge.host(case.host_fn, jvp=jvp)
    if kind == "vjp":
        return jaxbridge.host(case.host_fn, vjp=vjp)
    return jaxbridge.host(
        case.host_fn, vmap="vectorized", derivative=jaxbridge.FiniteDifferences(scheme=kind)
    )


def _close(a, b, tol):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", FLOAT_CASES, ids=repr)
@pytest.mark.parametrize("kind", ["jacobian", "pair", "central", "forward"])
def test_first_order_all_modes(case, kind, x64):
    args = _f64(case.args())
    f = wrap(case, kind, len(args))
    tol = TOL[kind]
    if kind in ("jacobian", "pair", "central"):
        check_grads(f, args, order=1, modes=("fwd", "rev"), atol=tol * 10, rtol=tol * 10)
    argnums = tuple(range(len(args)))
    for transform in (jax.jacfwd, jax.jacrev):
        _close(transform(f, argnums)(*args), transform(case.reference, argnums)(*args), tol)
    # jit(grad) and vmap(grad) of a scalar loss
    loss = lambda g: lambda *a: sum(jnp.sum(jnp.sin(x)) for x in jax.tree_util.tree_leaves(g(*a)))  # noqa: E731
    _close(jax.jit(jax.grad(loss(f)))(*args), jax.grad(loss(case.reference))(*args), tol)
    stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x, 2 * x]), args)
    _close(
        jax.vmap(jax.grad(loss(f)))(*stacked),
        jax.vmap(jax.grad(loss(case.reference)))(*stacked),
        tol,
    )


@pytest.mark.parametrize("case", FLOAT_CASES[:4], ids=repr)
def test_one_sided_pairs_work_in_their_mode_and_name_the_other(case, x64):
    args = _f64(case.args())
    n = len(args)
    argnums = tuple(range(n))
    only_jvp, only_vjp = wrap(case, "jvp", n), wrap(case, "vjp", n)
    _close(jax.jacfwd(only_jvp, argnums)(*args), jax.jacfwd(case.reference, argnums)(*args), 1e-8)
    _close(jax.jacrev(only_vjp, argnums)(*args), jax.jacrev(case.reference, argnums)(*args), 1e-8)
    with pytest.raises(
        ValueError,
        match=r"reverse mode \(grad, vjp, jacrev\) of host function .* "
        r"needs `vjp=` \(or `jacobian=`\)",
    ):
        jax.jacrev(only_jvp)(*args)
    with pytest.raises(
        ValueError,
        match=r"forward mode \(jvp, jacfwd\) of host function .* needs "
        r"`jvp=` \(or `jacobian=`\)",
    ):
        jax.jacfwd(only_vjp)(*args)


def test_second_order_through_a_jacobian_with_its_own_rule(x64):
    hess = lambda x: np.stack([np.diag(-np.sin(x))])[0]  # noqa: E731
    jac = jaxbridge.host(lambda x: np.diag(np.cos(x)), jacobian=lambda x: _diag3(-np.sin(x)))
    f = jaxbridge.host(np.sin, jacobian=jac)
    x = jnp.linspace(0.1, 1.0, 4)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(jax.hessian(lambda x: f(x).sum())(x), hess(x), atol=1e-12)
    d1 = lambda x: jax.grad(lambda x: f(x)[1])(x)[1]  # noqa: E731
    np.testing.assert_allclose(jax.grad(d1)(x)[1], -np.sin(x[1]), rtol=1e-12)


def _diag3(v):
    n = v.shape[0]
    out = np.zeros((n, n, n))
    out[np.arange(n), np.arange(n), np.arange(n)] = v
    return out


def test_second_order_by_finite_differences(x64):
    f = jaxbridge.host(
        lambda x: np.sin(x) * x[..., ::-1],
        vmap="vectorized",
        derivative=jaxbridge.FiniteDifferences(),
    )
    x = jnp.linspace(0.1, 1.0, 3)
    twin = lambda x: jnp.sin(x) * x[::-1]  # noqa: E731
    loss = lambda g: lambda x: jnp.sum(g(x) ** 2)  # noqa: E731
    np.testing.assert_allclose(jax.hessian(loss(f))(x), jax.hessian(loss(twin))(x), atol=1e-4)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"), atol=1e-3, rtol=1e-3)


def test_finite_differences_is_one_batched_call_per_derivative(x64):
    calls = []

    def fn(x):
        calls.append(x.shape)
        return np.sin(x).sum(axis=-1)

    f = jaxbridge.host(fn, vmap="vectorized", derivative=jaxbridge.FiniteDifferences())
    x = jnp.ones(64)
    for transform, shape in (
        (jax.grad, (128, 64)),  # reverse: all 2n perturbed points (the unused primal is pruned)
        (lambda f: lambda x: jax.jvp(f, (x,), (jnp.ones(64),))[1], (2, 64)),  # forward: 2 points
        (jax.jacfwd, (128, 64)),  # n tangents x 2 points, still one call
    ):
        g = jax.jit(transform(f))
        g(x)
        calls.clear()
        got = g(x)
        assert calls == [shape], transform
        want = np.cos(1.0) * (64.0 if shape == (2, 64) else 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-8)


def test_integer_and_static_inputs_get_no_tangent(x64):
    def jvp(x, n, mode, tx, tn):
        assert mode == "scale" and np.all(tn == 0)
        return tx * n

    f = jaxbridge.host(lambda x, n, mode: x * n, jvp=jvp, vjp=lambda x, n, mode, ct: (ct * n, None))
    x, n = jnp.ones(3), jnp.arange(3)
    got = jax.grad(lambda x: f(x, n, "scale").sum())(x)
    np.testing.assert_allclose(got, [0, 1, 2])
    t = jax.jvp(lambda x: f(x, n, "scale"), (x,), (jnp.ones(3),))[1]
    np.testing.assert_allclose(t, [0, 1, 2])
    # and an integer output gets a float0 tangent
    g = jaxbridge.host(
        lambda x: (x * 2, np.int64(3)), jacobian=lambda x: (2 * np.eye(3), np.zeros(3))
    )
    _, (tx, tn) = jax.jvp(g, (x,), (jnp.ones(3),))
    assert tn.dtype == jax.dtypes.float0
    np.testing.assert_allclose(tx, 2)


def test_no_rule_and_keyword_errors():
    f = jaxbridge.host(np.sin)
    with pytest.raises(ValueError) as info:  # what JAX raises for a pure_callback under grad
        jax.grad(lambda x: f(x).sum())(jnp.ones(2))
    assert str(info.value).endswith(
        "needs a derivative rule: pass `jacobian=`, `jvp=` and `vjp=`, or "
        "`derivative=jaxbridge.FiniteDifferences()` to `jaxbridge.host`."
    )
    g = jaxbridge.host(lambda x, *, y: x * y, derivative=jaxbridge.FiniteDifferences())
    with pytest.raises(TypeError, match="with respect to the keyword argument `y`"):
        jax.grad(lambda y: g(jnp.ones(2), y=y).sum())(jnp.ones(2))
    # differentiating only the positional argument is fine
    jax.grad(lambda x: g(x, y=jnp.ones(2)).sum())(jnp.ones(2))


def test_rule_results_are_checked_and_name_rule_and_function(x64):
    f = jaxbridge.host(np.sin, jacobian=lambda x: np.zeros((2, 2)))
    with pytest.raises(
        Exception,
        match=r"\(jacobian= of sin\)' returned a wrong array at ``: "
        r"expected f64\[3,3\], got f64\[2,2\]",
    ):
        jax.jacfwd(f)(jnp.ones(3))


def _quiet_sqrt(x):
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


def test_finite_differences_check_finite(x64):
    f = jaxbridge.host(
        _quiet_sqrt,
        vmap="vectorized",
        derivative=jaxbridge.FiniteDifferences(check_finite=True),
    )
    with pytest.raises(
        Exception, match="finite differences of host function '_quiet_sqrt' are not finite"
    ):
        jax.block_until_ready(jax.jit(jax.jacfwd(f))(jnp.array([0.0, 1.0])))


def test_finite_differences_arguments_are_checked():
    with pytest.raises(ValueError, match="must be 'central' or 'forward'; got 'backward'"):
        jaxbridge.FiniteDifferences(scheme="backward")
    with pytest.raises(ValueError, match="must be positive"):
        jaxbridge.FiniteDifferences(step=0.0)
    with pytest.raises(ValueError, match="takes one derivative rule"):
        jaxbridge.host(np.sin, jacobian=np.cos, derivative=jaxbridge.FiniteDifferences())


def test_scipy_kv_analytic_rule_matches_finite_differences(x64):
    special = pytest.importorskip("scipy.special")
    nu = 0.7  # non-integer order: JAX has no kv

    def dkv(z):  # d/dz K_nu(z) = -(K_{nu-1}(z) + K_{nu+1}(z)) / 2
        return -(special.kv(nu - 1, z) + special.kv(nu + 1, z)) / 2

    analytic = jaxbridge.host(
        lambda z: special.kv(nu, z),
        vmap="vectorized",
        jvp=lambda z, t: dkv(z) * t,
        vjp=lambda z, ct: (dkv(z) * ct,),
    )
    fd = jaxbridge.host(
        lambda z: special.kv(nu, z), vmap="vectorized", derivative=jaxbridge.FiniteDifferences()
    )
    z = jnp.linspace(0.5, 3.0, 5)
    loss = lambda f: lambda z: jnp.sum(f(z) ** 2)  # noqa: E731
    np.testing.assert_allclose(jax.grad(loss(analytic))(z), jax.grad(loss(fd))(z), rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(jax.grad(lambda z: analytic(z)))(z), dkv(np.asarray(z)), rtol=1e-12
    )


@pytest.mark.parametrize("kind", ["jacobian", "pair", "central"])
def test_rules_under_scan_grad_of_vmap_and_in_axes(kind, x64):
    case = CASES[0]  # elementwise, two arguments
    x, y = _f64(case.args())
    f = wrap(case, kind, 2)
    ref = case.reference
    tol = TOL[kind]

    def over_batch(g, axes):
        xs = jnp.stack([x, 2 * x]) if axes[0] == 0 else x
        ys = jnp.stack([y, -y]) if axes[1] == 0 else y
        return lambda a, b: jnp.sum(jax.vmap(g, in_axes=axes)(xs * a, ys * b) ** 2)

    for axes in ((0, None), (None, 0), (0, 0)):
        got = jax.grad(over_batch(f, axes), argnums=(0, 1))(1.5, 0.5)
        _close(got, jax.grad(over_batch(ref, axes), argnums=(0, 1))(1.5, 0.5), tol)

    def rolled(g):
        return lambda x: jax.lax.scan(lambda c, _: (g(c, y), None), x, None, length=3)[0].sum()

    _close(jax.jit(jax.grad(rolled(f)))(x), jax.grad(rolled(ref))(x), tol * 10)


def test_vjp_may_return_a_bare_cotangent_for_one_positional_argument(lowering):
    # issue 12, item 9: `tuple()` of a bare array used to iterate over its first axis
    f = jaxbridge.host(np.sin, vjp=lambda x, ct: np.cos(x) * ct)
    x = jnp.linspace(0.1, 0.9, 4)
    loss = lambda x: f(x).sum()  # noqa: E731
    for g in (jax.grad(loss), jax.jit(jax.grad(loss))):
        np.testing.assert_allclose(g(x), jnp.cos(x), rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(jax.grad(loss))(jnp.stack([x, 2 * x])), jnp.cos(jnp.stack([x, 2 * x])), rtol=1e-6
    )
    # a static argument does not count: one positional array argument
    g = jaxbridge.host(lambda mode, x: x * 3.0, vjp=lambda mode, x, ct: 3.0 * ct)
    np.testing.assert_allclose(jax.grad(lambda x: g("m", x).sum())(x), 3.0)
    # a pytree argument: its cotangent tree, bare
    h = jaxbridge.host(lambda p: p[0] * p[1], vjp=lambda p, ct: (ct * p[1], ct * p[0]))
    da, db = jax.grad(lambda p: h(p).sum())((x, 2 * x))
    np.testing.assert_allclose(da, 2 * x, rtol=1e-6)
    np.testing.assert_allclose(db, x, rtol=1e-6)


def test_vjp_of_several_arguments_must_return_a_tuple():
    f = jaxbridge.host(lambda x, y: x * y, vjp=lambda x, y, ct: ct * y)
    with pytest.raises(Exception) as info:  # noqa: B017 - crosses XLA as text, under grad's jit
        jax.grad(lambda x: f(x, x).sum())(jnp.ones(3))
    assert (
        "`vjp=` of host function 'test_vjp_of_several_arguments_must_return_a_tuple.<locals>."
        "<lambda>' must return a tuple with one cotangent per positional array argument (2 "
        "here, `None` for an integer one); got `ndarray`."
    ) in str(info.value)
    g = jaxbridge.host(lambda x, y: x * y, vjp=lambda x, y, ct: (ct * y,))
    with pytest.raises(Exception, match=r"\(2 here, `None` for an integer one\); got a tuple of 1"):
        jax.grad(lambda x: g(x, x).sum())(jnp.ones(3))
