"""Every registered host function under jit and eagerly, both lowerings, both strategies."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import CASES, STRATEGIES

import jaxbridge


def assert_tree_close(got, want, rtol=1e-6, atol=1e-6):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_jit_matches_reference(case, strategy, lowering):
    f = jaxbridge.host(case.host_fn, vmap=strategy)
    args = case.args()
    assert_tree_close(jax.jit(f)(*args), case.reference(*args))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_eager_matches_reference(case):
    f = jaxbridge.host(case.host_fn)
    args = case.args()
    got = f(*args)
    assert all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(got))
    assert_tree_close(got, case.reference(*args))


def test_decorator_forms_keep_name_and_doc():
    @jaxbridge.host
    def plain(x):
        """Doc."""
        return x

    @jaxbridge.host(vmap="vectorized")
    def configured(x):
        """Other doc."""
        return x

    wrapped = jaxbridge.host(np.cos, vmap="sequential")
    assert (plain.__name__, plain.__doc__) == ("plain", "Doc.")
    assert (configured.__name__, configured.__doc__) == ("configured", "Other doc.")
    assert wrapped.__name__ == "cos"


def test_host_receives_numpy_read_only(lowering):
    seen = []

    @jaxbridge.host
    def f(x):
        seen.append((type(x), x.flags.writeable, x.dtype))
        return x + 1

    jax.jit(f)(np.ones(3, np.float32)).block_until_ready()
    f(np.ones(3, np.float32))
    # probe, jitted call, eager call
    assert seen == [(np.ndarray, False, np.dtype("float32"))] * 3


def test_host_mutating_its_input_fails_loudly_and_spares_the_caller(lowering):
    @jaxbridge.host
    def f(x):
        x[0] = 100.0
        return x

    x = jax.numpy.ones(3)
    with pytest.raises(Exception, match="read-only"):
        jax.jit(f)(x).block_until_ready()
    with pytest.raises(ValueError, match="read-only"):
        f(x)
    np.testing.assert_array_equal(x, np.ones(3))


def test_static_arguments_pass_through_unchanged():
    class Model:  # unhashable: keyed by identity
        __hash__ = None  # type: ignore[assignment]

        def __init__(self, scale):
            self.scale = scale

    calls = []

    @jaxbridge.host
    def f(model, x, how):
        calls.append((type(model), how))
        return x * model.scale if how == "scale" else x

    m = Model(3.0)
    jf = jax.jit(lambda x: f(m, x, "scale"))  # jax.jit itself cannot take m as an argument
    np.testing.assert_allclose(jf(np.ones(2, np.float32)), [3.0, 3.0])
    np.testing.assert_allclose(f(m, np.ones(2, np.float32), "scale"), [3.0, 3.0])
    np.testing.assert_allclose(jax.jit(lambda x: f(m, x, "keep"))(np.ones(2, np.float32)), [1, 1])
    assert all(t is Model for t, _ in calls)


def test_python_numbers_are_traced_unless_declared_static():
    traces = []

    @jaxbridge.host(static_argnames="k")
    def f(x, k):
        traces.append(type(k))
        return x * k

    g = jax.jit(lambda x, k: f(x, k=k), static_argnums=1)
    np.testing.assert_allclose(g(np.ones(2, np.float32), 2), [2.0, 2.0])
    assert int in traces  # the static int reached the host as a Python int

    h = jaxbridge.host(lambda x, s: x * s)
    np.testing.assert_allclose(jax.jit(h)(np.ones(2, np.float32), 2.0), [2.0, 2.0])


def test_result_declared_or_computed_needs_no_probe():
    probes = []

    def fn(x):
        probes.append(x.shape)
        return x * 2

    declared = jaxbridge.host(fn, result=jax.ShapeDtypeStruct((3,), np.float32))
    computed = jaxbridge.host(fn, result=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype))
    for f in (declared, computed):
        probes.clear()
        np.testing.assert_allclose(jax.jit(f)(np.ones(3, np.float32)), [2, 2, 2])
        assert probes == [(3,)]  # the real call only


def test_probe_runs_once_per_signature():
    probes = []

    @jaxbridge.host
    def f(x):
        probes.append(x.shape)
        return x

    jf = jax.jit(f)
    jf(np.ones(3, np.float32))
    jf(np.ones(3, np.float32))
    jax.jit(lambda x: f(x) + 1)(np.ones(3, np.float32))
    jf(np.ones(4, np.float32))
    # one probe + one real call per signature (3,), then the calls
    assert probes == [(3,), (3,), (3,), (3,), (4,), (4,)]


def test_init_state_is_one_per_thread_across_signatures_and_eager_calls(lowering):
    import threading

    made = []

    def init():
        made.append(threading.get_ident())
        return {"calls": 0}

    @jaxbridge.host(init=init)
    def count(x, *, state):
        state["calls"] += 1
        return x * 0 + state["calls"]

    count(np.ones(2, np.float32))
    jax.jit(count)(np.ones(2, np.float32))
    jax.jit(count)(np.ones(3, np.float32))
    out = jax.jit(jax.vmap(count))(np.ones((2, 2), np.float32))
    assert made == [threading.get_ident()]
    # eager 1, probe + call for (2,), probe + call for (3,), then 2 elements (the vmapped
    # call reuses the probed (2,) signature)
    np.testing.assert_array_equal(out[:, 0], [6, 7])

    other = []
    t = threading.Thread(target=lambda: other.append(float(count(np.ones(1, np.float32))[0])))
    t.start()
    t.join()
    assert len(made) == 2 and other == [1.0]  # a new thread gets its own state


def test_the_lowering_asked_for_is_the_one_used(lowering):
    text = jax.jit(jaxbridge.host(lambda x: x + 1)).lower(np.ones(3, np.float32)).as_text()
    target = {"buffer": "xla_buffer_python_cpu_callback", "pure": "xla_ffi_python_cpu_callback"}
    assert f"custom_call @{target[lowering]}" in text


def test_explicit_lowering_argument_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("JAXBRIDGE_LOWERING", "buffer")
    f = jaxbridge.host(lambda x: x + 1, lowering="pure")
    text = jax.jit(f).lower(np.ones(3, np.float32)).as_text()
    assert "custom_call @xla_ffi_python_cpu_callback" in text


def test_result_accepts_anything_with_shape_and_dtype(lowering):
    # issue 12, item 6: as pure_callback's result_shape_dtypes
    calls = []

    def fn(x):
        calls.append(x.shape)
        return np.sin(x)

    x = jnp.linspace(0.0, 1.0, 3)
    specs = {
        "ShapeDtypeStruct": jax.ShapeDtypeStruct((3,), jnp.float32),
        "ShapedArray": jax.core.ShapedArray((3,), jnp.float32),
        "numpy array": np.zeros(3, np.float32),
        "jax array": jnp.zeros(3, jnp.float32),
    }
    for name, spec in specs.items():
        got = jax.jit(jaxbridge.host(fn, result=spec))(x)
        np.testing.assert_allclose(got, np.sin(np.asarray(x)), rtol=1e-6, err_msg=name)
    assert calls == [(3,)] * len(specs)  # only the real calls: no probe ran
    # NumPy scalars in a pytree, and a callable returning arrays
    tree = jaxbridge.host(lambda x: {"a": x[0]}, result={"a": np.float32(0.0)})
    np.testing.assert_allclose(jax.jit(tree)(x)["a"], 0.0)
    computed = jaxbridge.host(lambda x: x * 2, result=lambda x: np.empty(x.shape, np.float32))
    np.testing.assert_allclose(jax.jit(computed)(x), 2 * np.asarray(x))


def test_result_may_be_the_traced_argument_itself(lowering):
    # the most common pure_callback idiom: host(np.sin, result=x)(x), x a tracer
    probes = []

    def sin(x):
        probes.append(1)
        return np.sin(x)

    @jax.jit
    def f(x):
        both = jaxbridge.host(lambda x: (sin(x), x), result=(x, x))(x)
        return jaxbridge.host(sin, result=x)(x) + both[0]

    x = jnp.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(f(x), 2 * np.sin(np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(f)(jnp.stack([x, x])), 2 * np.sin([x, x]), rtol=1e-6)
    with jax.checking_leaks():  # the wrapper keeps only shape and dtype, no tracer
        jax.jit(lambda x: jaxbridge.host(np.cos, result=x)(x))(x)
    # a float64 NumPy spec with x64 off is canonicalised, as JAX does
    g = jaxbridge.host(np.sin, result=np.zeros(4))
    assert jax.jit(g)(x).dtype == jnp.float32


def test_result_spec_errors_name_the_leaf():
    with pytest.raises(TypeError, match=r"got `str` at `\['a'\]`"):
        jaxbridge.host(np.sin, result={"a": "f32[3]"})
