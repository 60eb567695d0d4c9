"""Gates: what a policy must satisfy before hardware, measured per scenario and backend, and the verdict.

Every gate is a number measured over a scenario's episodes (all its seeds) that must not exceed its threshold
(``measured <= threshold`` passes; a measurement without samples, NaN, fails). Samples are the policy steps
after the warm-up (``settings.warmup_s``: the drop from the reset height) of robots that have not fallen, until
the episode's end; ``fall_rate`` counts every episode.

=================== ======= ==================================================================================
gate                unit    measured
=================== ======= ==================================================================================
lin_vel_error       m/s     mean planar tracking error ``|v*_xy - v_xy|`` (base frame, base centre of mass)
ang_vel_error       rad/s   mean yaw-rate tracking error ``|w*_z - w_z|``
fall_rate           1       fraction of episodes with a fall (:mod:`.robot_kinematics`)
torque_rms          1       largest per-joint RMS of the applied drive torque, over the effort limit ``E``
torque_saturation   1       fraction of joint samples whose PD demand ``k_p (q* - q) - k_d qd`` (at the policy
                            step's start) lies outside the DC-motor envelope at the joint's speed
joint_velocity      1       largest ``|qd|`` over the DC motor's no-load speed ``v`` (beyond it the motor brakes)
joint_limit         rad     largest excursion beyond the description's joint ranges (no simulator models them)
foot_slip           m/s     mean horizontal speed of the stance feet's contact points: feet whose bottom is
                            within ``stance_height`` at the policy step's start and end (landing and lifting
                            feet pass that band in swing); the sphere's lowest material point (rolling is not
                            slip)
base_tilt           rad     largest ``|roll|`` or ``|pitch|`` of the base
action_rate         1       mean over samples of the RMS over joints of ``a_t - a_(t-1)`` (action units)
stuck_rate          1       fraction of the episodes stuck: a 10-s window, standing, commanded faster than 0.3 m/s
                            on average, in which the base moved less than 1 m (:mod:`.terrain_scenarios`)
body_contact        1       fraction of the samples with a thigh or shank collision capsule at or below the
                            ground (:mod:`.robot_kinematics`)
gait_mismatch       1       fraction of the episodes whose gait (:mod:`.gait_analysis`, over their steps commanded
                            faster than ``settings.gait_min_speed``) is not the task's gait (``env.gait``);
                            checked where episodes were measured, for a task whose gait has a class
export_mismatch     1       largest ``|a_exported - a_torch|`` on the recorded observations (not per scenario)
=================== ======= ==================================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

#: Gate name -> (unit, one-line description).
GATES: dict[str, tuple[str, str]] = {
    "lin_vel_error": ("m/s", "mean planar velocity tracking error"),
    "ang_vel_error": ("rad/s", "mean yaw-rate tracking error"),
    "fall_rate": ("", "fraction of episodes with a fall"),
    "torque_rms": ("x E", "largest per-joint RMS drive torque / effort limit"),
    "torque_saturation": ("", "fraction of joint samples with the PD demand outside the DC-motor envelope"),
    "joint_velocity": ("x v", "largest |joint velocity| / DC-motor no-load speed"),
    "joint_limit": ("rad", "largest excursion beyond the joint ranges"),
    "foot_slip": ("m/s", "mean horizontal speed of the stance feet's contact points"),
    "base_tilt": ("rad", "largest |roll| or |pitch|"),
    "action_rate": ("", "mean RMS action change per policy step"),
    "stuck_rate": ("", "fraction of episodes stuck (commanded > 0.3 m/s, < 1 m in 10 s)"),
    "body_contact": ("", "fraction of samples with a thigh or shank on the ground"),
    "gait_mismatch": ("", "fraction of moving episodes not walking the task's gait"),
    "export_mismatch": ("", "largest |exported - torch| action on the recorded observations"),
}
SCENARIO_GATES = tuple(g for g in GATES if g != "export_mismatch")
#: Gate name -> what failing it means for a robot (printed with the verdict).
ON_HARDWARE: dict[str, str] = {
    "lin_vel_error": "the robot does not go where it is commanded (an operator or planner must correct it)",
    "ang_vel_error": "the robot does not turn as commanded",
    "fall_rate": "the robot falls: damage to the robot and its surroundings; do not deploy",
    "torque_rms": "the drives carry a continuous load that heats the motors beyond their rating",
    "torque_saturation": "the policy asks for torque the motors cannot give: the robot moves unlike in simulation",
    "joint_velocity": "joints exceed the motors' no-load speed: the drives brake and lose torque",
    "joint_limit": "joints run into their mechanical stops (no simulator here models them): impacts, damage",
    "foot_slip": "stance feet slide: lost traction, worse on low friction, wear of the feet",
    "base_tilt": "the base rolls or pitches far: close to a fall, sensors and payload disturbed",
    "action_rate": "the joint targets change fast: drive heating, wear and vibration on the robot",
    "stuck_rate": "the robot stops where the terrain gets hard: it does not get where it is sent",
    "body_contact": "thighs or shanks hit the ground or a step: impacts on the legs, lost footing",
    "gait_mismatch": "the robot does not walk the gait it was trained for: its loads and timing differ from the design",
    "export_mismatch": "the exported file does not compute the trained policy: re-export",
}

#: Per-env sums a batch accumulates (arrays [N], ``torque_sq`` [N, n]); see :class:`MetricSums`.
_SUM_FIELDS = ("samples", "lin_err", "ang_err", "saturated", "joint_samples", "stance", "slip", "action_rate",
               "body_contact")
_MAX_FIELDS = ("qd_ratio", "limit_excess", "tilt")


class MetricSums:
    """Per-env running sums and maxima over the gated samples of a batch of ``N`` episodes."""

    def __init__(self, num_envs: int, num_joints: int):
        for name in _SUM_FIELDS:
            setattr(self, name, np.zeros(num_envs))
        for name in _MAX_FIELDS:
            setattr(self, name, np.zeros(num_envs))
        self.torque_sq = np.zeros((num_envs, num_joints))
        self.fell = np.zeros(num_envs, dtype=bool)
        self.fall_time = np.full(num_envs, np.nan)
        self.fall_command = np.full((num_envs, 3), np.nan)  # (vx, vy, wz) commanded when the env fell
        self.stuck = np.zeros(num_envs, dtype=bool)  # set at the batch's end (:func:`.terrain_scenarios.stuck`)

    def add(self, m: np.ndarray, *, lin_err, ang_err, torque, saturated, qd_ratio, limit_excess, stance, slip,
            tilt, action_rate, body_contact=None) -> None:
        """Accumulate one policy step for the envs of mask ``m`` [N] (the others are left as they are)."""
        w = m.astype(np.float64)
        self.samples += w
        self.lin_err += w * lin_err
        self.ang_err += w * ang_err
        self.torque_sq += w[:, None] * torque ** 2
        self.saturated += w * saturated.sum(axis=1)
        self.joint_samples += w * saturated.shape[1]
        self.stance += w * stance.sum(axis=1)
        self.slip += w * (slip * stance).sum(axis=1)
        self.action_rate += w * action_rate
        if body_contact is not None:
            self.body_contact += w * body_contact
        for name, value in (("qd_ratio", qd_ratio), ("limit_excess", limit_excess), ("tilt", tilt)):
            current = getattr(self, name)
            setattr(self, name, np.where(m, np.maximum(current, value), current))

    def rows(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The sums of envs ``index`` (for one episode each) as a dict of arrays."""
        out = {name: getattr(self, name)[index].copy() for name in (*_SUM_FIELDS, *_MAX_FIELDS)}
        out["torque_sq"] = self.torque_sq[index].copy()
        out["fell"] = self.fell[index].copy()
        out["fall_time"] = self.fall_time[index].copy()
        out["fall_command"] = self.fall_command[index].copy()
        out["stuck"] = self.stuck[index].copy()
        return out


def scenario_metrics(episodes: list[dict], effort_limit: float) -> dict[str, float]:
    """The gate measurements of a scenario from its episodes' sums (each a :meth:`MetricSums.rows` entry of one
    env: scalars, ``torque_sq`` [n])."""
    def total(name):
        return float(sum(float(e[name]) for e in episodes))

    samples = total("samples")
    nan = float("nan")

    def ratio(num, den):
        return num / den if den > 0 else nan

    torque_sq = np.sum([e["torque_sq"] for e in episodes], axis=0)
    rms = np.sqrt(torque_sq / samples) if samples > 0 else np.full_like(torque_sq, nan)
    peak = {name: (max(float(e[name]) for e in episodes) if samples > 0 else nan)
            for name in _MAX_FIELDS}
    return {
        "lin_vel_error": ratio(total("lin_err"), samples),
        "ang_vel_error": ratio(total("ang_err"), samples),
        "fall_rate": float(np.mean([bool(e["fell"]) for e in episodes])) if episodes else nan,
        "torque_rms": float(rms.max()) / effort_limit,
        "torque_saturation": ratio(total("saturated"), total("joint_samples")),
        "joint_velocity": peak["qd_ratio"],
        "joint_limit": peak["limit_excess"],
        "foot_slip": ratio(total("slip"), total("stance")),
        "base_tilt": peak["tilt"],
        "action_rate": ratio(total("action_rate"), samples),
        "stuck_rate": float(np.mean([bool(e.get("stuck", False)) for e in episodes])) if episodes else nan,
        "body_contact": ratio(sum(float(e.get("body_contact", 0.0)) for e in episodes), samples),
        "gait_mismatch": nan,  # the gait's measure (:mod:`.gait_analysis`): set by the validation run
    }


@dataclass
class GateResult:
    """One gate of one scenario (or the export gate) in one backend."""

    gate: str
    value: float
    threshold: float
    backend: str = "-"
    scenario: str = "-"

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.value) and self.value <= self.threshold)

    @property
    def unit(self) -> str:
        return GATES[self.gate][0]

    def describe(self) -> str:
        value = "n/a (no samples)" if not np.isfinite(self.value) else f"{self.value:.4g}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.backend} / {self.scenario}: {self.gate} = {value}{unit} > {self.threshold:.4g}{unit}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = None if not np.isfinite(self.value) else float(self.value)
        d["passed"] = self.passed
        d["unit"] = self.unit
        return d


def check_gates(metrics: dict[str, float], thresholds: dict[str, float | None], backend: str,
                scenario: str) -> list[GateResult]:
    """The results of the enabled gates (threshold not None) of one scenario in one backend."""
    return [GateResult(name, float(metrics[name]), float(t), backend, scenario)
            for name, t in thresholds.items() if t is not None and name in metrics]


def verdict(results: list[GateResult]) -> tuple[str, list[GateResult]]:
    """``("PASS" | "FAIL", failing gates)``."""
    failing = [r for r in results if not r.passed]
    return ("FAIL" if failing else "PASS"), failing
