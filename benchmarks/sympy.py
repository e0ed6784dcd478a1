# ruff: noqa: E402, B023 - the sys.path fix precedes imports; closures run inside their loop
"""jaxbridge.sympy.compile against sympy.lambdify (jax, cse), lambdify (numpy) and sympy2jax.

Prints, per expression size, conversion, trace, XLA compile, call time on 100,000 points and
grad call time, with ratios to lambdify(modules="jax", cse=True) measured in the same run.
`python benchmarks/sympy.py --quick` runs the small sizes only.
"""

import argparse
import os
import random
import sys
import time

# This file is named sympy.py: keep its folder off the path so `import sympy` finds SymPy.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np
import sympy

import jaxbridge.sympy as jbs

POINTS = 100_000


def make(n_ops, shared, seed=0):
    """About n_ops operations over 5 symbols; shared=True reuses subexpressions (a DAG)."""
    rng = random.Random(seed)
    syms = sympy.symbols("x0:5")
    unary = [sympy.sin, sympy.cos, sympy.tanh, sympy.exp]
    M = lambda *a: sympy.Mul(*a, evaluate=False)
    A = lambda *a: sympy.Add(*a, evaluate=False)
    nodes = list(syms) if shared else [rng.choice(syms) for _ in range(n_ops // 3 + 2)]
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


def _time(fn, repeat=5):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def measure_jax(convert, xs):
    t = time.perf_counter()
    f = convert()
    conversion = time.perf_counter() - t
    jitted = jax.jit(lambda *v: f(*v))
    t = time.perf_counter()
    lowered = jitted.lower(*xs)
    trace = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    xla = time.perf_counter() - t
    call = _time(lambda: compiled(*xs))
    grad = jax.jit(jax.grad(lambda *v: jnp.sum(f(*v))))
    grad_call = _time(lambda: grad(*xs))
    return dict(convert=conversion, trace=trace, compile=xla, call=call, grad=grad_call)


def measure_numpy(convert, xs):
    t = time.perf_counter()
    f = convert()
    conversion = time.perf_counter() - t
    arrays = [np.asarray(x) for x in xs]
    with np.errstate(all="ignore"):  # random expressions overflow somewhere; timing only
        return dict(convert=conversion, call=_time(lambda: f(*arrays)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    sizes = (
        [(200, False), (2000, False), (200, True)]
        if quick
        else [(200, False), (2000, False), (20000, False), (200, True), (2000, True), (20000, True)]
    )
    try:
        import sympy2jax
    except ImportError:
        sympy2jax = None
    key = jax.random.PRNGKey(0)
    xs = [
        jax.random.uniform(k, (POINTS,), minval=0.1, maxval=0.9) for k in jax.random.split(key, 5)
    ]
    rows = []
    for n, shared in sizes:
        expr, syms = make(n, shared)
        label = f"{n} ops{' shared' if shared else ''}"
        results = {"jaxbridge": measure_jax(lambda: jbs.compile(expr, list(syms)), xs)}
        # sympy.cse (inside lambdify and sympy2jax's tree walk) is exponential on shared DAGs.
        if not shared and n <= 2000:
            results["lambdify jax cse"] = measure_jax(
                lambda: sympy.lambdify(syms, expr, modules="jax", cse=True), xs
            )
            results["lambdify numpy"] = measure_numpy(
                lambda: sympy.lambdify(syms, expr, modules="numpy", cse=True), xs
            )
            if sympy2jax is not None:

                def s2j():
                    mod = sympy2jax.SymbolicModule(expr)
                    names = [str(s) for s in syms]
                    return lambda *v: mod(**dict(zip(names, v, strict=True)))

                results["sympy2jax"] = measure_jax(s2j, xs)
        rows.append((label, results))
    base_name = "lambdify jax cse"
    print(
        f"{'expression':<18}{'method':<18}{'convert s':>10}{'trace s':>9}{'compile s':>10}"
        f"{'call ms':>9}{'grad ms':>9}{'trace+compile ratio':>21}{'call ratio':>11}"
    )
    for label, results in rows:
        base = results.get(base_name)
        for name, r in results.items():
            tc = r.get("trace", float("nan")) + r.get("compile", float("nan"))
            ratio_tc = tc / (base["trace"] + base["compile"]) if base else float("nan")
            ratio_call = r["call"] / base["call"] if base else float("nan")
            print(
                f"{label:<18}{name:<18}{r['convert']:>10.3f}{r.get('trace', float('nan')):>9.3f}"
                f"{r.get('compile', float('nan')):>10.3f}{r['call'] * 1e3:>9.2f}"
                f"{r.get('grad', float('nan')) * 1e3:>9.2f}{ratio_tc:>21.2f}{ratio_call:>11.2f}"
            )


if __name__ == "__main__":
    main()
