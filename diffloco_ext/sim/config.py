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
ENGINES = ("warp", "mujoco", "hard")
SURROGATES = ("simplified", "smoothed")


@dataclass
class SimCfg:
    """Simulation settings (SI units).

    Attributes:
        dt: Physics time step (s). Isaac Lab's flat ANYmal-D task: 0.005.
        substeps: Physics steps per policy step (decimation; the joint targets are held). Isaac Lab: 4.
        contact: Contact model and its settings (:class:`~.contact.ContactParams`); a mode name is accepted.
        max_speed: Divergence guard: a generalised velocity beyond this (m/s, rad/s) flags the environment.
        max_distance: Divergence guard: a coordinate beyond this (m, rad) flags the environment.
        dtype: ``"float32"`` (training) or ``"float64"`` (verification). With an aligned engine: the precision of
            the observations and rewards (the states are float64, the accurate engine's).
        device: ``"cpu"`` or ``"cuda[:N]"``.
        engine: The forward physics. ``"warp"``: the differentiable simulator above (Schwarke et al.). ``"mujoco"``
            or ``"hard"``: the aligned step of Song et al. (:mod:`.aligned_step`): MuJoCo, or the project's hard
            contact without a tape, forward, and ``surrogate`` backward (CPU only).
        surrogate: With an aligned engine, the differentiable model the gradient comes from: ``"smoothed"`` (this
            simulator with ``contact``, one policy step) or ``"simplified"`` (:mod:`.fixed_contact_surrogate`).
        engine_dt: MuJoCo's time step (s) under the aligned step; must divide the policy step. The validation's: 0.0025.
        engine_threads: MuJoCo's rollout threads (None: the CPU count, at most 8).
    """

    dt: float = 0.005
    substeps: int = 1
    contact: ContactParams = field(default_factory=ContactParams)
    max_speed: float = 1.0e3
    max_distance: float = 1.0e4
    dtype: str = "float32"
    device: str = "cpu"
    engine: str = "warp"
    surrogate: str = "smoothed"
    engine_dt: float = 0.0025
    engine_threads: int | None = None

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

    @property
    def aligned(self) -> bool:
        """Whether the forward physics is an accurate engine with a surrogate's gradient (Song et al.)."""
        return self.engine != "warp"

    def build_model(self, robot, num_envs: int, **kwargs):
        """The :class:`~.model.Model` of ``num_envs`` copies of ``robot`` in this config's precision and on its
        device (``kwargs`` go to :func:`~.model.build_model`: gravity, friction, ...)."""
        from .model import build_model

        dtype = "float64" if self.aligned else self.dtype
        return build_model(robot, num_envs, device=self.device, dtype=dtype, **kwargs)

    def build_bridge(self, model, body_gaps: bool = True):
        """The differentiable step of this config for ``model`` (from :meth:`build_model`): a
        :class:`~.torch_bridge.TorchSimulator` of the simulator (``engine="warp"``) or an
        :class:`~.aligned_step.AlignedSimulator` (an accurate engine, float64, CPU)."""
        from .simulator import Simulator

        sim = Simulator.from_cfg(model, self)
        if not self.aligned:
            from .torch_bridge import TorchSimulator

            return TorchSimulator(sim, body_gaps=body_gaps)
        if self.device != "cpu":
            raise ValueError(f"SimCfg.engine={self.engine!r} runs on the CPU (MuJoCo C, the untaped simulator); "
                             f"device is {self.device!r}")
        from .aligned_step import AlignedSimulator

        return AlignedSimulator(sim, self.engine, self.surrogate, engine_dt=self.engine_dt,
                                threads=self.engine_threads, max_speed=self.max_speed, max_distance=self.max_distance)


def _checked(name: str, value):
    if name in ("dt", "max_speed", "max_distance", "engine_dt"):
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
    if name == "engine":
        if value not in ENGINES:
            raise ValueError(f"SimCfg.engine must be one of {ENGINES}, got {value!r}")
        return value
    if name == "surrogate":
        if value not in SURROGATES:
            raise ValueError(f"SimCfg.surrogate must be one of {SURROGATES}, got {value!r}")
        return value
    if name == "engine_threads":
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"SimCfg.engine_threads must be None or an integer >= 1, got {value!r}")
        return value
    if name == "device":
        if not isinstance(value, str) or not (value == "cpu" or value.startswith("cuda")):
            raise ValueError(f"SimCfg.device must be 'cpu' or 'cuda[:N]', got {value!r}")
        return value
    return value
