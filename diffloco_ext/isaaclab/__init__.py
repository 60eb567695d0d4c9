"""The Isaac Lab layer: the project's robots and tasks inside Isaac Lab 3.0 (the only package importing ``isaaclab``).

* :mod:`.usd_export`: USD files written with ``pxr`` from a :class:`~diffloco_ext.assets.RobotDescription`
  (articulation, mass properties, joints, foot and body colliders, physics material) and a ground plane.
* :mod:`.robot_cfg`: the robot as an Isaac Lab ``ArticulationCfg`` (our USD, ``DCMotorCfg`` with our gains).
* :mod:`.env_cfg`: the velocity task as a ``ManagerBasedRLEnvCfg`` mirroring
  :mod:`diffloco_ext.tasks.velocity.env_cfg`; :mod:`.mdp` its custom terms; :mod:`.agents` the runner configs.
* :mod:`.tasks`: registration of the ``DiffLoco-*-Isaac`` ids (light: string entry points, imported by every
  ``isaaclab`` command through the ``isaaclab.tasks`` entry-point group).
* :mod:`.validation_backend`: Isaac Lab (PhysX or Newton) as a validation backend.
* :mod:`.warp_cpu`: the CPU-only fix standalone PhysX needs (pinned host memory without CUDA).

Importing this package imports nothing heavy; the submodules other than :mod:`.tasks` import Isaac Lab.
"""
