"""Loading an `MjModel` from whatever the user holds: a model, MJCF text, a path, a gym id."""

from __future__ import annotations

import os
import pathlib
from typing import Any, Protocol, cast

import numpy as np

try:
    import mujoco
except ImportError as e:  # the optional extra is missing: say how to get it
    raise ImportError("`jaxbridge.mujoco` needs MuJoCo: `pip install jaxbridge[mujoco]`") from e

__all__ = ["load_model", "load_gymnasium", "mj", "MjModel", "MjData"]


# MuJoCo's bindings ship no type stubs: these Protocols state the parts jaxbridge uses, and
# `mj` is the module seen through them (the very same module object at run time).


class MjOption(Protocol):
    timestep: float
    integrator: int
    solver: int
    disableflags: int
    enableflags: int


class MjModel(Protocol):
    """The `mujoco.MjModel` attributes jaxbridge reads."""

    nq: int
    nv: int
    na: int
    nu: int
    nsensordata: int
    nconmax: int
    nkey: int
    opt: MjOption
    geom_bodyid: np.ndarray
    actuator_ctrllimited: np.ndarray

    @staticmethod
    def from_xml_string(xml: str) -> MjModel: ...
    @staticmethod
    def from_xml_path(path: str) -> MjModel: ...
    @staticmethod
    def from_binary_path(path: str) -> MjModel: ...


class MjWarnings(Protocol):
    number: np.ndarray


class MjData(Protocol):
    """The `mujoco.MjData` attributes jaxbridge reads and writes."""

    ctrl: np.ndarray
    ncon: int
    contact: Any  # a struct of arrays, read field by field with getattr
    warning: MjWarnings


class _StateBits(Protocol):
    mjSTATE_TIME: int
    mjSTATE_QPOS: int
    mjSTATE_QVEL: int
    mjSTATE_ACT: int
    mjSTATE_HISTORY: int
    mjSTATE_PLUGIN: int
    mjSTATE_PLASTIC: int
    mjSTATE_CTRL: int
    mjSTATE_FULLPHYSICS: int


class _DisableBits(Protocol):
    mjDSBL_AUTORESET: int
    mjDSBL_CLAMPCTRL: int


class _MuJoCo(Protocol):
    """The parts of the `mujoco` module jaxbridge calls."""

    __version__: str
    MjModel: type[MjModel]
    mjtState: _StateBits
    mjtDisableBit: _DisableBits
    mjtEnableBit: Any  # read with getattr: its members differ between MuJoCo versions
    mjMAXVAL: float

    def MjData(self, model: MjModel) -> MjData: ...  # noqa: N802  (MuJoCo's name)
    def mj_resetData(self, m: MjModel, d: MjData) -> None: ...  # noqa: N802
    def mj_resetDataKeyframe(self, m: MjModel, d: MjData, key: int) -> None: ...  # noqa: N802
    def mj_setState(self, m: MjModel, d: MjData, state: np.ndarray, spec: int) -> None: ...  # noqa: N802
    def mj_getState(self, m: MjModel, d: MjData, state: np.ndarray, spec: int) -> None: ...  # noqa: N802
    def mj_stateSize(self, m: MjModel, spec: int) -> int: ...  # noqa: N802
    def mj_forward(self, m: MjModel, d: MjData) -> None: ...


mj = cast("_MuJoCo", mujoco)


def load_model(model: Any) -> MjModel:
    """Turns an `MjModel`, MJCF text or a path to an MJCF/MJB file into an `MjModel`.

    Args:
        model: a `mujoco.MjModel` (used as is, not copied), a string of MJCF XML (anything
            starting with `<`), or a `str`/`os.PathLike` path to an `.xml` or `.mjb` file.

    Returns:
        The compiled `mujoco.MjModel`.

    Raises:
        TypeError: `model` is none of these.
        FileNotFoundError: the path does not exist.

    Example:
        >>> m = load_model('<mujoco><worldbody><body><freejoint/><geom size=".1"/>'
        ...                '</body></worldbody></mujoco>')
        >>> (m.nq, m.nv)
        (7, 6)
    """
    if isinstance(model, mj.MjModel):
        return model
    if isinstance(model, str) and model.lstrip().startswith("<"):
        return mj.MjModel.from_xml_string(model)
    if isinstance(model, str | os.PathLike):
        path = pathlib.Path(model)
        if not path.exists():
            raise FileNotFoundError(
                f"`jaxbridge.mujoco.Simulator(model=...)`: no file at {str(path)!r}. Pass an "
                "`mujoco.MjModel`, MJCF text (starting with `<`), or the path of an .xml/.mjb file."
            )
        if path.suffix.lower() == ".mjb":
            return mj.MjModel.from_binary_path(str(path))
        return mj.MjModel.from_xml_path(str(path))
    raise TypeError(
        "`jaxbridge.mujoco.Simulator(model=...)` must be a `mujoco.MjModel`, MJCF text or a path "
        f"to an .xml/.mjb file; got {type(model).__name__}. For a gymnasium environment use "
        "`Simulator.from_gymnasium(env_id)`."
    )


def load_gymnasium(env_id: str, **make_kwargs: Any) -> tuple[MjModel, int]:
    """The `MjModel` and `frame_skip` of a gymnasium MuJoCo environment.

    The environment is made once (with `make_kwargs`, e.g. `xml_file=` or `frame_skip=`),
    its model taken, and the environment closed.

    Args:
        env_id: a gymnasium id such as `"Humanoid-v5"`.
        **make_kwargs: passed to `gymnasium.make`.

    Returns:
        `(model, frame_skip)`: one environment step is `frame_skip` physics steps.

    Raises:
        ImportError: gymnasium is not installed.
        TypeError: the environment is not a MuJoCo environment.

    Example:
        >>> model, frame_skip = load_gymnasium("Hopper-v5")
        >>> (model.nq, frame_skip)
        (6, 4)
    """
    try:
        import gymnasium
    except ImportError as e:
        raise ImportError(
            "`Simulator.from_gymnasium` needs gymnasium: `pip install jaxbridge[mujoco]`"
        ) from e
    env = gymnasium.make(env_id, **make_kwargs)
    try:
        inner = env.unwrapped
        model = getattr(inner, "model", None)
        if not isinstance(model, mj.MjModel):
            raise TypeError(
                f"`Simulator.from_gymnasium({env_id!r})`: this environment has no "
                "`mujoco.MjModel` (`env.unwrapped.model`); pass a MuJoCo environment id "
                "such as 'Humanoid-v5'."
            )
        return model, int(getattr(inner, "frame_skip", 1))
    finally:
        env.close()
