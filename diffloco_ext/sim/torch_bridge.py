"""PyTorch bridge: simulator steps as differentiable torch operations.

:class:`TorchSimulator` wraps a :class:`~.simulator.Simulator`. Its :meth:`~TorchSimulator.step` takes torch
tensors ``q`` [N, nq], ``u`` [N, nv], joint targets [N, n] (and optional feed-forward torques) and returns a
:class:`StepOutput`: the next ``q``, ``u``, the foot positions/velocities [N, F, 3] at the new state, the mean
contact force on each foot over the step [N, F, 3] (world frame, N), the per-env divergence flags [N], each
foot's contact state and gap [N, F] (for tasks and logs), and the drive torques applied during the step [N, n]
(N·m, differentiable). Each call records one step on its own ``wp.Tape``;
torch's autograd chains the steps, so gradients flow through whole rollouts, to the initial state, the actions,
and the model parameters exposed by :meth:`~TorchSimulator.parameters` (zero-copy views of the Warp arrays:
writing into them, e.g. for domain randomisation, changes the model).

Memory: a step kept for backward holds the values of its :class:`~.simulator.StepData` (``StepData.nbytes``:
about 7 KB per environment for ANYmal without contact, 10 KB with contact, in float32) until torch frees the
graph; a T-step rollout holds T of them, plus one set of gradient arrays that every step's reverse pass reuses.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import warp as wp

from .simulator import Simulator
from .state import Control, State

_TORCH_DTYPES = {wp.float32: torch.float32, wp.float64: torch.float64}


class StepOutput(NamedTuple):
    q: torch.Tensor  # [N, nq]
    u: torch.Tensor  # [N, nv]
    foot_pos: torch.Tensor  # [N, F, 3] world (m)
    foot_vel: torch.Tensor  # [N, F, 3] world (m/s)
    contact_force: torch.Tensor  # [N, F, 3] world (N), mean over the step
    diverged: torch.Tensor  # [N] bool: the env's step diverged and its state was held
    contact_state: torch.Tensor  # [N, F] weight of each foot's contact (1/0 hard and soft, sigma(gap) smoothed)
    foot_gap: torch.Tensor  # [N, F] signed gap of each foot sphere at the step's midpoint (m)
    joint_torque: torch.Tensor  # [N, n] drive torque applied during the step (N m; StepData.tau), differentiable


class _StepFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, bridge: "TorchSimulator", q, u, joint_target, joint_torque, *params):
        sim, model = bridge.sim, bridge.sim.model
        tape = wp.Tape()

        def warp_in(t):
            return wp.from_torch(t.detach().contiguous(), dtype=model.dtype, requires_grad=True)

        state_in = State(q=warp_in(q), u=warp_in(u))
        control = Control(joint_target=warp_in(joint_target), joint_torque=warp_in(joint_torque))
        state_out = sim.empty_state(requires_grad=True)
        data = sim.step(state_in, control, state_out, tape=tape)
        foot_pos, foot_vel = sim.foot_kinematics(state_out.q, state_out.u, tape=tape)
        N, F = model.num_envs, model.num_feet
        if data.contact is not None:
            force = data.contact.force
            force_t = wp.to_torch(force).reshape(N, F, 3).clone()
        else:
            force = None
            force_t = torch.zeros((N, F, 3), dtype=q.dtype, device=q.device)
        diverged = wp.to_torch(data.diverged).bool().clone()
        state, gap = bridge._contact_state(data)
        ctx.mark_non_differentiable(diverged, state, gap)
        ctx.saved = (bridge, tape, state_in, control, state_out, foot_pos, foot_vel, force, data.tau)
        return (
            wp.to_torch(state_out.q).clone(),
            wp.to_torch(state_out.u).clone(),
            wp.to_torch(foot_pos).reshape(N, F, 3).clone(),
            wp.to_torch(foot_vel).reshape(N, F, 3).clone(),
            force_t,
            diverged,
            state,
            gap,
            wp.to_torch(data.tau).clone(),
        )

    @staticmethod
    def backward(ctx, g_q, g_u, g_foot_pos, g_foot_vel, g_force, _g_diverged, _g_state, _g_gap, g_tau):
        if ctx.saved is None:
            raise RuntimeError("a simulator step can be backpropagated once: its tape is freed by the first "
                               "backward (retain_graph=True does not keep it); run the step again instead")
        bridge, tape, state_in, control, state_out, foot_pos, foot_vel, force, tau = ctx.saved
        model = bridge.sim.model
        outputs = [(state_out.q, g_q), (state_out.u, g_u), (foot_pos, g_foot_pos), (foot_vel, g_foot_vel)]
        if force is not None:
            if force.grad is None:  # a step's intermediates get their gradient arrays when the tape reverses it
                force.grad = wp.empty_like(force, requires_grad=False)
            outputs.append((force, g_force))
        if tau.grad is None:
            tau.grad = wp.zeros_like(tau, requires_grad=False)
        outputs.append((tau, g_tau))
        for arr, grad in outputs:
            if grad is not None:
                wp.to_torch(arr.grad).copy_(grad.reshape(wp.to_torch(arr.grad).shape))
        params = bridge.parameter_arrays()
        needs = ctx.needs_input_grad[1:]  # q, u, joint_target, joint_torque, *params
        param_needs = dict(zip(bridge.parameter_names, needs[4:]))
        for name, arr in params.items():
            if param_needs[name] and arr.grad is not None:
                arr.grad.zero_()  # the model's gradient arrays are shared by all steps: this step's alone
        tape.backward()
        outs = [
            wp.to_torch(a.grad).clone() if need else None
            for a, need in zip((state_in.q, state_in.u, control.joint_target, control.joint_torque), needs[:4])
        ]
        for name in bridge.parameter_names:
            grad = params[name].grad
            outs.append(wp.to_torch(grad).clone() if param_needs[name] and grad is not None else None)
        tape.reset()
        ctx.saved = None
        del model
        return (None, *outs)


class TorchSimulator:
    """Differentiable torch front-end of a :class:`Simulator` (same device, same precision).

    A step records a tape only when gradients can flow (grad mode on and some input requires grad); otherwise
    it runs the plain step with reused buffers.
    """

    parameter_names = ("body_mass", "body_com", "body_inertia", "joint_stiffness", "joint_damping", "friction")

    def __init__(self, sim: Simulator):
        self.sim = sim
        model = sim.model
        self.dtype = _TORCH_DTYPES[model.dtype]
        self.device = torch.device(model.device)
        for arr in self.parameter_arrays().values():
            if not arr.requires_grad:
                arr.requires_grad = True
        self._params = {name: wp.to_torch(arr, requires_grad=False) for name, arr in self.parameter_arrays().items()}

    def parameter_arrays(self) -> dict[str, wp.array]:
        return {name: getattr(self.sim.model, name) for name in self.parameter_names}

    def parameters(self) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of the per-env model parameters (mass [N, B], com [N, B, 3], ...)."""
        return self._params

    def _check(self, name: str, t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        if t.dtype != self.dtype:
            raise TypeError(f"{name}: expected dtype {self.dtype} (the model's precision), got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"{name}: expected device {self.device}, got {t.device}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
        return t

    def step(self, q: torch.Tensor, u: torch.Tensor, joint_target: torch.Tensor,
             joint_torque: torch.Tensor | None = None, params: dict[str, torch.Tensor] | None = None):
        """One differentiable step. Returns a :class:`StepOutput`.

        ``params`` (default: :meth:`parameters`) are passed to autograd so gradients reach them; they must be
        the zero-copy views returned by :meth:`parameters` (possibly with ``requires_grad`` set).
        """
        m = self.sim.model
        N = m.num_envs
        self._check("q", q, (N, m.nq))
        self._check("u", u, (N, m.nv))
        self._check("joint_target", joint_target, (N, m.num_joints))
        if joint_torque is None:
            joint_torque = torch.zeros_like(joint_target)
        self._check("joint_torque", joint_torque, (N, m.num_joints))
        params = self._params if params is None else params
        inputs = (q, u, joint_target, joint_torque, *(params[name] for name in self.parameter_names))
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in inputs)):
            return self._step_without_tape(q, u, joint_target, joint_torque)
        return StepOutput(*_StepFunction.apply(self, *inputs))

    def _step_without_tape(self, q, u, joint_target, joint_torque) -> StepOutput:
        """The same step with no tape and reused buffers (rollouts that need no gradient, e.g. PPO, evaluation)."""
        sim, model = self.sim, self.sim.model
        N, F = model.num_envs, model.num_feet

        def warp_in(t):
            return wp.from_torch(t.detach().contiguous(), dtype=model.dtype)

        state_out = sim.empty_state()
        data = sim.step(State(q=warp_in(q), u=warp_in(u)),
                        Control(joint_target=warp_in(joint_target), joint_torque=warp_in(joint_torque)), state_out)
        foot_pos, foot_vel = sim.foot_kinematics(state_out.q, state_out.u)
        force = (wp.to_torch(data.contact.force).reshape(N, F, 3).clone() if data.contact is not None
                 else torch.zeros((N, F, 3), dtype=self.dtype, device=self.device))
        return StepOutput(wp.to_torch(state_out.q), wp.to_torch(state_out.u),
                          wp.to_torch(foot_pos).reshape(N, F, 3), wp.to_torch(foot_vel).reshape(N, F, 3), force,
                          wp.to_torch(data.diverged).bool().clone(), *self._contact_state(data),
                          wp.to_torch(data.tau).clone())

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
