"""`Simulator`: MuJoCo's C engine as JAX functions of a flat state array."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import jaxbridge

from .._batching import VECTORIZED, AbstractBatching, flatten_batch
from . import _derivatives, _jacobians, _warmstart
from ._engine import DEFAULT_OUTPUTS, Engine
from ._model import load_gymnasium, load_model
from ._state import StateParts, flat

if TYPE_CHECKING:  # jaxtyping is a test-time dependency only
    from jaxtyping import Array, ArrayLike, Float

    # Aliases: ruff reads jaxtyping's shape strings in annotations as (bad) forward references.
    States = Float[Array, "*batch nstate"]
    StatesLike = Float[ArrayLike, "*batch nstate"]
    CtrlsLike = Float[ArrayLike, "*batch nu"]
    CtrlSequences = Float[ArrayLike, "*batch T nu"]

    from .._call import HostCall

__all__ = ["Simulator", "Trajectory"]

_DEFAULT_MAX_CONTACTS = 64  # MuJoCo 4 sizes its contact buffer dynamically (nconmax = -1)


_WARMSTART_CHANGED = (
    "`Simulator.rollout`'s derivative was traced for a model with the solver's warm start "
    "disabled (`mjDSBL_WARMSTART`), and the flag has been cleared since: the traced derivative "
    "would leave out the warm start's sensitivity. Trace it again (a new `jax.jit`) after "
    "changing `model.opt.disableflags`."
)


def _nan_where(diverged: Array, *tangents: Array) -> tuple[Array, ...]:
    """The tangents, NaN for the elements that diverged (a mask by multiplication: linear in
    the tangents, so reverse mode transposes it). A diverged element's differences are taken
    around a reset or a stopped simulation and mean nothing."""
    return tuple(
        t
        * jnp.where(diverged, jnp.nan, 1.0)
        .astype(t.dtype)
        .reshape(diverged.shape + (1,) * (t.ndim - diverged.ndim))
        for t in tangents
    )


class Trajectory(NamedTuple):
    """What `Simulator.rollout` returns.

    Attributes:
        state: `(*batch, T, nstate)`: the state after each control.
        sensordata: `(*batch, T, nsensordata)`: the sensors of the last physics step of each.
        diverged: `(*batch,)` booleans: MuJoCo warned during this rollout (bad qpos, qvel or
            qacc, usually a diverging simulation, or a full contact buffer), reset or stopped
            it, and repeated the state it stopped at for the remaining steps; or the input held
            NaN or Inf, or a control MuJoCo replaces by zero (beyond 1e10 after clamping). The
            other elements of the batch are unaffected. A warning that does not reset (a full
            buffer) is flagged in any physics step, except, with MuJoCo before 4.0, in the
            last one of a batch on the thread pool (see "Divergence and bad input" in
            docs/mujoco.md).
    """

    state: Array
    sensordata: Array
    diverged: Array


def _plain_float64(x: np.ndarray) -> bool:
    """Whether `x` is C-contiguous float64, as `Engine.step_one` takes its arrays."""
    return x.dtype == np.float64 and x.flags.c_contiguous


class _StepBatching(AbstractBatching):
    """A batch of `step`s as one engine call, written straight into XLA's output buffer.

    The generic `"vectorized"` strategy calls the host function and then copies and checks its
    result; `step` is the hot path of a closed loop (one call per `lax.scan` step), so here
    MuJoCo writes the next states into the output buffer itself (with `nstep == 1` and float64).
    """

    name = "vectorized"

    def __init__(self, engine: Engine, nstep: int, step: Callable[..., Any]):
        self.engine = engine
        self.nstep = nstep
        self.nstate = engine.layout.nstate
        self.step = step  # the host function this strategy runs; others (its Jacobian) are
        # batched as `"vectorized"` batches them

    def run(
        self,
        call: HostCall,
        batch: tuple[int, ...],
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
    ) -> None:
        if call.fn is not self.step:
            VECTORIZED.run(call, batch, ins, outs)
            return
        state, ctrl = ins
        out = outs[0]
        B = batch[0] if len(batch) == 1 else math.prod(batch)
        buffers = len(batch) == 1 and state.shape[0] == B and ctrl.shape[0] == B
        if not buffers:  # broadcast or nested batch dimensions: flatten them
            state, ctrl = flatten_batch(state, 1, batch), flatten_batch(ctrl, 1, batch)
            out = out.view()
            out.shape = (B, self.nstate)  # raises rather than copy: XLA's buffers are dense
        direct = out.dtype == np.float64  # `state` and `out` share a dtype, and so does `ctrl`
        if buffers and B == 1 and direct and ctrl.dtype == np.float64:
            # XLA's own (C-contiguous float64) buffers, one element.
            if self.engine.step_one(state, ctrl, out, self.nstep):
                out[...] = np.nan  # see below
            return
        if direct and ctrl.dtype == np.float64:
            diverged = self.engine.step_into(state, ctrl, self.nstep, out)
        else:
            next_state, flags = self.engine.step(state, ctrl, self.nstep)
            out[...] = next_state
            diverged = flags if flags.any() else None
        # MuJoCo resets a diverging element to its initial state: a plausible-looking state
        # that is wrong. NaN cannot pass for a real state, and spares the other elements.
        if diverged is not None:
            out[diverged] = np.nan

    def buffer_call(
        self, call: HostCall, in_shapes: Sequence[tuple], out_shapes: Sequence[tuple]
    ) -> Callable[..., None] | None:
        """The closed loop's own `buffer_callback` function, for a `step` of float64 states
        and controls under at most one `vmap` of both (one call per `lax.scan` step).

        `HostCall`'s generic call makes its inputs read-only and checks that no reference to
        them outlives it, guards for a user's code that cost microseconds per call; the
        engine's own code here copies its inputs into MuJoCo and keeps nothing. What runs is
        `run`'s: MuJoCo writes into XLA's output buffer, a diverged element comes back NaN,
        and an error is raised as `HostCall` raises it.
        """
        if call.fn is not self.step or len(in_shapes) != 2 or len(out_shapes) != 1:
            return None
        if any(np.dtype(a.dtype) != np.float64 for a in (*call.in_avals, *call.spec.avals)):
            return None
        (s_shape, u_shape), (o_shape,) = in_shapes, out_shapes
        rank = len(s_shape)  # 1: a `lax.scan` of `sim.step` without `vmap`; 2: one `vmap`
        if (
            rank not in (1, 2)
            or len(u_shape) != rank
            or (rank == 2 and not u_shape[0] == s_shape[0] >= 1)
        ):
            return None  # broadcast controls, nested or empty batches: `run` takes them
        assert tuple(o_shape) == tuple(s_shape)
        B = s_shape[0] if rank == 2 else 1
        step, fail = self.engine.stepper(B, self.nstep, rank), call.fail

        def own(ctx: Any, outs: Any, state: Any, ctrl: Any) -> None:
            del ctx
            try:
                out = outs[0].__array__()
                diverged = step(state.__array__(), ctrl.__array__(), out)
                if diverged is not None:  # flags of a batch; any flag of one element is it
                    out[diverged if rank == 2 else ...] = np.nan
            except Exception as e:
                raise fail(e) from e

        return own


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
        self.max_contacts = int(max_contacts)
        self.derivatives = derivatives
        self._engine = Engine(self.model, nthread)
        self._layout = self._engine.layout
        self._qmap = _derivatives.QposMap.from_model(self.model)
        self.nthread = self._engine.nthread
        # Sizes as plain ints: MjModel attribute reads cost microseconds on every host call.
        self._nu, self._nsensordata = int(self.model.nu), int(self.model.nsensordata)

        # One host function per `nstep`, with `nstep` bound rather than static: positional
        # array arguments take the host call's fast path (no argument rebuilding per call).
        self._step_hosts: dict[int, Callable[..., Any]] = {}
        self._rollout_host = jaxbridge.host(
            self._host_rollout,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._rollout_result,
        )
        self._jacobians_host = jaxbridge.host(
            self._host_jacobians,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._jacobians_result,
        )
        self._warm_jacobians_host = jaxbridge.host(
            self._host_warm_jacobians,
            vmap="vectorized",
            static_argnames=("nstep",),
            result=self._warm_jacobians_result,
        )
        self._forward_host = jaxbridge.host(
            self._host_forward,
            vmap="vectorized",
            static_argnames=("names",),
            result=self._forward_result,
            jacobian=self._host_forward_jacobian,
        )
        self._rollout_core = jax.custom_jvp(self._rollout_primal, nondiff_argnums=(2,))
        self._rollout_core.defjvp(self._rollout_jvp)

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
        m = self.model
        return (
            f"Simulator(nq={m.nq}, nv={m.nv}, nu={m.nu}, nstate={self.nstate}, "
            f"frame_skip={self.frame_skip}, nthread={self.nthread})"
        )

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
        f = self._step_host(nstep)
        for _ in batch:  # leading dimensions are batches too: one host call for all of them
            f = jax.vmap(f)
        return f(state, ctrl)

    def _nstep(self, nstep: int | None) -> int:
        if nstep is None:
            return self.frame_skip
        if not isinstance(nstep, int | np.integer) or nstep < 1:
            raise ValueError(f"`Simulator.step(nstep=...)` must be an int >= 1; got {nstep!r}.")
        return int(nstep)

    def _step_host(self, nstep: int) -> Callable[..., Any]:
        f = self._step_hosts.get(nstep)
        if f is None:
            step = functools.partial(self._host_step, nstep=nstep)
            f = self._step_hosts[nstep] = jaxbridge.host(
                step,
                vmap=_StepBatching(self._engine, nstep, step),
                result=lambda state, ctrl: state,
                jacobian=functools.partial(self._host_step_jacobian, nstep=nstep),
            )
        return f

    def _host_step(self, state: np.ndarray, ctrl: np.ndarray, nstep: int) -> np.ndarray:
        if state.ndim == 1 and _plain_float64(state) and _plain_float64(ctrl):
            # Unbatched (`lax.scan` of `sim.step` without vmap): the one-element fast path.
            out = np.empty((1, self.nstate))
            if self._engine.step_one(state[None], ctrl[None], out, nstep):
                out[...] = np.nan  # see below
            return out[0]
        if state.ndim == 2:  # under one vmap (the common case): no reshapes needed
            out, diverged = self._engine.step(state, ctrl, nstep)
        else:
            out, diverged = self._engine.step(flat(state), flat(ctrl), nstep)
            out = out.reshape(state.shape)
            diverged = diverged.reshape(state.shape[:-1])
        # MuJoCo resets a diverging element to its initial state: a plausible-looking state
        # that is wrong. NaN cannot pass for a real state, and spares the other elements.
        if diverged.any():
            out[diverged] = np.nan
        return out

    def _host_step_jacobian(self, state: np.ndarray, ctrl: np.ndarray, nstep: int):
        n, nu = self.nstate, self.nu
        lead = state.shape[:-1]
        state, ctrl = flat(state), flat(ctrl)
        Jx, Ju, _, _ = _derivatives.step_jacobians(
            self._engine, self._qmap, state, ctrl, nstep, method=self.derivatives
        )
        # Where the step itself diverged (its value is NaN), so are its derivatives: the
        # differences around a reset or a rejected control are finite and mean nothing. One
        # more step per element, next to the 2 n + 1 of the differences.
        diverged = self._engine.step(state, ctrl, nstep)[1]
        Jx[diverged], Ju[diverged] = np.nan, np.nan
        return Jx.reshape((*lead, n, n)), Ju.reshape((*lead, n, nu))

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
        f = lambda s, u, _f=self._rollout_core: _f(s, u, self.frame_skip)  # noqa: E731
        for _ in batch:
            f = jax.vmap(f)
        return Trajectory(*f(state, ctrls))

    def _rollout_result(self, state, ctrls, nstep):
        T = ctrls.shape[-2]
        lead = state.shape[:-1]
        return (
            jax.ShapeDtypeStruct((*lead, T, self.nstate), state.dtype),
            jax.ShapeDtypeStruct((*lead, T, self.nsensordata), state.dtype),
            jax.ShapeDtypeStruct(lead, jnp.bool_),
        )

    def _host_rollout(self, state: np.ndarray, ctrls: np.ndarray, nstep: int):
        lead, T = state.shape[:-1], ctrls.shape[-2]
        states, sensors, diverged = self._engine.rollout(flat(state), flat(ctrls, 2), nstep)
        return (
            states.reshape((*lead, T, self.nstate)),
            sensors.reshape((*lead, T, self.nsensordata)),
            diverged.reshape(lead),
        )

    def _rollout_primal(self, state, ctrls, nstep):
        return self._rollout_host(state, ctrls, nstep=nstep)

    def _rollout_jvp(self, nstep, primals, tangents):
        state, ctrls = primals
        dstate, dctrls = tangents
        states, sensors, diverged = self._rollout_core(state, ctrls, nstep)
        zero = np.zeros(diverged.shape, jax.dtypes.float0)
        if ctrls.shape[-2] > 1 and _derivatives.carries_warmstart(self.model):
            # The warm start each step leaves moves the next step's forces: it is carried as
            # tangent state (its input to the first step is a fresh MjData's, no input here).
            J = self._warm_jacobians_host(state, ctrls, states, nstep=nstep)

            def warm_chain(carry, per_step):
                (dx, dw), (J_t, du_t) = carry, per_step
                dy = J_t.Sx @ dx + J_t.Sw @ dw + J_t.Su @ du_t
                dx, dw = (
                    J_t.Jx @ dx + J_t.Jw @ dw + J_t.Ju @ du_t,
                    J_t.Wx @ dx + J_t.Ww @ dw + J_t.Wu @ du_t,
                )
                return (dx, dw), (dx, dy)

            dw = jnp.zeros(self.model.nv, dstate.dtype)
            _, (dstates, dsensors) = jax.lax.scan(warm_chain, (dstate, dw), (J, dctrls))
            return (states, sensors, diverged), (*_nan_where(diverged, dstates, dsensors), zero)
        # One host call for the Jacobians of all T steps (on the thread pool), at the states
        # the primal rollout already visited, each from the warm start it had there.
        Jx, Ju, Sx, Su = self._jacobians_host(state, ctrls, states, nstep=nstep)

        def chain(dx, per_step):
            Jx_t, Ju_t, Sx_t, Su_t, du_t = per_step
            dy = Sx_t @ dx + Su_t @ du_t
            dx = Jx_t @ dx + Ju_t @ du_t
            return dx, (dx, dy)

        _, (dstates, dsensors) = jax.lax.scan(chain, dstate, (Jx, Ju, Sx, Su, dctrls))
        return (states, sensors, diverged), (*_nan_where(diverged, dstates, dsensors), zero)

    def _jacobians_result(self, state, ctrls, states, nstep):
        lead, n, nu, ns = states.shape[:-1], self.nstate, self.nu, self.nsensordata
        shape = lambda *s: jax.ShapeDtypeStruct((*lead, *s), state.dtype)  # noqa: E731
        return shape(n, n), shape(n, nu), shape(ns, n), shape(ns, nu)

    def _host_jacobians(self, state, ctrls, states, nstep):
        """The `(*batch, T)` step Jacobians of a rollout from `state` `(*batch, n)` with
        `ctrls` `(*batch, T, nu)` that visited `states` `(*batch, T, n)`.

        Each step is differenced from the warm start the rollout had there (replayed on the
        host, one rollout's cost), held fixed: right with `mjDSBL_WARMSTART` and for a rollout
        of one control (its warm start is a fresh `MjData`'s); else `_host_warm_jacobians`
        runs instead.
        """
        n, nu, ns = self.nstate, self.nu, self.nsensordata
        if ctrls.shape[-2] > 1 and _derivatives.carries_warmstart(self.model):
            raise RuntimeError(_WARMSTART_CHANGED)
        state0 = np.ascontiguousarray(flat(state), dtype=np.float64)
        ctrls = np.ascontiguousarray(flat(ctrls, 2), dtype=np.float64)
        visited = np.ascontiguousarray(flat(states, 2), dtype=np.float64)
        prev = np.concatenate([state0[:, None], visited[:, :-1]], axis=1)
        warmstart = _derivatives.primal_warmstarts(self._engine, state0, ctrls, nstep)
        Jx, Ju, Sx, Su = _derivatives.step_jacobians(
            self._engine,
            self._qmap,
            flat(prev),
            flat(ctrls),
            nstep,
            next_state=flat(visited),
            method=self.derivatives,
            warmstart=flat(warmstart),
        )
        lead = states.shape[:-1]
        return (
            Jx.reshape((*lead, n, n)),
            Ju.reshape((*lead, n, nu)),
            Sx.reshape((*lead, ns, n)),
            Su.reshape((*lead, ns, nu)),
        )

    def _warm_jacobians_result(self, state, ctrls, states, nstep):
        lead, n, nu, nv, ns = (
            states.shape[:-1],
            self.nstate,
            self.nu,
            self.model.nv,
            self.nsensordata,
        )
        shape = lambda *s: jax.ShapeDtypeStruct((*lead, *s), state.dtype)  # noqa: E731
        return _warmstart.WarmJacobians(
            shape(n, n),
            shape(n, nu),
            shape(n, nv),
            shape(ns, n),
            shape(ns, nu),
            shape(ns, nv),
            shape(nv, n),
            shape(nv, nu),
            shape(nv, nv),
        )

    def _host_warm_jacobians(self, state, ctrls, states, nstep):
        """`_host_jacobians` with the warm start as state: the `(*batch, T)` blocks of
        `_warmstart.WarmJacobians`, at the states and warm starts the rollout visited."""
        T = ctrls.shape[-2]
        state0 = np.ascontiguousarray(flat(state), dtype=np.float64)
        ctrls = np.ascontiguousarray(flat(ctrls, 2), dtype=np.float64)
        visited = np.ascontiguousarray(flat(states, 2), dtype=np.float64)
        prev = np.concatenate([state0[:, None], visited[:, :-1]], axis=1)
        warmstart = _derivatives.primal_warmstarts(self._engine, state0, ctrls, nstep)
        first = np.zeros((state0.shape[0], T), bool)
        first[:, 0] = True  # the first step's warm start is a fresh MjData's: no input
        J = _warmstart.warm_step_jacobians(
            self._engine,
            self._qmap,
            flat(prev),
            flat(ctrls),
            flat(warmstart),
            nstep,
            with_w=~first.ravel(),
            next_state=flat(visited),
        )
        lead = states.shape[:-1]
        return _warmstart.WarmJacobians(*(b.reshape((*lead, *b.shape[1:])) for b in J))

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
        self._engine.output_specs(names, self.max_contacts)  # unknown names fail here
        state, ctrl, _ = self._batch(state, ctrl, "forward")
        batch = jnp.broadcast_shapes(state.shape[:-1], ctrl.shape[:-1])
        state = jnp.broadcast_to(state, (*batch, self.nstate))
        ctrl = jnp.broadcast_to(ctrl, (*batch, self.nu))
        f = functools.partial(self._forward_host, names=names)
        for _ in batch:
            f = jax.vmap(f)
        return f(state, ctrl)

    def _forward_result(self, state, ctrl, names):
        lead = state.shape[:-1]
        return {
            name: jax.ShapeDtypeStruct(
                (*lead, *shape), state.dtype if np.issubdtype(dtype, np.floating) else jnp.int32
            )
            for name, (shape, dtype) in self._engine.output_specs(names, self.max_contacts).items()
        }

    def _host_forward(self, state: np.ndarray, ctrl: np.ndarray, names: tuple[str, ...]):
        lead = state.shape[:-1]
        out = self._engine.forward(flat(state), flat(ctrl), names, self.max_contacts)
        return {
            k: (v if np.issubdtype(v.dtype, np.floating) else v.astype(np.int32)).reshape(
                (*lead, *v.shape[1:])
            )
            for k, v in out.items()
        }

    def _host_forward_jacobian(self, state: np.ndarray, ctrl: np.ndarray, names):
        lead = state.shape[:-1]
        state, ctrl = flat(state), flat(ctrl)
        jac = _jacobians.forward_jacobian(
            self._engine, self._qmap, state, ctrl, names, self.max_contacts
        )
        # A control MuJoCo replaces by zero makes the outputs NaN (see `Engine.forward`): the
        # derivatives of the zero-control model must not pass for theirs.
        rejected = self._engine.rejected_controls(ctrl)
        if rejected.any():
            for blocks in jac.values():
                for b in blocks:
                    b[rejected] = np.nan
        return {
            k: tuple(b.reshape((*lead, *b.shape[1:])) for b in blocks) for k, blocks in jac.items()
        }
