"""The project's command curriculum as an Isaac Lab curriculum term (:class:`velocity_command_curriculum`).

The differentiable task's curriculum (:class:`diffloco_ext.tasks.velocity.env_cfg.CommandsCfg`,
:class:`diffloco_ext.tasks.velocity.commands.VelocityCommand`) widens the command ranges linearly from initial
ranges to the full ones over ``curriculum_steps`` policy steps of each env; once they are full it switches the
resampling period to ``resampling_time_final``, turns on the reward terms named in ``after_curriculum`` (weight 0
before) and, with ``pushes_after_curriculum``, the pushes. This term does the same on Isaac Lab's managers, with
Isaac Lab's ``common_step_counter`` (policy steps, all envs step together) as the clock:

* the ``UniformVelocityCommand``'s ``cfg.ranges`` (``lin_vel_x``, ``lin_vel_y``, ``ang_vel_z``: the draws at each
  resample and the heading controller's yaw-rate clip, as the project's ``current_range``), and its
  ``cfg.resampling_time_range``;
* the reward manager's weights of the ``after_curriculum`` terms (0, then the configured weight), of the
  ``weights_curriculum_end`` terms (moved while the ranges widen) and of the ``weights_after_curriculum`` terms (the
  weight the ranges were full with, then the given one);
* the push event's ``velocity_range`` (0, then the configured range);
* the randomisation events' ranges (the project's ``RandomizationCfg.after_curriculum``): the ``*_after_curriculum``
  params put in place of the events' own once the ranges are full, or moved there linearly over ``ranges_ramp``
  policy steps after it (the project's ``RandomizationCfg.ranges_ramp``) in :data:`RANGES_RAMP_STAGES` steps. The
  material term samples its friction when it is built (Newton: the range; PhysX: the material buckets), so it is
  built again with each new range; the mass, centre of mass and gain terms read their ranges at each call and keep
  the defaults they captured.

Isaac Lab computes curriculum terms when envs reset (``ManagerBasedRLEnv._reset_idx``), so the ranges follow the
clock at every reset, i.e. every few steps once episodes end at different times, as the project's resample.
The boundary commands have no counterpart here (:func:`diffloco_ext.isaaclab.env_cfg.commands_cfg` refuses them).

**Resuming** (``isaaclab train ... --resume``): Isaac Lab restores the learner, not the env, so its step counter
starts again at 0; the ``start_step`` param (policy steps already trained: iterations x ``num_steps_per_env``, e.g.
``env.curriculum.commands.params.start_step=7200`` after 300 iterations of 24 steps) puts the clock where the run
stopped. The project's own runner saves and restores its curriculum's clock with the checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from isaaclab.managers import CurriculumTermCfg, ManagerTermBase

from diffloco_ext.tasks.schedule import checked_fraction_ramp, checked_ramp, interpolated_range, ramp_fraction
from diffloco_ext.tasks.velocity.env_cfg import RandomizationRangesCfg

COMMANDS = ("lin_vel_x", "lin_vel_y", "ang_vel_z")


def curriculum_progress(step: int, num_steps: int, has_curriculum: bool) -> float:
    """The curriculum's progress in [0, 1] after ``step`` policy steps (1 when it is off), as the project's
    ``VelocityCommand.progress``."""
    if not has_curriculum:
        return 1.0
    return min(1.0, step / num_steps)


class velocity_command_curriculum(ManagerTermBase):
    """Curriculum term (``CurriculumTermCfg(func=velocity_command_curriculum, params=...)``); see the module
    docstring. Returns ``{"progress": p}`` (logged by Isaac Lab as ``Curriculum/<term>/progress``).

    Params (the project's ``CommandsCfg`` / ``RewardsCfg`` / ``RandomizationCfg`` fields they carry):

    * ``command_name``: the velocity command term;
    * ``num_steps`` (``curriculum_steps``, policy steps), ``initial_scale`` (``curriculum_initial_scale``),
      ``initial_lin_vel_x`` / ``initial_lin_vel_y`` / ``initial_ang_vel_z`` (``curriculum_initial_*``: m/s, rad/s;
      None: ``initial_scale`` x the full range). The curriculum is on when ``num_steps > 0`` and some initial
      range differs from the full one (the project's ``has_curriculum``); the full ranges are the command's.
    * ``start_step``: policy steps before this env's first (a resumed run's; see the module docstring);
    * ``resampling_time`` / ``resampling_time_final`` (s; final None: ``resampling_time`` throughout);
    * ``after_curriculum``: reward terms at weight 0 until the ranges are full (their configured weights after);
    * ``weights_after_curriculum``: ``{term: weight}``, the weights these terms take once the ranges are full
      (before: the configured ones, or 0 for a term ``after_curriculum`` names too); ``weights_ramp``
      ``(start, end)``: policy steps after the ranges are full over which they take over linearly (the project's
      ``RewardsCfg.weights_ramp``; ``(0, 0)``: at once);
    * ``weights_curriculum_end``: ``{term: weight}``, the weights these terms reach while the ranges widen, moving
      from the configured ones as the curriculum's progress goes over ``weights_curriculum_ramp`` ``(start, end)``
      (fractions; the project's ``RewardsCfg.weights_curriculum_end``); once the ranges are full they are the
      weights ``weights_after_curriculum``'s ramp starts from. Not for the terms ``after_curriculum`` names;
    * ``push_term``: an event term whose ``velocity_range`` is held at 0 until then (None: pushes from the start). A
      term the config has switched off (``events.<name> = None``, as ``play_mode`` does with the pushes) is
      nothing to hold; a name the config does not have is an error.
    * ``friction_after_curriculum``, ``base_mass_scale_after_curriculum``, ``base_com_xy_after_curriculum``,
      ``base_com_z_after_curriculum``, ``stiffness_scale_after_curriculum``, ``damping_scale_after_curriculum``
      (the project's ``RandomizationCfg.after_curriculum``; None: unchanged): the ranges of the events
      ``physics_material``, ``base_mass``, ``base_com`` and ``actuator_gains`` once the command ranges are full;
      ``ranges_ramp`` ``(start, end)``: policy steps after that over which they move there from the events' own
      (``(0, 0)``: at once).
    """

    def __init__(self, cfg: CurriculumTermCfg, env):
        super().__init__(cfg, env)
        p = cfg.params
        self._command_cfg = env.command_manager.get_term(p["command_name"]).cfg
        self._full = {name: tuple(getattr(self._command_cfg.ranges, name)) for name in COMMANDS}
        num_steps = int(p.get("num_steps", 0))
        scale = float(p.get("initial_scale", 1.0))
        if num_steps < 0 or not 0.0 <= scale <= 1.0:
            raise ValueError(f"velocity_command_curriculum: num_steps must be >= 0 and initial_scale in [0, 1], got "
                             f"{num_steps} and {scale}")
        self._initial = {}
        for name in COMMANDS:
            given = p.get(f"initial_{name}")
            full = self._full[name]
            self._initial[name] = (full[0] * scale, full[1] * scale) if given is None else tuple(map(float, given))
            if len(self._initial[name]) != 2 or self._initial[name][0] > self._initial[name][1]:
                raise ValueError(f"velocity_command_curriculum: initial_{name} must be (low, high) with low <= high, "
                                 f"got {given!r}")
        given = [p.get(f"initial_{name}") for name in COMMANDS]
        self._has_curriculum = num_steps > 0 and (scale < 1.0 or any(g is not None for g in given))
        self._num_steps = num_steps
        self._start_step = int(p.get("start_step", 0))
        if self._start_step < 0:
            raise ValueError(f"velocity_command_curriculum: start_step must be >= 0, got {self._start_step}")
        known = set(env.reward_manager.active_terms)
        names = list(p.get("after_curriculum") or ())
        final = {str(k): float(w) for k, w in dict(p.get("weights_after_curriculum") or {}).items()}
        mid = {str(k): float(w) for k, w in dict(p.get("weights_curriculum_end") or {}).items()}
        for key, given in (("after_curriculum", names), ("weights_after_curriculum", list(final)),
                           ("weights_curriculum_end", list(mid))):
            unknown = [n for n in given if n not in known]
            if unknown:
                raise ValueError(f"velocity_command_curriculum: {key} names unknown reward terms {unknown}; "
                                 f"the terms are {sorted(known)}")
        both = sorted(set(mid) & set(names))
        if both:
            raise ValueError(f"velocity_command_curriculum: weights_curriculum_end names terms that after_curriculum "
                             f"holds at 0 until the ranges are full: {both}")
        configured = {n: float(env.reward_manager.get_term_cfg(n).weight) for n in (*names, *final, *mid)}
        #: reward term -> (weight at the curriculum's start, at the curriculum ramp's end (the weight once the ranges
        #: are full), at the after-curriculum ramp's end); a term after_curriculum names is 0 until the ranges are full
        self._weights = {}
        for n, w in configured.items():
            full = mid.get(n, w)
            self._weights[n] = (0.0 if n in names else w, full, final.get(n, full))
        self._ramp = checked_ramp("velocity_command_curriculum: weights_ramp", p.get("weights_ramp") or (0, 0),
                                  "policy steps after the ranges are full")
        self._curriculum_ramp = checked_fraction_ramp("velocity_command_curriculum: weights_curriculum_ramp",
                                                      p.get("weights_curriculum_ramp") or (0.0, 1.0))
        self._after_curriculum = set(names)
        self._push_term = p.get("push_term")
        self._push_range = None
        if self._push_term is not None and getattr(env.cfg.events, self._push_term, ...) is None:
            self._push_term = None  # switched off in the config (play mode): no pushes to hold
        if self._push_term is not None:
            push_cfg = env.event_manager.get_term_cfg(self._push_term)  # ValueError if there is none
            self._push_range = {k: tuple(v) for k, v in push_cfg.params["velocity_range"].items()}
        self._event_params_after = event_params_after_curriculum(p, env)
        self._event_params_before = {name: {k: env.event_manager.get_term_cfg(name).params[k] for k in params}
                                     for name, params in self._event_params_after.items()}
        self._ranges_ramp = checked_ramp("velocity_command_curriculum: ranges_ramp", p.get("ranges_ramp") or (0, 0),
                                         "policy steps after the ranges are full")
        self._events_fraction = 0.0  # how far the events' ranges are from their own to the after-curriculum ones

    @property
    def has_curriculum(self) -> bool:
        return self._has_curriculum

    def progress(self, step: int) -> float:
        return curriculum_progress(step, self._num_steps, self._has_curriculum)

    def __call__(self, env, env_ids, command_name: str = "base_velocity", num_steps: int = 0,
                 initial_scale: float = 1.0, initial_lin_vel_x=None, initial_lin_vel_y=None, initial_ang_vel_z=None,
                 start_step: int = 0, resampling_time: float = 10.0, resampling_time_final: float | None = None,
                 after_curriculum: Sequence[str] = (), weights_after_curriculum=None, weights_ramp=(0, 0),
                 weights_curriculum_end=None, weights_curriculum_ramp=(0.0, 1.0),
                 push_term: str | None = None,
                 friction_after_curriculum=None, base_mass_scale_after_curriculum=None,
                 base_com_xy_after_curriculum=None, base_com_z_after_curriculum=None,
                 stiffness_scale_after_curriculum=None, damping_scale_after_curriculum=None,
                 ranges_ramp=(0, 0)) -> dict[str, float]:
        step = self._start_step + int(env.common_step_counter)
        p = self.progress(step)
        for name in COMMANDS:
            setattr(self._command_cfg.ranges, name, interpolated_range(self._initial[name], self._full[name], p))
        period = resampling_time_final if (resampling_time_final is not None and p >= 1.0) else resampling_time
        self._command_cfg.resampling_time_range = (float(period), float(period))
        done = p >= 1.0
        since_done = max(0, step - self._num_steps) if self._has_curriculum else step
        f = ramp_fraction(since_done, self._ramp)
        fc = ramp_fraction(p, self._curriculum_ramp)
        for name, (start, full, final) in self._weights.items():
            term_cfg = env.reward_manager.get_term_cfg(name)
            if done:
                term_cfg.weight = full + f * (final - full)
            else:
                term_cfg.weight = 0.0 if name in self._after_curriculum else start + fc * (full - start)
            env.reward_manager.set_term_cfg(name, term_cfg)
        if self._push_term is not None:
            push_cfg = env.event_manager.get_term_cfg(self._push_term)
            push_cfg.params["velocity_range"] = (dict(self._push_range) if done else
                                                 {k: (0.0, 0.0) for k in self._push_range})
            env.event_manager.set_term_cfg(self._push_term, push_cfg)
        if done and self._event_params_after:
            # in RANGES_RAMP_STAGES steps: the material term is rebuilt at each
            stage = math.floor(ramp_fraction(since_done, self._ranges_ramp) * RANGES_RAMP_STAGES) / RANGES_RAMP_STAGES
            if stage > self._events_fraction:
                self._widen_events(env, stage)
        return {"progress": p}

    def _widen_events(self, env, fraction: float) -> None:
        """Put the ranges ``fraction`` (0 to 1) of the way from the events' own to the after-curriculum ones in
        place (those exactly at 1); rebuild the terms that sample at construction."""
        for name, params in self._event_params_after.items():
            term_cfg = env.event_manager.get_term_cfg(name)
            before = self._event_params_before[name]
            term_cfg.params.update({k: interpolated_params(before[k], v, fraction) for k, v in params.items()})
            if name in REBUILT_EVENTS and isinstance(term_cfg.func, ManagerTermBase):
                term_cfg.func = type(term_cfg.func)(term_cfg, env)
            env.event_manager.set_term_cfg(name, term_cfg)
        self._events_fraction = fraction


#: The after-curriculum event ranges of a ``ranges_ramp`` take over in this many equal steps (each rebuilds the
#: material term, which samples when built).
RANGES_RAMP_STAGES = 20


def interpolated_params(before, after, fraction: float):
    """An event param ``fraction`` of the way from ``before`` to ``after``: ranges per bound, dicts of ranges per key
    (``com_range``); ``after`` itself at 1."""
    if fraction >= 1.0:
        return after
    if isinstance(after, dict):
        return {k: interpolated_params(before[k], v, fraction) for k, v in after.items()}
    return interpolated_range(before, after, fraction)


#: Event terms built again when their ranges change: they sample from the range at construction.
REBUILT_EVENTS = ("physics_material",)
#: The project's ``RandomizationRangesCfg`` ranges; each is the curriculum param ``<name>_after_curriculum``
#: (``adversarial_fraction`` is not a range, and the soft grounds are the training simulator's: the Isaac Lab mapping
#: rejects them, ``env_cfg.events_cfg``).
RANDOMIZATION_AFTER_CURRICULUM = tuple(f.name for f in dataclasses.fields(RandomizationRangesCfg) if f.name not in
                                       ("adversarial_fraction", "soft_ground_fraction", "soft_ground_stiffness"))


def event_params_after_curriculum(params: dict, env) -> dict[str, dict]:
    """The event params that the ``*_after_curriculum`` curriculum params set, by event term (events the config
    does not have or has switched off, e.g. with the randomisation off, are skipped: nothing to widen)."""
    def given(key):
        return params.get(f"{key}_after_curriculum")

    out: dict[str, dict] = {}
    friction = given("friction")
    if friction is not None:
        out["physics_material"] = {"static_friction_range": tuple(friction), "dynamic_friction_range": tuple(friction)}
    if given("base_mass_scale") is not None:
        out["base_mass"] = {"mass_distribution_params": tuple(given("base_mass_scale"))}
    com_xy, com_z = given("base_com_xy"), given("base_com_z")
    if com_xy is not None or com_z is not None:
        events = env.cfg.events
        current = dict(events.base_com.params["com_range"]) if getattr(events, "base_com", None) is not None else {}
        if com_xy is not None:
            current["x"] = current["y"] = (-float(com_xy), float(com_xy))
        if com_z is not None:
            current["z"] = (-float(com_z), float(com_z))
        out["base_com"] = {"com_range": current}
    gains = {}
    if given("stiffness_scale") is not None:
        gains["stiffness_distribution_params"] = tuple(given("stiffness_scale"))
    if given("damping_scale") is not None:
        gains["damping_distribution_params"] = tuple(given("damping_scale"))
    if gains:
        out["actuator_gains"] = gains
    for name in list(out):
        if getattr(env.cfg.events, name, None) is None:
            del out[name]  # randomisation switched off: nothing to widen
    return out
