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


# A driven, damped three-level gate's fidelity gradient (the discrete adjoint: diffrax's loop
# forward, jaxbridge's backward), in a process with the option, where each loop of
# jaxbridge.scqubits.dynamics' solver runs as one kernel, and in one without.
GATE = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import jaxbridge
if sys.argv[1] == "on":
    jaxbridge.loops_as_kernels()
from jaxbridge.scqubits import dynamics

def fidelity(x, gradient):
    h = jnp.diag(jnp.array([0.0, 1.0, 1.9]))
    op = jnp.array([[0, 1, 0], [1, 0, 1.4], [0, 1.4, 0]]) * x[1]
    pulse = dynamics.smooth(lambda t, a: a * jnp.sin(2 * jnp.pi * t), x[0])
    jumps = [0.05 * jnp.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])]
    target = jnp.array([[0, 1], [1, 0]])
    f = dynamics.gate_fidelity(h, [(op, pulse)], target, [0, 1], jnp.array([0.0, 2.0]),
                               jump_ops=jumps, gradient=gradient)
    return f[-1]

x = jnp.array([0.2, 1.1])
run = jax.jit(jax.value_and_grad(fidelity), static_argnums=1)
out = {g: [float(v) for v in jnp.concatenate([jnp.ravel(a) for a in run(x, g)])]
       for g in ("adjoint",)}
print(json.dumps(out))
"""


def test_dynamics_gradients_are_the_same_with_loops_as_kernels():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    runs = [subprocess.Popen([sys.executable, "-c", GATE, mode], stdout=subprocess.PIPE,
                             text=True, env=env) for mode in ("off", "on")]  # fmt: skip
    outs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    default, kernels = (json.loads(out.strip().splitlines()[-1]) for out in outs)
    for mode in default:
        assert kernels[mode] == pytest.approx(default[mode], rel=1e-10, abs=1e-12), mode
        assert abs(default[mode][1]) > 1e-3  # a gradient that is not zero


def test_an_option_xla_did_not_take_is_reported_and_undone(monkeypatch):
    """Where XLA read its options before the call (here: this process's backend is up, and
    the backend check is told otherwise), the test loop still compiles as separate kernels:
    the call raises with the fix, and `XLA_FLAGS` is as it was."""
    jax.numpy.zeros(1).block_until_ready()
    monkeypatch.setattr(_loops.xla_bridge, "backends_are_initialized", lambda: False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    with pytest.raises(RuntimeError, match="XLA did not take the option"):
        jaxbridge.loops_as_kernels()
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false"
    monkeypatch.delenv("XLA_FLAGS")
    with pytest.raises(RuntimeError, match="XLA did not take the option"):
        jaxbridge.loops_as_kernels()
    assert "XLA_FLAGS" not in os.environ
