# ruff: noqa: B023 - closures run inside their loop
"""jaxbridge.sympy.compile against sympy.lambdify (jax, cse), lambdify (numpy) and sympy2jax.

Prints, per expression size, conversion, trace, XLA compile, call time on 100,000 points and
grad call time, with ratios to lambdify(modules="jax", cse=True) measured in the same run
(medians; calls of all methods interleaved, so load on a shared machine hits each alike), then
the cost of training the constants with the expression passed as a jit argument.
`python benchmarks/sympy_converters.py --quick` runs the small sizes only.
"""

import argparse
import random
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _util import peer, require

sympy = require("sympy", script="sympy_converters.py")  # the `sympy` extra

import jaxbridge.sympy as jbs  # noqa: E402 - after the check that SymPy imports

POINTS = 100_000


def make(n_ops, shared, seed=0, reuse=0):
    """About n_ops operations over 5 symbols; shared=True reuses subexpressions (a DAG).

    reuse=k builds k subexpressions of n_ops / (2 k) operations first, then a tree of the other
    half whose leaves are drawn from the symbols and those subexpressions: each is used about
    n_ops / (6 (5 + k)) times, as sums of products reuse terms after `sympy.diff` or `expand`.
    """
    rng = random.Random(seed)
    syms = sympy.symbols("x0:5")
    unary = [sympy.sin, sympy.cos, sympy.tanh, sympy.exp]
    M = lambda *a: sympy.Mul(*a, evaluate=False)
    A = lambda *a: sympy.Add(*a, evaluate=False)
    leaves = list(syms)
    if reuse:
        leaves += [make(n_ops // (2 * reuse), False, seed + 1 + k)[0] for k in range(reuse)]
        n_ops -= n_ops // 2
    nodes = list(syms) if shared else [rng.choice(leaves) for _ in range(n_ops // 3 + 2)]
    ops = 0
    while ops < n_ops and (shared or len(nodes) > 1):
        if shared:
            a, b = rng.choice(nodes[-50:]), rng.choice(nodes[-200:])
        else:
            a = nodes.pop(rng.randrange(len(nodes)))
            b = nodes.pop(rng.randrange(len(nodes)))
        r, c, s = rng.random(), sympy.Float(round(rng.uniform(0.5, 1.5), 3)), rng.choice(syms)
        if r < 0.3:
            e, ops = M(a, b), ops + 1
        elif r < 0.6:
            e, ops = A(a, M(b, s)), ops + 2
        elif r < 0.8:
            e, ops = M(rng.choice(unary)(A(M(c, s), a), evaluate=False), b), ops + 4
        else:
            e, ops = A(c, M(a, b)), ops + 2
        nodes.append(e)
    return (A(*nodes[-20:]) if shared else A(*nodes)), syms


REPEAT = 15  # timed calls per method, interleaved across methods; medians are reported


def _median(values):
    return float(np.median(values))


def _times(fns, repeat=REPEAT):
    """Median wall time of each no-argument function, calls interleaved in shuffled rounds."""
    for fn in fns.values():
        jax.block_until_ready(fn())
    times = {name: [] for name in fns}
    order = list(fns)
    shuffle = random.Random(0).shuffle
    for _ in range(repeat):
        # A fresh order each round: a call right after a heavy one (a grad) runs slower, and a
        # fixed order would charge that to whichever method comes first.
        shuffle(order)
        for name in order:
            fn = fns[name]
            t = time.perf_counter()
            jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - t)
    return {name: _median(v) for name, v in times.items()}


def measure_jax(converters, xs, compile_repeat, with_grad=True, compiler_options=None):
    """Conversion, trace, compile, call and grad times of each converter, side by side.

    Trace and compile are medians of `compile_repeat` fresh `jax.jit`s, interleaved across the
    converters like the calls.
    """
    results, fns, calls = {}, {}, {}
    for name, convert in converters.items():
        t = time.perf_counter()
        try:
            fns[name] = convert()
        except RecursionError:
            results[name] = {"error": "RecursionError"}
            continue
        results[name] = dict(convert=time.perf_counter() - t, trace=[], compile=[])
    for _ in range(compile_repeat):
        for name, f in fns.items():
            jitted = jax.jit(lambda *v, f=f: f(*v))
            t = time.perf_counter()
            lowered = jitted.lower(*xs)
            results[name]["trace"].append(time.perf_counter() - t)
            t = time.perf_counter()
            compiled = lowered.compile(compiler_options)
            results[name]["compile"].append(time.perf_counter() - t)
            calls[name, "call"] = lambda compiled=compiled: compiled(*xs)
    for name, f in fns.items():
        results[name]["trace"] = _median(results[name]["trace"])
        results[name]["compile"] = _median(results[name]["compile"])
        if with_grad:
            grad = jax.jit(
                jax.grad(lambda *v, f=f: jnp.sum(f(*v))), compiler_options=compiler_options
            )
            calls[name, "grad"] = lambda grad=grad: grad(*xs)
    for (name, kind), t in _times(calls).items():
        results[name][kind] = t
    return results


def measure_numpy(convert, xs):
    t = time.perf_counter()
    f = convert()
    conversion = time.perf_counter() - t
    arrays = [np.asarray(x) for x in xs]
    with np.errstate(all="ignore"):  # random expressions overflow somewhere; timing only
        call = _times({"numpy": lambda: f(*arrays)})["numpy"]
    return dict(convert=conversion, call=call)


def measure_training(expr, syms, xs, sympy2jax, eqx):
    """Forward and grad w.r.t. the constants with the expression passed as a jit argument.

    Against the forward call, and the grad w.r.t. the inputs, of the same converter closed over
    (its constants baked in), all measured in the same rounds. The sympy2jax rows need both
    `sympy2jax` and `eqx` (equinox); either None skips them.
    """
    names = [str(s) for s in syms]
    # jaxbridge's Expression is a plain pytree: plain jax.jit; sympy2jax's module needs equinox.
    models = {
        "jaxbridge": (jbs.Expression(expr, list(syms)), lambda e, *v: e(*v), jax.jit, jax.grad)
    }
    closed = {"jaxbridge": jbs.compile(expr, list(syms))}
    if sympy2jax is not None and eqx is not None:
        module = sympy2jax.SymbolicModule(expr)
        call = lambda m, *v: m(**dict(zip(names, v, strict=True)))
        models["sympy2jax"] = (module, call, eqx.filter_jit, eqx.filter_grad)
        closed["sympy2jax"] = lambda *v: call(module, *v)
    fns = {}
    for name, (model, call, jit, grad) in models.items():
        forward = jit(call)
        train = jit(grad(lambda m, *v, call=call: jnp.sum(call(m, *v))))
        closed_forward = jax.jit(closed[name])
        closed_grad = jax.jit(jax.grad(lambda *v, f=closed[name]: jnp.sum(f(*v)), argnums=(0,)))
        fns[name, "closed forward"] = lambda f=closed_forward: f(*xs)
        fns[name, "closed grad"] = lambda f=closed_grad: f(*xs)
        fns[name, "argument forward"] = lambda f=forward, m=model: f(m, *xs)
        fns[name, "argument grad"] = lambda f=train, m=model: f(m, *xs)
    times = _times(fns)
    kinds = ("closed forward", "closed grad", "argument forward", "argument grad")
    return [(name, *(times[name, k] for k in kinds)) for name in models]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the small sizes only")
    parser.add_argument("--max-ops", type=int, default=None, help="only rows of at most N ops")
    opts = parser.parse_args()
    quick = opts.quick
    sizes = (
        [(200, False), (2000, False), (200, True)]
        if quick
        else [(200, False), (2000, False), (20000, False), (200, True), (2000, True), (20000, True)]
    )
    if opts.max_ops is not None:
        sizes = [(n, shared) for n, shared in sizes if n <= opts.max_ops]
    sympy2jax = peer("sympy2jax", rows="the sympy2jax rows")
    # sympy2jax's modules are equinox modules: its training rows jit with equinox's filters.
    eqx = peer("equinox", rows="the sympy2jax training rows") if sympy2jax else None
    key = jax.random.PRNGKey(0)
    xs = [
        jax.random.uniform(k, (POINTS,), minval=0.1, maxval=0.9) for k in jax.random.split(key, 5)
    ]
    jax.jit(lambda v: v + 1.0)(xs[0]).block_until_ready()  # one-time backend start-up
    nan = float("nan")
    base_name = "lambdify jax cse"
    n_train = min(200 if quick else 2000, opts.max_ops or 2000)
    reuse = 4 if quick else 10
    print(
        f"Training constants, {n_train} ops, the expression passed as a jit argument (arg) or "
        "closed over; ratios over the closed-over forward call (fwd) and grad w.r.t. the first "
        f"input (grad). 'tree': no subexpression occurs twice; 'reused': {reuse} "
        "subexpressions, each used many times."
    )
    print(
        f"{'expression':<12}{'method':<12}{'fwd ms':>8}{'grad ms':>9}{'arg fwd ms':>11}"
        f"{'arg grad ms':>12}{'arg fwd/fwd':>12}{'arg grad/fwd':>13}{'arg grad/grad':>14}",
        flush=True,
    )
    for label, r in (("tree", 0), ("reused", reuse)):
        expr, syms = make(n_train, False, reuse=r)
        for name, fwd, grad, arg_fwd, arg_grad in measure_training(expr, syms, xs, sympy2jax, eqx):
            print(
                f"{label:<12}{name:<12}{fwd * 1e3:>8.2f}{grad * 1e3:>9.2f}{arg_fwd * 1e3:>11.2f}"
                f"{arg_grad * 1e3:>12.2f}{arg_fwd / fwd:>12.2f}{arg_grad / fwd:>13.2f}"
                f"{arg_grad / grad:>14.2f}",
                flush=True,
            )

    print()
    print(f"Medians of {REPEAT} interleaved calls on {POINTS:,} points; ratios to {base_name}.")
    print(
        f"{'expression':<18}{'method':<18}{'convert s':>10}{'trace s':>9}{'compile s':>10}"
        f"{'call ms':>9}{'grad ms':>9}{'t+c ratio':>10}{'call ratio':>11}{'grad ratio':>11}",
        flush=True,
    )
    for n, shared in sizes:
        expr, syms = make(n, shared)
        label = f"{n} ops{' shared' if shared else ''}"
        # XLA:CPU's fusion emitter recomputes shared values of programs this large at each use
        # (jaxbridge.sympy.compile warns; the cost is in docs/sympy.md). These rows use the
        # older emitter, as the warning advises.
        legacy = shared and n > 2000
        options = {"xla_cpu_use_fusion_emitters": False} if legacy else None
        name = "jaxbridge legacy*" if legacy else "jaxbridge"

        def convert():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return jbs.compile(expr, list(syms))

        converters = {name: convert}
        # sympy.cse (inside lambdify and sympy2jax's tree walk) is exponential on shared DAGs,
        # and takes minutes on 20,000 operations.
        if not shared and n <= 2000:
            converters["lambdify jax cse"] = lambda: sympy.lambdify(
                syms, expr, modules="jax", cse=True
            )
            if sympy2jax is not None:

                def s2j():
                    mod = sympy2jax.SymbolicModule(expr)
                    names = [str(s) for s in syms]
                    return lambda *v: mod(**dict(zip(names, v, strict=True)))

                converters["sympy2jax"] = s2j
        # XLA takes minutes to compile the grad of 20,000 operations (any converter): the
        # large rows measure conversion, trace, compile and call only.
        results = measure_jax(
            converters,
            xs,
            compile_repeat=1 if n > 2000 else 3,
            with_grad=n <= 2000,
            compiler_options=options,
        )
        if not shared and n <= 2000:
            results["lambdify numpy"] = measure_numpy(
                lambda: sympy.lambdify(syms, expr, modules="numpy", cse=True), xs
            )
        base = results.get(base_name)
        for name, r in results.items():
            if "error" in r:
                print(f"{label:<18}{name:<18}{r['error']:>10}")
                continue
            tc = r.get("trace", nan) + r.get("compile", nan)
            ratio_tc = tc / (base["trace"] + base["compile"]) if base else nan
            ratio_call = r["call"] / base["call"] if base else nan
            ratio_grad = r.get("grad", nan) / base["grad"] if base else nan
            print(
                f"{label:<18}{name:<18}{r['convert']:>10.3f}{r.get('trace', nan):>9.3f}"
                f"{r.get('compile', nan):>10.3f}{r['call'] * 1e3:>9.2f}"
                f"{r.get('grad', nan) * 1e3:>9.2f}{ratio_tc:>10.2f}{ratio_call:>11.2f}"
                f"{ratio_grad:>11.2f}",
                flush=True,
            )
        if base:
            floor = base["compile"] / (base["trace"] + base["compile"])
            print(
                f"{label:<18}XLA's compile of {base_name}'s own program alone is {floor:.2f} of "
                "its trace+compile: the least t+c ratio any converter emitting the same "
                "operations can reach.",
                flush=True,
            )
    if not quick:
        print(
            "* compiled with compiler_options={'xla_cpu_use_fusion_emitters': False}: XLA:CPU's "
            "default fusion emitter recomputes the shared values at each use on these rows."
        )


if __name__ == "__main__":
    main()
