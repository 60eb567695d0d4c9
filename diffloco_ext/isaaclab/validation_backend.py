"""Isaac Lab (PhysX or Newton) as a validation backend of :mod:`diffloco_ext.validation`.

``N`` robots in an Isaac Lab ``ManagerBasedEnv`` built from this layer's USD and ``ArticulationCfg`` (the
description's DC-motor drive as Isaac Lab's explicit ``DCMotor``, computed at every physics step with the targets
held for the policy step) on the ground plane, with nothing else: no commands, rewards, randomisation or
resets of its own. The protocol's conventions are the project simulator's, converted here **by name and
convention** at the boundary:

* joints: the protocol's order is the description's (leg by leg); the articulation's public order is Isaac
  Lab's (grouped by joint type, ``joint_ordering`` of :func:`~.robot_cfg.robot_cfg`). Targets go through Isaac
  Lab's ``JointPositionAction`` with ``joint_names`` = the description's names, ``preserve_order``, scale 1 and
  no offset; states are read by name (:attr:`IsaacLabBackend.joint_ids`).
* base pose: position relative to the env's origin (the ground is z = 0 under every env); quaternion
  ``(w, x, y, z)`` here, ``(x, y, z, w)`` in Isaac Lab 3.0.
* base velocity: the protocol's ``u[:3]`` is the world velocity of the base frame's origin and ``u[3:6]`` the
  angular velocity in the base frame. Written and read here as Isaac Lab's root *centre-of-mass* velocity (world
  frame, what the engines store), converted with the base's centre of mass: ``v_com = v_origin + w x (R c)``.
  (Isaac Lab 3.0's root *link* velocity on standalone PhysX did not round-trip: a write followed by a read differed
  by ``w x c`` with ``c`` in the wrong frame, 6 mm/s at 0.37 rad/s.)

Isaac Lab's state is float32: a reset followed by :meth:`state` returns the state to float32 precision
(~1e-7 relative).

Engines: ``"physx"`` (standalone PhysX, ``ovphysx``; Isaac Sim's PhysX where Isaac Sim is installed) and
``"newton"`` (MuJoCo-Warp), with the presets of :class:`~.env_cfg.VelocityPhysicsCfg` (Newton: 2 substeps per
physics step). ``sim_dt`` is the physics step, ``policy_dt / sim_dt`` of them per policy step.

Per-env parameters (:meth:`IsaacLabBackend.set_parameters`, the protocol's ``EnvParameters``): ``friction``
through the robot's shape materials (the ground's material has friction 0 and both combine by ``max``, so the
contact's coefficient is the robot's on both engines), ``payload_kg`` on the base's mass (its inertia and centre
of mass unchanged), ``stiffness_scale`` / ``damping_scale`` on the DC motor's gains.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from diffloco_ext.assets.robot_description import RobotDescription

ENGINES = ("physx", "newton")


def _env_cfg(robot: RobotDescription, num_envs: int, engine: str, policy_dt: float, sim_dt: float, friction: float):
    import isaaclab.sim as sim_utils
    from isaaclab.assets import AssetBaseCfg
    from isaaclab.envs import ManagerBasedEnvCfg, mdp
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg
    from isaaclab.utils import configclass

    from .env_cfg import VelocityPhysicsCfg, ground_material
    from .robot_cfg import robot_cfg
    from .usd_export import ground_usd_path

    decimation = int(round(policy_dt / sim_dt))
    if decimation < 1 or abs(decimation * sim_dt - policy_dt) > 1e-9:
        raise ValueError(f"policy_dt {policy_dt} s must be a whole multiple of sim_dt {sim_dt} s")
    presets = VelocityPhysicsCfg()
    physics = presets.physx if engine == "physx" else presets.newton_mjwarp

    articulation = robot_cfg(robot, base_height=robot.default_base_height, friction=friction,
                             friction_combine_mode="max")

    @configclass
    class SceneCfg(InteractiveSceneCfg):
        ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.GroundPlaneCfg(
            usd_path=ground_usd_path(), physics_material=ground_material(0.0)))
        robot = articulation

    @configclass
    class ActionsCfg:
        joint_pos = mdp.JointPositionActionCfg(asset_name="robot", joint_names=list(robot.joint_names),
                                               preserve_order=True, scale=1.0, use_default_offset=False)

    @configclass
    class ObservationsCfg:
        @configclass
        class PolicyCfg(ObservationGroupCfg):
            joint_pos = ObservationTermCfg(func=mdp.joint_pos)

        policy: PolicyCfg = PolicyCfg()

    @configclass
    class BackendEnvCfg(ManagerBasedEnvCfg):
        sim: SimulationCfg = SimulationCfg(dt=sim_dt, device="cpu", physics=physics)
        scene: SceneCfg = SceneCfg(num_envs=num_envs, env_spacing=3.0)
        actions: ActionsCfg = ActionsCfg()
        observations: ObservationsCfg = ObservationsCfg()

        def __post_init__(self):
            self.decimation = decimation
            self.sim.render_interval = decimation
            self.sim.physics_material = ground_material(0.0)

    return BackendEnvCfg()


class IsaacLabBackend:
    """``num_envs`` robots in Isaac Lab on ``engine`` (see the module docstring)."""

    def __init__(self, robot: RobotDescription, num_envs: int, *, engine: str, policy_dt: float, sim_dt: float,
                 friction: float):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got '{engine}'")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if robot.actuator is None:
            raise ValueError(f"robot '{robot.name}' has no drive model")
        from isaaclab.envs import ManagerBasedEnv

        from .warp_cpu import enable_cpu_pinned_fallback

        enable_cpu_pinned_fallback()
        self.name = f"isaaclab-{engine}"
        self.engine = engine
        self.robot = robot
        self.num_envs = num_envs
        self.policy_dt = float(policy_dt)
        self.sim_dt = float(sim_dt)
        self.env = ManagerBasedEnv(_env_cfg(robot, num_envs, engine, policy_dt, sim_dt, friction))
        self.env.reset()
        self.articulation = self.env.scene["robot"]
        names = list(self.articulation.joint_names)
        missing = [n for n in robot.joint_names if n not in names]
        if missing:
            raise RuntimeError(f"Isaac Lab's articulation lacks joints {missing} (it has {names})")
        #: articulation (public) column of each description joint: x_desc = x_isaaclab[:, joint_ids]
        self.joint_ids = torch.tensor([names.index(n) for n in robot.joint_names], dtype=torch.long)
        self.base_id = list(self.articulation.body_names).index(robot.bodies[0].name)
        self.origins = self.env.scene.env_origins.detach().cpu().double()
        self._torque = torch.zeros(num_envs, robot.num_joints, dtype=torch.float64)
        self._mass0 = self.articulation.data.body_mass.torch.clone()
        self._gains = self._event_term("randomize_actuator_gains", joint_names=".*",
                                       stiffness_distribution_params=(1.0, 1.0),
                                       damping_distribution_params=(1.0, 1.0), operation="scale")
        self._set_friction(torch.full((num_envs,), float(friction), dtype=torch.float64))

    def _event_term(self, name: str, *, body_names=None, joint_names=None, **params):
        """An instance of Isaac Lab's event term ``isaaclab.envs.mdp.<name>`` on the robot, with its params."""
        from isaaclab.envs import mdp
        from isaaclab.managers import EventTermCfg, SceneEntityCfg

        entity = {"body_names": body_names} if body_names is not None else {"joint_names": joint_names}
        asset_cfg = SceneEntityCfg("robot", **entity)
        asset_cfg.resolve(self.env.scene)
        art = self.articulation
        if joint_names is not None and list(asset_cfg.joint_ids) == list(range(art.num_joints)):
            asset_cfg.joint_ids = slice(None)  # all joints, as the event manager passes them
        if body_names is not None and list(asset_cfg.body_ids) == list(range(art.num_bodies)):
            asset_cfg.body_ids = slice(None)
        cfg = EventTermCfg(func=getattr(mdp, name), mode="reset", params={"asset_cfg": asset_cfg, **params})
        term = cfg.func(cfg, self.env)
        return term, cfg.params

    def _per_value(self, values: torch.Tensor, apply) -> None:
        """``apply(value, env_ids)`` for each distinct value of ``values`` [N] (envs grouped by value)."""
        for value in torch.unique(values):
            apply(float(value), torch.nonzero(values == value).flatten().to(self.env.device))

    def _set_friction(self, friction: torch.Tensor) -> None:
        """Static and dynamic friction of every robot shape per env: Isaac Lab's material event with the range
        ``(value, value)`` (its samples are then the value exactly; a term per value, since the engines' terms
        fix their range when built)."""
        if (friction < 0).any() or not torch.isfinite(friction).all():
            raise ValueError("friction must be finite and >= 0")

        def apply(mu: float, env_ids: torch.Tensor) -> None:
            term, params = self._event_term(
                "randomize_rigid_body_material", body_names=".*", static_friction_range=(mu, mu),
                dynamic_friction_range=(mu, mu), restitution_range=(0.0, 0.0), num_buckets=1, make_consistent=False)
            term(self.env, env_ids, **params)

        self._per_value(friction, apply)

    def _set_gain_scales(self, stiffness_scale: torch.Tensor, damping_scale: torch.Tensor) -> None:
        """The DC motor's k_p, k_d as their nominal values times the scales (Isaac Lab's gain event, which scales
        from the values it captured when built, with the degenerate range ``(scale, scale)``)."""
        term, params = self._gains
        pairs = torch.stack([stiffness_scale, damping_scale], dim=1)
        for pair in torch.unique(pairs, dim=0):
            env_ids = torch.nonzero((pairs == pair).all(dim=1)).flatten().to(self.env.device)
            kp, kd = float(pair[0]), float(pair[1])
            term(self.env, env_ids, **{**params, "stiffness_distribution_params": (kp, kp),
                                       "damping_distribution_params": (kd, kd)})

    # ---- protocol ----------------------------------------------------------------------------------------------
    def set_parameters(self, params) -> None:
        """Per-env ``friction``, ``payload_kg``, ``stiffness_scale``, ``damping_scale`` (arrays [N])."""
        n = self.num_envs
        arrays = {}
        for key in ("friction", "payload_kg", "stiffness_scale", "damping_scale"):
            value = np.asarray(getattr(params, key), dtype=np.float64)
            if value.shape != (n,):
                raise ValueError(f"parameter '{key}' must have shape ({n},), got {value.shape}")
            arrays[key] = torch.as_tensor(value)
        mass = self._mass0.clone()
        mass[:, self.base_id] += arrays["payload_kg"].to(mass.dtype)
        if (mass[:, self.base_id] <= 0).any():
            raise ValueError("a payload leaves the base without mass")
        self.articulation.set_masses_index(masses=mass[:, [self.base_id]], body_ids=[self.base_id], env_ids=None)
        self._set_gain_scales(arrays["stiffness_scale"], arrays["damping_scale"])
        self._set_friction(arrays["friction"])

    def reset(self, q: torch.Tensor, u: torch.Tensor, env_mask: torch.Tensor | None = None) -> None:
        from isaaclab.utils.math import quat_apply

        from diffloco_ext.assets.rotations import wxyz_to_xyzw

        n, nj = self.num_envs, self.robot.num_joints
        q, u = torch.as_tensor(q, dtype=torch.float64), torch.as_tensor(u, dtype=torch.float64)
        if q.shape != (n, 7 + nj) or u.shape != (n, 6 + nj):
            raise ValueError(f"q must be [{n}, {7 + nj}] and u [{n}, {6 + nj}], got {tuple(q.shape)}, {tuple(u.shape)}")
        ids = torch.arange(n) if env_mask is None else torch.nonzero(torch.as_tensor(env_mask)).flatten()
        if ids.numel() == 0:
            return
        q, u = q[ids], u[ids]
        art, dev = self.articulation, self.env.device
        quat_xyzw = wxyz_to_xyzw(q[:, 3:7] / torch.linalg.norm(q[:, 3:7], dim=1, keepdim=True))
        pose = torch.cat([q[:, :3] + self.origins[ids], quat_xyzw], dim=1).float().to(dev)
        ang_w = quat_apply(quat_xyzw, u[:, 3:6])
        com_w = quat_apply(quat_xyzw, self._base_com_b(ids))
        vel = torch.cat([u[:, :3] + torch.linalg.cross(ang_w, com_w), ang_w], dim=1).float().to(dev)
        joint_pos = torch.zeros(len(ids), nj, dtype=torch.float32)
        joint_vel = torch.zeros(len(ids), nj, dtype=torch.float32)
        joint_pos[:, self.joint_ids] = q[:, 7:].float()
        joint_vel[:, self.joint_ids] = u[:, 6:].float()
        env_ids = ids.to(dev)
        art.write_root_link_pose_to_sim_index(root_pose=pose, env_ids=env_ids)
        art.write_root_com_velocity_to_sim_index(root_velocity=vel, env_ids=env_ids)
        art.write_joint_position_to_sim_index(position=joint_pos.to(dev), env_ids=env_ids)
        art.write_joint_velocity_to_sim_index(velocity=joint_vel.to(dev), env_ids=env_ids)
        art.set_joint_position_target_index(target=joint_pos.to(dev), env_ids=env_ids)
        art.reset(env_ids)
        self.env.scene.write_data_to_sim()

    def step(self, joint_target: torch.Tensor) -> None:
        env = self.env
        target = torch.as_tensor(joint_target, dtype=torch.float32)
        if target.shape != (self.num_envs, self.robot.num_joints):
            raise ValueError(f"joint_target must be [{self.num_envs}, {self.robot.num_joints}], "
                             f"got {tuple(target.shape)}")
        env.action_manager.process_action(target.to(env.device))
        torque = torch.zeros(self.num_envs, self.robot.num_joints, dtype=torch.float64)
        # Newton's physics manager runs all ``decimation`` physics steps in one ``sim.step()`` (its actuators inside
        # the loop), PhysX one per call: as Isaac Lab's ManagerBasedEnv.step, call it decimation / steps-per-call
        # times. (Looping ``decimation`` times on Newton ran 4x the policy step: 0.08 s of physics per 0.02 s.)
        steps_per_call = env.cfg.decimation if env.sim.physics_manager.handles_decimation() else 1
        calls = env.cfg.decimation // steps_per_call
        for _ in range(calls):
            env.action_manager.apply_action()
            env.scene.write_data_to_sim()
            env.sim.step(render=False)
            env.scene.update(dt=env.physics_dt * steps_per_call)
            torque += self.articulation.data.applied_torque.torch[:, self.joint_ids].double().cpu()
        self._torque = torque / calls  # Newton: the last physics step's torque

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        from isaaclab.utils.math import quat_apply, quat_apply_inverse

        from diffloco_ext.assets.rotations import xyzw_to_wxyz

        data = self.articulation.data
        pose = data.root_link_pose_w.torch.detach().cpu().double()
        vel = data.root_com_vel_w.torch.detach().cpu().double()
        com_w = quat_apply(pose[:, 3:7], self._base_com_b(slice(None)))
        lin_origin = vel[:, :3] - torch.linalg.cross(vel[:, 3:6], com_w)
        ang_b = quat_apply_inverse(pose[:, 3:7], vel[:, 3:6])
        joint_pos = data.joint_pos.torch.detach().cpu()[:, self.joint_ids]
        joint_vel = data.joint_vel.torch.detach().cpu()[:, self.joint_ids]
        q = torch.cat([pose[:, :3] - self.origins, xyzw_to_wxyz(pose[:, 3:7]), joint_pos.double()], dim=1)
        u = torch.cat([lin_origin, ang_b, joint_vel.double()], dim=1)
        return q, u

    def _base_com_b(self, ids) -> torch.Tensor:
        """The base's centre of mass in the base frame [len(ids), 3] (m, float64), as the engine has it now."""
        return self.articulation.data.body_com_pos_b.torch[:, self.base_id].detach().cpu().double()[ids]

    def joint_torque(self) -> torch.Tensor:
        """The drive torque [N, n] (N m, description order) averaged over the last step's physics steps (on Newton,
        whose physics manager runs them in one call, the last physics step's)."""
        return self._torque.clone()

    def close(self) -> None:
        if getattr(self, "env", None) is not None:
            self.env.close()
            self.env = None


def make_backend(robot: RobotDescription, num_envs: int, *, engine: str = "physx", policy_dt: float = 0.02,
                 sim_dt: float = 0.005, friction: float = 1.0, **options) -> IsaacLabBackend:
    """The validation layer's factory (``diffloco_ext.validation.backend_registry``): Isaac Lab on ``engine``."""
    if options:
        raise TypeError(f"unknown options for the Isaac Lab backend: {sorted(options)}")
    if not math.isfinite(friction) or friction < 0:
        raise ValueError(f"friction must be finite and >= 0, got {friction}")
    return IsaacLabBackend(robot, num_envs, engine=engine, policy_dt=policy_dt, sim_dt=sim_dt, friction=friction)
