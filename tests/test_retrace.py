"""A second call with the same signature neither retraces nor probes again."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge


def _counting(**options):
    calls = []

    def fn(x):
        calls.append(x.shape)
        return np.sin(x)

    return jaxbridge.host(fn, **options), calls


def test_no_retrace_on_second_call():
    f, calls = _counting()
    traces = []

    @jax.jit
    def g(x):
        traces.append(1)
        return f(x)

    x = jnp.ones(3)
    g(x)
    g(x + 1)
    jax.vmap(g)(jnp.ones((2, 3)))
    jax.vmap(g)(jnp.ones((2, 3)))
    assert len(traces) == 1  # vmap of a jitted function reuses its jaxpr
    assert calls.count((3,)) == 1 + 2 + 2 * 2  # one probe, two calls, two 2-element batches


def test_no_retrace_with_each_derivative_rule():
    for options in (
        dict(jacobian=lambda x: np.diag(np.cos(x))),
        dict(jvp=lambda x, t: np.cos(x) * t, vjp=lambda x, ct: (np.cos(x) * ct,)),
        dict(vmap="vectorized", derivative=jaxbridge.FiniteDifferences()),
    ):
        f, calls = _counting(**options)
        traces = []

        @jax.jit
        def g(x, f=f, traces=traces):
            traces.append(1)
            return jax.grad(lambda x: f(x).sum())(x)

        g(jnp.ones(3))
        g(jnp.zeros(3))
        assert len(traces) == 1, options


def test_the_signature_cache_is_shared_across_jits():
    f, calls = _counting()
    jax.jit(f)(jnp.ones(3))
    jax.jit(lambda x: f(x) * 2)(jnp.ones(3))
    assert calls.count((3,)) == 1 + 2  # a single probe for both programs
