"""Port of JAX's callback tests: differentiating host calls.

JAX's callbacks have no derivatives: `pure_callback` raises ValueError under `grad`, and
`io_callback` raises ValueError under `jvp`, `linearize` and `linear_transpose`. A jaxbridge
host function without a rule raises ValueError too, naming what to pass (issue 12, item 8);
with a rule (`jvp=`/`vjp=`, `jacobian=`, `derivative=`) it is differentiable in every mode.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxbridge

F32 = jnp.float32
NO_RULE = "needs a derivative rule"


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_cannot_take_grad_without_a_rule(mode):
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        jax.jit(jax.grad(lambda x: jax.pure_callback(np.sin, x, x)))(2.0)
    f = mode.host(np.sin, result=_like)
    with pytest.raises(ValueError, match=NO_RULE) as info:
        jax.jit(jax.grad(f))(2.0)
    assert "`jacobian=`" in str(info.value)  # names the fix


@pytest.mark.parametrize("transform", ["jvp", "linearize", "vjp"])
def test_io_style_derivatives_without_a_rule(mode, transform):
    """JAX's io_callback cases (`jvp`, `linearize`), and `vjp` beside them."""
    f = mode.host(lambda x: x, result=jax.ShapeDtypeStruct((), F32))
    run = {
        "jvp": lambda: jax.jvp(f, (0.0,), (1.0,)),
        "linearize": lambda: jax.linearize(f, 0.0),
        "vjp": lambda: jax.vjp(f, 0.0)[1](1.0),
    }[transform]
    with pytest.raises(ValueError, match=NO_RULE):
        run()


def test_linear_transpose_without_a_rule(mode):
    """JAX: "IO callbacks do not support transpose." (ValueError). A host function is not
    known to be linear, so jaxbridge must refuse too, with an error that names it."""
    x = jnp.array(1.0)
    f = mode.host(lambda x: x, result=_like)
    with pytest.raises(ValueError, match="<lambda>"):
        jax.linear_transpose(f, x)(x)


def test_grad_through_a_jax_custom_jvp_around_host_calls(mode):
    """JAX's case: `jax.custom_jvp` whose primal and tangent are both host calls."""
    sin_host = mode.host(np.sin, result=_like)
    cos_host = mode.host(np.cos, result=_like)

    @jax.custom_jvp
    def sin(x):
        return sin_host(x)

    @sin.defjvp
    def _sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return sin(x), cos_host(x) * t

    out = jax.jit(jax.grad(sin))(2.0)
    np.testing.assert_allclose(out, jnp.cos(2.0), rtol=1e-6)


def test_grad_with_jaxbridge_rules(mode):
    """The same function with jaxbridge's own rules, in every mode."""
    x = jnp.float32(2.0)
    pair = mode.host(
        np.sin, result=_like, jvp=lambda x, t: np.cos(x) * t, vjp=lambda x, ct: (np.cos(x) * ct,)
    )
    jac = mode.host(np.sin, result=_like, jacobian=np.cos)
    for f in (pair, jac):
        np.testing.assert_allclose(jax.jit(jax.grad(f))(x), jnp.cos(x), rtol=1e-6)
        np.testing.assert_allclose(
            jax.jvp(f, (x,), (jnp.float32(3.0),))[1], 3 * jnp.cos(x), rtol=1e-6
        )


def test_vjp_may_return_a_bare_array_for_one_argument(mode):
    """Issue 12, item 9: `vjp=` of a function of one argument may return its cotangent bare."""
    f = mode.host(np.sin, result=_like, vjp=lambda x, ct: np.cos(x) * ct)
    np.testing.assert_allclose(jax.jit(jax.grad(f))(2.0), np.cos(np.float32(2.0)), rtol=1e-6)
    xs = jnp.arange(3.0)
    np.testing.assert_allclose(
        jax.jit(jax.vmap(jax.grad(f)))(xs), np.cos(np.arange(3.0, dtype=np.float32)), rtol=1e-6
    )


def test_vjp_of_two_arguments_returning_one_cotangent_says_a_tuple_is_expected(mode):
    f = mode.host(
        lambda x, y: x * y,
        result=jax.ShapeDtypeStruct((), F32),
        vjp=lambda x, y, ct: ct * y,  # wrong: one cotangent per positional argument
    )
    with pytest.raises(Exception, match=r"tuple with one cotangent per positional"):
        jax.block_until_ready(jax.jit(jax.grad(f))(2.0, 3.0))


def test_check_grads_in_float64(x64):
    f = jaxbridge.host(
        lambda x, y: np.sin(x) * y,
        jvp=lambda x, y, tx, ty: np.cos(x) * y * tx + np.sin(x) * ty,
        vjp=lambda x, y, ct: (np.cos(x) * y * ct, np.sin(x) * ct),
    )
    check_grads(f, (jnp.arange(3.0), jnp.full(3, 0.5)), order=1, modes=("fwd", "rev"))


def test_cannot_use_an_io_call_in_checkpoint():
    """As JAX: effects are not supported in partial evaluation of `checkpoint`."""
    seen = jaxbridge.host(lambda y: y, ordered=True, result=jax.ShapeDtypeStruct((), F32))

    @jax.grad
    @jax.checkpoint
    def f(x, y):
        seen(y)
        return x

    with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval"):
        f(2.0, 3.0)


def test_cannot_use_an_unordered_io_call_in_checkpoint():
    seen = jaxbridge.host(lambda y: y, io=True, result=jax.ShapeDtypeStruct((), F32))

    @jax.grad
    @jax.checkpoint
    def f(x, y):
        seen(y)
        return x

    with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval"):
        f(2.0, 3.0)
