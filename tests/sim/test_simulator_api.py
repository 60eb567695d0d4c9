"""The simulator API tasks build on: settings validated when set, buffers that follow them, no silent zero
gradients, per-step parameters, decimation, resets that cut one env's gradient chain and leave the others'."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import warp as wp

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.config import SimCfg
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.step_data import StepData
from diffloco_ext.sim.torch_bridge import TorchSimulator

from .test_contact_gradients import standing_state
from .test_gradients import check_gradient

N = 2


@pytest.fixture(scope="module")
def robot():
    return get_robot("anymal_d")


@pytest.fixture(scope="module")
def standing(robot):
    return standing_state(robot)


def _bridge(robot, contact="smoothed", **kwargs):
    return TorchSimulator(Simulator(build_model(robot, N, dtype="float64", friction=0.8), dt=0.005, contact=contact,
                                    **kwargs))


def _inputs(robot, standing, seed=0):
    rng = np.random.default_rng(seed)
    q, u = (torch.tensor(a.copy()) for a in standing)
    q[:, 2] += torch.tensor([0.004, -0.002])
    u += torch.tensor(rng.normal(scale=0.2, size=u.shape))
    target = torch.tensor(np.tile(robot.default_joint_positions(), (N, 1)) + rng.uniform(-0.2, 0.2, (N, 12)))
    return q, u, target


# -- settings ------------------------------------------------------------------------------------------------
def test_contact_params_are_validated_on_assignment():
    p = ContactParams("smoothed")
    assert p.effective_stabilization == 0.0
    p.mode = "hard"  # the mode's own default, as a fresh ContactParams("hard") has
    assert p.effective_stabilization == ContactParams("hard").effective_stabilization == 0.2
    for name, bad in (("kappa", 0.0), ("kappa", -300.0), ("kappa", float("nan")), ("iterations", 0),
                      ("iterations", 2.5), ("mode", "sticky"), ("relaxation", 2.5), ("stabilization", 1.0)):
        old = getattr(p, name)
        with pytest.raises(ValueError, match=name if name != "mode" else "contact mode"):
            setattr(p, name, bad)
        assert getattr(p, name) == old, f"{name}: the rejected value must not stay"
    with pytest.raises(AttributeError, match="no setting 'kapa'"):
        p.kapa = 3.0


def test_simulator_settings_are_validated_on_assignment(robot):
    sim = Simulator(build_model(robot, 1), dt=0.005, contact="smoothed")
    for name, bad in (("dt", 0.0), ("dt", -1.0), ("dt", float("inf")), ("max_speed", 0.0), ("substeps", 0)):
        with pytest.raises(ValueError, match=name):
            setattr(sim, name, bad)
    assert sim.dt == 0.005 and sim.substeps == 1
    with pytest.raises(TypeError, match="ContactParams"):
        sim.contact = 3
    with pytest.raises(ValueError, match="needs foot spheres"):
        Simulator(build_model(dataclasses.replace(robot, feet=()), 1), contact="hard")


def test_sim_cfg_is_the_one_place_and_validated(robot):
    cfg = SimCfg(dt=0.005, substeps=4, contact="hard", dtype="float64")
    assert isinstance(cfg.contact, ContactParams) and cfg.contact.mode == "hard"
    assert cfg.policy_dt == pytest.approx(0.02)
    sim = Simulator.from_cfg(cfg.build_model(robot, 1), cfg)
    assert (sim.dt, sim.substeps, sim.contact.mode, sim.model.dtype) == (0.005, 4, "hard", wp.float64)
    for name, bad in (("dt", 0), ("substeps", 0), ("dtype", "float16"), ("device", "tpu")):
        with pytest.raises(ValueError, match=name):
            SimCfg(**{name: bad})
    with pytest.raises(AttributeError, match="no field 'decimation'"):
        cfg.decimation = 4


def test_switching_contact_mode_reallocates_reused_buffers(robot, standing):
    """Built without contact, switched to smoothed: the untaped step must give the taped step's result (the old
    code kept its no-contact buffers and returned the no-contact step); smoothed -> none must work too."""
    bridge = _bridge(robot, contact="none")
    q, u, target = _inputs(robot, standing)
    bridge.step(q, u, target)  # allocates the no-contact buffers
    for mode in ("smoothed", "none", "hard"):
        bridge.sim.contact = mode
        with torch.no_grad():
            plain = bridge.step(q, u, target)
        taped = bridge.step(q, u, target.clone().requires_grad_())
        torch.testing.assert_close(plain.q, taped.q.detach(), rtol=0, atol=1e-12)
        torch.testing.assert_close(plain.contact_force, taped.contact_force.detach(), rtol=0, atol=1e-9)
    bridge.sim.contact.iterations = 4  # changes the shape of the iterate history
    with torch.no_grad():
        plain = bridge.step(q, u, target)
    torch.testing.assert_close(plain.q, bridge.step(q, u, target.clone().requires_grad_()).q.detach(), rtol=0,
                               atol=1e-12)


def test_replayed_steps_equal_plain_steps_and_see_every_change(robot, standing):
    """Untaped steps on the same arrays are recorded as a graph and replayed (``replay.py``): every result equals a
    step of a fresh simulator (which runs its first step plainly) to the bit, while array contents (joint targets,
    masses, gravity) and settings (kappa, dt, the guard) change between the steps."""
    model = build_model(robot, N, dtype="float64", friction=0.8)
    sim = Simulator(model, dt=0.005, contact="smoothed", report_body_gaps=True)
    q, u, target = (x.numpy() for x in _inputs(robot, standing))
    s0, s1, control = sim.state(q, u), sim.empty_state(), sim.control(target)

    def check(label, control=control):
        out = sim.step(s0, control, s1)
        fresh = Simulator(model, dt=sim.dt, contact=dataclasses.replace(sim.contact), max_speed=sim.max_speed,
                          report_body_gaps=True)
        ref_out = fresh.empty_state()
        ref = fresh.step(s0, control, ref_out)
        np.testing.assert_array_equal(s1.q.numpy(), ref_out.q.numpy(), err_msg=label)
        np.testing.assert_array_equal(out.body_gap.numpy(), ref.body_gap.numpy(), err_msg=label)
        np.testing.assert_array_equal(s1.u.numpy(), ref_out.u.numpy(), err_msg=label)
        if out.contact is not None:
            np.testing.assert_array_equal(out.contact.force.numpy(), ref.contact.force.numpy(), err_msg=label)
        return s1.q.numpy().copy()

    first = check("first (plain)")
    check("second (recorded)")
    assert len(sim._replays._graphs) == 1
    np.testing.assert_array_equal(check("third (replayed)"), first)

    def change(label, apply):  # each change is checked twice: first seen, then recorded (so the next one
        apply()                # would replay a stale recording if the key missed it)
        check(label)
        return check(f"{label}, recorded")

    assert np.abs(change("new joint targets", lambda: control.joint_target.assign(target + 0.3)) - first).max() > 1e-6
    # another joint-target array (the same torque array): its own recording
    other = dataclasses.replace(control, joint_target=sim.control(target - 0.2).joint_target)
    check("other control arrays", other)
    check("other control arrays, recorded", other)
    mass, gravity = model.body_mass.numpy(), model.gravity.numpy()
    change("heavier bodies", lambda: model.body_mass.assign(mass * 1.5))
    change("half gravity", lambda: model.gravity.assign(gravity * 0.5))
    change("kappa", lambda: setattr(sim.contact, "kappa", 100.0))
    change("iterations", lambda: setattr(sim.contact, "iterations", 4))
    change("dt", lambda: setattr(sim, "dt", 0.002))
    change("no contact", lambda: setattr(sim, "contact", "none"))
    # every env is held: the guard's bound is baked into a recording too
    np.testing.assert_array_equal(change("guard", lambda: setattr(sim, "max_speed", 1e-3)), s0.q.numpy())
    assert len(sim._replays._graphs) >= 3


# -- gradients ----------------------------------------------------------------------------------------------------
def test_taped_step_into_a_state_without_gradient_arrays_is_an_error(robot):
    sim = Simulator(build_model(robot, N, dtype="float64"), contact="smoothed")
    s0 = sim.state(requires_grad=True)
    control = sim.control(requires_grad=True)
    with pytest.raises(ValueError, match="gradient arrays on state_out"):
        sim.step(s0, control, sim.empty_state(), tape=wp.Tape())


def test_a_stage_reversed_without_its_output_gradient_is_an_error(robot):
    """The old reverse passes returned silently (zero gradients) when an output had no gradient array: the reverse
    of the stage that writes ``state_out`` (the divergence guard) raises, even past ``step``'s own check."""
    sim = Simulator(build_model(robot, N, dtype="float64"))
    s0, out = sim.state(requires_grad=True), sim.empty_state()  # out: no gradient arrays
    tape = wp.Tape()
    data = StepData.allocate(sim.model)
    sim._run(sim.model, s0, sim.control(), out, data, tape)
    tape.record_func(backward=data.attach_gradients, arrays=[])
    with pytest.raises(RuntimeError, match="output 'q_out' has no gradient array"):
        tape.backward()


def test_parameters_given_to_a_step_are_the_ones_it_uses(robot, standing):
    """``params=`` copies (not the model's views) drive the forward pass and receive exact gradients (the old
    bridge ignored them in the forward pass and still returned gradients)."""
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing)
    own = bridge.parameters()
    friction = own["friction"].clone() * 0.25
    stiffness = own["joint_stiffness"].clone() * 1.5
    with torch.no_grad():
        base = bridge.step(q, u, target)
        given = bridge.step(q, u, target, params={"friction": friction, "joint_stiffness": stiffness})
        own["friction"].mul_(0.25)
        own["joint_stiffness"].mul_(1.5)
        written = bridge.step(q, u, target)
        own["friction"].div_(0.25)
        own["joint_stiffness"].div_(1.5)
    assert (given.q - base.q).abs().max() > 1e-6
    torch.testing.assert_close(given.q, written.q, rtol=0, atol=1e-12)
    rng = np.random.default_rng(3)
    weights = [torch.tensor(rng.normal(size=s)) for s in ((N, 19), (N, 18), (N, 4, 3), (N, 4, 3), (N, 4, 3))]
    weights[4] *= 1e-3

    class Given:  # the FD helper calls bridge.step(q, u, targets): route it through params=
        def step(self, q, u, t):
            return bridge.step(q, u, t, params={"friction": friction, "joint_stiffness": stiffness})

    for name, tensor in (("friction", friction), ("joint_stiffness", stiffness)):
        check_gradient(Given(), (q, u, target), name, tensor, weights, 3, rng)


def test_unknown_or_malformed_parameters_are_clear_errors(robot, standing):
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing)
    with pytest.raises(KeyError, match="unknown model parameter"):
        bridge.step(q, u, target, params={"mass": bridge.parameters()["body_mass"]})
    with pytest.raises(ValueError, match="expected shape"):
        bridge.step(q, u, target, params={"friction": torch.ones(N + 1, dtype=torch.float64)})


def test_gravity_written_after_construction_takes_effect(robot):
    bridge = _bridge(robot, contact="none")
    model = bridge.sim.model
    q = torch.tensor(model.default_q(base_height=2.0))
    u = torch.zeros(N, model.nv, dtype=torch.float64)
    target = torch.tensor(np.tile(model.default_joint_pos, (N, 1)))
    bridge.parameters()["gravity"][1] = 0.0  # env 1 in zero gravity
    with torch.no_grad():
        out = bridge.step(q, u, target)
    assert out.u[0, 2] == pytest.approx(-9.81 * 0.005, rel=1e-9)
    assert abs(out.u[1, 2]) < 1e-12


def test_zero_quaternion_and_nan_state_are_flagged(robot, standing):
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing)
    q[0, 3:7] = 0.0
    with torch.no_grad():
        out = bridge.step(q, u, target)
    assert out.diverged.tolist() == [True, False]


# -- decimation -----------------------------------------------------------------------------------------------
def test_policy_step_equals_its_physics_steps(robot, standing):
    """``substeps=4`` gives the state of four single steps and the mean of their contact forces."""
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing)
    with torch.no_grad():
        policy = bridge.step(q, u, target, substeps=4)
        qi, ui, forces = q, u, []
        for _ in range(4):
            single = bridge.step(qi, ui, target)
            qi, ui = single.q.clone(), single.u.clone()
            forces.append(single.contact_force.clone())
    torch.testing.assert_close(policy.q, qi, rtol=0, atol=1e-12)
    torch.testing.assert_close(policy.u, ui, rtol=0, atol=1e-12)
    torch.testing.assert_close(policy.contact_force, torch.stack(forces).mean(0), rtol=0, atol=1e-9)
    torch.testing.assert_close(policy.foot_gap, single.foot_gap, rtol=0, atol=1e-12)
    taped = bridge.step(q, u, target.clone().requires_grad_(), substeps=4)
    torch.testing.assert_close(taped.q.detach(), qi, rtol=0, atol=1e-12)
    torch.testing.assert_close(taped.contact_force.detach(), policy.contact_force, rtol=0, atol=1e-9)


@pytest.mark.parametrize("wrt", ["q0", "joint_target", "friction"])
def test_decimated_gradient_matches_finite_differences(robot, standing, wrt):
    bridge = _bridge(robot)
    bridge.sim.substeps = 4
    q, u, target = _inputs(robot, standing, seed=1)
    rng = np.random.default_rng(7)
    weights = [torch.tensor(rng.normal(size=s)) for s in ((N, 19), (N, 18), (N, 4, 3), (N, 4, 3), (N, 4, 3), (N, 12))]
    weights[4] *= 1e-3  # the mean contact force (N) and the mean joint torque (N m) of the policy step in the loss too
    weights[5] *= 1e-2
    tensor = {"q0": q, "joint_target": target}.get(wrt, bridge.parameters().get(wrt))
    check_gradient(bridge, (q, u, target), wrt, tensor, weights, 3, rng)


# -- resets ---------------------------------------------------------------------------------------------------------
def _rollout(bridge, q0, u0, target, reset_at=None, reset_q=None, reset_u=None, new_friction=None, steps=6):
    """Sum of weighted base heights over a rollout; env 0 is reset at ``reset_at`` to a new state and a new
    friction, out of place (as a task does)."""
    params = {"friction": bridge.parameters()["friction"].clone()}
    q, u, loss = q0, u0, 0.0
    mask = torch.tensor([True, False])
    for t in range(steps):
        if t == reset_at:
            q = torch.where(mask[:, None], reset_q, q)
            u = torch.where(mask[:, None], reset_u, u)
            params["friction"] = torch.where(mask, new_friction, params["friction"])
        out = bridge.step(q, u, target, params=params)
        q, u = out.q, out.u
        loss = loss + (out.q[:, 2] * torch.arange(1, N + 1)).sum() + out.foot_pos[..., 2].sum()
    return loss


def test_reset_cuts_the_reset_envs_gradient_chain_only(robot, standing):
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing, seed=2)
    reset_q, reset_u = q.clone(), torch.zeros_like(u)
    reset_q[:, 2] += 0.01
    friction = torch.full((N,), 0.5, dtype=torch.float64)
    q0 = q.clone().requires_grad_()
    (with_reset,) = torch.autograd.grad(_rollout(bridge, q0, u, target, 3, reset_q, reset_u, friction), q0)
    (without,) = torch.autograd.grad(_rollout(bridge, q0, u, target), q0)
    torch.testing.assert_close(with_reset[1], without[1], rtol=1e-12, atol=1e-12)  # env 1: chain intact
    (before,) = torch.autograd.grad(_rollout(bridge, q0, u, target, steps=3), q0)
    torch.testing.assert_close(with_reset[0], before[0], rtol=1e-10, atol=1e-10)  # env 0: only steps before reset
    assert (with_reset[0] - without[0]).abs().max() > 1e-6


def test_in_place_randomisation_under_a_live_graph_is_an_error(robot, standing):
    bridge = _bridge(robot)
    q, u, target = _inputs(robot, standing)
    out = bridge.step(q.clone().requires_grad_(), u, target)
    with torch.no_grad():
        bridge.parameters()["friction"][0] = 0.3  # would make the backward read the new friction
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.q.sum().backward()
    with torch.no_grad():
        bridge.parameters()["friction"][0] = 0.8
