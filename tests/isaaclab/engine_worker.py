"""One Isaac Lab session on one engine, for the tests (run in its own process: Isaac Lab keeps one simulation per
process), the worker the engine tests (``test_engines.py``, through ``conftest.py``'s ``probe`` fixture) drive.
Usage: ``python engine_worker.py ENGINE OUT.json`` (ENGINE ``physx`` or ``newton``).

Builds the ``DiffLoco-Velocity-Flat-AnymalD-Isaac`` env (4 envs), resets and steps it, reads back what the
tests compare (mass properties, joint and body names, observations under a known joint state); closes it; then
builds the validation backend (2 envs) and runs its round trip and a standing rollout. Everything measured goes
to the JSON file; the assertions are in ``test_engines.py``.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch


def probe_env(engine: str) -> dict:
    import gymnasium as gym

    from diffloco_ext.isaaclab import tasks  # noqa: F401  (registers the ids)
    from diffloco_ext.isaaclab.env_cfg import AnymalDFlatIsaacEnvCfg

    t0 = time.time()
    cfg = AnymalDFlatIsaacEnvCfg()
    cfg.scene.num_envs = 4
    cfg.sim.device = "cpu"
    cfg.sim.physics = cfg.sim.physics.physx if engine == "physx" else cfg.sim.physics.newton_mjwarp
    cfg.observations.policy.enable_corruption = False  # exact observations
    # the mass properties are read before any mass randomisation (friction's stays: the curriculum widens it)
    cfg.events.base_mass = None
    cfg.events.base_com = None
    cfg.curriculum.commands = None  # the recipe's curriculum term: the probes build their own on the full ranges
    env = gym.make("DiffLoco-Velocity-Flat-AnymalD-Isaac", cfg=cfg).unwrapped
    out = {"env_build_s": time.time() - t0}
    robot = env.scene["robot"]
    data = robot.data
    out["joint_names"] = list(robot.joint_names)
    out["body_names"] = list(robot.body_names)
    out["body_mass"] = data.body_mass.torch[0].double().tolist()
    out["body_com"] = data.body_com_pos_b.torch[0].double().tolist()
    out["body_inertia"] = data.body_inertia.torch[0].double().reshape(-1, 3, 3).tolist()
    out["default_joint_pos"] = data.default_joint_pos.torch[0].double().tolist()
    obs, _ = env.reset()
    out["obs_shape"] = list(obs["policy"].shape)
    rewards, finite = [], True
    t1 = time.time()
    for _ in range(10):
        obs, reward, terminated, truncated, extras = env.step(torch.zeros(4, 12))
        finite &= bool(torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all())
        rewards.append(reward.double().mean().item())
    out["env_step_s"] = (time.time() - t1) / 10
    from diffloco_ext.isaaclab import mdp as diffloco_mdp

    out["torque_saturation_at_rest"] = diffloco_mdp.torque_saturation(env, 80.0).double().tolist()
    out["obs_finite"] = finite
    out["mean_reward"] = float(np.mean(rewards))
    out["reward_terms"] = list(env.reward_manager.active_terms)
    # the project's gait terms, called directly: with limit 0 the joint term is |qd|^2; with the stance indicator's
    # height far above the robot the slip term is the feet's summed horizontal speed
    from isaaclab.managers import SceneEntityCfg

    feet = SceneEntityCfg("robot", body_names=".*_FOOT", preserve_order=True)
    feet.resolve(env.scene)
    out["excess_terms"] = {"joint_vel": diffloco_mdp.excess_joint_vel(env, 0.0).double().tolist()}
    out["excess_expected"] = {"joint_vel": data.joint_vel.torch.double().square().sum(1).tolist()}
    out["excess_terms"]["foot_slip"] = diffloco_mdp.foot_slip(env, feet, 0.03, 10.0, 1e-3).double().tolist()
    out["excess_expected"]["foot_slip"] = data.body_link_lin_vel_w.torch[:, feet.body_ids, :2].double().norm(
        dim=-1).sum(1).tolist()
    # the swing-force term, a pronk of period 0.4 s at 0.1 s (every foot mid-swing: s = 1) for every env (threshold
    # -1): the feet's summed normal force over the robot's weight
    from isaaclab.managers import RewardTermCfg

    sensor = SceneEntityCfg("contact_forces", body_names=".*_FOOT", preserve_order=True)
    sensor.resolve(env.scene)
    params = {"sensor_cfg": sensor, "command_name": "base_velocity", "phase_offsets": dict.fromkeys(
        ("LF", "RF", "LH", "RH"), 0.0), "duty": 0.5, "period": 0.4, "swing_height": 0.08, "standing_threshold": -1.0}
    term = diffloco_mdp.swing_contact_force(RewardTermCfg(func=diffloco_mdp.swing_contact_force, weight=1.0,
                                                          params=params), env)
    env.episode_length_buf[:] = 5
    out["excess_terms"]["swing_contact_force"] = term(env, **params).double().tolist()
    forces = env.scene.sensors["contact_forces"].data.net_forces_w.torch[:, sensor.body_ids, 2].double()
    out["excess_expected"]["swing_contact_force"] = (
        forces.sum(1) / (data.body_mass.torch.double().sum(1) * 9.81)).tolist()
    # the paired-force term on the bound's pairs: |F_LF - F_RF| + |F_LH - F_RH| over the weight
    params = {"sensor_cfg": sensor, "command_name": "base_velocity", "phase_offsets": {
        "LF": 0.0, "RF": 0.0, "LH": 0.5, "RH": 0.5}, "standing_threshold": -1.0}
    term = diffloco_mdp.paired_contact_force(RewardTermCfg(func=diffloco_mdp.paired_contact_force, weight=1.0,
                                                           params=params), env)
    out["excess_terms"]["paired_contact_force"] = term(env, **params).double().tolist()
    column = {env.scene.sensors["contact_forces"].body_names[b][:2]: k for k, b in enumerate(sensor.body_ids)}
    f = {leg: forces[:, column[leg]] for leg in ("LF", "RF", "LH", "RH")}
    out["excess_expected"]["paired_contact_force"] = (
        ((f["LF"] - f["RF"]).abs() + (f["LH"] - f["RH"]).abs())
        / (data.body_mass.torch.double().sum(1) * 9.81)).tolist()
    # a known joint state, by name: the observation's joint block must list it in the policy's order
    values = {name: 0.05 * (i + 1) for i, name in enumerate(sorted(robot.joint_names))}
    position = torch.tensor([[values[n] for n in robot.joint_names]] * 4, dtype=torch.float32)
    robot.write_joint_position_to_sim_index(position=position)
    robot.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(position))
    env.scene.update(dt=0.0)
    obs_now = env.observation_manager.compute()["policy"]
    out["probe_joint_values"] = values
    out["obs_joint_pos_rel"] = obs_now[0, 12:24].double().tolist()
    # the saturation term after a step with targets 2.5 rad off the default pose: every env asks its DC motors
    # for more than they give (kp 2.5 rad = 200 N m against an 80 N m limit)
    env.step(torch.tensor([[5.0, -5.0] * 6] * 4))
    effort_limit = 80.0
    actuators = robot.actuators
    out["torque_saturation_saturated"] = diffloco_mdp.torque_saturation(env, effort_limit).double().tolist()
    computed = actuators.computed_effort.torch.double()
    out["torque_saturation_fraction"] = float(
        ((computed - actuators.applied_effort.torch.double()).abs() > 1e-3).double().mean())
    out["curriculum"] = probe_curriculum(env)
    env.close()
    return out


def probe_curriculum(env) -> dict:
    """The command curriculum term on the env's managers: forward commands 0.5-1.0 m/s widening to the full square
    over 100 policy steps, foot_slip and the pushes off until then; what it sets at the clock's 0, 50, 100."""
    from isaaclab.managers import CurriculumTermCfg

    from diffloco_ext.isaaclab.curriculum import velocity_command_curriculum

    command = env.command_manager.get_term("base_velocity").cfg
    params = {"command_name": "base_velocity", "num_steps": 100, "initial_lin_vel_x": (0.5, 1.0),
              "initial_lin_vel_y": (0.0, 0.0), "initial_ang_vel_z": (0.0, 0.0), "resampling_time": 10.0,
              "resampling_time_final": 4.0, "after_curriculum": ["foot_slip"], "push_term": "push_robot",
              "weights_after_curriculum": {"action_rate": -0.05}}
    env.reward_manager.get_term_cfg("foot_slip").weight = -1.0
    term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=params), env)
    out = {"full_lin_vel_x": list(command.ranges.lin_vel_x)}
    for step in (0, 50, 100):
        env.common_step_counter = step
        state = term(env, slice(None), **params)
        out[str(step)] = {
            "progress": state["progress"], "lin_vel_x": list(command.ranges.lin_vel_x),
            "lin_vel_y": list(command.ranges.lin_vel_y), "ang_vel_z": list(command.ranges.ang_vel_z),
            "resampling_time_range": list(command.resampling_time_range),
            "foot_slip_weight": env.reward_manager.get_term_cfg("foot_slip").weight,
            "action_rate_weight": env.reward_manager.get_term_cfg("action_rate").weight,
            "push_x": list(env.event_manager.get_term_cfg("push_robot").params["velocity_range"]["x"])}
    # the commands the env draws at the clock's 0 follow the initial ranges (a reset resamples every env)
    env.common_step_counter = 0
    term(env, slice(None), **params)
    env.command_manager.reset(None)
    env.command_manager.compute(dt=env.step_dt)
    out["commands_at_0"] = env.command_manager.get_command("base_velocity").double().tolist()
    try:
        velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params={
            **params, "after_curriculum": ["no_such_term"]}), env)
        out["unknown_term_error"] = ""
    except ValueError as e:
        out["unknown_term_error"] = str(e)
    # weights_ramp: the after-curriculum weights take over over policy steps 20-100 after the ranges are full
    ramped = {**params, "weights_ramp": (20, 100)}
    ramp_term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=ramped), env)
    out["ramp_action_rate"] = []
    for step in (100, 160, 300):
        env.common_step_counter = step
        ramp_term(env, slice(None), **ramped)
        out["ramp_action_rate"].append(env.reward_manager.get_term_cfg("action_rate").weight)
    # weights_curriculum_end: action_rate to -0.03 over progress 0.2-0.6, then weights_ramp to -0.05 from there
    moved = {**ramped, "weights_curriculum_end": {"action_rate": -0.03}, "weights_curriculum_ramp": (0.2, 0.6)}
    env.reward_manager.get_term_cfg("action_rate").weight = -0.01  # the ramp above left it at -0.05
    moved_term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=moved), env)
    out["curriculum_ramp_action_rate"] = []
    for step in (10, 40, 80, 100, 160, 300):
        env.common_step_counter = step
        moved_term(env, slice(None), **moved)
        out["curriculum_ramp_action_rate"].append(env.reward_manager.get_term_cfg("action_rate").weight)
    try:
        velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params={
            **moved, "weights_curriculum_end": {"foot_slip": -1.0}}), env)
        out["curriculum_ramp_conflict_error"] = ""
    except ValueError as e:
        out["curriculum_ramp_conflict_error"] = str(e)
    env.common_step_counter = 0
    try:
        velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params={
            **params, "weights_after_curriculum": {"no_such_weight": 1.0}}), env)
        out["unknown_weight_error"] = ""
    except ValueError as e:
        out["unknown_weight_error"] = str(e)
    # a push term switched off in the config (play mode) is nothing to hold; an unknown name is an error
    saved_push, env.cfg.events.push_robot = env.cfg.events.push_robot, None
    out["push_off_ok"] = velocity_command_curriculum(
        CurriculumTermCfg(func=velocity_command_curriculum, params=params), env)(env, slice(None), **params)["progress"]
    env.cfg.events.push_robot = saved_push
    try:
        velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params={
            **params, "push_term": "no_such_push"}), env)
        out["unknown_push_error"] = ""
    except ValueError as e:
        out["unknown_push_error"] = str(e)
    # a resumed run: start_step puts the clock where it stopped (Isaac Lab's counter starts again at 0)
    resumed = {**params, "start_step": 50}
    env.common_step_counter = 0
    resumed_term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=resumed), env)
    out["resumed_progress"] = resumed_term(env, slice(None), **resumed)["progress"]
    out["ramped"] = probe_randomization_ramp(env, params)
    out["widened"] = probe_randomization_after_curriculum(env, params)
    return out


def drawn_friction(env):
    """The friction the material term drew at a reset of every env: (min, max)."""
    material = env.event_manager.get_term_cfg("physics_material")
    material.func(env, None, **material.params)
    impl = material.func._impl
    if hasattr(impl, "material_buckets"):  # PhysX: the buckets the shapes draw from
        drawn = impl.material_buckets[:, 0]
    else:  # Newton: the shapes' friction coefficients
        import warp as wp

        drawn = wp.to_torch(impl._friction_binding)[:, impl._shape_indices.to(env.device)]
    return [float(drawn.min()), float(drawn.max())]


def probe_randomization_ramp(env, params: dict) -> dict:
    """``ranges_ramp`` (0, 100): the events' ranges at the clock's 100 (the command ranges just full), 150 and 200
    (the ramp's end), from the events' own toward friction 0.30-0.35 and stiffness 1.3-1.4; the events' params and
    terms are put back afterwards."""
    from isaaclab.managers import CurriculumTermCfg

    from diffloco_ext.isaaclab.curriculum import velocity_command_curriculum

    names = ("physics_material", "actuator_gains")
    saved = {n: (dict(env.event_manager.get_term_cfg(n).params), env.event_manager.get_term_cfg(n).func)
             for n in names}
    ramped = {**params, "friction_after_curriculum": (0.30, 0.35), "stiffness_scale_after_curriculum": (1.3, 1.4),
              "ranges_ramp": (0, 100)}
    term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=ramped), env)
    out = {"own_friction_range": list(saved["physics_material"][0]["static_friction_range"]),
           "own_stiffness_params": list(saved["actuator_gains"][0]["stiffness_distribution_params"])}
    for step in (100, 150, 200):
        env.common_step_counter = step
        term(env, slice(None), **ramped)
        material = env.event_manager.get_term_cfg("physics_material")
        out[str(step)] = {"friction_range": list(material.params["static_friction_range"]),
                          "friction_drawn": drawn_friction(env),
                          "stiffness_params": list(env.event_manager.get_term_cfg("actuator_gains")
                                                   .params["stiffness_distribution_params"])}
    for n, (p, func) in saved.items():
        cfg = env.event_manager.get_term_cfg(n)
        cfg.params.clear()
        cfg.params.update(p)
        cfg.func = func
        env.event_manager.set_term_cfg(n, cfg)
    return out


def probe_randomization_after_curriculum(env, params: dict) -> dict:
    """The randomisation ranges the curriculum puts in place once the command ranges are full: friction (the
    material term, built again: it samples at construction) and the gains; what the terms hold and draw at the
    clock's 50 and 100."""
    from isaaclab.managers import CurriculumTermCfg

    from diffloco_ext.isaaclab.curriculum import velocity_command_curriculum

    widen = {**params, "friction_after_curriculum": (0.30, 0.35), "stiffness_scale_after_curriculum": (1.3, 1.4)}
    term = velocity_command_curriculum(CurriculumTermCfg(func=velocity_command_curriculum, params=widen), env)
    material_before = env.event_manager.get_term_cfg("physics_material").func
    out = {}
    for step in (50, 100):
        env.common_step_counter = step
        term(env, slice(None), **widen)
        material = env.event_manager.get_term_cfg("physics_material")
        material.func(env, None, **material.params)  # a reset's draw for every env
        impl = material.func._impl
        if hasattr(impl, "material_buckets"):  # PhysX: the buckets the shapes draw from
            drawn = impl.material_buckets[:, 0]
        else:  # Newton: the shapes' friction coefficients
            import warp as wp

            drawn = wp.to_torch(impl._friction_binding)[:, impl._shape_indices.to(env.device)]
        gains = env.event_manager.get_term_cfg("actuator_gains")
        out[str(step)] = {"rebuilt": material.func is not material_before,
                          "friction_range": list(material.params["static_friction_range"]),
                          "friction_drawn": [float(drawn.min()), float(drawn.max())],
                          "stiffness_params": list(gains.params["stiffness_distribution_params"])}
    return out


def probe_backend(engine: str) -> dict:
    from diffloco_ext.assets import get_robot
    from diffloco_ext.isaaclab.validation_backend import make_backend

    robot = get_robot("anymal_d")
    t0 = time.time()
    backend = make_backend(robot, 2, engine=engine, policy_dt=0.02, sim_dt=0.005, friction=1.0)
    out = {"backend_build_s": time.time() - t0, "backend_name": backend.name}
    default = torch.tensor(robot.default_joint_positions())
    q = torch.zeros(2, 7 + robot.num_joints, dtype=torch.float64)
    q[:, 2] = 0.6
    q[0, 3] = 1.0
    q[1, 3:7] = torch.tensor([np.cos(0.3), 0.1, -0.05, np.sin(0.3)])
    q[1, 3:7] /= torch.linalg.norm(q[1, 3:7])
    q[:, 7:] = default
    q[1, 7:] += 0.01 * torch.arange(robot.num_joints)  # distinct per joint: the order shows
    u = torch.zeros(2, 6 + robot.num_joints, dtype=torch.float64)
    u[1, :6] = torch.tensor([0.1, -0.2, 0.05, 0.3, -0.1, 0.2])
    u[1, 6:] = 0.1 * torch.arange(robot.num_joints)
    backend.reset(q, u)
    q1, u1 = backend.state()
    out["roundtrip_q"] = (q1 - q).abs().max().item()
    out["roundtrip_u"] = (u1 - u).abs().max().item()
    art = backend.articulation
    by_name = dict(zip(art.joint_names, art.data.joint_pos.torch[1].double().tolist()))
    out["joint_pos_by_name"] = by_name
    out["joint_pos_set"] = dict(zip(robot.joint_names, q[1, 7:].tolist()))
    # standing at zero action (targets = the default pose) for 1 s
    q[1] = q[0]
    backend.reset(q, torch.zeros_like(u))
    t1 = time.time()
    for _ in range(50):
        backend.step(default.repeat(2, 1))
    out["backend_step_s"] = (time.time() - t1) / 50
    q2, u2 = backend.state()
    out["standing_q"] = q2.tolist()
    out["standing_speed"] = u2[:, :6].abs().max().item()
    out["standing_torque"] = backend.joint_torque().tolist()
    # a joint target on one joint by name moves that joint
    target = default.repeat(2, 1)
    k = robot.joint_names.index("LF_KFE")
    target[:, k] -= 0.2
    for _ in range(10):
        backend.step(target)
    q3, _ = backend.state()
    out["moved_joint_delta"] = (q3[0, 7:] - q2[0, 7:]).tolist()
    # free fall from 3 m: a policy step covers policy_dt of physics (the base's vertical speed after 3 steps)
    q[:, 2] = 3.0
    backend.reset(q, torch.zeros_like(u))
    for _ in range(3):
        backend.step(default.repeat(2, 1))
    out["fall_vz_after_3_steps"] = backend.state()[1][:, 2].tolist()
    backend.close()
    return out


def main() -> None:
    engine, path = sys.argv[1], sys.argv[2]
    result = {"engine": engine}
    result.update(probe_env(engine))
    result.update(probe_backend(engine))
    with open(path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
