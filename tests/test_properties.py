"""Property-based tests: random pytrees, dtypes, shapes and transformation stacks.

Every example is compared with the same computation written in plain `jax.numpy`. Hypothesis
runs derandomized (a fixed seed, no example database), so a run is reproducible and the default
profile stays under about a minute on 2 cores. `JAXBRIDGE_HYPOTHESIS=ci-large` runs ten times
more examples and adds `jaxbridge.Ray` to the batching strategies.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import EXECUTORS, STRATEGIES, make_strategy
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from jax import lax

import jaxbridge

PROFILE = os.environ.get("JAXBRIDGE_HYPOTHESIS", "default")
if PROFILE not in ("default", "ci-large"):
    raise ValueError(f"JAXBRIDGE_HYPOTHESIS must be 'default' or 'ci-large'; got {PROFILE!r}.")
LARGE = PROFILE == "ci-large"
SCALE = 10 if LARGE else 1

BASE = settings(
    derandomize=True,  # a fixed seed: the same examples on every run
    database=None,
    deadline=None,  # the first example of a kind compiles: no per-example time limit
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def examples(n: int) -> Any:
    """`n` examples (ten times more in the large profile), under a matching time limit."""
    limit = pytest.mark.timeout(300 * SCALE)

    def decorate(test):
        return limit(settings(BASE, max_examples=n * SCALE)(test))

    return decorate


# --- batching strategies ------------------------------------------------------------------


def _strategy_names() -> list[str]:
    names = [*STRATEGIES, *EXECUTORS]
    if LARGE:
        try:
            import ray  # noqa: F401

            names += ["ray"]
        except ImportError:
            pass
    return names


STRATEGY_NAMES = _strategy_names()


def make_vmap(name: str) -> Any:
    """A `vmap=` value; executors of the same size share their pools across examples."""
    if name != "ray":
        return make_strategy(name, chunk_size=2 if name.startswith("threads") else None)
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    return jaxbridge.Ray(num_workers=2)


def is_vectorized(name: str) -> bool:
    """Whether the host function sees a leading batch dimension under vmap."""
    return name == "vectorized" or name.endswith("-vec")


strategies = st.sampled_from(STRATEGY_NAMES)
lowerings = st.sampled_from(["buffer", "pure"])

# --- random pytrees of arrays --------------------------------------------------------------


class Pair(NamedTuple):
    first: Any
    second: Any


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A leaf to build: not a pytree node, so empty tuples stay empty containers."""

    shape: tuple[int, ...]
    dtype: str = "float64"

    def value(self, rng: np.random.Generator) -> np.ndarray:
        dtype, shape = np.dtype(self.dtype), self.shape
        if dtype.kind == "b":
            return rng.integers(0, 2, shape).astype(bool)
        if dtype.kind in "iu":
            return rng.integers(0, 5, shape).astype(dtype)
        if dtype.kind == "c":
            return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
        return rng.uniform(-1, 1, shape).astype(dtype)


DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]
DTYPES += ["complex64", "complex128"]
SHAPES = [(), (0,), (1,), (3,), (2, 3), (3, 0), (1, 2, 1)]


def _leaf_spec():
    return st.builds(Leaf, st.sampled_from(SHAPES), st.sampled_from(DTYPES))


def _tree(leaf: st.SearchStrategy, max_leaves: int = 5) -> st.SearchStrategy:
    """Nested dicts, tuples, lists, NamedTuples and empty containers of `leaf`."""
    empty = st.sampled_from([(), [], {}, Pair((), {})])

    def extend(children):
        return st.one_of(
            st.lists(children, max_size=3).map(tuple),
            st.lists(children, max_size=3),
            st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
            st.tuples(children, children).map(lambda p: Pair(*p)),
        )

    return st.recursive(st.one_of(leaf, empty), extend, max_leaves=max_leaves)


def _tol(dtype: Any) -> float:
    return {2: 2e-3, 4: 2e-6, 8: 1e-12}.get(
        np.dtype(dtype).itemsize // (2 if np.dtype(dtype).kind == "c" else 1), 0.0
    )


def assert_trees_equal(got: Any, want: Any, tol: float | None = None) -> None:
    """Same structure, dtypes and shapes; values equal within the dtype's tolerance."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        t = _tol(w.dtype) if tol is None else tol
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=t, atol=t)
        else:
            np.testing.assert_array_equal(g, w)


def _op(xp: Any, x: Any, k: int, mode: str) -> Any:
    """Elementwise per dtype kind, written once for NumPy and for jax.numpy."""
    kind = np.dtype(x.dtype).kind
    if kind == "b":
        return xp.logical_not(x) if mode == "flip" else xp.logical_xor(x, x)
    if mode == "flip":
        return x * k - x
    return x * x + x * k


def host_op(tree, k, mode):
    return jax.tree_util.tree_map(lambda x: _op(np, np.asarray(x), k, mode), tree)


def jnp_op(tree, k, mode):
    return jax.tree_util.tree_map(lambda x: _op(jnp, jnp.asarray(x), k, mode), tree)


@examples(40)
@given(
    spec=_tree(_leaf_spec()),
    k=st.integers(1, 3),
    mode=st.sampled_from(["flip", "square"]),
    where=st.sampled_from(["eager", "jit", "jit-vmap"]),
    strategy=strategies,
    lowering=lowerings,
    x64=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_pytrees_of_every_dtype_and_shape_round_trip(
    spec, k, mode, where, strategy, lowering, x64, seed
):
    """Values, dtypes, shapes and structure match jax.numpy for any pytree and static args."""
    rng = np.random.default_rng(seed)
    with jax.enable_x64(x64):
        tree = jax.tree_util.tree_map(lambda s: jnp.asarray(s.value(rng)), spec)
        f = jaxbridge.host(host_op, static_argnums=1, vmap=make_vmap(strategy), lowering=lowering)
        if where == "eager":
            got, want = f(tree, k, mode), jnp_op(tree, k, mode)
        elif where == "jit":
            g = jax.jit(f, static_argnums=(1, 2))
            got, want = g(tree, k, mode), jnp_op(tree, k, mode)
        else:
            stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x, x[...]]), tree)
            assume(jax.tree_util.tree_leaves(stacked))  # vmap needs something to batch
            g = jax.jit(jax.vmap(lambda t: f(t, k, mode)))
            got, want = g(stacked), jax.vmap(lambda t: jnp_op(t, k, mode))(stacked)
        assert_trees_equal(got, want)


# --- vmap: random in_axes and out_axes, nested ----------------------------------------------


def _core_fn(xp: Any, nd: int) -> Any:
    """(x, y) of one core shape -> {"e": elementwise, "r": reduction over the core}."""

    def fn(x, y):
        axes = tuple(range(x.ndim - nd, x.ndim))
        return {"e": xp.sin(x) * y + x, "r": xp.sum(x * y, axis=axes)}

    return fn


@st.composite
def vmap_stacks(draw):
    core = draw(st.sampled_from([(), (2,), (3,), (2, 2)]))
    depth = draw(st.integers(1, 3))
    shapes = [list(core), list(core)]
    e_nd, r_nd = len(core), 0
    levels = []
    for _ in range(depth):
        n = draw(st.sampled_from([1, 2, 3, 0] if depth == 1 else [1, 2, 3]))
        axes = [draw(st.one_of(st.none(), st.integers(0, len(s)))) for s in shapes]
        if all(a is None for a in axes):
            axes[draw(st.integers(0, 1))] = 0
            axes = [0 if a is not None else None for a in axes]  # keep one, at 0
        for s, a in zip(shapes, axes):
            if a is not None:
                s.insert(a, n)
        out = {
            "e": draw(st.integers(-(e_nd + 1), e_nd)),
            "r": draw(st.integers(-(r_nd + 1), r_nd)),
        }
        e_nd, r_nd = e_nd + 1, r_nd + 1
        levels.append((tuple(axes), out))
    return core, [tuple(s) for s in shapes], levels


@examples(20)
@given(
    stack=vmap_stacks(),
    strategy=strategies,
    lowering=lowerings,
    jit=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_nested_vmap_with_random_axes_matches_jax_numpy(stack, strategy, lowering, jit, seed):
    core, shapes, levels = stack
    nd = len(core)
    rng = np.random.default_rng(seed)
    args = [jnp.asarray(rng.normal(size=s), jnp.float32) for s in shapes]
    seen = []

    def fn(x, y):
        # Unbatched shapes in a loop; one leading batch dimension when vectorized (the probe
        # at trace time sees unbatched shapes either way).
        ndims = (nd, nd + 1) if is_vectorized(strategy) else (nd,)
        seen.append(all(v.ndim in ndims and v.shape[v.ndim - nd :] == core for v in (x, y)))
        return _core_fn(np, nd)(x, y)

    f = jaxbridge.host(fn, vmap=make_vmap(strategy), lowering=lowering)
    g, ref = f, _core_fn(jnp, nd)
    for axes, out in levels:
        g = jax.vmap(g, in_axes=axes, out_axes=out)
        ref = jax.vmap(ref, in_axes=axes, out_axes=out)
    if jit:
        g = jax.jit(g)
    assert_trees_equal(g(*args), ref(*args), tol=1e-5)
    if "processes" not in strategy and "ray" not in strategy:  # workers have their own `seen`
        assert all(seen)


# --- derivative rules of every kind, under random transformation stacks ----------------------


def _flat(x: np.ndarray, nd: int) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    lead, core = x.shape[: x.ndim - nd], x.shape[x.ndim - nd :]
    return x.reshape(lead + (math.prod(core),)), lead, core


def f_np(x, nd):
    """sin(x) * |x|² + x over the core; a leading batch is kept (vectorized strategies)."""
    xf, lead, core = _flat(np.asarray(x), nd)
    s = np.sum(xf**2, axis=-1, keepdims=True)
    return (np.sin(xf) * s + xf).reshape(lead + core)


def f_jnp(x):
    return jnp.sin(x) * jnp.sum(x**2) + x


def jac_np(x, nd):
    """d f_i / d x_j = δij (cos(xi) s + 1) + 2 sin(xi) xj, in jax.jacfwd's layout."""
    xf, lead, core = _flat(np.asarray(x), nd)
    n = xf.shape[-1]
    s = np.sum(xf**2, axis=-1)[..., None, None]
    eye = np.eye(n, dtype=xf.dtype)
    j = eye * (np.cos(xf)[..., :, None] * s + 1) + 2 * np.sin(xf)[..., :, None] * xf[..., None, :]
    return j.reshape(lead + core + core)


def hess_np(x, nd):
    """d J_ij / d x_k, in jax.jacfwd(jax.jacfwd(f)) layout."""
    xf, lead, core = _flat(np.asarray(x), nd)
    n = xf.shape[-1]
    s = np.sum(xf**2, axis=-1)[..., None, None, None]
    eye = np.eye(n, dtype=xf.dtype)
    sin, cos = np.sin(xf), np.cos(xf)
    e_ij, e_ik, e_jk = eye[:, :, None], eye[:, None, :], eye[None, :, :]
    h = (
        e_ij * e_ik * (-sin[..., :, None, None] * s)
        + e_ij * 2 * cos[..., :, None, None] * xf[..., None, None, :]
        + e_ik * 2 * cos[..., :, None, None] * xf[..., None, :, None]
        + e_jk * 2 * sin[..., :, None, None]
    )
    return h.reshape(lead + core + core + core)


def jvp_np(x, t, nd):
    j = jac_np(x, nd)
    jf, _, _ = _flat(j.reshape(j.shape[: j.ndim - nd] + (-1,)), 1)
    xf, lead, core = _flat(np.asarray(x), nd)
    tf, _, _ = _flat(np.asarray(t), nd)
    jm = jf.reshape(lead + (xf.shape[-1], xf.shape[-1]))
    return np.einsum("...ij,...j->...i", jm, tf).reshape(lead + core)


def vjp_np(x, ct, nd):
    xf, lead, core = _flat(np.asarray(x), nd)
    jm = jac_np(x, nd).reshape(lead + (xf.shape[-1], xf.shape[-1]))
    cf, _, _ = _flat(np.asarray(ct), nd)
    return (np.einsum("...ij,...i->...j", jm, cf).reshape(lead + core),)


RULES = ["jacobian", "pair", "jvp", "vjp", "central", "forward"]
MAX_ORDER = {"jacobian": 3, "pair": 2, "jvp": 2, "vjp": 2, "central": 2, "forward": 1}


def wrap(kind: str, nd: int, strategy: str, lowering: str) -> jaxbridge.Host:
    opts = dict(vmap=make_vmap(strategy), lowering=lowering)
    f = functools.partial(f_np, nd=nd)
    if kind == "jacobian":
        # The Jacobian is itself a host function with a rule: second order works, third raises.
        hess = jaxbridge.host(
            functools.partial(jac_np, nd=nd), jacobian=functools.partial(hess_np, nd=nd), **opts
        )
        return jaxbridge.host(f, jacobian=hess, **opts)
    jvp, vjp = functools.partial(jvp_np, nd=nd), functools.partial(vjp_np, nd=nd)
    if kind in ("pair", "jvp", "vjp"):
        return jaxbridge.host(
            f, jvp=jvp if kind != "vjp" else None, vjp=vjp if kind != "jvp" else None, **opts
        )
    return jaxbridge.host(f, derivative=jaxbridge.FiniteDifferences(scheme=kind), **opts)


FORWARD, REVERSE = {"jvp", "jacfwd"}, {"grad", "vjp", "jacrev"}
TRANSFORMS = ["jit", "vmap", "grad", "jvp", "vjp", "jacfwd", "jacrev", "scan", "cond", "remat"]


def apply(name: str, g: Any, p: dict[str, int]) -> Any:
    """One transformation of `g: x -> y`, the same for the host function and the reference."""
    if name == "jit":
        return jax.jit(g)
    if name == "remat":
        return jax.checkpoint(g)
    if name == "vmap":
        return jax.vmap(g, in_axes=p["in"], out_axes=p["out"])
    if name == "grad":
        return jax.grad(lambda x: jnp.sum(jnp.sin(g(x))))
    if name == "jvp":
        return lambda x: jax.jvp(g, (x,), (jnp.cos(x),))[1]
    if name == "vjp":

        def pulled(x):
            y, pullback = jax.vjp(g, x)
            return pullback(jnp.sin(y))[0]

        return pulled
    if name == "jacfwd":
        return jax.jacfwd(g)
    if name == "jacrev":
        return jax.jacrev(g)
    if name == "scan":

        def scanned(xs):
            def body(c, x):
                y = g(x)
                return c + jnp.sum(y), y * c

            return lax.scan(body, jnp.ones((), xs.dtype), xs)[1]

        return scanned
    assert name == "cond"
    return lambda x: lax.cond(jnp.sum(x) > 0, g, lambda z: 2 * g(z), x)


@st.composite
def transform_stacks(draw, kind):
    core = draw(st.sampled_from([(), (2,), (3,), (2, 2)]))
    in_shape, out_shape = list(core), list(core)
    stack, order = [], 0
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(TRANSFORMS))
        p: dict[str, int] = {}
        if name in FORWARD | REVERSE:
            if order + 1 > MAX_ORDER[kind]:
                continue
            order += 1
        if name == "vmap":
            n = draw(st.integers(1, 3))
            p = {
                "in": draw(st.integers(0, len(in_shape))),
                "out": draw(st.integers(0, len(out_shape))),
            }
            in_shape.insert(p["in"], n)
            out_shape.insert(p["out"], n)
        elif name == "scan":
            n = draw(st.integers(1, 3))
            in_shape.insert(0, n)
            out_shape.insert(0, n)
        elif name in ("jacfwd", "jacrev"):
            if math.prod(out_shape) * math.prod(in_shape) > 150:
                continue
            out_shape = out_shape + in_shape
        elif name in ("grad", "vjp"):
            out_shape = list(in_shape)
        stack.append((name, p))
    return core, tuple(in_shape), stack


def expected_error(kind: str, stack: list) -> tuple[type[BaseException], ...] | None:
    """The documented error for a stack the rule does not support, or None."""
    derivs = [name for name, _ in stack if name in FORWARD | REVERSE]
    if kind == "jacobian" and len(derivs) >= 3:
        return (ValueError,)  # the second-order rule has no rule itself: names what to pass
    if kind in ("pair", "jvp", "vjp"):
        if len(derivs) >= 2:  # differentiates the plain `jvp=`/`vjp=` functions: no rule
            return (ValueError,)
        if derivs and kind == "jvp" and derivs[0] in REVERSE:
            return (ValueError,)
        if derivs and kind == "vjp" and derivs[0] in FORWARD:
            return (ValueError,)
    return None


TOL = {"jacobian": 1e-9, "pair": 1e-9, "jvp": 1e-9, "vjp": 1e-9, "central": 1e-5, "forward": 1e-5}


@examples(30)
@given(
    data=st.data(),
    kind=st.sampled_from(RULES),
    strategy=strategies,
    lowering=lowerings,
    seed=st.integers(0, 2**16),
)
def test_random_transformation_stacks_match_jax_numpy(data, kind, strategy, lowering, seed):
    """jit/vmap/grad/jvp/vjp/jacfwd/jacrev/scan/cond/remat stacks, every derivative rule."""
    core, in_shape, stack = data.draw(transform_stacks(kind))
    nd = len(core)
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(seed).uniform(-1.5, 1.5, in_shape))
        g, ref = wrap(kind, nd, strategy, lowering), f_jnp
        for name, p in stack:
            g, ref = apply(name, g, p), apply(name, ref, p)
        error = expected_error(kind, stack)
        if error is not None:
            with pytest.raises(error):
                jax.block_until_ready(g(x))
            return
        got, want = g(x), ref(x)
        n_derivs = sum(name in FORWARD | REVERSE for name, _ in stack)
        tol = TOL[kind] * (1e3 if n_derivs > 1 and kind == "central" else 1)
        scale = max(1.0, float(jnp.max(jnp.abs(want)))) if want.size else 1.0
        assert_trees_equal(got, want, tol=tol * scale)


# --- derivative rules over pytree arguments, with static and integer arguments --------------


def _float_tree(max_leaves: int = 4) -> st.SearchStrategy:
    leaf = st.builds(Leaf, st.sampled_from([(), (2,), (1, 2)]))
    return _tree(leaf, max_leaves=max_leaves).filter(lambda t: jax.tree_util.tree_leaves(t))


def tree_fn(xp: Any, tree: Any, mode: str, n: Any, core_ndims: list[int]) -> Any:
    """Couples all leaves: each leaf * sum of squares of all, plus an integer term."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    lead = leaves[0].shape[: leaves[0].ndim - core_ndims[0]]
    total = sum(
        xp.sum(xp.reshape(v**2, lead + (-1,)), axis=-1) for v, nd in zip(leaves, core_ndims)
    )
    outs = []
    for v, nd in zip(leaves, core_ndims):
        t = xp.reshape(total, lead + (1,) * nd)
        # `n` is traced too: stacked to the batch like the rest under vectorized strategies.
        shift = xp.reshape(xp.asarray(n).astype(v.dtype), lead + (1,) * nd)
        outs.append((xp.sin(v) if mode == "sin" else xp.tanh(v)) * t + shift * v)
    return jax.tree_util.tree_unflatten(treedef, outs)


@examples(10)
@given(
    shapes=_float_tree(),
    kind=st.sampled_from(["jacobian", "pair", "central", "forward"]),
    mode=st.sampled_from(["sin", "tanh"]),
    strategy=strategies,
    lowering=lowerings,
    transform=st.sampled_from(["grad", "jvp", "jacfwd", "jacrev", "vmap-grad"]),
    inside=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_derivative_rules_over_random_pytrees(
    shapes, kind, mode, strategy, lowering, transform, inside, seed
):
    """Rules over pytree arguments; with `inside`, a static string sits in the same pytree.

    A static leaf inside a differentiated argument is `None` in the layout of tangents,
    cotangents and Jacobian blocks (regression: such specs used to be rejected).
    """
    rng = np.random.default_rng(seed)
    core_ndims = [len(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes)]

    def unbox(b):
        if inside:
            assert b["tag"] in ("static-tag", None)
            return b["tree"]
        return b

    def box(t, tag=None):
        return {"tree": t, "tag": tag} if inside else t

    def ref(b, mode, *, n):
        return tree_fn(jnp, unbox(b), mode, n, core_ndims)

    def host_fn(b, mode, *, n):
        assert not inside or b["tag"] == "static-tag"
        return tree_fn(np, unbox(b), mode, n, core_ndims)

    def batched(fn, *args):
        """A JAX function of unbatched arguments applied to a (possibly) stacked batch.

        x64 explicitly: executor threads do not inherit the caller's thread-local
        `jax.enable_x64()` (see test_reentrancy.py::test_threads_workers_see_the_callers_x64).
        """
        first = jax.tree_util.tree_leaves(args[0])[0]
        with jax.enable_x64(True):
            if first.ndim > core_ndims[0]:
                return jax.vmap(fn)(*args)
            return fn(*args)

    def jacobian(b, mode, *, n):
        j = lambda u, m: jax.jacfwd(lambda v: ref(v, mode, n=m))(u)  # noqa: E731
        return jax.tree_util.tree_map(np.asarray, batched(j, box(unbox(b)), n))

    def jvp(b, mode, t, *, n):
        fn = lambda p, q, m: jax.jvp(lambda v: ref(v, mode, n=m), (p,), (q,))[1]  # noqa: E731
        return jax.tree_util.tree_map(np.asarray, batched(fn, box(unbox(b)), t, n))

    def vjp(b, mode, ct, *, n):
        fn = lambda p, c, m: jax.vjp(lambda v: ref(v, mode, n=m), p)[1](c)[0]  # noqa: E731
        return (jax.tree_util.tree_map(np.asarray, batched(fn, box(unbox(b)), ct, n)),)

    opts = dict(vmap=make_vmap(strategy), lowering=lowering)
    if kind == "jacobian":
        f = jaxbridge.host(host_fn, jacobian=jacobian, **opts)
    elif kind == "pair":
        f = jaxbridge.host(host_fn, jvp=jvp, vjp=vjp, **opts)
    else:
        f = jaxbridge.host(host_fn, derivative=jaxbridge.FiniteDifferences(scheme=kind), **opts)

    with jax.enable_x64(True):
        n = jnp.asarray(2, jnp.int32)
        tree = jax.tree_util.tree_map(lambda s: jnp.asarray(s.value(rng)), shapes)
        fh = lambda t: f(box(t, "static-tag"), mode, n=n)  # noqa: E731
        fr = lambda t: ref(box(t), mode, n=n)  # noqa: E731
        loss = lambda g: (
            lambda t: sum(  # noqa: E731
                jnp.sum(jnp.cos(v)) for v in jax.tree_util.tree_leaves(g(t))
            )
        )
        if transform == "grad":
            got, want = jax.jit(jax.grad(loss(fh)))(tree), jax.grad(loss(fr))(tree)
        elif transform == "jvp":
            tangent = jax.tree_util.tree_map(jnp.cos, tree)
            got = jax.jvp(fh, (tree,), (tangent,))
            want = jax.jvp(fr, (tree,), (tangent,))
        elif transform == "jacfwd":
            got, want = jax.jacfwd(fh)(tree), jax.jacfwd(fr)(tree)
        elif transform == "jacrev":
            got, want = jax.jit(jax.jacrev(fh))(tree), jax.jacrev(fr)(tree)
        else:
            stacked = jax.tree_util.tree_map(lambda v: jnp.stack([v, -v, 2 * v]), tree)
            got = jax.vmap(jax.grad(loss(fh)))(stacked)
            want = jax.vmap(jax.grad(loss(fr)))(stacked)
        tol = {"jacobian": 1e-9, "pair": 1e-9, "central": 1e-6, "forward": 1e-5}[kind]
        assert_trees_equal(got, want, tol=tol)


# --- regressions found by the properties above ----------------------------------------------


@pytest.mark.parametrize("kind", ["jacobian", "pair", "central"])
def test_regression_static_leaf_inside_a_differentiated_argument(kind, x64):
    """A static leaf (a string) inside an argument's pytree is `None` in the rules' layout.

    Found by `test_derivative_rules_over_random_pytrees`: the rules' result specs hold `None`
    there and used to be rejected as "must be a pytree of jax.ShapeDtypeStruct".
    """

    def fn(d, scale):
        assert d["tag"] == "s"
        return np.sin(d["x"]) * scale

    def ref(x, scale):
        return jnp.sin(x) * scale

    rules = {
        "jacobian": dict(
            jacobian=lambda d, scale: (
                {"x": np.diag(np.cos(d["x"]) * scale), "tag": None},
                np.sin(d["x"]),
            )
        ),
        "pair": dict(
            jvp=lambda d, scale, td, ts: np.cos(d["x"]) * scale * td["x"] + np.sin(d["x"]) * ts,
            vjp=lambda d, scale, ct: (
                {"x": np.cos(d["x"]) * scale * ct, "tag": None},
                np.sum(np.sin(d["x"]) * ct),
            ),
        ),
        "central": dict(derivative=jaxbridge.FiniteDifferences()),
    }
    f = jaxbridge.host(fn, **rules[kind])
    x, s = jnp.asarray([0.1, 0.2, 0.3]), jnp.asarray(2.0)
    tol = 1e-6 if kind == "central" else 1e-12
    for transform in (jax.jacfwd, jax.jacrev):
        got = transform(lambda x, s: f({"x": x, "tag": "s"}, s), argnums=(0, 1))(x, s)
        assert_trees_equal(got, transform(ref, argnums=(0, 1))(x, s), tol=tol)
    grad = lambda g: jax.vmap(jax.grad(lambda x, s: jnp.sum(g(x, s)), argnums=(0, 1)))  # noqa: E731
    xs, ss = jnp.stack([x, 2 * x]), jnp.stack([s, s])
    got = grad(lambda x, s: f({"x": x, "tag": "s"}, s))(xs, ss)
    assert_trees_equal(got, grad(ref)(xs, ss), tol=tol)


def test_declared_result_may_hold_none_as_an_empty_subtree():
    """As everywhere in JAX, `None` in `result=` is an empty subtree, matched by a `None`."""
    f = jaxbridge.host(
        lambda x: {"y": x * 2, "nothing": None},
        result={"y": jax.ShapeDtypeStruct((2,), jnp.float32), "nothing": None},
    )
    got = jax.jit(f)(jnp.ones(2, jnp.float32))
    assert got["nothing"] is None
    np.testing.assert_array_equal(got["y"], 2.0)


@pytest.mark.parametrize(
    "kind, strategy, lowering",
    [("jacobian", "vectorized", "buffer"), ("central", "sequential", "pure")],
)
def test_regression_second_derivative_through_scan(kind, strategy, lowering):
    """grad(grad(scan(f))): JAX drops a custom_jvp rule when it partially evaluates the call
    inside scan; the second derivative must still reach the host function's rule.

    Found by `test_random_transformation_stacks_match_jax_numpy` (stack scan, grad, grad):
    it failed with "Buffer callbacks do not support JVP" (later "Differentiation rule for
    'host_call' not implemented").
    """
    stack = [("scan", {}), ("vmap", {"in": 1, "out": 0}), ("grad", {}), ("grad", {})]
    with jax.enable_x64(True):
        g, ref = wrap(kind, 0, strategy, lowering), f_jnp
        for name, p in stack:
            g, ref = apply(name, g, p), apply(name, ref, p)
        x = jnp.linspace(0.2, 0.7, 6).reshape(2, 3)
        assert_trees_equal(g(x), ref(x), tol=1e-9 if kind == "jacobian" else 1e-4)
    no_rule = jaxbridge.host(np.sin)
    scanned = lambda x: jax.lax.scan(lambda c, v: (c, no_rule(v)), 0.0, x)[1]  # noqa: E731
    with pytest.raises(ValueError, match="needs a derivative rule"):
        jax.grad(lambda x: jnp.sum(scanned(x)))(jnp.ones(2))
