"""Replays of taped policy steps: the torch bridge's differentiable steps recorded once, then run without Python.

A taped policy step through the bridge (:class:`~.torch_bridge.TorchSimulator`) costs far more Python than kernel
time at the sizes a CPU trains at: at 128 environments with contact, a policy step of 4 physics steps runs 4.2 ms
of kernels forward but took 7.3 ms, and 28 ms forward and backward (each physics step allocates its intermediates,
builds the stages' argument structs and records its reverse closures; the reverse attaches gradient arrays and
builds their structs again). SHAC's rollouts repeat the same steps on the same shapes every iteration.

A :class:`TapedStep` owns every array one taped policy step reads or writes: its inputs (state, control, a copy of
every per-env model parameter, each with a gradient array), the intermediates the step allocated, its outputs.
Its first forward pass is recorded as a Warp CPU graph (``wp.capture_begin`` / ``wp.capture_end``, Warp's API
capture) while the ordinary code builds the ``wp.Tape``; its first backward pass is recorded the same way,
starting with the zeroing of every gradient array that accumulates. Later uses copy the inputs in (torch copies),
replay the forward graph, and, for the backward, copy the outputs' gradients in and replay the backward graph:
no Python per launch. The values a graph bakes in are the arrays' addresses (all owned by the record, the model,
the gradient arenas or the scratch pool) and the settings: the pool is keyed on every setting
(:meth:`~.simulator.Simulator.replay_settings`), the substep count, the model's argument struct and the scratch
pool's generation, and drops its records when the key changes.

A :class:`TapedStepPool` lends records: one per step whose backward pass is pending (a SHAC horizon of 32 policy
steps holds 32), returned when the backward pass has run or when torch frees the step's graph without one. CPU
only (elsewhere the bridge runs its steps as they are).
"""

from __future__ import annotations

import warp as wp

from .body_contacts import body_gaps
from .model import RANDOMIZABLE
from .state import Control, State


def _torch(array: wp.array):
    return wp.to_torch(array, requires_grad=False)


class TapedStep:
    """One taped policy step of ``substeps`` physics steps with its own arrays and its recorded graphs."""

    def __init__(self, sim, substeps: int, key: tuple, with_gaps: bool = True):
        model = sim.model
        self.substeps, self.key = substeps, key
        N, n = model.num_envs, model.num_joints
        kw = dict(dtype=model.dtype, device=model.device, requires_grad=True)
        self.state_in = State(q=wp.zeros((N, model.nq), **kw), u=wp.zeros((N, model.nv), **kw))
        self.control = Control(joint_target=wp.zeros((N, n), **kw), joint_torque=wp.zeros((N, n), **kw))
        #: every per-env parameter as the record's own array, with a gradient array when it is differentiable
        self.params = {name: wp.zeros(arr.shape, dtype=arr.dtype, device=arr.device, requires_grad=differentiable)
                       for (name, differentiable), arr in zip(RANDOMIZABLE.items(), model.parameter_arrays().values())}
        self.model = model.with_parameters(self.params)
        self.inputs = [self.state_in.q, self.state_in.u, self.control.joint_target, self.control.joint_torque,
                       *self.params.values()]
        self.input_views = [_torch(a) for a in self.inputs]
        self.tape = wp.Tape()
        device = model.device
        wp.capture_begin(device=device)
        try:
            self.state_out = sim.empty_state(requires_grad=True)
            self.data = sim.advance(self.state_in, self.control, self.state_out, substeps=substeps, tape=self.tape,
                                    model=self.model)
            self.foot_pos, self.foot_vel = sim.foot_kinematics(self.state_out.q, self.state_out.u, tape=self.tape)
            #: the collision bodies' gaps at the end state, replayed with the step (None: not asked for, or no
            #: collision shapes)
            self.body_gap = (body_gaps(self.model, self.state_out.q, self.tape)
                             if with_gaps and model.collision is not None else None)
        finally:
            self.forward_graph = wp.capture_end(device=device)
        self.backward_graph = None
        d = self.data
        self.outputs = [self.state_out.q, self.state_out.u, self.foot_pos, self.foot_vel]
        if d.contact_force is not None:
            self.outputs.append(d.contact_force)
        self.outputs.append(d.joint_torque)
        if self.body_gap is not None:
            self.outputs.append(self.body_gap)
        self.output_grad_views = [_torch(a.grad) for a in self.outputs]
        # every gradient array the backward pass adds into that is not zeroed by the reverse itself (the
        # intermediates' gradient arenas are, when each step's reverse attaches them)
        accumulating = [a.grad for a in self.inputs if a.grad is not None]
        for state in d.states:
            accumulating += [state.q.grad, state.u.grad]
        for step in d.steps:
            accumulating.append(step.tau.grad)
            if step.contact is not None:
                accumulating.append(step.contact.force.grad)
        self._accumulating = accumulating

    def forward(self, tensors) -> None:
        """Copy the input tensors (state, control, parameters, in :attr:`inputs` order) in and run the step."""
        for view, tensor in zip(self.input_views, tensors):
            view.copy_(tensor.detach())
        wp.capture_launch(self.forward_graph)

    def backward(self, output_grads) -> None:
        """Copy the outputs' gradients in (``None``: zero) and run the backward pass (recorded on first use)."""
        for view, grad in zip(self.output_grad_views, output_grads):
            if grad is None:
                view.zero_()
            else:
                view.copy_(grad.reshape(view.shape))
        if self.backward_graph is None:
            device = self.model.device
            wp.capture_begin(device=device)
            try:
                for grad in self._accumulating:
                    grad.zero_()
                self.tape.backward()
            finally:
                self.backward_graph = wp.capture_end(device=device)
        wp.capture_launch(self.backward_graph)


class TapedStepPool:
    """Records of taped steps lent to the bridge's steps (see the module docstring)."""

    def __init__(self, sim, capacity: int = 512, with_gaps: bool = True):
        self.sim = sim
        self.with_gaps = with_gaps  # whether the records compute the collision-body gaps
        self.capacity = capacity
        self._free: list[TapedStep] = []
        self._lent = 0
        self._key = None
        self._keep = None

    def key(self, substeps: int) -> tuple:
        arrays = self.sim.model.arrays
        return (substeps, id(arrays), *self.sim.replay_settings())

    def acquire(self, substeps: int) -> "TapedStep | None":
        """A record for a step of ``substeps`` under the current settings (None when the pool is full: the caller
        runs the step without a record)."""
        key = self.key(substeps)
        if key != self._key:
            self._free.clear()
            self._key, self._keep = key, self.sim.model.arrays  # kept: the key holds its id
        for i, record in enumerate(self._free):
            if record.substeps == substeps:
                self._lent += 1
                return self._free.pop(i)
        if self._lent >= self.capacity:
            return None
        self._lent += 1
        return TapedStep(self.sim, substeps, key, self.with_gaps)

    def release(self, record: TapedStep) -> None:
        """Return a record whose backward pass has run (or will never run)."""
        self._lent -= 1
        if record.key == self._key:
            self._free.append(record)

    @property
    def size(self) -> int:
        """Records made and not dropped (lent + free)."""
        return self._lent + len(self._free)


class Lease:
    """A record lent to one step: returned to its pool when the lease is dropped (after the backward pass, or when
    torch frees the step's graph without one)."""

    def __init__(self, pool: TapedStepPool, record: TapedStep):
        self.pool, self.record = pool, record

    def __del__(self):
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.release(self.record)
