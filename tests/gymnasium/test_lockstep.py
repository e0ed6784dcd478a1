"""Every id, stepped in lockstep with gymnasium's own environment: obs, reward, flags, info."""

from __future__ import annotations

import pytest
from conftest import lockstep

# (id, keywords other than the defaults, max_episode_steps, steps); the defaults run too.
CASES = [
    ("Hopper-v5", {}, None, 60),
    (
        "Hopper-v5",
        {
            "frame_skip": 3,
            "ctrl_cost_weight": 0.01,
            "healthy_reward": 0.5,
            "healthy_z_range": (0.8, 2.0),
            "healthy_angle_range": (-0.3, 0.3),
            "exclude_current_positions_from_observation": False,
        },
        15,
        40,
    ),
    ("Hopper-v5", {"terminate_when_unhealthy": False, "reset_noise_scale": 0.1}, None, 30),
]


@pytest.mark.parametrize(("env_id", "kwargs", "limit", "steps"), CASES)
def test_lockstep(x64, env_id, kwargs, limit, steps):
    ended = lockstep(env_id, kwargs, steps=steps, max_episode_steps=limit)
    if limit is not None:
        assert ended >= steps // limit  # truncation happened, and the next episode matched
