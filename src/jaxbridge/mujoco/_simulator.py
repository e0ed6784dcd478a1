"""`Simulator`: MuJoCo's C engine as JAX functions of a flat state array."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _derivatives
from ._core import SimCore
from ._engine import Engine
from ._fieldcalls import DataCalls
from ._forward import ForwardCalls
from ._model import load_gymnasium, load_model
from ._outputs import DEFAULT_OUTPUTS
from ._rollout import RolloutCalls, Trajectory
from ._state import StateParts
from ._step import StepCalls
from ._tangent import QposMap

if TYPE_CHECKING:  # jaxtyping is a test-time dependency only
    from jaxtyping import Array, ArrayLike, Float

    # Aliases: ruff reads jaxtyping's shape strings in annotations as (bad) forward references.
    States = Float[Array, "*batch nstate"]
    StatesLike = Float[ArrayLike, "*batch nstate"]
    CtrlsLike = Float[ArrayLike, "*batch nu"]
    CtrlSequences = Float[ArrayLike, "*batch T nu"]


__all__ = ["Simulator", "Trajectory"]

_DEFAULT_MAX_CONTACTS = 64  # MuJoCo 4 sizes its contact buffer dynamically (nconmax = -1)


class Simulator:
    """A MuJoCo model as JAX functions: `step`, `rollout` and `forward` of a flat state.

    The state is a float array in MuJoCo's `mjSTATE_FULLPHYSICS` layout (time, qpos, qvel,
    act, ...; see `make_state` and `split_state`), exactly what `mujoco.rollout` takes.

    Under `jax.jit` each method is one host call into MuJoCo. Under `jax.vmap` (any nesting)
    and for leading batch dimensions the whole batch is still ONE host call, run on MuJoCo's
    own C thread pool (`mujoco.rollout`, `nthread` threads, GIL released, one `MjData` per
    thread). Results are float64 from MuJoCo, returned in the state's dtype (float32 unless x64
    is on: enable x64 for bit-exact agreement with MuJoCo). `step` and `rollout` are pure
    functions of their arguments: every element starts from a freshly reset `MjData` with a
    zero warm start, whichever thread runs it.

    Derivatives (`jax.grad`, `jvp`, `jacfwd`, `jacrev`, and their vmaps) of `step` and
    `rollout` come from `mujoco.mjd_transitionFD` (differences in tangent space that do not
    straddle contact changes, computed for the whole batch in one host call; see
    "Derivatives through contact" in docs/mujoco.md) mapped to the coordinates of the state
    array (4 per quaternion, not 3). For RK4 models, which `mjd_transitionFD` refuses (the
    gymnasium models use RK4), the same differences run as one batched `mujoco.rollout`
    instead; `derivatives="fd"` forces this for any model. `rollout` chains the per-step
    Jacobians, without simulating again, in both modes. The constraint solver's result
    depends on its warm start (PGS most; CG and Newton where the warm start meets their
    tolerance), which `rollout` carries from step to step and `step` over its `frame_skip`
    physics steps: unless `mjDSBL_WARMSTART`, the derivatives carry it too (differences of
    MuJoCo steps over the state, the control and the warm start: more costly; see
    "Derivatives through contact"). `forward`'s kinematic
    outputs have analytic Jacobians (MuJoCo's `mj_jac*`), the others differences. Second-order
    derivatives are not supported. Time, `history`, `plugin` and `plastic` state are treated
    as constants.

    Args:
        model: a `MjModel`, MJCF text, or a path to an `.xml`/`.mjb` file.
        nthread: threads of the MuJoCo pool; `None` for the CPUs this process may use.
        frame_skip: physics steps per `step` (and per control of `rollout`).
        max_contacts: how many contacts `forward`'s `contact_*` outputs hold (padded with
            zeros; the count is in `ncon`).
        derivatives: `"auto"`, `"mjd"` (`mjd_transitionFD`) or `"fd"` (batched rollouts).
            Where the warm start is carried (above), a rollout of several controls and a
            `step` of several physics steps are differenced over MuJoCo steps whatever
            this says: `mjd_transitionFD` holds the warm start fixed.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxbridge.mujoco import Simulator
        >>> sim = Simulator('<mujoco><worldbody><body pos="0 0 1"><joint name="z" type="slide" '
        ...                 'axis="0 0 1"/><geom size=".1"/></body></worldbody>'
        ...                 '<actuator><motor joint="z"/></actuator></mujoco>')
        >>> state = sim.make_state(qvel=jnp.array([1.0]))
        >>> nxt = jax.jit(sim.step)(state, jnp.array([0.0]))
        >>> round(float(sim.split_state(nxt).qpos[0]), 3)
        0.002
        >>> jax.grad(lambda u: sim.step(state, u)[2])(jnp.array([0.0])).shape
        (1,)
    """

    def __init__(
        self,
        model: Any,
        *,
        nthread: int | None = None,
        frame_skip: int = 1,
        max_contacts: int | None = None,
        derivatives: str = "auto",
    ):
        self.model = load_model(model)
        if not isinstance(frame_skip, int | np.integer) or frame_skip < 1:
            raise ValueError(
                f"`Simulator(frame_skip=...)` must be an int >= 1; got {frame_skip!r}."
            )
        if derivatives not in ("auto", "mjd", "fd"):
            raise ValueError(
                f"`Simulator(derivatives=...)` must be 'auto', 'mjd' or 'fd'; got {derivatives!r}."
            )
        if derivatives == "mjd" and not _derivatives.uses_mjd(self.model):
            raise ValueError(
                "`Simulator(derivatives='mjd')`: `mjd_transitionFD` does not support this model's "
                "RK4 integrator. Use derivatives='auto' (batched finite differences over rollouts)."
            )
        if max_contacts is None:
            max_contacts = self.model.nconmax if self.model.nconmax > 0 else _DEFAULT_MAX_CONTACTS
        self.frame_skip = int(frame_skip)
        engine = Engine(self.model, nthread)
        self._layout = engine.layout
        self.nthread = engine.nthread
        # Sizes as plain ints: an MjModel attribute read is a call into the bindings, on
        # every host call.
        self._nu, self._nsensordata = int(self.model.nu), int(self.model.nsensordata)
        # What the host calls read, handed to them (they never see this class).
        self._core = SimCore(
            model=self.model,
            engine=engine,
            qmap=QposMap.from_model(self.model),
            layout=self._layout,
            nu=self._nu,
            nsensordata=self._nsensordata,
            frame_skip=int(frame_skip),
            derivatives=derivatives,
            max_contacts=int(max_contacts),
        )
        self._step = StepCalls(self._core)
        self._rollout = RolloutCalls(self._core)
        self._forward = ForwardCalls(self._core)

    @classmethod
    def from_gymnasium(
        cls,
        env_id: str,
        *,
        nthread: int | None = None,
        max_contacts: int | None = None,
        derivatives: str = "auto",
        **make_kwargs: Any,
    ) -> Simulator:
        """The model and `frame_skip` of a gymnasium MuJoCo environment, so `step` is one env step.

        Args:
            env_id: a gymnasium id, e.g. `"Humanoid-v5"`.
            nthread: as for `Simulator`.
            max_contacts: as for `Simulator`.
            derivatives: as for `Simulator`.
            **make_kwargs: passed to `gymnasium.make` (e.g. `xml_file=`, `frame_skip=`).

        Returns:
            A `Simulator`.

        Example:
            >>> sim = Simulator.from_gymnasium("Hopper-v5")
            >>> (sim.frame_skip, sim.nstate)
            (4, 13)
        """
        model, frame_skip = load_gymnasium(env_id, **make_kwargs)
        return cls(
            model,
            nthread=nthread,
            frame_skip=frame_skip,
            max_contacts=max_contacts,
            derivatives=derivatives,
        )

    def __repr__(self) -> str:
        return repr(self._core)

    @property
    def derivatives(self) -> str:
        """`"auto"`, `"mjd"` or `"fd"` (see the class); may be set, and is read on every call."""
        return self._core.derivatives

    @derivatives.setter
    def derivatives(self, value: str) -> None:
        self._core.derivatives = value

    @property
    def max_contacts(self) -> int:
        """How many contacts `forward`'s `contact_*` outputs hold."""
        return self._core.max_contacts

    @max_contacts.setter
    def max_contacts(self, value: int) -> None:
        self._core.max_contacts = int(value)

    @property
    def core(self) -> SimCore:
        """What this simulator's host calls read: its model, engine, qpos map and options.

        For instrumentation and for benchmarks that call the host side directly (the demo
        replaces `core.engine` with a wrapper that times MuJoCo's share of a run). The calls
        read it on every call, so a replaced engine is the one they use. Its fields are
        internal: they may change between releases.
        """
        return self._core

    # -- sizes and state -----------------------------------------------------------------

    @property
    def nstate(self) -> int:
        """Length of the `mjSTATE_FULLPHYSICS` state vector."""
        return self._layout.nstate

    @property
    def nu(self) -> int:
        """Length of a control vector."""
        return self._nu

    @property
    def nsensordata(self) -> int:
        """Length of the sensor vector."""
        return self._nsensordata

    def initial_state(self, dtype: Any = None) -> Array:
        """The state of a fresh `MjData`: `qpos0` (or keyframe 0), zero velocity, time 0.

        Args:
            dtype: the float dtype; `None` for JAX's default (float64 under x64).

        Returns:
            A `(nstate,)` array.
        """
        return self._layout.make(dtype)

    def make_state(
        self,
        qpos: ArrayLike | None = None,
        qvel: ArrayLike | None = None,
        act: ArrayLike | None = None,
        time: ArrayLike | None = None,
        *,
        history: ArrayLike | None = None,
        plugin: ArrayLike | None = None,
        plastic: ArrayLike | None = None,
        dtype: Any = None,
    ) -> States:
        """A state from its parts; the parts not given come from `initial_state()`.

        JAX-traceable and differentiable. Leading dimensions of the parts broadcast together:
        `make_state(qpos=q)` with `q` of shape `(8, nq)` gives 8 states.

        Args:
            qpos: `(*batch, nq)` positions (quaternions need not be normalised: MuJoCo
                normalises them, and derivatives account for it).
            qvel: `(*batch, nv)` velocities.
            act: `(*batch, na)` actuator activations.
            time: `(*batch,)` simulation time.
            history: `(*batch, nhistory)`, plugin: plugin state, plastic: plasticity state.
            dtype: the float dtype; `None` for JAX's default.

        Returns:
            A `(*batch, nstate)` array.

        Raises:
            ValueError: a part has the wrong trailing size, or the batch shapes clash.
        """
        return self._layout.make(
            dtype,
            time=time,
            qpos=qpos,
            qvel=qvel,
            act=act,
            history=history,
            plugin=plugin,
            plastic=plastic,
        )

    def split_state(self, state: StatesLike) -> StateParts:
        """The named parts of a state (`time`, `qpos`, `qvel`, `act`, ...); JAX-traceable.

        Args:
            state: a `(*batch, nstate)` state.

        Returns:
            A `StateParts` named tuple of views with the same leading dimensions.
        """
        return self._layout.split(state)

    # -- step ----------------------------------------------------------------------------

    def _batch(self, state: Any, ctrl: Any, what: str) -> tuple[jax.Array, jax.Array, tuple]:
        state = jnp.asarray(state)
        self._layout.check(state, f"{what}(state=...)")
        if not jnp.issubdtype(state.dtype, jnp.floating):
            state = state.astype(jnp.zeros(()).dtype)
        if ctrl is None:
            ctrl = jnp.zeros(self.nu, state.dtype)
        ctrl = jnp.asarray(ctrl)
        if ctrl.ndim == 0 or ctrl.shape[-1] != self.nu:
            raise ValueError(
                f"`Simulator.{what}(ctrl=...)` must have trailing dimension nu={self.nu} (this "
                f"model's number of actuators); got shape {tuple(ctrl.shape)}."
            )
        return state, ctrl.astype(state.dtype), state.shape[:-1]

    def step(
        self,
        state: StatesLike,
        ctrl: CtrlsLike | None = None,
        *,
        nstep: int | None = None,
    ) -> States:
        """The state after `frame_skip` (or `nstep`) physics steps with control `ctrl` held.

        Equal bit for bit (in float64) to `mj.mj_setState` then `mj_step` on a fresh
        `MjData`. An element that diverges (MuJoCo warns and resets it: NaN or Inf in the
        state or control, an unstable simulation), or whose control MuJoCo replaces by zero
        (beyond 1e10 after clamping), comes back as all NaN rather than as
        MuJoCo's reset state, and the other elements are unaffected; test with
        `jnp.isnan(next_state).any(-1)`, or use `rollout` for a boolean `diverged` flag.

        Args:
            state: `(*batch, nstate)` states.
            ctrl: `(*batch, nu)` controls (leading dimensions broadcast with `state`'s);
                `None` for zeros.
            nstep: physics steps; `None` for `frame_skip`.

        Returns:
            The `(*batch, nstate)` next states, in `state`'s dtype.

        Raises:
            ValueError: `state` or `ctrl` has the wrong trailing size.
        """
        state, ctrl, _ = self._batch(state, ctrl, "step")
        nstep = self._nstep(nstep)
        batch = jnp.broadcast_shapes(state.shape[:-1], ctrl.shape[:-1])
        state = jnp.broadcast_to(state, (*batch, self.nstate))
        ctrl = jnp.broadcast_to(ctrl, (*batch, self.nu))
        f = self._step.host(nstep)
        for _ in batch:  # leading dimensions are batches too: one host call for all of them
            f = jax.vmap(f)
        return f(state, ctrl)

    def _nstep(self, nstep: int | None) -> int:
        if nstep is None:
            return self.frame_skip
        if not isinstance(nstep, int | np.integer) or nstep < 1:
            raise ValueError(f"`Simulator.step(nstep=...)` must be an int >= 1; got {nstep!r}.")
        return int(nstep)

    # -- rollout -------------------------------------------------------------------------

    def rollout(
        self,
        state: StatesLike,
        ctrls: CtrlSequences,
    ) -> Trajectory:
        """Simulates `T` controls from `state`, each held for `frame_skip` physics steps.

        One host call for the whole trajectory (and the whole batch). Equal bit for bit (in
        float64) to repeated `mj_step` from a fresh `MjData`, and to `mujoco.rollout`.

        Args:
            state: `(*batch, nstate)` initial states.
            ctrls: `(*batch, T, nu)` controls (leading dimensions broadcast with `state`'s).

        Returns:
            A `Trajectory(state, sensordata, diverged)`; see `Trajectory`. Derivatives flow
            through `state` and `sensordata` by chaining the per-step Jacobians (forward and
            reverse mode), with the solver's warm start as part of the chained state
            (unless `mjDSBL_WARMSTART`); `diverged` has none.

        Raises:
            ValueError: `state` or `ctrls` has the wrong size.
            RuntimeError: (from a derivative; under `jit` XLA wraps it) `mjDSBL_WARMSTART`
                was cleared in `model.opt.disableflags` after the derivative was traced.
        """
        state, ctrls, _ = self._batch(state, ctrls, "rollout")
        if ctrls.ndim < 2:
            raise ValueError(
                f"`Simulator.rollout(ctrls=...)` must have shape (*batch, T, nu={self.nu}); got "
                f"shape {tuple(ctrls.shape)}. For a single step use `Simulator.step`."
            )
        batch = jnp.broadcast_shapes(state.shape[:-1], ctrls.shape[:-2])
        state = jnp.broadcast_to(state, (*batch, self.nstate))
        ctrls = jnp.broadcast_to(ctrls, (*batch, *ctrls.shape[-2:]))
        f = lambda s, u, _f=self._rollout.call: _f(s, u, self.frame_skip)  # noqa: E731
        for _ in batch:
            f = jax.vmap(f)
        return Trajectory(*f(state, ctrls))

    # -- named fields --------------------------------------------------------------------

    @functools.cached_property
    def fields(self) -> DataCalls:
        """This model's field calls (`DataCalls`): named `MjData` fields in, named fields out."""
        return DataCalls(self.model, nthread=self.nthread)

    def step_fields(
        self, inputs: Mapping[str, Any], outputs: Sequence[str], *, nstep: int | None = None
    ) -> dict[str, Array]:
        """`frame_skip` (or `nstep`) calls of `mj_step` from named `MjData` fields; the named
        fields after them: derived fields (`xpos`, `cvel`, `sensordata`, ...), the warm start
        (`qacc_warmstart`, in and out, so a loop can carry it as gymnasium's `MjData` does),
        and `cfrc_ext` from `mj_rnePostConstraint` (on the rows in contact). See
        `DataCalls.step` for the fields, shapes and derivatives.

        Example:
            >>> sim = Simulator.from_gymnasium("Hopper-v5")
            >>> out = sim.step_fields({"physics": sim.initial_state()}, ("physics", "xpos"))
            >>> out["physics"].shape, out["xpos"].shape
            ((13,), (5, 3))
        """
        return self.fields.step(inputs, outputs, nstep=self._nstep(nstep))

    def forward_fields(self, inputs: Mapping[str, Any], outputs: Sequence[str]) -> dict[str, Array]:
        """`mj_forward` at named `MjData` fields; the named fields after it (as
        `DataCalls.forward`)."""
        return self.fields.forward(inputs, outputs)

    # -- forward -------------------------------------------------------------------------

    def forward(
        self,
        state: StatesLike,
        ctrl: CtrlsLike | None = None,
        outputs: Sequence[str] = DEFAULT_OUTPUTS,
    ) -> dict[str, Array]:
        """Named quantities after `mj_forward` at `state` (and `ctrl`), each of fixed shape.

        Args:
            state: `(*batch, nstate)` states.
            ctrl: `(*batch, nu)` controls; `None` for zeros.
            outputs: names of fixed-size `MjData` arrays (`"xpos"`, `"xquat"`,
                `"site_xpos"`, `"sensordata"`, `"qacc"`, `"subtree_com"`, ...), and
                `"contact_<field>"` for fields of `MjData.contact` (`"contact_dist"`,
                `"contact_pos"`, `"contact_geom"`, ...): the first `max_contacts` contacts,
                zero-padded, with their count `"ncon"` added (it may exceed `max_contacts`).

        Returns:
            A dict from name to `(*batch, *shape)` array; floats in `state`'s dtype, integers
            as int32. Derivatives (all modes) of the float outputs: analytic for positions and
            orientations of bodies, geoms and sites and for `subtree_com`, differences at the
            cheapest pipeline stage otherwise, mapped to the state's coordinates. Where
            MuJoCo warned during `mj_forward` (a control it replaced by zero: NaN, Inf or
            beyond 1e10 after clamping; a full contact buffer), that element's float outputs
            are NaN.

        Raises:
            ValueError: an unknown output name, or `state`/`ctrl` of the wrong size.

        Example:
            >>> from jaxbridge.mujoco import Simulator
            >>> sim = Simulator.from_gymnasium("Hopper-v5")
            >>> out = sim.forward(sim.initial_state(), outputs=("xpos", "contact_dist"))
            >>> sorted(out), out["xpos"].shape, out["contact_dist"].shape
            (['contact_dist', 'ncon', 'xpos'], (5, 3), (64,))
        """
        if isinstance(outputs, str):
            outputs = (outputs,)
        names = tuple(outputs)
        self._core.engine.output_specs(names, self.max_contacts)  # unknown names fail here
        state, ctrl, _ = self._batch(state, ctrl, "forward")
        batch = jnp.broadcast_shapes(state.shape[:-1], ctrl.shape[:-1])
        state = jnp.broadcast_to(state, (*batch, self.nstate))
        ctrl = jnp.broadcast_to(ctrl, (*batch, self.nu))
        f = functools.partial(self._forward.host, names=names)
        for _ in batch:
            f = jax.vmap(f)
        return f(state, ctrl)
