"""`jaxbridge.loops_as_kernels`: XLA compiles small while loops into one kernel, on request."""

import json
import os
import subprocess
import sys

import jax
import pytest

import jaxbridge
from jaxbridge import _loops

# A fresh process: the option must be set before JAX's backend starts. It prints whether a
# loop of a few small operations compiled into one kernel, and the loop's values.
PROGRAM = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import jaxbridge
if sys.argv[1] == "on":
    jaxbridge.loops_as_kernels()

def loop(y):
    def body(i, y):
        return y + 0.01 * jnp.sin(y[::-1]) * jnp.cos(3.0 * y)
    return jax.lax.fori_loop(0, 200, body, y)

y = jnp.linspace(0.0, 1.0, 256)
text = jax.jit(loop).lower(y).compile().as_text()
print(json.dumps({"kernel": "xla_cpu_small_call" in text, "values": loop(y).tolist(),
                  "devices": jax.device_count()}))
"""


def run(mode, flags=None):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if flags is not None:
        env["XLA_FLAGS"] = flags
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_small_loop_becomes_one_kernel_with_the_same_values():
    default, kernels = run("off"), run("on")
    assert not default["kernel"] and kernels["kernel"]
    assert kernels["values"] == pytest.approx(default["values"], rel=1e-13, abs=1e-13)


def test_other_xla_flags_are_kept():
    flags = "--xla_force_host_platform_device_count=3"
    flags += " --xla_backend_extra_options=xla_cpu_disable_loop_unrolling"
    got = run("on", flags)
    assert got["kernel"] and got["devices"] == 3


def test_the_option_joins_an_existing_backend_option_list():
    merged = _loops._with_option("--x=1 --xla_backend_extra_options=a=1,b=2", 64)
    assert merged == f"--x=1 --xla_backend_extra_options=a=1,b=2,{_loops.OPTION}=64"
    again = _loops._with_option(merged, 128)
    assert again == f"--x=1 --xla_backend_extra_options=a=1,b=2,{_loops.OPTION}=128"
    assert _loops._with_option("", 5) == f"--xla_backend_extra_options={_loops.OPTION}=5"


def test_after_the_backend_started_it_refuses_and_names_the_fix():
    jax.numpy.zeros(1).block_until_ready()  # this process's backend is up
    before = os.environ.get("XLA_FLAGS")
    with pytest.raises(RuntimeError, match="before JAX's first computation") as info:
        jaxbridge.loops_as_kernels()
    assert "XLA_FLAGS='--xla_backend_extra_options=" in str(info.value)
    assert os.environ.get("XLA_FLAGS") == before  # nothing changed


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "64"])
def test_max_bytes_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        jaxbridge.loops_as_kernels(bad)
