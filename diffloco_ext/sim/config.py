"""``SimCfg``: the one place the simulation settings of a task are set.

A task (and the Isaac Lab layer, field by field onto Isaac Lab's ``SimulationCfg`` and the env's ``decimation``)
reads its simulator from this config::

    cfg = SimCfg(dt=0.005, substeps=4, contact=ContactParams("smoothed", kappa=300.0))
    model = cfg.build_model(get_robot("anymal_d"), num_envs=256)
    sim = Simulator.from_cfg(model, cfg)      # sim.policy_dt == 0.02 s (50 Hz policy)

Every field is validated when the config is made and when it is set (an unknown field, a non-positive ``dt`` or
``substeps``, an unknown precision or device: a clear error naming the field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .contact import ContactParams

PRECISIONS = ("float32", "float64")


@dataclass
class SimCfg:
    """Simulation settings (SI units).

    Attributes:
        dt: Physics time step (s). Isaac Lab's flat ANYmal-D task: 0.005.
        substeps: Physics steps per policy step (decimation; the joint targets are held). Isaac Lab: 4.
        contact: Contact model and its settings (:class:`~.contact.ContactParams`); a mode name is accepted.
        max_speed: Divergence guard: a generalised velocity beyond this (m/s, rad/s) flags the environment.
        max_distance: Divergence guard: a coordinate beyond this (m, rad) flags the environment.
        dtype: ``"float32"`` (training) or ``"float64"`` (verification).
        device: ``"cpu"`` or ``"cuda[:N]"``.
    """

    dt: float = 0.005
    substeps: int = 1
    contact: ContactParams = field(default_factory=ContactParams)
    max_speed: float = 1.0e3
    max_distance: float = 1.0e4
    dtype: str = "float32"
    device: str = "cpu"

    def __setattr__(self, name: str, value) -> None:
        if name not in self.__dataclass_fields__:
            raise AttributeError(f"SimCfg has no field '{name}': use one of {tuple(self.__dataclass_fields__)}")
        if name == "contact" and isinstance(value, str):
            value = ContactParams(mode=value)
        object.__setattr__(self, name, _checked(name, value))

    @property
    def policy_dt(self) -> float:
        """Duration of one policy step (s): ``substeps * dt``."""
        return self.substeps * self.dt

    def build_model(self, robot, num_envs: int, **kwargs):
        """The :class:`~.model.Model` of ``num_envs`` copies of ``robot`` in this config's precision and on its
        device (``kwargs`` go to :func:`~.model.build_model`: gravity, friction, ...)."""
        from .model import build_model

        return build_model(robot, num_envs, device=self.device, dtype=self.dtype, **kwargs)


def _checked(name: str, value):
    if name in ("dt", "max_speed", "max_distance"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"SimCfg.{name} must be a finite number > 0, got {value!r}")
        return float(value)
    if name == "substeps":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"SimCfg.substeps must be an integer >= 1, got {value!r}")
        return value
    if name == "contact":
        if not isinstance(value, ContactParams):
            raise TypeError(f"SimCfg.contact must be a ContactParams or a mode name, got {type(value).__name__}")
        return value
    if name == "dtype":
        if value not in PRECISIONS:
            raise ValueError(f"SimCfg.dtype must be one of {PRECISIONS}, got {value!r}")
        return value
    if name == "device":
        if not isinstance(value, str) or not (value == "cpu" or value.startswith("cuda")):
            raise ValueError(f"SimCfg.device must be 'cpu' or 'cuda[:N]', got {value!r}")
        return value
    return value
