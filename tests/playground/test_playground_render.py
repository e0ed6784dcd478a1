"""Videos: Playground's `env.render` on jaxbridge States, the GL backend chosen headless, and
one clear error where MuJoCo cannot render. Each check runs in a fresh interpreter, because
MuJoCo binds its OpenGL backend once, when it is first imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    environ.update(env, OPENBLAS_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_a_render_without_gl_is_one_clear_error():
    done = _run(
        """
        from jaxbridge.render import GLUnavailableError, frames
        try:
            frames(object(), [])
        except GLUnavailableError as e:
            print(e)
        """,
        MUJOCO_GL="disable",
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("MuJoCo cannot render here: MUJOCO_GL=disable (AttributeError")
    assert line.endswith("set MUJOCO_GL=egl or MUJOCO_GL=osmesa before mujoco is imported")


def test_use_headless_gl_keeps_the_users_choice_and_says_when_it_fails():
    done = _run(
        """
        import os, sys
        from jaxbridge.render import GLUnavailableError, use_headless_gl
        try:
            use_headless_gl()
        except GLUnavailableError as e:
            print(e)
        print("mujoco" in sys.modules, os.environ["MUJOCO_GL"])
        try:
            use_headless_gl(["disable", "off"])
        except GLUnavailableError as e:
            print(e)
        """,
        MUJOCO_GL="disable",
    )
    assert done.returncode == 0, done.stderr
    first, state, second = done.stdout.splitlines()
    assert first.startswith("MuJoCo cannot render here: MUJOCO_GL=disable (disable: ")
    assert state == "False disable"  # MuJoCo not imported here; the user's setting untouched
    # the user's MUJOCO_GL is the only backend tried, whatever the list
    assert second.startswith("MuJoCo cannot render here: MUJOCO_GL=disable (disable: ")


def test_playground_renders_jaxbridge_states_to_a_gif(tmp_path):
    done = _run(
        f"""
        import sys
        from jaxbridge.render import GLUnavailableError, use_headless_gl
        try:
            print("backend", use_headless_gl())
        except GLUnavailableError as e:
            print("skip", e)
            sys.exit(0)
        import jax, jax.numpy as jnp, numpy as np
        from PIL import Image
        from jaxbridge import playground
        from jaxbridge.render import frames, write_gif

        env = playground.load("CartpoleSwingup")
        first = jax.jit(env.reset)(jax.random.key(0))
        def body(s, a):
            s = env.step(s, a)
            return s, s
        actions = jnp.ones((12, env.action_size))
        _, stacked = jax.jit(lambda s: jax.lax.scan(body, s, actions))(first)
        listed = [jax.tree.map(lambda x, t=t: x[t], stacked) for t in range(12)]
        a = frames(env, stacked, height=48, width=64)
        b = frames(env, listed, height=48, width=64)
        assert len(a) == 12 and a[0].shape == (48, 64, 3) and a[0].dtype == np.uint8
        assert all((x == y).all() for x, y in zip(a, b))
        assert (a[0] != a[-1]).any(), "the cart moved, the frames did not"
        path = write_gif(a, r"{tmp_path}/cartpole.gif", fps=25)
        gif = Image.open(path)
        assert gif.n_frames == 12 and gif.size == (64, 48)
        try:
            frames(env, jax.tree.map(lambda x: jnp.stack([x, x]), stacked))
        except ValueError as e:
            print(e)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines[0].startswith("skip"):
        pytest.skip(lines[0])
    assert lines[0] in ("backend egl", "backend osmesa")
    assert lines[1].startswith("the trajectory must be a list of States or one State")
    assert "got data.qpos of shape (2, 12, 2)" in lines[1]
