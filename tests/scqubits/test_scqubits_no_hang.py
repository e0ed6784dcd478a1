"""No program of `jaxbridge.scqubits` can hang: batched gradient sweeps on a 2-thread XLA pool.

XLA's CPU LAPACK kernels (jaxlib 0.10.2) split a batch over XLA's own thread pool and wait for
it; two of them side by side in one program, on a 2-thread pool, wait for each other forever
(two batched `jnp.linalg.solve` in one `jit` hang within three calls). The package runs every
eigensolver on the host instead. The sweeps below (T1, T2 and single channels, over flux and
over design parameters, and the composite models) run in a subprocess pinned to two CPUs,
under a timeout, so that a hang fails this test rather than the worker; each compiled program
is also checked to contain no LAPACK call at all, which is what makes the hang impossible.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, warnings
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 2:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])  # XLA's pool: 2 threads
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import scqubits
    warnings.simplefilter("ignore")
    import jaxbridge.scqubits as jbq

    def check(name, fn, *args):
        compiled = jax.jit(fn).lower(*args).compile()
        text = compiled.as_text()
        if "lapack" in text.lower():
            raise SystemExit(f"{name}: the compiled program calls LAPACK inside XLA")
        for _ in range(3):  # the reported hang came within three calls
            out = jax.block_until_ready(compiled(*args))
        leaves = jax.tree.leaves(out)
        if not all(np.isfinite(np.asarray(x)).all() for x in leaves):
            raise SystemExit(f"{name}: non-finite result {out}")
        print("ok", name, flush=True)

    flux = jnp.linspace(0.3, 0.7, 101)
    fl = jbq.model(scqubits.Fluxonium(EJ=8.9, EC=2.5, EL=0.5, flux=0.4, cutoff=80))
    for channel in ("t2_effective", "t1_effective", "t1_capacitive", "tphi_1_over_f_flux"):
        method = getattr(fl, channel)
        check(f"fluxonium {channel} over flux",
              jax.vmap(jax.grad(lambda f, method=method: method(params={"flux": f}))), flux)
    designs = jnp.stack([jnp.linspace(4.0, 9.0, 16), jnp.linspace(1.0, 2.5, 16),
                         jnp.linspace(0.3, 1.0, 16)], axis=1)
    def t2_of(x):
        return fl.t2_effective(params={"EJ": x[0], "EC": x[1], "EL": x[2], "flux": 0.45})
    check("fluxonium t2_effective over (EJ, EC, EL)", jax.vmap(jax.grad(t2_of)), designs)
    def t1_of(x):
        return fl.t1_effective(params={"EJ": x[0], "EC": x[1], "EL": x[2]})
    check("fluxonium t1_effective over (EJ, EC, EL)", jax.vmap(jax.grad(t1_of)), designs)
    def designed(x):  # example 09's objective: one eigensys, its esys reused by the channels
        p = {"EJ": x[0], "EC": x[1], "EL": x[2], "flux": 0.5}
        esys = fl.eigensys(p, evals_count=3)
        return fl.t2_effective(esys=esys, params=p) + esys[0][1]
    check("fluxonium esys + t2_effective over (EJ, EC, EL)",
          jax.vmap(jax.value_and_grad(designed)), designs)

    tt = jbq.model(scqubits.TunableTransmon(EJmax=20.0, EC=0.3, d=0.2, flux=0.1, ng=0.0,
                                            ncut=15))
    check("tunable transmon t2_effective over flux",
          jax.vmap(jax.grad(lambda f: tt.t2_effective(params={"flux": f}))), flux)

    tmon = scqubits.Transmon(EJ=20.0, EC=0.3, ng=0.0, ncut=10, truncated_dim=3, id_str="tmon")
    osc = scqubits.Oscillator(E_osc=6.0, truncated_dim=4, id_str="osc")
    hs = scqubits.HilbertSpace([tmon, osc])
    hs.add_interaction(g=0.1, op1=tmon.n_operator, op2=osc.creation_operator, add_hc=True)
    a = osc.annihilation_operator()
    hs.add_interaction(expr="0.01 * cos(n) * (a + a.dag())", op1=("n", tmon.n_operator),
                       op2=("a", a, osc))
    hm = jbq.model(hs)
    def chi(ej):
        e = lambda b: hm.energy_by_bare_index(b, {"tmon": {"EJ": ej}})
        return e((1, 1)) - e((1, 0)) - e((0, 1)) + e((0, 0))
    check("HilbertSpace chi over EJ", jax.vmap(jax.grad(chi)), jnp.linspace(15.0, 25.0, 16))
    print("done", flush=True)
    """
)


def test_gradient_sweeps_finish_on_two_threads():
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired as timeout:
        out = timeout.stdout.decode() if isinstance(timeout.stdout, bytes) else timeout.stdout
        raise AssertionError(f"a sweep hung (no result in 900 s); finished: {out}") from None
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("done"), done.stdout
