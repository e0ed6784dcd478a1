"""Every id, stepped in lockstep with gymnasium's own environment: obs, reward, flags, info.

The default run steps each id once with keywords other than the defaults, through a
truncation and into the next episode; the slow run (JAXBRIDGE_SLOW=1) steps every id with
its defaults and with those keywords, for several episodes.
"""

from __future__ import annotations

import pytest
from gym_helpers import lockstep

import jaxbridge.gymnasium as jg

KEYWORDS = {
    "Ant-v5": {
        "ctrl_cost_weight": 0.1,
        "contact_cost_weight": 1e-3,
        "healthy_z_range": (0.3, 1.0),
        "contact_force_range": (-0.5, 0.5),
        "reset_noise_scale": 0.05,
        "exclude_current_positions_from_observation": False,
        "main_body": "torso",
    },
    "HalfCheetah-v5": {
        "forward_reward_weight": 2.0,
        "ctrl_cost_weight": 0.5,
        "reset_noise_scale": 0.2,
        "exclude_current_positions_from_observation": False,
        "frame_skip": 3,
    },
    "Hopper-v5": {
        "frame_skip": 3,
        "ctrl_cost_weight": 0.01,
        "healthy_reward": 0.5,
        "healthy_state_range": (-50.0, 50.0),
        "healthy_z_range": (0.8, 2.0),
        "healthy_angle_range": (-0.3, 0.3),
        "exclude_current_positions_from_observation": False,
    },
    "Humanoid-v5": {
        "include_cinert_in_observation": False,
        "include_cvel_in_observation": False,
        "contact_cost_weight": 1e-6,
        "contact_cost_range": (-1.0, 5.0),
        "healthy_z_range": (0.9, 2.0),
        "exclude_current_positions_from_observation": False,
        "forward_reward_weight": 1.0,
    },
    "HumanoidStandup-v5": {
        "include_qfrc_actuator_in_observation": False,
        "impact_cost_weight": 1e-6,
        "impact_cost_range": (-1.0, 5.0),
        "ctrl_cost_weight": 0.05,
        "uph_cost_weight": 2.0,  # accepted and, as in gymnasium 1.4, unused
        "reset_noise_scale": 0.05,
    },
    "InvertedDoublePendulum-v5": {"healthy_reward": 5.0, "reset_noise_scale": 0.2, "frame_skip": 3},
    "InvertedPendulum-v5": {"reset_noise_scale": 0.05, "frame_skip": 3},
    "Pusher-v5": {
        "reward_near_weight": 1.0,
        "reward_dist_weight": 0.5,
        "reward_control_weight": 0.2,
    },
    "Reacher-v5": {"reward_dist_weight": 2.0, "reward_control_weight": 0.5, "frame_skip": 3},
    "Swimmer-v5": {
        "forward_reward_weight": 2.0,
        "ctrl_cost_weight": 1e-3,
        "reset_noise_scale": 0.2,
        "exclude_current_positions_from_observation": False,
    },
    "Walker2d-v5": {
        "xml_file": "walker2d.xml",  # gymnasium's older model of the walker
        "healthy_z_range": (0.7, 2.0),
        "healthy_angle_range": (-0.5, 0.5),
        "terminate_when_unhealthy": False,
        "ctrl_cost_weight": 0.01,
    },
}


def test_every_id_has_a_case():
    assert set(KEYWORDS) == set(jg.ENV_IDS)


@pytest.mark.parametrize("env_id", jg.ENV_IDS)
def test_lockstep_keywords(x64, env_id):
    # The 3-D bodies fall for some steps before their first contact.
    limit = 25 if env_id in ("Ant-v5", "Humanoid-v5", "HumanoidStandup-v5") else 10
    stats = lockstep(env_id, KEYWORDS[env_id], steps=2 * limit + 4, max_episode_steps=limit)
    assert stats["ended"] >= 2  # truncation, and the next episodes match too
    if "cfrc_ext" in stats:  # the contact forces were exercised, not only zeros
        assert stats["cfrc_ext"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("defaults", [True, False])
@pytest.mark.parametrize("env_id", jg.ENV_IDS)
def test_lockstep_long(x64, env_id, defaults):
    kwargs = {} if defaults else KEYWORDS[env_id]
    stats = lockstep(env_id, kwargs, steps=400, max_episode_steps=150, seed=5)
    assert stats["ended"] >= 2
