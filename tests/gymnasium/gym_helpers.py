"""Lockstep against gymnasium itself: the helpers the tests of `jaxbridge.gymnasium` share."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import jax
import numpy as np
import pytest

jg = pytest.importorskip("jaxbridge.gymnasium")

RTOL, ATOL = 1e-9, 1e-12  # relative, with an absolute floor for values that round to zero


def gym_make(env_id: str, **kwargs: Any) -> Any:
    """`gymnasium.make`, typed loosely (its environments' attributes are read freely here)."""
    return gymnasium.make(env_id, **kwargs)


def gym_make_vec(env_id: str, **kwargs: Any) -> Any:
    return gymnasium.make_vec(env_id, **kwargs)


def close(ours: Any, theirs: Any, what: str) -> None:
    np.testing.assert_allclose(
        np.asarray(ours, np.float64), np.asarray(theirs, np.float64), RTOL, ATOL, err_msg=what
    )


def close_info(ours: dict, theirs: dict, what: str) -> None:
    assert set(ours) == set(theirs), f"{what}: info keys {sorted(ours)} != {sorted(theirs)}"
    for k in theirs:
        close(ours[k], theirs[k], f"{what}: info[{k!r}]")


@functools.cache
def jitted(env: Any) -> tuple[Any, Any]:
    return jax.jit(env.step), jax.jit(env.observation)


def lockstep(
    env_id: str,
    kwargs: dict,
    *,
    steps: int,
    seed: int = 0,
    max_episode_steps: int | None = None,
    action_scale: float = 1.0,
) -> dict[str, float]:
    """Steps ours and gymnasium's with the same random actions for `steps` steps, resetting
    gymnasium where an episode ends and taking its state; asserts every number of every step.
    Returns the number of episodes that ended (`"ended"`) and, for an environment that reads
    contact forces, the largest `|cfrc_ext|` met (`"cfrc_ext"`)."""
    extra: dict[str, Any] = (
        {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    )
    env = jg.make(env_id, **kwargs, **extra)
    g = gym_make(env_id, **kwargs, **extra)
    step, observation = jitted(env)
    rng = np.random.default_rng(seed)
    obs, info = g.reset(seed=seed)
    state = env.state_from_gymnasium(g)
    close(observation(state, None), obs, f"{env_id} reset obs")
    close_info(env.state_info(state), info, f"{env_id} reset")
    stats = {"ended": 0.0}
    low, high = g.action_space.low, g.action_space.high
    for t in range(steps):
        a = action_scale * rng.uniform(low, high).astype(np.float64)
        state, o, r, term, trunc, inf = step(state, a)
        o2, r2, term2, trunc2, inf2 = g.step(a)
        what = f"{env_id} step {t}"
        close(o, o2, what + " obs")
        close(r, r2, what + " reward")
        assert bool(term) == term2 and bool(trunc) == trunc2, (what, term, term2, trunc, trunc2)
        close_info(inf, inf2, what)
        if "cfrc_ext" in state.fields:
            seen = float(np.abs(state.fields["cfrc_ext"]).max())
            stats["cfrc_ext"] = max(stats.get("cfrc_ext", 0.0), seen)
        if term2 or trunc2:
            stats["ended"] += 1
            obs, info = g.reset(seed=seed + t + 1)
            state = env.state_from_gymnasium(g)
            close(observation(state, None), obs, what + " reset obs")
    g.close()
    return stats
