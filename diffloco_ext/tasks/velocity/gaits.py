"""Gaits of the velocity task: when each foot swings, as the foot-height reference encodes it.

A gait is a periodic footfall pattern (Hildebrand's description): a cycle of ``period`` seconds in which every foot
is on the ground for the fraction ``duty`` and in the air for the rest, each foot's swing starting at its **phase
offset** after the left-front foot's (a fraction of the cycle, in [0, 1)). Schwarke et al. (arXiv 2404.02887) shape
the gait with a sinusoidal foot-height reference whose phases pair the feet; :func:`swing_height` is that
reference with any offsets and duty factor: foot ``f`` at cycle phase ``p_f = frac(t / period - offset_f)`` is at

    h_ref = swing_height * sin(pi * p_f / (1 - duty))   while p_f < 1 - duty (swing), else 0 (stance)

above the ground. With ``duty = 0.5`` this is the paper's ``swing_height * max(0, sin(2 pi t / period - 2 pi
offset_f))``.

The named gaits (:data:`GAITS`, offsets of LF, RF, LH, RH; the symmetric gaits after Hildebrand, the gallop after
Alexander's "Principles of Animal Locomotion"):

| gait | LF | RF | LH | RH | feet together |
|---|---|---|---|---|---|
| ``trot`` | 0 | 0.5 | 0.5 | 0 | diagonal pairs (LF+RH, RF+LH) |
| ``pace`` | 0 | 0.5 | 0 | 0.5 | lateral pairs (LF+LH, RF+RH) |
| ``bound`` | 0 | 0 | 0.5 | 0.5 | front pair, then hind pair |
| ``pronk`` | 0 | 0 | 0 | 0 | all four |
| ``gallop`` | 0 | 0.15 | 0.5 | 0.65 | transverse: a bound with each pair split, left leading front and hind |

The velocity task's policy does not observe the phase (Isaac Lab's 48 observations): the reference is a reward
of the time since the episode started, and a policy learns to walk the pattern, not to follow a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

#: The legs whose offsets a gait gives, by the first two letters of the foot names (ANYmal's convention).
LEGS = ("LF", "RF", "LH", "RH")


@dataclass
class GaitCfg:
    """A gait of the foot-height reference (see the module docstring).

    ``phase_offsets``: per leg (``LF``, ``RF``, ``LH``, ``RH``), the fraction of the cycle by which its swing starts
    after LF's, in [0, 1); ``duty``: the fraction of the cycle a foot is in stance, in (0, 1); ``period`` (s): one
    cycle; ``swing_height`` (m): the apex of the swing above the ground (the bottom of the foot's sphere).
    """

    phase_offsets: dict[str, float] = field(default_factory=lambda: {"LF": 0.0, "RF": 0.5, "LH": 0.5, "RH": 0.0})
    duty: float = 0.5
    period: float = 0.6
    swing_height: float = 0.08

    def __post_init__(self) -> None:
        self.check()

    def check(self, where: str = "gait") -> None:
        """A one-line ``ValueError`` naming ``where`` for offsets, duty, period or height out of range."""
        if set(self.phase_offsets) != set(LEGS):
            raise ValueError(f"{where}.phase_offsets must give each of {LEGS} once, got {sorted(self.phase_offsets)}")
        for leg, offset in self.phase_offsets.items():
            if not (isinstance(offset, (int, float)) and 0.0 <= offset < 1.0):
                raise ValueError(f"{where}.phase_offsets.{leg} must be a cycle fraction in [0, 1), got {offset!r}")
        if not 0.0 < self.duty < 1.0:
            raise ValueError(f"{where}.duty must be in (0, 1) (the stance fraction of the cycle), got {self.duty}")
        if not self.period > 0.0:
            raise ValueError(f"{where}.period must be > 0 s, got {self.period}")
        if not self.swing_height >= 0.0:
            raise ValueError(f"{where}.swing_height must be >= 0 m, got {self.swing_height}")

    def offsets_of(self, foot_names: list[str]) -> list[float]:
        """The offsets in the order of ``foot_names`` (``LF_FOOT``, ...: the leg is the name's first two letters)."""
        missing = [n for n in foot_names if n[:2] not in self.phase_offsets]
        if missing:
            raise ValueError(f"feet {missing} name no leg of the gait's {LEGS}")
        return [float(self.phase_offsets[n[:2]]) for n in foot_names]

    def pairs_of(self, foot_names: list[str]) -> list[tuple[int, int]]:
        """Index pairs ``(i, j)``, ``i < j``, into ``foot_names`` of the feet the gait moves together (equal phase
        offsets): the trot's diagonals, the pace's lateral pairs, the bound's front and hind pairs, all six of the
        pronk's, none of the gallop's."""
        offsets = self.offsets_of(foot_names)
        return [(i, j) for i in range(len(offsets)) for j in range(i + 1, len(offsets))
                if abs(offsets[i] - offsets[j]) < 1e-9]


#: The named gaits (``env.gait=<name>``): offsets of LF, RF, LH, RH; the trot is the task's default.
GAITS: dict[str, dict[str, float]] = {
    "trot": {"LF": 0.0, "RF": 0.5, "LH": 0.5, "RH": 0.0},
    "pace": {"LF": 0.0, "RF": 0.5, "LH": 0.0, "RH": 0.5},
    "bound": {"LF": 0.0, "RF": 0.0, "LH": 0.5, "RH": 0.5},
    "pronk": {"LF": 0.0, "RF": 0.0, "LH": 0.0, "RH": 0.0},
    "gallop": {"LF": 0.0, "RF": 0.15, "LH": 0.5, "RH": 0.65},
}


def named_gait(name: str) -> GaitCfg:
    """A new :class:`GaitCfg` of the named gait (duty 0.5, period 0.6 s, swing height 0.08 m)."""
    if name not in GAITS:
        raise ValueError(f"unknown gait '{name}': the named gaits are {list(GAITS)} (or set env.gait.phase_offsets)")
    return GaitCfg(phase_offsets=dict(GAITS[name]))


def swing_height(time: torch.Tensor, offsets: torch.Tensor, gait: GaitCfg, moving: torch.Tensor) -> torch.Tensor:
    """The reference foot heights [N, F] (m) at ``time`` [N] (s since the episode start) for feet with phase
    ``offsets`` [F] (cycle fractions); zero for envs that are not ``moving`` [N] bool (see the module docstring)."""
    phase = torch.remainder(time[:, None] / gait.period - offsets[None, :], 1.0)
    swing = 1.0 - gait.duty
    shape = torch.sin(math.pi * torch.clamp(phase / swing, max=1.0))
    return gait.swing_height * torch.where(phase < swing, shape, torch.zeros_like(shape)) * moving[:, None]
