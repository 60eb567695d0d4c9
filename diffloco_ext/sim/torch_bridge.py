"""PyTorch bridge: simulator steps as differentiable torch operations.

:class:`TorchSimulator` wraps a :class:`~.simulator.Simulator`. Its :meth:`~TorchSimulator.step` takes torch
tensors ``q`` [N, nq], ``u`` [N, nv], joint targets [N, n] (and optional feed-forward torques), runs one policy
step of ``substeps`` physics steps (default ``sim.substeps``; the targets held: decimation) and returns a
:class:`StepOutput`. Each call records its physics steps on one ``wp.Tape``; torch's autograd chains the calls,
so gradients flow through whole rollouts to the initial state, the actions and the per-env model parameters.

Parameters (domain randomisation): :meth:`~TorchSimulator.parameters` gives zero-copy torch views of the model's
per-env arrays (:data:`~.model.RANDOMIZABLE`: masses, coms, inertias, PD gains, friction, gravity, ...); writing
into them changes the model from the next step on. A step may instead be given its own tensors
(``params={"body_mass": m, ...}``, any subset; the others are the model's): the forward pass uses them and
gradients flow to them. A taped step keeps its parameter tensors for its backward pass: modifying one in place
before that backward (e.g. re-randomising a reset env into the model's views mid-rollout) is torch's usual
in-place error, never a silently wrong gradient. Randomise out of place instead
(``params["friction"] = torch.where(reset, new, params["friction"])``): the envs that were not reset keep their
gradient chain, and a reset env's state cut with ``torch.where`` starts a new one.

Taped steps on the CPU replay recorded Warp graphs (:mod:`.taped_replay`): the records' arrays are reused, so
the memory below is held by the pool's records (one per step whose backward is pending) instead of allocated per
step.

Memory: a physics step kept for backward holds the values of its :class:`~.step_data.StepData` (``StepData.nbytes``:
6.9 KB per environment for ANYmal without contact, 10.7 KB with contact, in float32) until torch frees the
graph, plus the intermediate states (``nq + nv`` values per env); a policy step of ``k`` substeps holds ``k``
of them; one set of gradient arrays (5.2 / 7.6 KB per env, the reverse passes' working memory included) is
reused by every step's reverse pass.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import warp as wp

from .body_contacts import body_gaps
from .model import DIFFERENTIABLE, RANDOMIZABLE
from .simulator import Simulator
from .state import Control, State
from .taped_replay import Lease, TapedStep, TapedStepPool

_TORCH_DTYPES = {wp.float32: torch.float32, wp.float64: torch.float64}


class StepOutput(NamedTuple):
    """What one policy step gives a task, at documented instants (``k`` physics steps of ``dt`` each)."""

    q: torch.Tensor  # [N, nq] at the end of the policy step
    u: torch.Tensor  # [N, nv] at the end of the policy step
    foot_pos: torch.Tensor  # [N, F, 3] foot sphere centres at the end state, world (m)
    foot_vel: torch.Tensor  # [N, F, 3] their velocities at the end state, world (m/s)
    contact_force: torch.Tensor  # [N, F, 3] mean force of the ground on each foot over the policy step, world (N)
    diverged: torch.Tensor  # [N] bool: some physics step diverged; the env was held at its last sane state
    # [N, F] contact weight (1/0 hard and soft, sigma(gap) smoothed), at the last substep's midpoint
    contact_state: torch.Tensor
    foot_gap: torch.Tensor  # [N, F] signed gap of each foot sphere (m) at the last substep's midpoint
    joint_torque: torch.Tensor  # [N, n] mean drive torque applied over the policy step (N m), differentiable
    #: [N, K] signed gap (m, negative in penetration) of each collision body (``model.collision.body_names``) to
    #: the terrain at the end state, differentiable (:mod:`.body_contacts`); [N, 0] for a robot without collision
    #: shapes; None unless the bridge was made with ``body_gaps=True`` (they cost a kinematics pass per policy
    #: step, and its reverse). Computed inside the step, so a replayed taped step (:mod:`.taped_replay`) replays
    #: it too.
    body_gap: torch.Tensor | None


def _param_array(model, name: str, tensor: torch.Tensor, own: torch.Tensor) -> wp.array:
    """The model's own array when ``tensor`` is its view, else a zero-copy Warp view of ``tensor``."""
    if tensor.data_ptr() == own.data_ptr() and tensor.shape == own.shape and tensor.stride() == own.stride():
        return getattr(model, name)
    array = getattr(model, name)
    return wp.from_torch(tensor.detach().contiguous(), dtype=array.dtype)


class _StepFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, bridge: "TorchSimulator", substeps: int, q, u, joint_target, joint_torque, *params):
        record = bridge._pool.acquire(substeps) if bridge._pool is not None else None
        if record is not None:
            return _StepFunction._forward_recorded(ctx, bridge, record, (q, u, joint_target, joint_torque, *params))
        sim, model = bridge.sim, bridge.sim.model
        tape = wp.Tape()

        def warp_in(t):
            return wp.from_torch(t.detach().contiguous(), dtype=model.dtype, requires_grad=True)

        arrays = {name: _param_array(model, name, t, bridge._params[name]) for name, t in zip(RANDOMIZABLE, params)}
        step_model = model.with_parameters(arrays)
        state_in = State(q=warp_in(q), u=warp_in(u))
        control = Control(joint_target=warp_in(joint_target), joint_torque=warp_in(joint_torque))
        state_out = sim.empty_state(requires_grad=True)
        data = sim.advance(state_in, control, state_out, substeps=substeps, tape=tape, model=step_model)
        foot_pos, foot_vel = sim.foot_kinematics(state_out.q, state_out.u, tape=tape)
        gaps = body_gaps(step_model, state_out.q, tape) if bridge._with_gaps else None
        N, F = model.num_envs, model.num_feet
        force = data.contact_force
        if force is not None:
            force_t = wp.to_torch(force).reshape(N, F, 3).clone()
        else:
            force_t = torch.zeros((N, F, 3), dtype=q.dtype, device=q.device)
        diverged = wp.to_torch(data.diverged).bool().clone()
        state, gap = bridge._contact_state(data.last)
        ctx.mark_non_differentiable(diverged, state, gap)
        ctx.save_for_backward(*params)  # an in-place change before the backward is torch's clear error
        tau = data.joint_torque
        ctx.saved = (bridge, tape, state_in, control, state_out, foot_pos, foot_vel, force, tau, gaps, arrays)
        return (
            wp.to_torch(state_out.q).clone(),
            wp.to_torch(state_out.u).clone(),
            wp.to_torch(foot_pos).reshape(N, F, 3).clone(),
            wp.to_torch(foot_vel).reshape(N, F, 3).clone(),
            force_t,
            diverged,
            state,
            gap,
            wp.to_torch(tau).clone(),
            bridge._gaps_tensor(gaps),
        )

    @staticmethod
    def backward(ctx, g_q, g_u, g_foot_pos, g_foot_vel, g_force, _g_diverged, _g_state, _g_gap, g_tau, g_body_gap):
        if ctx.saved is None:
            raise RuntimeError("a simulator step can be backpropagated once: its tape is freed by the first "
                               "backward (retain_graph=True does not keep it); run the step again instead")
        ctx.saved_tensors  # noqa: B018 - raises if a parameter tensor was modified in place since the forward
        if isinstance(ctx.saved[1], Lease):
            return _StepFunction._backward_recorded(ctx, (g_q, g_u, g_foot_pos, g_foot_vel, g_force, g_tau,
                                                          g_body_gap))
        bridge, tape, state_in, control, state_out, foot_pos, foot_vel, force, tau, gaps, arrays = ctx.saved
        outputs = [(state_out.q, g_q), (state_out.u, g_u), (foot_pos, g_foot_pos), (foot_vel, g_foot_vel)]
        if force is not None:
            outputs.append((force, g_force))
        outputs.append((tau, g_tau))
        if gaps is not None:
            outputs.append((gaps, g_body_gap))
        for arr, grad in outputs:
            if grad is not None:
                wp.to_torch(arr.grad).copy_(grad.reshape(wp.to_torch(arr.grad).shape))
        needs = ctx.needs_input_grad[2:]  # q, u, joint_target, joint_torque, *params
        param_needs = dict(zip(RANDOMIZABLE, needs[4:]))
        for name, arr in arrays.items():  # gradient arrays for the parameters autograd asks for, only
            if param_needs[name] and RANDOMIZABLE[name]:
                arr.grad = bridge._parameter_grad(name, arr)
            elif arr.grad is not None:
                arr.grad = None
        tape.backward()
        outs = [
            wp.to_torch(a.grad).clone() if need else None
            for a, need in zip((state_in.q, state_in.u, control.joint_target, control.joint_torque), needs[:4])
        ]
        for name, arr in arrays.items():
            outs.append(wp.to_torch(arr.grad).clone().reshape(bridge._params[name].shape)
                        if param_needs[name] and RANDOMIZABLE[name] else None)
        tape.reset()
        ctx.saved = None
        return (None, None, *outs)

    @staticmethod
    def _forward_recorded(ctx, bridge: "TorchSimulator", record: TapedStep, inputs):
        """The forward pass on a lent record (:mod:`.taped_replay`): inputs copied in, the recorded graph run."""
        model = bridge.sim.model
        N, F = model.num_envs, model.num_feet
        record.forward(inputs)
        d = record.data
        if d.contact_force is not None:
            force = wp.to_torch(d.contact_force).reshape(N, F, 3).clone()
        else:
            force = torch.zeros((N, F, 3), dtype=bridge.dtype, device=bridge.device)
        diverged = wp.to_torch(d.diverged).bool().clone()
        state, gap = bridge._contact_state(d.last)
        ctx.mark_non_differentiable(diverged, state, gap)
        ctx.save_for_backward(*inputs[4:])  # an in-place change before the backward is torch's clear error
        ctx.saved = (bridge, Lease(bridge._pool, record))
        return (
            wp.to_torch(record.state_out.q).clone(),
            wp.to_torch(record.state_out.u).clone(),
            wp.to_torch(record.foot_pos).reshape(N, F, 3).clone(),
            wp.to_torch(record.foot_vel).reshape(N, F, 3).clone(),
            force,
            diverged,
            state,
            gap,
            wp.to_torch(d.joint_torque).clone(),
            bridge._gaps_tensor(record.body_gap),
        )

    @staticmethod
    def _backward_recorded(ctx, grads):
        ctx.saved_tensors  # noqa: B018 - raises if a parameter tensor was modified in place since the forward
        bridge, lease = ctx.saved
        record = lease.record
        g_q, g_u, g_foot_pos, g_foot_vel, g_force, g_tau, g_body_gap = grads
        output_grads = [g_q, g_u, g_foot_pos, g_foot_vel] + ([g_force] if record.data.contact_force is not None
                                                             else []) + [g_tau]
        if record.body_gap is not None:
            output_grads.append(g_body_gap)
        record.backward(output_grads)
        needs = ctx.needs_input_grad[2:]  # q, u, joint_target, joint_torque, *params
        outs = [wp.to_torch(a.grad).clone() if need else None for a, need in zip(record.inputs[:4], needs[:4])]
        for (name, arr), need in zip(record.params.items(), needs[4:]):
            outs.append(wp.to_torch(arr.grad).clone().reshape(bridge._params[name].shape)
                        if need and RANDOMIZABLE[name] else None)
        ctx.saved = None  # drops the lease: the record goes back to the pool
        return (None, None, *outs)


class TorchSimulator:
    """Differentiable torch front-end of a :class:`Simulator` (same device, same precision).

    A step records a tape only when gradients can flow (grad mode on and some input requires grad); otherwise
    it runs the plain steps with reused buffers. On the CPU a taped step runs on a record lent by a
    :class:`~.taped_replay.TapedStepPool` (``replay_taped``, default on): its forward and backward passes are
    recorded once as Warp graphs and replayed, inputs and gradients copied in and out (exactly the values of the
    plain path; at 128 environments with contact a policy step's forward 21 -> 4.9 ms, its backward 16 -> 7.4 ms).

    ``body_gaps``: every step also reports the collision bodies' gaps at its end state (``StepOutput.body_gap``,
    differentiable; what a task reads for base-contact terminations and undesired-contact penalties). Off by
    default: it costs a kinematics pass per policy step and, taped, its reverse (at 4096 environments and one
    physics step per call, the gradient's cost grew from 2.3-2.7x to 3.2-4.0x the forward rollout with them
    always on; ``docs/benchmarks.md``); without it ``StepOutput.body_gap`` is None.
    """

    #: Parameters gradients flow to (the differentiable ones of :data:`~.model.RANDOMIZABLE`).
    parameter_names = DIFFERENTIABLE

    def __init__(self, sim: Simulator, replay_taped: bool = True, body_gaps: bool = False):
        self.sim = sim
        model = sim.model
        self._body_gaps = bool(body_gaps)
        self._with_gaps = self._body_gaps and model.collision is not None
        self.dtype = _TORCH_DTYPES[model.dtype]
        self.device = torch.device(model.device)
        self._params = {name: wp.to_torch(arr, requires_grad=False) for name, arr in model.parameter_arrays().items()}
        self._grads: dict[str, wp.array] = {}
        self._untaped = None  # the arrays untaped steps run on (see _step_without_tape)
        #: records of taped steps replayed as Warp CPU graphs (:mod:`.taped_replay`); None: every taped step runs
        #: its Python (other devices, or ``replay_taped=False``)
        on_cpu = str(model.device).startswith("cpu")
        self._pool = TapedStepPool(sim, with_gaps=self._with_gaps) if replay_taped and on_cpu else None

    @property
    def body_gaps(self) -> bool:
        """Whether steps report ``StepOutput.body_gap`` (read-only: fixed at construction, the replayed records
        bake it in; make another bridge to change it)."""
        return self._body_gaps

    def parameter_arrays(self) -> dict[str, wp.array]:
        return self.sim.model.parameter_arrays()

    def parameters(self) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of the per-env model parameters (mass [N, B], com [N, B, 3], ..., gravity [N, 3])."""
        return self._params

    def _parameter_grad(self, name: str, array: wp.array) -> wp.array:
        """A zeroed gradient array for parameter ``name`` (one per parameter, reused by every step's backward)."""
        grad = self._grads.get(name)
        if grad is None or grad.shape != array.shape or grad.dtype != array.dtype:
            grad = self._grads[name] = wp.zeros(array.shape, dtype=array.dtype, device=array.device)
        else:
            grad.zero_()
        return grad

    def _check(self, name: str, t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype != self.dtype:
            raise TypeError(f"{name}: expected dtype {self.dtype} (the model's precision), got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"{name}: expected device {self.device}, got {t.device}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
        return t

    def _resolve_params(self, params: dict[str, torch.Tensor] | None) -> list[torch.Tensor]:
        params = {} if params is None else params
        unknown = set(params) - set(RANDOMIZABLE)
        if unknown:
            raise KeyError(f"unknown model parameter(s) {sorted(unknown)}: use names of {tuple(RANDOMIZABLE)}")
        return [self._check(f"params['{name}']", params[name], tuple(own.shape)) if name in params else own
                for name, own in self._params.items()]

    def step(self, q: torch.Tensor, u: torch.Tensor, joint_target: torch.Tensor,
             joint_torque: torch.Tensor | None = None, params: dict[str, torch.Tensor] | None = None,
             substeps: int | None = None) -> StepOutput:
        """One differentiable policy step of ``substeps`` physics steps (default ``sim.substeps``) under the
        held joint targets. Returns a :class:`StepOutput`.

        ``params``: per-env parameter tensors for this step (any subset of :data:`~.model.RANDOMIZABLE`; default
        the model's own, :meth:`parameters`); the forward pass uses them and gradients flow to them.
        """
        m = self.sim.model
        N = m.num_envs
        self._check("q", q, (N, m.nq))
        self._check("u", u, (N, m.nv))
        self._check("joint_target", joint_target, (N, m.num_joints))
        if joint_torque is None:
            joint_torque = torch.zeros_like(joint_target)
        self._check("joint_torque", joint_torque, (N, m.num_joints))
        k = self.sim.substeps if substeps is None else substeps
        tensors = self._resolve_params(params)
        inputs = (q, u, joint_target, joint_torque, *tensors)
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
            out = self._step_without_tape(q, u, joint_target, joint_torque, tensors, k)
        else:
            out = StepOutput(*_StepFunction.apply(self, k, *inputs))
        return out if self._body_gaps else out._replace(body_gap=None)

    def _step_without_tape(self, q, u, joint_target, joint_torque, params, substeps) -> StepOutput:
        """The same step with no tape, on arrays this bridge keeps (rollouts that need no gradient: PPO,
        evaluation). The inputs are copied into the same arrays every call, so from the second call on the
        simulator replays each physics step's recorded graph (:mod:`.replay`) instead of running its Python."""
        sim, model = self.sim, self.sim.model
        N, F = model.num_envs, model.num_feet
        key = id(model.arrays)
        if self._untaped is None or self._untaped[0] != key:
            kw = dict(dtype=model.dtype, device=model.device)
            state_in = State(q=wp.zeros((N, model.nq), **kw), u=wp.zeros((N, model.nv), **kw))
            control = Control(joint_target=wp.zeros((N, model.num_joints), **kw),
                              joint_torque=wp.zeros((N, model.num_joints), **kw))
            arrays = {name: wp.zeros(a.shape, dtype=a.dtype, device=a.device)
                      for name, a in model.parameter_arrays().items()}
            inputs = [state_in.q, state_in.u, control.joint_target, control.joint_torque, *arrays.values()]
            gaps = wp.zeros((N, model.collision.num_bodies), **kw) if self._with_gaps else None
            self._untaped = (key, model.arrays, state_in, control, model.with_parameters(arrays), sim.empty_state(),
                             [wp.to_torch(a) for a in inputs], gaps)
        _, _, state_in, control, step_model, state_out, views, gaps = self._untaped
        for view, tensor in zip(views, (q, u, joint_target, joint_torque, *params)):
            view.copy_(tensor.detach())
        data = sim.advance(state_in, control, state_out, substeps=substeps, model=step_model)
        foot_pos, foot_vel = sim.foot_kinematics(state_out.q, state_out.u)
        if gaps is not None:
            body_gaps(step_model, state_out.q, out=gaps)
        force = (wp.to_torch(data.contact_force).reshape(N, F, 3) if data.contact_force is not None
                 else torch.zeros((N, F, 3), dtype=self.dtype, device=self.device))
        return StepOutput(wp.to_torch(state_out.q).clone(), wp.to_torch(state_out.u).clone(),
                          wp.to_torch(foot_pos).reshape(N, F, 3), wp.to_torch(foot_vel).reshape(N, F, 3), force,
                          wp.to_torch(data.diverged).bool(), *self._contact_state(data.last),
                          wp.to_torch(data.joint_torque), self._gaps_tensor(gaps))

    def _gaps_tensor(self, gaps: wp.array | None) -> torch.Tensor:
        """A copy of the collision-body gaps [N, K] as a torch tensor ([N, 0] without collision shapes)."""
        if gaps is None:
            return torch.zeros((self.sim.model.num_envs, 0), dtype=self.dtype, device=self.device)
        return wp.to_torch(gaps, requires_grad=False).clone()

    def _contact_state(self, data) -> tuple[torch.Tensor, torch.Tensor]:
        """Contact weights and gaps [N, F] of a step (zeros without contact), detached copies."""
        model = self.sim.model
        if data.contact is None:
            zeros = torch.zeros((model.num_envs, model.num_feet), dtype=self.dtype, device=self.device)
            return zeros, zeros.clone()
        return wp.to_torch(data.contact.weight).clone(), wp.to_torch(data.contact.gap).clone()

    def rollout(self, q0: torch.Tensor, u0: torch.Tensor, joint_targets: torch.Tensor,
                params: dict[str, torch.Tensor] | None = None):
        """``T`` steps from ``(q0, u0)`` under ``joint_targets`` [T, N, n]; returns stacked ``q``, ``u`` [T, N, ·]."""
        qs, us = [], []
        q, u = q0, u0
        for target in joint_targets:
            q, u = self.step(q, u, target, params=params)[:2]
            qs.append(q)
            us.append(u)
        return torch.stack(qs), torch.stack(us)
