"""compile: batching, matrices, exactness, Piecewise gradients, size, errors, no retrace."""

import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import jaxbridge.sympy as jbs
from jaxbridge.sympy import _errors

x, y, z = sympy.symbols("x y z")


def test_batching_broadcasts_leading_dimensions():
    f = jbs.compile(sympy.sin(x) * y + z, [x, y, z])
    out = f(jnp.ones((4, 1)), jnp.ones(3), 2.0)
    assert out.shape == (4, 3)
    assert jax.vmap(f, (0, None, None))(jnp.ones(5), 1.0, 1.0).shape == (5,)
    assert jax.vmap(jax.vmap(f, (0, None, None)), (None, 0, None))(
        jnp.ones(2), jnp.ones(3), 0.0
    ).shape == (3, 2)


def test_unbatched_subexpressions_are_computed_once_not_per_batch_element():
    # Inputs are brought to the batch rank, not the batch shape: sin(y) and exp(y) of an
    # unbatched y run on one element, and the result is broadcast where it meets x.
    f = jbs.compile(sympy.sin(y) * sympy.exp(y) * x + y**2, [x, y])
    jaxpr = jax.make_jaxpr(f)(jnp.ones(1000), 0.5).jaxpr
    shapes = {e.primitive.name: e.outvars[0].aval.shape for e in jaxpr.eqns}
    assert shapes["sin"] == shapes["exp"] == (1,)
    np.testing.assert_allclose(
        f(jnp.arange(3.0), 0.5), np.sin(0.5) * np.exp(0.5) * np.arange(3.0) + 0.25, rtol=1e-6
    )
    # Mixed batch shapes through Piecewise (double where), a MatrixSymbol and grad.
    A = sympy.MatrixSymbol("A", 2, 2)
    g = jbs.compile(
        [sympy.Piecewise((sympy.sqrt(x), x > 0), (y, True)), sympy.Trace(A) * y], [x, y, A]
    )
    xs, a = jnp.array([[-1.0], [4.0]]), jnp.broadcast_to(jnp.eye(2), (3, 2, 2))
    p, t = g(xs, jnp.arange(3.0), a)
    assert p.shape == t.shape == (2, 3)
    np.testing.assert_allclose(p, [[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(t, [[0.0, 2.0, 4.0]] * 2)
    grad = jax.grad(lambda v: jnp.sum(g(v, jnp.arange(3.0), a)[0]))(xs)
    np.testing.assert_allclose(grad, [[0.0], [0.75]])


def test_matrix_outputs_get_matrix_dims_last_and_pytrees():
    M = sympy.Matrix([[x, y], [x * y, 1]])
    f = jbs.compile({"m": M, "s": x + y, "a": sympy.Array([x, 2 * x, 3 * x])}, [x, y])
    out = f(jnp.arange(3.0), 2.0)
    assert out["m"].shape == (3, 2, 2)
    assert out["s"].shape == (3,)
    assert out["a"].shape == (3, 3)
    np.testing.assert_allclose(out["m"][2], [[2.0, 2.0], [4.0, 1.0]])


def test_matrix_symbols_and_matrix_operations():
    A = sympy.MatrixSymbol("A", 2, 2)
    v = sympy.symbols("v0:2")
    f = jbs.compile(
        [sympy.Determinant(A), sympy.Inverse(A), sympy.Trace(A), A.T * A, A[0, 1] * v[1]],
        [A, list(v)],
    )
    a = jnp.array([[2.0, 1.0], [0.5, 3.0]])
    det, inv, tr, ata, e = f(a, jnp.array([1.0, 4.0]))
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=1e-6)
    np.testing.assert_allclose(inv, np.linalg.inv(a), rtol=1e-6)
    np.testing.assert_allclose(tr, 5.0)
    np.testing.assert_allclose(ata, a.T @ a, rtol=1e-6)
    np.testing.assert_allclose(e, 4.0)
    g = jax.grad(lambda a: f(a, jnp.ones(2))[0])(a)
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-5)
    batched = f(jnp.stack([a, 2 * a]), jnp.ones(2))
    assert batched[1].shape == (2, 2, 2)


def test_integer_powers_and_rationals_stay_exact():
    f = jbs.compile(x**3 + sympy.Rational(2, 3) * y - x**-2, [x, y])
    assert "_rt.integer_pow(_a0, 3)" in f.source
    assert "_rt.div(_rt.mul(2.0, _a1), 3.0)" in f.source
    assert "power" not in f.source
    with jax.enable_x64(True):
        value = f(jnp.float64(3.0), jnp.float64(1.0))
        assert float(value) == 27.0 + 2.0 / 3.0 - 1.0 / 9.0
    jaxpr = jax.make_jaxpr(f)(1.0, 1.0)
    assert "integer_pow" in str(jaxpr) and " pow " not in str(jaxpr)


def test_dtype_follows_inputs_and_x64():
    f = jbs.compile(x / 3 + y, [x, y])
    assert f(1, 2).dtype == jnp.float32  # integers compute in the default float dtype
    assert f(jnp.float16(1), jnp.float16(2)).dtype == jnp.float16
    with jax.enable_x64(True):
        assert f(1.0, 2.0).dtype == jnp.float64
        assert f(jnp.float32(1), jnp.float32(2)).dtype == jnp.float32


@pytest.mark.parametrize("order", [1, 2])
def test_piecewise_gradients_are_finite_where_the_taken_branch_is_smooth(order):
    expr = sympy.Piecewise((sympy.sqrt(x), x > 0), (sympy.log(-x) * y, x < -1), (x**2 + y, True))
    f = jbs.compile(expr, [x, y])
    grad = jax.grad(f)
    if order == 2:
        grad = jax.grad(grad)
    points = jnp.array([-3.0, -0.5, 0.0, 0.25, 4.0])
    values = jax.vmap(grad, (0, None))(points, 2.0)
    assert np.all(np.isfinite(np.asarray(values)))
    want = {1: [-1 / 3 * 2, -1.0, 0.0, 1.0, 0.25], 2: [-2 / 9, 2.0, 2.0, -2.0, -1 / 32]}[order]
    np.testing.assert_allclose(values, want, rtol=1e-5)
    # Forward mode too.
    _, tangent = jax.jvp(lambda v: f(v, 2.0), (points,), (jnp.ones(5),))
    assert np.all(np.isfinite(np.asarray(tangent)))


def test_piecewise_without_default_is_nan_outside():
    f = jbs.compile(sympy.Piecewise((x, x > 0)), [x])
    assert np.isnan(float(f(-1.0))) and float(f(2.0)) == 2.0


def _deep(n):
    e = x
    for i in range(n):
        e = sympy.sin(e, evaluate=False) * y + sympy.Float(0.5 + i * 1e-4)
    return e


def test_20000_operations_compile_without_recursion_error():
    expr = _deep(6700)  # about 20,000 operations, nested 6,700 deep
    f = jbs.compile(expr, [x, y])
    # Tracing walks the printed assignments, never the expression tree: no recursion either.
    jaxpr = jax.make_jaxpr(f)(0.3, 0.9)
    assert len(jaxpr.eqns) >= 20_000


def test_shared_subexpressions_are_printed_once():
    shared = sympy.exp(sympy.sin(x) * y)
    f = jbs.compile([shared + 1, shared * z, sympy.cos(shared)], [x, y, z])
    assert f.source.count("_rt.exp(") == 1 and f.source.count("_rt.sin(") == 1
    g = jbs.compile([shared + 1, shared * z], [x, y, z], cse=False)
    assert g.source.count("_rt.exp(") == 2


def test_extra_functions_and_unknown_function_error():
    f_ = sympy.Function("f")
    with pytest.raises(ValueError) as info:
        jbs.compile(f_(x) + 1, [x])
    assert str(info.value) == _errors.UNKNOWN_FUNCTION.format(func="f", node="f(x)")
    g = jbs.compile(f_(x) + 1, [x], extra_functions={f_: lambda v: 3 * v})
    assert float(g(2.0)) == 7.0


def test_missing_symbols_error():
    with pytest.raises(ValueError) as info:
        jbs.compile(x + y * z, [x])
    assert str(info.value) == (
        "`jaxbridge.sympy.compile`: the expression uses `y`, `z`, which are not in `args`. "
        "Add them to `args`, or substitute a value with `expr.subs(...)` first."
    )


def test_non_numeric_constant_and_bad_arguments():
    with pytest.raises(ValueError, match="`zoo` is not a numeric constant"):
        jbs.compile(x + sympy.zoo, [x])
    with pytest.raises(TypeError, match="each entry must be a Symbol"):
        jbs.compile(x, [x + 1])
    with pytest.raises(ValueError, match="appears more than once"):
        jbs.compile(x, [x, [x, y]])
    with pytest.raises(ValueError, match='must be None or "symbolic"'):
        jbs.compile(x, [x], derivatives="numeric")


def test_call_time_shape_errors():
    f = jbs.compile(x * y + sum(sympy.symbols("v0:3")), [x, y, list(sympy.symbols("v0:3"))])
    with pytest.raises(ValueError, match="argument `\\[v0, v1, v2\\]` must end in shape \\(3,\\)"):
        f(1.0, 1.0, jnp.ones(4))
    with pytest.raises(ValueError, match="do not broadcast together \\(x: \\(2,\\), y: \\(3,\\)"):
        f(jnp.ones(2), jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeError, match="takes 3 argument"):
        f(1.0, 1.0)


def test_no_retrace_on_second_call():
    traces = []
    f = jbs.compile(sympy.cos(x) * y, [x, y])
    jitted = jax.jit(lambda a, b: (traces.append(1), f(a, b))[1])
    jitted(jnp.ones(3), 2.0)
    jitted(jnp.zeros(3), 3.0)
    assert len(traces) == 1


def test_symbolic_derivatives_every_order():
    f = jbs.compile(sympy.sqrt(x**2 + y**2), [x, y], derivatives="symbolic")
    np.testing.assert_allclose(jax.grad(f)(3.0, 4.0), 0.6)
    np.testing.assert_allclose(jax.hessian(f, argnums=(0, 1))(3.0, 4.0)[0][1], -12 / 125)
    np.testing.assert_allclose(jax.jacfwd(f, argnums=1)(3.0, 4.0), 0.8)
    np.testing.assert_allclose(
        jax.vmap(jax.grad(f))(jnp.array([3.0, 0.0]), jnp.array([4.0, 2.0])), [0.6, 0.0]
    )


def test_symbolic_derivatives_of_a_function_jax_cannot_differentiate():
    # erfinv of a Piecewise of floor: the symbolic tangent is the simplified sympy.diff.
    A = sympy.MatrixSymbol("A", 2, 2)
    f = jbs.compile(sympy.Determinant(A) * x, [A, x], derivatives="symbolic")
    a = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(jax.grad(f)(a, 2.0), [[8.0, -6.0], [-4.0, 2.0]])


def test_missing_sympy_fails_with_the_fix():
    code = (
        "import sys; sys.modules['sympy'] = None\n"
        "try:\n    import jaxbridge.sympy\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _errors.NEEDS_SYMPY


def _chain(n, shared):
    """n steps on x: each step uses the previous value once (a tree) or twice (a DAG)."""
    e = x
    for k in range(n):
        c = sympy.Float(1 + k / n)
        if shared:
            e = sympy.Add(
                sympy.Mul(c, e, e, evaluate=False), sympy.sin(e, evaluate=False), evaluate=False
            )
        else:
            e = sympy.sin(sympy.Mul(c, e, evaluate=False), evaluate=False)
    return e


def test_large_expression_with_shared_values_warns_on_cpu_with_the_fix():
    with pytest.warns(RuntimeWarning, match="xla_cpu_use_fusion_emitters") as record:
        jbs.compile(_chain(1_000, shared=True), [x])
    assert "used more than once" in str(record[0].message)
    assert record[0].filename == __file__  # attributed to the caller's line


def test_large_tree_and_small_shared_expressions_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jbs.compile(_chain(1_500, shared=False), [x])  # 3,000 operations, each used once
        jbs.compile(_chain(100, shared=True), [x])


def test_the_warnings_workaround_is_a_valid_compiler_option():
    f = jbs.compile(_chain(5, shared=True), [x])
    v = jnp.linspace(0.0, 1.0, 8)
    legacy = jax.jit(f, compiler_options={"xla_cpu_use_fusion_emitters": False})
    np.testing.assert_allclose(legacy(v), jax.jit(f)(v), rtol=1e-6)
