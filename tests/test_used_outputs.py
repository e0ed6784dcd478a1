"""Unused outputs cost nothing: the host-call primitive's dead-code rule.

A `jit`ted program that uses only some outputs of a host call runs a call restricted to those:
XLA makes buffers for them alone, nothing is copied for the others, and a host function wrapped
with `jaxbridge.host(used_outputs=True)` is told which outputs are used (a pytree of bools with
the result's structure, or None when all are) so it computes nothing for the rest. Checked
under jit, vmap (every strategy), grad, scan, cond, while_loop, sharded jit and io calls, against
the same computation on all outputs; `Computed` counts what the host function computed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxbridge
from jaxbridge._base import AbstractBatching, AbstractCall

ALL = {"sin": True, "cos": True, "sq": True}


class Computed:
    """The `used_outputs` each call received and how many times each output was computed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.flags: list[Any] = []
        self.counts = {k: 0 for k in ALL}

    def record(self, used_outputs):
        with self.lock:
            self.flags.append(used_outputs)
            for k in ALL:
                if used_outputs is None or used_outputs[k]:
                    self.counts[k] += 1

    def reset(self):
        self.flags.clear()
        self.counts = {k: 0 for k in ALL}


def trig(record: Computed, **options):
    """A host function of three outputs that computes only those it is told are used (its
    result declared, so no probe call computes them all)."""
    options.setdefault("result", lambda x: {k: jax.ShapeDtypeStruct(x.shape, x.dtype) for k in ALL})

    @jaxbridge.host(used_outputs=True, **options)
    def f(x, used_outputs=None):
        record.record(used_outputs)
        want = lambda k: used_outputs is None or used_outputs[k]  # noqa: E731
        return {
            "sin": np.sin(x) if want("sin") else None,
            "cos": np.cos(x) if want("cos") else None,
            "sq": x * x if want("sq") else None,
        }

    return f


def reference(x):
    return {"sin": jnp.sin(x), "cos": jnp.cos(x), "sq": x * x}


X = jnp.linspace(0.1, 1.0, 5)


def test_jit_tells_the_host_function_which_outputs_are_used(lowering):
    seen = Computed()
    f = trig(seen)
    np.testing.assert_allclose(jax.jit(lambda x: f(x)["cos"])(X), jnp.cos(X), rtol=1e-6)
    assert seen.flags[-1] == {"sin": False, "cos": True, "sq": False}
    seen.reset()
    out = jax.jit(lambda x: f(x)["sin"] + f(x)["sq"])(X)
    np.testing.assert_allclose(out, jnp.sin(X) + X * X, rtol=1e-6)
    # Two calls of one signature: JAX's CSE does not merge callbacks, so each is told.
    assert all(u == {"sin": u["sin"], "cos": False, "sq": u["sq"]} for u in seen.flags)
    assert seen.counts["cos"] == 0
    seen.reset()
    full = jax.jit(f)(X)  # every output used: None, as in the probe and eager calls
    assert seen.flags == [None]
    for k, v in reference(X).items():
        np.testing.assert_allclose(full[k], v, rtol=1e-6)


def test_no_output_used_removes_a_pure_call():
    seen = Computed()
    f = trig(seen)
    jax.block_until_ready(jax.jit(lambda x: (f(x), x + 1)[1])(X))
    assert seen.flags == []


def test_the_probe_and_eager_calls_receive_none():
    seen = Computed()
    f = trig(seen)
    out = f(np.asarray(X))  # eager: the function's own return value
    np.testing.assert_allclose(out["sq"], X * X, rtol=1e-6)
    assert seen.flags == [None]
    seen.reset()
    probed = trig(seen, result=None)
    jax.jit(lambda x: probed(x)["sin"])(X[:2])  # probed (every output), then called
    assert seen.flags == [None, {"sin": True, "cos": False, "sq": False}]


def test_a_host_function_without_the_option_is_unchanged():
    """It computes every output; only the used ones are copied, and the values are right."""
    calls = []

    @jaxbridge.host
    def g(x):
        calls.append(x.shape)
        return np.sin(x), np.cos(x), x * x

    np.testing.assert_allclose(jax.jit(lambda x: g(x)[1])(X), jnp.cos(X), rtol=1e-6)
    ys = jax.jit(jax.vmap(lambda x: g(x)[2]))(jnp.stack([X, 2 * X]))
    np.testing.assert_allclose(ys, jnp.stack([X * X, 4 * X * X]), rtol=1e-6)


@pytest.mark.parametrize(
    "vmap",
    ["sequential", "vectorized", jaxbridge.Threads(2), jaxbridge.Threads(2, vectorized=True)],
)
@pytest.mark.parametrize("in_axes", [0, (0, None), (None, 0)])
def test_vmap_one_host_call_told_the_used_outputs(vmap, in_axes):
    seen = Computed()

    def spec(x, y):
        return {
            k: jax.ShapeDtypeStruct(np.broadcast_shapes(x.shape, y.shape), x.dtype) for k in ALL
        }

    @jaxbridge.host(used_outputs=True, vmap=vmap, result=spec)
    def f(x, y, used_outputs=None):
        seen.record(used_outputs)
        want = lambda k: used_outputs is None or used_outputs[k]  # noqa: E731
        return {
            "sin": np.sin(x + y) if want("sin") else None,
            "cos": np.cos(x + y) if want("cos") else None,
            "sq": (x + y) ** 2 if want("sq") else None,
        }

    xs, ys = jnp.stack([X, 2 * X, 3 * X]), jnp.stack([X, X, -X])
    args = (xs, ys) if in_axes == 0 else (xs, X) if in_axes == (0, None) else (X, ys)
    out = jax.jit(jax.vmap(lambda x, y: f(x, y)["sq"], in_axes=in_axes))(*args)
    ref = jax.vmap(lambda x, y: (x + y) ** 2, in_axes=in_axes)(*args)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    assert seen.counts["sin"] == seen.counts["cos"] == 0
    assert {"sin": False, "cos": False, "sq": True} in seen.flags


def test_nested_vmap_and_a_dict_of_used_outputs():
    seen = Computed()
    f = trig(seen, vmap="vectorized")
    xs = jnp.arange(12.0).reshape(2, 2, 3) / 10
    out = jax.jit(jax.vmap(jax.vmap(lambda x: f(x)["cos"])))(xs)
    np.testing.assert_allclose(out, jnp.cos(xs), rtol=1e-6)
    assert seen.flags[-1] == {"sin": False, "cos": True, "sq": False}


@pytest.mark.parametrize("rule", ["jacobian", "finite_differences"])
def test_grad_uses_only_what_it_needs(rule):
    seen = Computed()

    def jac(x, used_outputs=None):
        del used_outputs
        return {"sin": np.diag(np.cos(x)), "cos": np.diag(-np.sin(x)), "sq": np.diag(2 * x)}

    options = (
        {"jacobian": jac}
        if rule == "jacobian"
        else {"derivative": jaxbridge.FiniteDifferences(), "vmap": "vectorized"}
    )
    with jax.enable_x64(True):
        x = jnp.linspace(0.1, 1.0, 4)
        f = trig(seen, **options)
        loss = lambda x: jnp.sum(f(x)["sin"])  # noqa: E731
        value, grad = jax.jit(jax.value_and_grad(loss))(x)
        np.testing.assert_allclose(value, jnp.sum(jnp.sin(x)), rtol=1e-12)
        np.testing.assert_allclose(grad, jnp.cos(x), rtol=1e-7 if rule == "jacobian" else 1e-6)
        # The primal call computes only "sin". Finite differences in reverse mode difference
        # every output (their Jacobian is one matrix), the Jacobian rule computes none.
        assert seen.flags[0] == {"sin": True, "cos": False, "sq": False}
        if rule == "jacobian":
            assert seen.flags == [seen.flags[0]]
        seen.reset()
        jvp_out = jax.jit(lambda x, t: jax.jvp(lambda x: f(x)["sq"], (x,), (t,)))(x, x)
        np.testing.assert_allclose(jvp_out[1], 2 * x * x, rtol=1e-6)
        # Forward mode: the primal call and (finite differences) the differenced points
        # compute "sq" alone.
        only_sq = {"sin": False, "cos": False, "sq": True}
        assert seen.flags == [only_sq] * (1 if rule == "jacobian" else 2), seen.flags


def test_grad_of_grad_through_scan_differentiates_a_restricted_call():
    """Scan's partial evaluation runs dead-code elimination on the first derivative's body;
    the second derivative then meets the restricted primitive and differentiates it."""
    seen = Computed()
    with jax.enable_x64(True):
        f = trig(seen, derivative=jaxbridge.FiniteDifferences(), vmap="vectorized")

        def loss(x):
            def body(c, _):
                return c + jnp.sum(f(x * c)["sin"]), None

            return jax.lax.scan(body, 1.0, None, length=2)[0]

        def ref(x):
            c = 1.0
            for _ in range(2):
                c = c + jnp.sum(jnp.sin(x * c))
            return c

        x = jnp.array([0.3, 0.5])
        np.testing.assert_allclose(jax.jit(jax.grad(loss))(x), jax.grad(ref)(x), rtol=1e-6)
        hess = jax.jit(jax.hessian(loss))(x)
        np.testing.assert_allclose(hess, jax.hessian(ref)(x), rtol=1e-3, atol=1e-4)
        assert {"sin": True, "cos": False, "sq": False} in seen.flags


def test_scan_and_cond_bodies_use_only_some_outputs():
    seen = Computed()
    f = trig(seen)

    def step(c, x):
        return c + f(x)["cos"], f(x)["sq"]

    carry, ys = jax.jit(lambda xs: jax.lax.scan(step, jnp.zeros(5), xs))(jnp.stack([X, 2 * X]))
    np.testing.assert_allclose(carry, jnp.cos(X) + jnp.cos(2 * X), rtol=1e-6)
    np.testing.assert_allclose(ys, jnp.stack([X * X, 4 * X * X]), rtol=1e-6)
    assert seen.counts["sin"] == 0
    seen.reset()
    branch = lambda p, x: jax.lax.cond(p, lambda x: f(x)["sin"], lambda x: -x, x)  # noqa: E731
    np.testing.assert_allclose(jax.jit(branch)(True, X), jnp.sin(X), rtol=1e-6)
    assert seen.flags[-1] == {"sin": True, "cos": False, "sq": False}


def test_while_loop_bodies_compute_every_output():
    """JAX has no dead-code rule for `while_loop`, so its body's calls are told nothing."""
    seen = Computed()
    f = trig(seen)
    body = lambda c: (c[0] + 1, c[1] + f(c[1])["sq"])  # noqa: E731
    out = jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] < 2, body, (0, x))[1])(X)
    np.testing.assert_allclose(out, X + X * X + (X + X * X) ** 2, rtol=1e-5)
    assert seen.flags == [None, None]


@pytest.mark.parametrize("kind", ["io", "ordered"])
def test_an_io_call_runs_even_when_no_output_is_used(kind):
    seen = Computed()
    f = trig(seen, result=reference(X), **{kind: True})
    jax.block_until_ready(jax.jit(lambda x: (f(x), x + 1)[1])(X))
    # An io call is never removed; an ordered one computes every output (no dead-code rule).
    expected = {"sin": False, "cos": False, "sq": False} if kind == "io" else None
    assert seen.flags == [expected]
    seen.reset()
    np.testing.assert_allclose(jax.jit(lambda x: f(x)["cos"])(X), jnp.cos(X), rtol=1e-6)
    assert seen.flags == [{"sin": False, "cos": True, "sq": False} if kind == "io" else None]


@pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 devices")
def test_sharded_jit_calls_per_device_with_only_the_used_outputs():
    seen = Computed()
    f = trig(seen, vmap="vectorized")
    mesh = jax.make_mesh((4,), ("d",))
    xs = jax.device_put(jnp.arange(24.0).reshape(8, 3) / 10, NamedSharding(mesh, P("d")))
    out = jax.jit(jax.vmap(lambda x: f(x)["cos"]))(xs)
    np.testing.assert_allclose(out, jnp.cos(xs), rtol=1e-6)
    assert len(seen.flags) == 4  # one call per device, each told the same
    assert all(u == {"sin": False, "cos": True, "sq": False} for u in seen.flags)


def test_processes_workers_are_told_too():
    # The workers' records stay in the workers: a worker asked for "sin" raises instead.
    @jaxbridge.host(used_outputs=True, vmap=jaxbridge.Processes(2))
    def f(x, used_outputs=None):
        want = lambda k: used_outputs is None or used_outputs[k]  # noqa: E731
        if used_outputs is not None and want("sin"):
            raise AssertionError("sin is not used, but the worker was asked for it")
        return {"sin": np.sin(x) if want("sin") else None, "sq": x * x if want("sq") else None}

    xs = jnp.stack([X, 2 * X, 3 * X, 4 * X])
    out = jax.jit(jax.vmap(lambda x: f(x)["sq"]))(xs)
    np.testing.assert_allclose(out, xs * xs, rtol=1e-6)


class Positional(AbstractBatching):
    """A strategy written before the dead-code rule: it writes every output by position."""

    name = "positional"

    def __init__(self):
        self.outs_seen: list[list[Any]] = []

    def run(
        self,
        call: AbstractCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[Any],
    ) -> None:
        self.outs_seen.append([None if o is None else o.shape for o in outs])
        (x,) = ins
        for o, v in zip(outs, (np.sin(x), np.cos(x), x * x)):
            o[...] = v


def test_a_strategy_that_does_not_handle_unused_outputs_gets_scratch_arrays():
    strategy = Positional()

    @jaxbridge.host(vmap=strategy)
    def g(x):
        return np.sin(x), np.cos(x), x * x

    xs = jnp.stack([X, 2 * X])
    np.testing.assert_allclose(jax.jit(jax.vmap(lambda x: g(x)[2]))(xs), xs * xs, rtol=1e-6)
    assert strategy.outs_seen == [[(2, 5), (2, 5), (2, 5)]]


def test_used_outputs_must_be_a_bool():
    with pytest.raises(TypeError) as e:
        jaxbridge.host(np.sin, used_outputs="yes")  # pyright: ignore[reportCallIssue, reportArgumentType]
    assert str(e.value) == (
        "`jaxbridge.host(used_outputs=...)` must be True (the host function takes a keyword "
        "argument `used_outputs` and computes only the outputs it flags) or False; got `str`."
    )


def test_a_wrong_used_output_is_still_checked():
    spec = {
        "a": jax.ShapeDtypeStruct((3,), jnp.float32),
        "b": jax.ShapeDtypeStruct((3,), jnp.float32),
    }

    @jaxbridge.host(used_outputs=True, result=spec)
    def f(x, used_outputs=None):
        return {"a": x, "b": np.zeros(7, np.float32)}

    with pytest.raises(Exception) as e:
        jax.jit(lambda x: f(x)["b"])(jnp.ones(3)).block_until_ready()
    assert "returned a wrong array at `['b']`: expected f32[3], got f32[7]." in str(e.value)


def test_a_jvp_vjp_pair_under_a_partly_used_result():
    """The tangent is a linear call of the `jvp=` host function: restricted to the used
    outputs too, and still transposed by `vjp=`."""

    def jvp(x, t):
        return np.cos(x) * t, 2 * x * t

    def vjp(x, ct):
        ct_sin, ct_sq = ct
        return (np.cos(x) * ct_sin + 2 * x * ct_sq,)

    f = jaxbridge.host(lambda x: (np.sin(x), x * x), jvp=jvp, vjp=vjp)
    with jax.enable_x64(True):
        x = jnp.linspace(0.1, 1.0, 4)
        t = jnp.ones(4)
        _, tangent = jax.jit(lambda x, t: jax.jvp(lambda x: f(x)[1], (x,), (t,)))(x, t)
        np.testing.assert_allclose(tangent, 2 * x, rtol=1e-12)
        grad = jax.jit(jax.grad(lambda x: jnp.sum(f(x)[0])))(x)
        np.testing.assert_allclose(grad, jnp.cos(x), rtol=1e-12)
        hvp = jax.jit(jax.jacfwd(lambda x: f(x)[0]))(x)
        np.testing.assert_allclose(hvp, jnp.diag(jnp.cos(x)), rtol=1e-12)
