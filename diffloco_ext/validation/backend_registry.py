"""Validation backends by name, as lazy references to their factories (a backend's engine is imported only
when it is used, so an engine that is not installed costs nothing until it is asked for).

======================= ==================================================================== =========
name                    factory                                                              physics dt
======================= ==================================================================== =========
``hard``                the project's simulator, hard contact (:mod:`.sim_backend`)           5 ms
``mujoco``              MuJoCo C on the exported MJCF, the drive model in the loop            2.5 ms
``isaaclab-physx``      Isaac Lab on PhysX (``diffloco_ext.isaaclab.validation_backend``)     5 ms
``isaaclab-newton``     Isaac Lab on Newton (same factory, ``engine="newton"``)               5 ms
``smoothed``            the project's simulator in the training contact (smoothed, kappa 300   5 ms
                        1/m): a reference, not a validator (is a failure the policy's, or the
                        contact model's?)
``mujoco-soft``         MuJoCo with a ground twice as soft (contact ``solref`` time constant  2.5 ms
                        0.04 s, MuJoCo's default 0.02 s): a stress test, not a validator (a
                        policy whose gait holds on one ground only falls here)
======================= ==================================================================== =========

Aliases: ``isaaclab`` = both Isaac Lab engines, ``all`` = every validator (all but ``smoothed`` and
``mujoco-soft``; those that cannot be imported here are skipped with the reason). Any
``"package.module:factory"`` string is a user backend with the same factory signature:
``factory(robot, num_envs, *, policy_dt, sim_dt, friction, **options) -> Backend``.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field


class BackendUnavailable(RuntimeError):
    """A backend whose engine cannot be imported here (the message says what is missing)."""


@dataclass(frozen=True)
class BackendSpec:
    factory: str  # "package.module:function"
    sim_dt: float  # s, the engine's physics step
    options: dict = field(default_factory=dict)
    description: str = ""
    requires: tuple[str, ...] = ()  # top-level modules the engine needs (checked before the factory is imported)


ISAACLAB_FACTORY = "diffloco_ext.isaaclab.validation_backend:make_backend"

BACKENDS: dict[str, BackendSpec] = {
    "hard": BackendSpec("diffloco_ext.validation.sim_backend:make_backend", 0.005, {"contact": "hard"},
                        "the project's simulator, hard contact"),
    "mujoco": BackendSpec("diffloco_ext.validation.mujoco_backend:make_backend", 0.0025, {},
                          "MuJoCo C on the exported MJCF, the project's drive model"),
    "isaaclab-physx": BackendSpec(ISAACLAB_FACTORY, 0.005, {"engine": "physx"}, "Isaac Lab, PhysX", ("isaaclab",)),
    "isaaclab-newton": BackendSpec(ISAACLAB_FACTORY, 0.005, {"engine": "newton"}, "Isaac Lab, Newton",
                                   ("isaaclab",)),
    "smoothed": BackendSpec("diffloco_ext.validation.sim_backend:make_backend", 0.005, {"contact": "smoothed"},
                            "the project's simulator, the training's smoothed contact (a reference)"),
    "mujoco-soft": BackendSpec("diffloco_ext.validation.mujoco_backend:make_backend", 0.0025,
                               {"contact_time_constant": 0.04, "name": "mujoco-soft"},
                               "MuJoCo with a ground twice as soft (solref time constant 0.04 s; a stress test)"),
}
VALIDATORS = ("hard", "mujoco", "isaaclab-physx", "isaaclab-newton")  # the backends that judge a policy
ALIASES: dict[str, tuple[str, ...]] = {"isaaclab": ("isaaclab-physx", "isaaclab-newton"), "all": VALIDATORS}
CHOICES = (*BACKENDS, *ALIASES)


def spec(name: str) -> BackendSpec:
    if name in BACKENDS:
        return BACKENDS[name]
    if ":" in name:
        return BackendSpec(name, 0.005, {}, "user backend")
    raise KeyError(f"unknown backend '{name}': use one of {list(CHOICES)} or 'package.module:factory'")


def resolve(names: list[str] | str) -> tuple[list[str], bool]:
    """Backend names from the command line (aliases expanded, duplicates dropped, order kept), and whether
    unavailable ones may be skipped (only when ``all`` asked for them)."""
    names = [names] if isinstance(names, str) else list(names)
    out, lenient = [], False
    for name in names:
        if name == "all":
            lenient = True
        for n in ALIASES.get(name, (name,)):
            spec(n)  # unknown names fail here
            if n not in out:
                out.append(n)
    return out, lenient


def factory(name: str):
    """The factory function of backend ``name`` (imports its engine; :class:`BackendUnavailable` if it cannot)."""
    s = spec(name)
    module_name, _, attr = s.factory.partition(":")
    missing = [m for m in s.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise BackendUnavailable(f"backend '{name}' needs {', '.join(missing)}, which is not installed here "
                                 f"(Isaac Lab: see docs/validation.md); validate with --backend hard mujoco instead")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        if module_name.split(".")[:2] == ["diffloco_ext", "isaaclab"]:
            raise BackendUnavailable(
                f"backend '{name}' needs the Isaac Lab layer (diffloco_ext.isaaclab) and Isaac Lab itself, which "
                f"cannot be imported here ({type(err).__name__}: {err}); install Isaac Lab (docs/validation.md) "
                f"or validate with --backend hard/mujoco") from None
        raise BackendUnavailable(f"backend '{name}': cannot import {module_name} ({err})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise BackendUnavailable(f"backend '{name}': {module_name} has no factory '{attr}'") from None


def available(name: str) -> tuple[bool, str]:
    """``(True, "")`` if backend ``name`` can be made here, else ``(False, reason)``."""
    try:
        factory(name)
    except BackendUnavailable as err:
        return False, str(err)
    return True, ""


#: The backends that run on generated terrain (its arrays as their ground).
TERRAIN_BACKENDS = ("hard", "mujoco", "smoothed", "mujoco-soft")


def make_backend(name: str, robot, num_envs: int, *, policy_dt: float, friction: float = 1.0, terrain=None):
    """Backend ``name`` for ``num_envs`` robots ``robot`` at the task's ``policy_dt`` (s), on flat ground or on
    ``terrain`` (a generated terrain; the backends of :data:`TERRAIN_BACKENDS`)."""
    s = spec(name)
    extra = {}
    if terrain is not None:
        if name not in TERRAIN_BACKENDS:
            raise BackendUnavailable(f"backend '{name}' does not run on generated terrain here; the terrain "
                                     f"backends are {list(TERRAIN_BACKENDS)}")
        extra["terrain"] = terrain
    return factory(name)(robot, num_envs, policy_dt=policy_dt, sim_dt=s.sim_dt, friction=friction, **s.options,
                         **extra)
