"""The same host function batched four ways: a loop, threads, processes and Ray.

Under `jax.vmap` a `jaxbridge.host` function is ONE host call for the whole batch; `vmap=`
chooses how that call runs its elements. The results are equal, element for element.

    python examples/04_batching.py [--quick]     # --quick skips Ray (its cluster takes ~10 s)
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge

parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true", help="a smaller batch, and no Ray")
args = parser.parse_args()


def largest_eigenvalue(x):
    """One element: a (32,) vector -> the largest eigenvalue of a matrix built from it."""
    a = np.outer(x, x) + np.diag(np.cos(x)) + np.tri(x.size) * 0.01
    for _ in range(20):  # some work per element (LAPACK releases the GIL)
        a = a + 0.001 * np.linalg.eigvalsh(a @ a.T)[-1] * np.eye(x.size) / x.size
    return np.linalg.eigvalsh(a + a.T)[-1].astype(x.dtype)


strategies = {
    "sequential": "sequential",
    "Threads(2)": jaxbridge.Threads(2),
    "Processes(2)": jaxbridge.Processes(2),
}
if not args.quick:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    strategies["Ray(2 workers)"] = jaxbridge.Ray(num_workers=2)

batch = 32 if args.quick else 256
xs = jax.random.normal(jax.random.key(0), (batch, 32))
results = {}
try:
    for name, vmap in strategies.items():
        f = jax.jit(jax.vmap(jaxbridge.host(largest_eigenvalue, vmap=vmap)))
        f(xs).block_until_ready()  # compile, start the workers
        start = time.perf_counter()
        results[name] = np.asarray(f(xs))
        elapsed = time.perf_counter() - start
        print(f"{name:>15}: {batch} elements in one host call, {elapsed * 1e3:7.1f} ms")
finally:
    if not args.quick:
        ray.shutdown()

reference = results["sequential"]
for name, value in results.items():
    assert np.array_equal(value, reference), name
print(f"all {len(results)} strategies give the same {batch} results, bit for bit")
# The wrapped function also differentiates, its finite differences batched through the executor:
fd_threads = jaxbridge.host(
    largest_eigenvalue, vmap=jaxbridge.Threads(2), derivative=jaxbridge.FiniteDifferences()
)
g = jax.grad(fd_threads)(xs[0])
print(f"grad through Threads(2): {g.shape}, all 64 difference points in one host call")
assert jnp.isfinite(g).all()
