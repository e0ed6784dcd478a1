"""Playground's tests: the reference on the path, and JAX's default promotion rules, which
Playground's own environment code relies on (the suite's conftest makes them strict)."""

import os
import sys

import jax
import pytest

pytest.importorskip("mujoco_playground")
sys.path.insert(0, os.path.dirname(__file__))  # reference.py


@pytest.fixture(autouse=True)
def playground_promotion():
    # Playground's humanoid broadcasts (4, 3) against (3,); its rewards mix dtypes.
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        yield
