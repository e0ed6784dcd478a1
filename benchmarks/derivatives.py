"""Cost of derivatives of host functions, against the hand-written alternatives.

Run: `python benchmarks/derivatives.py [--quick]`. All rows are measured in this one process.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from _util import QUICK, fmt_time, table, timeit, verdict

import jaxbridge

N_IN = 64


def host_fn(x):
    """A vectorised host function of 64 inputs: works on (64,) and on (B, 64)."""
    return np.sum(np.sin(x) * np.cos(2.0 * x), axis=-1)


def twin(x):
    return jnp.sum(jnp.sin(x) * jnp.cos(2.0 * x), axis=-1)


def host_grad(x):
    return np.cos(x) * np.cos(2.0 * x) - 2.0 * np.sin(x) * np.sin(2.0 * x)


def main() -> None:
    x = jnp.linspace(0.1, 1.0, N_IN, dtype=jnp.float32)
    number = 20 if QUICK else 100
    rows = []

    # Finite differences: one batched call of 2n points, against a naive loop of host calls.
    fd = jaxbridge.host(host_fn, vmap="vectorized", derivative=jaxbridge.FiniteDifferences())
    t_fd = timeit(lambda g=jax.jit(jax.grad(fd)): g(x), number=number)
    points = jnp.tile(x, (2 * N_IN, 1))
    t_batch = timeit(lambda f=jax.jit(jax.vmap(fd)): f(points), number=number)
    spec = jax.ShapeDtypeStruct((), jnp.float32)
    one = jax.jit(lambda p: jax.pure_callback(host_fn, spec, p))
    eye = jnp.eye(N_IN, dtype=jnp.float32) * 1e-2

    def naive_loop():
        return jnp.stack([(one(x + eye[i]) - one(x - eye[i])) / 2e-2 for i in range(N_IN)])

    t_loop = timeit(naive_loop, number=2 if QUICK else 5, repeat=3)
    rows += [
        ("grad by FiniteDifferences (one batched call)", fmt_time(t_fd), "1.00"),
        ("one batched forward call, 128 points", fmt_time(t_batch), f"{t_batch / t_fd:.2f}"),
        ("naive loop of 128 pure_callback calls", fmt_time(t_loop), f"{t_loop / t_fd:.1f}"),
    ]

    # Analytic rules against the pattern of JAX's documentation.
    jac = jaxbridge.host(host_fn, vmap="vectorized", jacobian=host_grad)
    pair = jaxbridge.host(
        host_fn,
        vmap="vectorized",
        jvp=lambda x, t: np.sum(host_grad(x) * t, axis=-1),
        vjp=lambda x, ct: (host_grad(x) * np.asarray(ct)[..., None],),
    )

    @jax.custom_jvp
    def documented(x):
        return jax.pure_callback(host_fn, spec, x)

    @documented.defjvp
    def _documented_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        g = jax.pure_callback(host_grad, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return documented(x), jnp.sum(g * t)

    t_jac = timeit(lambda g=jax.jit(jax.grad(jac)): g(x), number=number)
    t_pair = timeit(lambda g=jax.jit(jax.grad(pair)): g(x), number=number)
    t_doc = timeit(lambda g=jax.jit(jax.grad(documented)): g(x), number=number)
    t_twin = timeit(lambda g=jax.jit(jax.grad(twin)): g(x), number=number)
    for name, t in (
        ("grad with jacobian=", t_jac),
        ("grad with jvp= + vjp=", t_pair),
        ("pure_callback + custom_jvp (JAX docs pattern)", t_doc),
        ("jax.grad of the JAX-native twin", t_twin),
    ):
        rows.append((name, fmt_time(t), f"{t / t_fd:.2f}"))

    print(
        table(
            f"Gradient of a {N_IN}-input host function (jax {jax.__version__})",
            rows,
            ("implementation", "time", "ratio to FD grad"),
        )
    )
    summary = [
        ("FD grad / one batched forward call", f"{t_fd / t_batch:.2f}", verdict(t_fd / t_batch, 3)),
        (
            "naive loop / FD grad",
            f"{t_loop / t_fd:.1f}x",
            verdict(t_loop / t_fd, 20, lower_is_better=False),
        ),
        ("jacobian= / docs pattern", f"{t_jac / t_doc:.2f}", "(lower is better)"),
        ("jvp=+vjp= / docs pattern", f"{t_pair / t_doc:.2f}", "(lower is better)"),
    ]
    print(table("Targets", summary, ("measure", "value", "target")))


if __name__ == "__main__":
    main()
