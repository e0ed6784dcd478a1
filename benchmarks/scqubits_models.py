# ruff: noqa: E402, B023 - the thread limits precede imports; closures run in loops
"""jaxbridge.scqubits against scqubits itself: sweeps, gradients, dense against sparse.

Both sides run with OPENBLAS_NUM_THREADS=1 (set before NumPy loads), in one process, calls
interleaved (medians). Rows:

- Fluxonium, cutoff 110, 101 flux points, 6 levels: `jit(vmap(eigenvals))` against
  `get_spectrum_vs_paramvals` (target >= 5x after compilation; compile time reported).
- The gradient of f01 with respect to (EJ, EC, EL) at the 101 points against central
  differences of scqubits' own sweeps (6 sweeps; target >= 15x).
- Transmon (ncut 30) and `Circuit` (a fluxonium from YAML, harmonic basis) sweeps.
- Dense `eigh` against the host sparse `eigsh` for growing dimension (a ZeroPi grid).
- Compile times of the noise programs for a fluxonium at cutoff 80 (trace, XLA compile, the
  first call and a later one) against scqubits computing the same numbers directly (gradients
  by central differences): `jit(value_and_grad(t2_effective))` (target: trace + compile
  <= 0.5 s), `vmap(grad(t2_effective))` over 101 fluxes, `t2_effective` and `eigenvals`; with
  the time-to-first-result ratio and the StableHLO size.
- Noise at 101 flux points (Fluxonium 80): `t2_effective` against scqubits' own loop, and its
  gradient with respect to (EJ, EC, EL) against central differences of that loop.
- A composite sweep: Transmon (ncut 20, 4 levels) + Oscillator (5 levels), `g n (a + a^dag)`,
  101 EJ values, 10 levels, against `ParameterSweep` (target >= 10x), with the bare-labelled
  energies, and the gradient of chi against differences of six sweeps
  (`--composite` runs only this table; `--compile` only the compile and noise tables).

`python benchmarks/scqubits_models.py --quick` is the short run (about a minute).
"""

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import scqubits as scq
from _util import QUICK, fmt_time, table, timeit, verdict

import jaxbridge.scqubits as jbq

scq.settings.PROGRESSBAR_DISABLED = True
scq.settings.T1_DEFAULT_WARNING = False  # its notice that t1 rates sum both directions
warnings.filterwarnings("ignore", category=DeprecationWarning)
REPEAT = 1 if QUICK else 5
POINTS = 101


def sweep_rows(label, obj, name, values, k, target=None):
    m = jbq.model(obj)
    ours = jax.jit(jax.vmap(lambda v: m.eigenvals({name: v}, evals_count=k)))
    x = jnp.asarray(values)
    start = time.perf_counter()
    jax.block_until_ready(ours(x))
    compile_s = time.perf_counter() - start
    theirs = lambda: obj.get_spectrum_vs_paramvals(name, values, evals_count=k, num_cpus=1)
    err = np.abs(np.asarray(ours(x)) - theirs().energy_table).max()
    t_ours = timeit(lambda: ours(x), number=1, repeat=REPEAT)
    t_theirs = timeit(theirs, number=1, repeat=REPEAT)
    ratio = t_theirs / t_ours
    goal = verdict(ratio, target, lower_is_better=False) if target else ""
    row = (label, fmt_time(t_theirs), fmt_time(t_ours), f"{ratio:.1f}x", f"{compile_s:.2f} s",
           f"{err:.1e}", goal)  # fmt: skip
    return row


def gradient_row(obj, values):
    m = jbq.model(obj)
    names = ("EJ", "EC", "EL")

    def f01(p, flux):
        e = m.eigenvals({**dict(zip(names, p)), "flux": flux}, evals_count=2)
        return e[1] - e[0]

    p0 = jnp.asarray([obj.EJ, obj.EC, obj.EL])
    ours = jax.jit(jax.vmap(jax.grad(f01), in_axes=(None, 0)))
    x = jnp.asarray(values)
    start = time.perf_counter()
    jax.block_until_ready(ours(p0, x))
    compile_s = time.perf_counter() - start
    step = 1e-4

    def theirs():
        out = []
        for name in names:
            base = getattr(obj, name)
            f = []
            for sign in (1, -1):
                setattr(obj, name, base + sign * step)
                e = obj.get_spectrum_vs_paramvals("flux", values, evals_count=2, num_cpus=1)
                f.append(e.energy_table[:, 1] - e.energy_table[:, 0])
            setattr(obj, name, base)
            out.append((f[0] - f[1]) / (2 * step))
        return np.stack(out, axis=1)

    err = np.abs(np.asarray(ours(p0, x)) - theirs()).max()
    t_ours = timeit(lambda: ours(p0, x), number=1, repeat=REPEAT)
    t_theirs = timeit(theirs, number=1, repeat=REPEAT)
    ratio = t_theirs / t_ours
    return ("Fluxonium 110: grad f01 wrt (EJ, EC, EL), 101 points", fmt_time(t_theirs),
            fmt_time(t_ours), f"{ratio:.1f}x", f"{compile_s:.2f} s", f"{err:.1e}",
            verdict(ratio, 15, lower_is_better=False))  # fmt: skip


def dense_sparse_rows(points_list):
    rows = []
    for pts in points_list:
        grid = scq.Grid1d(-6 * np.pi, 6 * np.pi, pts)
        obj = scq.ZeroPi(EJ=10.0, EL=0.04, ECJ=20.0, EC=0.04, ng=0.1, flux=0.23, grid=grid,
                         ncut=10, dEJ=0.0, dCJ=0.0)  # fmt: skip
        m = jbq.model(obj)
        dense = jax.jit(lambda f: m.eigenvals({"flux": f}, evals_count=6, method="dense"))
        sparse = jax.jit(lambda f: m.eigenvals({"flux": f}, evals_count=6, method="sparse"))
        err = np.abs(np.asarray(dense(0.23)) - np.asarray(sparse(0.23))).max()
        t_dense = timeit(lambda: dense(0.23), number=1, repeat=REPEAT)
        t_sparse = timeit(lambda: sparse(0.23), number=1, repeat=REPEAT)
        t_scq = timeit(lambda: obj.eigenvals(6), number=1, repeat=REPEAT)
        rows.append((f"ZeroPi, dim {m.dim}", fmt_time(t_dense), fmt_time(t_sparse),
                     fmt_time(t_scq), f"{t_dense / t_sparse:.2f}", f"{err:.1e}"))  # fmt: skip
    return rows


# -- composite sweep: a HilbertSpace against ParameterSweep


def _interleaved(fns, repeat):
    """Median seconds of each function, called in turn `repeat` times (after one warm-up)."""
    for fn in fns:
        jax.block_until_ready(fn())
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            out.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def composite_rows():
    """Transmon (ncut 20, 4 levels) + Oscillator (5 levels), g n (a + a^dag), 101 EJ, 10 levels."""
    tmon = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=20, truncated_dim=4, id_str="tmon")
    osc = scq.Oscillator(E_osc=6.0, truncated_dim=5, id_str="osc")
    hs = scq.HilbertSpace([tmon, osc])
    a = osc.annihilation_operator()
    hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=(a + a.T, osc))
    m = jbq.model(hs)
    ejs = np.linspace(10.0, 30.0, POINTS)
    labels = [(0, 0), (1, 0), (0, 1), (1, 1)]

    def sweep(**values):
        tmon.EJ, osc.E_osc, hs.interaction_list[0].g_strength = 20.0, 6.0, 0.1
        for name, v in values.items():
            if name == "g":
                hs.interaction_list[0].g_strength = v
            else:
                setattr(osc, name, v)

        def update(EJ):
            tmon.EJ = EJ

        with warnings.catch_warnings():  # scqubits warns that the coupling is a fixed matrix
            warnings.simplefilter("ignore", UserWarning)
            return scq.ParameterSweep(hilbertspace=hs, paramvals_by_name={"EJ": ejs},
                                      update_hilbertspace=update, evals_count=10,
                                      num_cpus=1)  # fmt: skip

    def levels(ej):
        return m.eigenvals({"tmon": {"EJ": ej}}, evals_count=10)

    def labelled(ej):
        p = {"tmon": {"EJ": ej}}
        energies = [m.energy_by_bare_index(b, p, evals_count=10) for b in labels]
        return m.eigenvals(p, evals_count=10), jnp.stack(energies)

    def chi(p):  # p = (EJ, g, E_osc)
        q = {"tmon": {"EJ": p[0]}, "osc": {"E_osc": p[2]}, "g": [p[1]]}
        e = [m.energy_by_bare_index(b, q, evals_count=10) for b in labels]
        return e[3] - e[1] - e[2] + e[0]

    x = jnp.asarray(ejs)
    p0 = jnp.asarray([20.0, 0.1, 6.0])
    ours_levels = jax.jit(jax.vmap(levels))
    ours_labelled = jax.jit(jax.vmap(labelled))
    # d chi / d(EJ, g, E_osc) at every point: EJ is the swept variable, g and E_osc shared.
    ours_grad = jax.jit(jax.vmap(lambda p, ej: jax.grad(chi)(p.at[0].set(ej)), (None, 0)))
    compile_s = []
    for fn, args in ((ours_levels, (x,)), (ours_labelled, (x,)), (ours_grad, (p0, x))):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        compile_s.append(time.perf_counter() - start)

    ps = sweep()
    evals = np.asarray(ps["evals"])
    err_levels = np.abs(np.asarray(ours_levels(x)) - evals).max()
    got_evals, got_e = ours_labelled(x)
    want_e = np.stack([np.asarray(ps.energy_by_bare_index(b), dtype=float) for b in labels], 1)
    err_labelled = max(np.abs(np.asarray(got_evals) - evals).max(),
                       np.nanmax(np.abs(np.asarray(got_e) - want_e)))  # fmt: skip

    def scq_chi(ps):
        e = [np.asarray(ps.energy_by_bare_index(b), dtype=float) for b in labels]
        return e[3] - e[1] - e[2] + e[0]

    def theirs_grad():
        out = []
        for name, x0, h in (("EJ", 0.0, 1e-3), ("g", 0.1, 1e-4), ("E_osc", 6.0, 1e-4)):
            if name == "EJ":  # the swept variable: differences of the sweep over shifted EJ
                shift = lambda d: (ejs.__iadd__(d), scq_chi(sweep()), ejs.__isub__(d))[1]
                out.append((shift(h) - shift(-h)) / (2 * h))
            else:
                out.append((scq_chi(sweep(**{name: x0 + h})) - scq_chi(sweep(**{name: x0 - h})))
                           / (2 * h))  # fmt: skip
        sweep()  # restore
        return np.stack(out, 1)

    want_grad = theirs_grad()
    got_grad = np.asarray(ours_grad(p0, x))
    err_grad = np.nanmax(np.abs(got_grad - want_grad) / (np.abs(want_grad) + 1e-12))
    repeat = 1 if QUICK else 5
    t_ps, t_levels, t_labelled = _interleaved(
        [sweep, lambda: ours_levels(x), lambda: ours_labelled(x)], repeat
    )
    t_fd, t_grad = _interleaved([theirs_grad, lambda: ours_grad(p0, x)], 1 if QUICK else 3)
    return [
        ("101 EJ, 10 levels: ParameterSweep vs jit(vmap(eigenvals))", fmt_time(t_ps),
         fmt_time(t_levels), f"{t_ps / t_levels:.1f}x", f"{compile_s[0]:.2f} s",
         f"{err_levels:.1e}", verdict(t_ps / t_levels, 10, lower_is_better=False)),
        ("... and energy_by_bare_index of 4 labels (all 10 labelled)", fmt_time(t_ps),
         fmt_time(t_labelled), f"{t_ps / t_labelled:.1f}x", f"{compile_s[1]:.2f} s",
         f"{err_labelled:.1e}", verdict(t_ps / t_labelled, 10, lower_is_better=False)),
        ("grad chi wrt (EJ, g, E_osc) at 101 EJ: 6 sweeps of differences", fmt_time(t_fd),
         fmt_time(t_grad), f"{t_fd / t_grad:.1f}x", f"{compile_s[2]:.2f} s",
         f"{err_grad:.1e} rel", ""),
    ]  # fmt: skip


def _compile_times(fn, *args):
    """(trace s, compile s, first call s, later call s, StableHLO kB) of `jax.jit(fn)`.

    The first call of a compiled program sets up its host calls; a later call is the median
    of `REPEAT`.
    """
    w0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    w1 = time.perf_counter()
    compiled = lowered.compile()
    w2 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    w3 = time.perf_counter()
    later = timeit(lambda: compiled(*args), number=1, repeat=REPEAT)
    return w1 - w0, w2 - w1, w3 - w2, later, len(lowered.as_text()) / 1e3


COMPILE_HEADER = ("program", "trace", "compile", "first call", "later call", "scqubits",
                  "scqubits / (trace + compile + first)", "scqubits / later", "StableHLO",
                  "target")  # fmt: skip


def compile_rows():
    """Each program's trace, compile, first and later call, against scqubits computing the
    same numbers directly (its gradients by central differences), from a fresh model."""
    names = ("EJ", "EC", "EL")
    p = {"EJ": 3.0, "EC": 1.5, "EL": 1.5}
    flux = np.linspace(0.3, 0.7, POINTS)

    def fluxonium():
        return scq.Fluxonium(EJ=3.0, EC=1.5, EL=1.5, flux=0.5, cutoff=80)

    def differences(qubit, fn, name, x0, step):
        setattr(qubit, name, x0 + step)
        up = fn()
        setattr(qubit, name, x0 - step)
        down = fn()
        setattr(qubit, name, x0)
        return (up - down) / (2 * step)

    def scq_value_and_grad(qubit):  # t2 and its 3 central differences: 7 evaluations
        value = qubit.t2_effective()
        grad = [differences(qubit, qubit.t2_effective, n, p[n], 1e-5) for n in names]
        return value, grad

    def scq_flux_grads(qubit):  # d t2 / d flux at 101 fluxes: 202 evaluations
        out = [differences(qubit, qubit.t2_effective, "flux", f, 1e-5) for f in flux]
        qubit.flux = 0.5
        return out

    cases = [
        ("Fluxonium 80: value_and_grad(t2_effective)", 0.5,
         lambda m: (jax.value_and_grad(lambda p: m.t2_effective(params=p)), p),
         scq_value_and_grad),
        ("Fluxonium 80: vmap(grad(t2_effective)), 101 fluxes", None,
         lambda m: (jax.vmap(jax.grad(lambda f: m.t2_effective(params={"flux": f}))),
                    jnp.asarray(flux)),
         scq_flux_grads),
        ("Fluxonium 80: t2_effective", None,
         lambda m: (lambda p: m.t2_effective(params=p), p), lambda q: q.t2_effective()),
        ("Fluxonium 80: eigenvals(evals_count=3)", None,
         lambda m: (lambda p: m.eigenvals(p, evals_count=3), p), lambda q: q.eigenvals(3)),
    ]  # fmt: skip
    # JAX's and XLA's one-time costs of a process's first trace and compile (a small
    # transmon's program) are paid before the rows, so each row's times are its program's.
    warm = jbq.model(scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=5))
    vg = jax.value_and_grad(lambda ej: warm.t2_effective(params={"EJ": ej}))
    jax.jit(vg).lower(20.0).compile()
    rows = []
    for label, target, make, theirs in cases:
        # A fresh model and fresh functions per row: nothing traced before is reused.
        fn, arg = make(jbq.model(fluxonium()))
        trace, comp, first, later, kb = _compile_times(fn, arg)
        qubit = fluxonium()
        t_scq = timeit(lambda: theirs(qubit), number=1, repeat=1 if QUICK else 3)
        total = trace + comp
        goal = verdict(total, target, lower_is_better=True) if target else ""
        rows.append((label, f"{trace:.2f} s", f"{comp:.2f} s", fmt_time(first), fmt_time(later),
                     fmt_time(t_scq), f"{t_scq / (total + first):.2f}x", f"{t_scq / later:.0f}x",
                     f"{kb:.0f} kB", goal))  # fmt: skip
    return rows


def noise_rows():
    qubit = scq.Fluxonium(EJ=3.0, EC=1.5, EL=1.5, flux=0.5, cutoff=80)
    m = jbq.model(qubit)
    names = ("EJ", "EC", "EL")
    flux = np.linspace(0.3, 0.7, 21 if QUICK else POINTS)
    x = jnp.asarray(flux)
    p0 = jnp.asarray([qubit.EJ, qubit.EC, qubit.EL])

    def t2(p, f):
        return m.t2_effective(params={**dict(zip(names, p)), "flux": f})

    values = jax.jit(jax.vmap(t2, in_axes=(None, 0)))
    grads = jax.jit(jax.vmap(jax.grad(t2), in_axes=(None, 0)))

    def loop():
        out = []
        for f in flux:
            qubit.flux = f
            out.append(qubit.t2_effective())
        qubit.flux = 0.5
        return np.asarray(out)

    step = 1e-5

    def differences():
        out = []
        for name in names:
            base = getattr(qubit, name)
            f = []
            for sign in (1, -1):
                setattr(qubit, name, base + sign * step)
                f.append(loop())
            setattr(qubit, name, base)
            out.append((f[0] - f[1]) / (2 * step))
        return np.stack(out, axis=1)

    rows = []
    for label, ours, theirs, rel in [
        (f"Fluxonium 80: t2_effective at {flux.size} fluxes", values, loop, False),
        (f"Fluxonium 80: grad t2_effective wrt (EJ, EC, EL), {flux.size} fluxes", grads,
         differences, True),
    ]:  # fmt: skip
        start = time.perf_counter()
        got = np.asarray(jax.block_until_ready(ours(p0, x)))
        compile_s = time.perf_counter() - start
        want = theirs()
        # values: the largest relative error; gradients: against the largest component (the
        # differences' own error, step 1e-5, dominates)
        err = np.abs(got - want).max() / np.abs(want).max() if rel else np.abs(got / want - 1).max()
        t_ours = timeit(lambda: ours(p0, x), number=1, repeat=REPEAT)
        t_theirs = timeit(theirs, number=1, repeat=1 if rel else REPEAT)
        rows.append((label, fmt_time(t_theirs), fmt_time(t_ours), f"{t_theirs / t_ours:.1f}x",
                     f"{compile_s:.2f} s", f"{err:.1e} rel"))  # fmt: skip
    return rows


def main():
    header = ("case", "scqubits", "jaxbridge", "speed-up", "compile", "max |diff|", "target")
    if "--compile" in sys.argv:  # only the compile and noise tables
        head = COMPILE_HEADER
        print(
            table("Compile times (jit, first call's tracing and XLA compile)", compile_rows(), head)
        )
        head = ("case", "scqubits", "jaxbridge", "speed-up", "compile", "max |diff|")
        print(table("Noise channels against scqubits (OPENBLAS_NUM_THREADS=1)", noise_rows(), head))
        return
    if "--composite" in sys.argv:  # only the composite table
        title = "HilbertSpace sweeps against ParameterSweep (OPENBLAS_NUM_THREADS=1, interleaved)"
        print(table(title, composite_rows(), header))
        return
    flux = np.linspace(0.0, 1.0, POINTS)
    fluxonium = scq.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.0, cutoff=110)
    rows: list[tuple[str, ...]] = [
        sweep_rows("Fluxonium 110: 101 flux points, 6 levels", fluxonium, "flux", flux, 6, 5)
    ]
    rows.append(gradient_row(fluxonium, flux))
    transmon = scq.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=30)
    rows.append(
        sweep_rows("Transmon ncut 30: 101 ng points", transmon, "ng", np.linspace(-1, 1, POINTS), 6)
    )
    circuit = scq.Circuit(
        'branches:\n- ["JJ", 1, 2, EJ=8.9, 1]\n- ["L", 1, 2, EL=0.5]\n- ["C", 1, 2, EC=2.5]\n',
        from_file=False, ext_basis="harmonic",
    )  # fmt: skip
    circuit.cutoff_ext_1 = 60
    few = np.linspace(0.0, 1.0, 21 if QUICK else POINTS)
    label = f"Circuit (harmonic 60): {few.size} flux points"
    rows.append(sweep_rows(label, circuit, "Φ1", few, 6))
    print(table("jaxbridge.scqubits against scqubits (OPENBLAS_NUM_THREADS=1)", rows, header))
    head = COMPILE_HEADER
    print(table("Compile times (jit, first call's tracing and XLA compile)", compile_rows(), head))
    head = ("case", "scqubits", "jaxbridge", "speed-up", "compile", "max |diff|")
    print(table("Noise channels against scqubits (OPENBLAS_NUM_THREADS=1)", noise_rows(), head))
    sizes = [10, 20, 30] if QUICK else [10, 20, 30, 60, 120]
    head = ("case", "dense", "sparse", "scqubits eigsh", "dense/sparse", "max |diff|")
    title = "Dense eigh against host sparse eigsh (6 levels, one point, jit)"
    print(table(title, dense_sparse_rows(sizes), head))
    title = "HilbertSpace sweeps against ParameterSweep (OPENBLAS_NUM_THREADS=1, interleaved)"
    print(table(title, composite_rows(), header))


if __name__ == "__main__":
    main()
