"""The named gaits' phase tables, the reference's shape per gait at hand-made times, and the gait config's
overrides and bad values."""

import math

import pytest
import torch

from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides
from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg, AnymalDFlatPaceEnvCfg, VelocityEnvCfg
from diffloco_ext.tasks.velocity.gaits import GAITS, LEGS, GaitCfg, named_gait, pair_lags, swing_height, synchrony_error

#: Which feet swing together in each named gait (the pairs whose offsets are equal).
TOGETHER = {"trot": [{"LF", "RH"}, {"RF", "LH"}], "pace": [{"LF", "LH"}, {"RF", "RH"}],
            "bound": [{"LF", "RF"}, {"LH", "RH"}], "pronk": [set(LEGS)]}


@pytest.mark.parametrize("name", sorted(TOGETHER))
def test_symmetric_gaits_pair_their_feet(name):
    offsets = GAITS[name]
    for group in TOGETHER[name]:
        assert len({offsets[leg] for leg in group}) == 1
    groups = {offsets[leg] for leg in LEGS}
    assert groups == ({0.0} if name == "pronk" else {0.0, 0.5})


def test_transverse_gallop_splits_the_bound_with_the_same_lead():
    o = GAITS["gallop"]
    assert o["LF"] == 0.0 and 0.0 < o["RF"] < 0.5  # front pair split, left foot first
    assert o["LH"] == 0.5 and o["RH"] - o["LH"] == pytest.approx(o["RF"] - o["LF"])  # hind pair: same lead and lag


def test_trot_reference_is_schwarke_et_als_sine():
    """The default gait (trot, duty 0.5) is the paper's ``0.08 * max(0, sin(2 pi t / 0.6 + phase))`` with phase 0
    for LF and RH, pi for RF and LH."""
    gait = VelocityEnvCfg().gait
    t = torch.linspace(0.0, 2.0, 401, dtype=torch.float64)
    offsets = torch.tensor(gait.offsets_of(["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]), dtype=torch.float64)
    ref = swing_height(t, offsets, gait, torch.ones(401, dtype=torch.bool))
    phase = torch.tensor([0.0, math.pi, math.pi, 0.0], dtype=torch.float64)
    paper = 0.08 * torch.clamp(torch.sin(2 * math.pi * t[:, None] / 0.6 + phase), min=0.0)
    torch.testing.assert_close(ref, paper, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", sorted(GAITS))
def test_reference_shape_at_hand_made_times(name):
    """Each foot is at the apex a quarter cycle after its own offset (duty 0.5), on the ground over its stance half,
    and the reference is zero for a standing env."""
    gait = named_gait(name)
    offsets = torch.tensor([gait.phase_offsets[leg] for leg in LEGS], dtype=torch.float64)
    for f, leg in enumerate(LEGS):
        apex = torch.tensor([(gait.phase_offsets[leg] + 0.25) * gait.period + 3 * gait.period], dtype=torch.float64)
        ref = swing_height(apex, offsets, gait, torch.tensor([True]))[0]
        assert ref[f].item() == pytest.approx(0.08, abs=1e-12)
        stance = apex + 0.5 * gait.period  # three quarters: the middle of its stance
        assert swing_height(stance, offsets, gait, torch.tensor([True]))[0, f].item() == 0.0
        assert swing_height(apex, offsets, gait, torch.tensor([False]))[0, f].item() == 0.0


def test_duty_factor_sets_the_swing_share():
    """With duty 0.75 a foot is up for a quarter of the cycle: apex at 1/8 of it, down from 1/4 on."""
    gait = GaitCfg(phase_offsets=dict(GAITS["pronk"]), duty=0.75, period=0.8, swing_height=0.1)
    t = torch.tensor([0.1, 0.2 - 1e-9, 0.2 + 1e-9, 0.5, 0.79], dtype=torch.float64)
    ref = swing_height(t, torch.zeros(1, dtype=torch.float64), gait, torch.ones(5, dtype=torch.bool))[:, 0]
    assert ref[0].item() == pytest.approx(0.1)
    assert 0.0 < ref[1].item() < 1e-6 and ref[2].item() == 0.0 and ref[3].item() == 0.0 and ref[4].item() == 0.0
    # the share of time in swing over many cycles
    t = torch.linspace(0, 80, 200001, dtype=torch.float64)
    ref = swing_height(t, torch.zeros(1, dtype=torch.float64), gait, torch.ones(len(t), dtype=torch.bool))
    assert (ref > 0).double().mean().item() == pytest.approx(0.25, abs=2e-3)


def test_gait_overrides_and_variants():
    cfg = AnymalDFlatEnvCfg()
    assert cfg.gait.phase_offsets == GAITS["trot"]
    apply_overrides(cfg, {"gait": "bound"}, "env")
    assert cfg.gait.phase_offsets == GAITS["bound"] and cfg.gait.duty == 0.5
    apply_overrides(cfg, {"gait.duty": "0.6", "gait.phase_offsets.RF": "0.25", "gait.period": "0.5"}, "env")
    assert cfg.gait.duty == 0.6 and cfg.gait.phase_offsets["RF"] == 0.25 and cfg.gait.period == 0.5
    assert GAITS["bound"]["RF"] == 0.0  # the table is not changed through a config
    assert AnymalDFlatPaceEnvCfg().gait.phase_offsets == GAITS["pace"]
    assert AnymalDFlatEnvCfg().gait.phase_offsets == GAITS["trot"]


def test_bad_gaits_are_clear_errors():
    with pytest.raises(ValueError, match="unknown gait 'canter'"):
        apply_overrides(AnymalDFlatEnvCfg(), {"gait": "canter"}, "env")
    with pytest.raises(ConfigOverrideError, match="env.gait.duty"):
        apply_overrides(AnymalDFlatEnvCfg(), {"gait.duty": "often"}, "env")
    for bad, match in (({"duty": 1.0}, "duty must be in"), ({"period": 0.0}, "period must be"),
                       ({"swing_height": -0.1}, "swing_height"),
                       ({"phase_offsets": {"LF": 0.0, "RF": 1.2, "LH": 0.5, "RH": 0.0}}, "phase_offsets.RF"),
                       ({"phase_offsets": {"LF": 0.0, "RF": 0.5}}, "each of")):
        with pytest.raises(ValueError, match=match):
            GaitCfg(**bad)
    cfg = named_gait("trot")
    cfg.phase_offsets["XX"] = 0.5  # an override can add a key: the env's check names it
    with pytest.raises(ValueError, match="env.gait.phase_offsets"):
        cfg.check("env.gait")


def _heights(name: str, steps: int, period_steps: int = 20) -> torch.Tensor:
    """Foot heights [T, 4] (LEGS order) of feet swinging as the named gait asks, at any start of the cycle."""
    gait = named_gait(name)
    t = torch.arange(steps, dtype=torch.float64) * gait.period / period_steps + 0.123
    offsets = torch.tensor([gait.phase_offsets[leg] for leg in LEGS], dtype=torch.float64)
    return swing_height(t, offsets, gait, torch.ones(steps, dtype=torch.bool))


@pytest.mark.parametrize("name", sorted(GAITS))
def test_synchrony_holds_the_phase_relations_without_a_clock(name):
    """Feet that keep the gait's relations score 0, whenever their cycle started; those of another gait do not (20
    steps a cycle: every named gait's lags are whole steps)."""
    gait = named_gait(name)
    pairs = pair_lags([gait.phase_offsets[leg] for leg in LEGS], gait.period, gait.period / 20)
    assert sorted({lag for _, _, lag in pairs}) == sorted({round(((gait.phase_offsets[b] - gait.phase_offsets[a])
                                                                  % 1.0) * 20) % 20 for a in LEGS for b in LEGS
                                                           if a != b})
    history_len = max(1, max(lag for _, _, lag in pairs))

    def error(walk):
        h = _heights(walk, 60)
        history = torch.stack([h[59 - k] for k in range(1, history_len + 1)])[None]  # [1, H, 4]
        return synchrony_error(h[59:60], history, torch.tensor([59]), pairs).item()

    assert error(name) == pytest.approx(0.0, abs=1e-12)
    others = [error(other) for other in GAITS if GAITS[other] != GAITS[name]]
    assert min(others) > 1e-4
    # before the lag's history exists (just after a reset), the pair does not count
    h = _heights("pronk" if name != "pronk" else "trot", 1)
    assert synchrony_error(h, torch.zeros(1, history_len, 4, dtype=torch.float64), torch.tensor([0]),
                           [p for p in pairs if p[2] > 0]).item() == 0.0


def test_synchrony_gradient_matches_finite_differences():
    pairs = pair_lags([GAITS["gallop"][leg] for leg in LEGS], 0.6, 0.02)
    gen = torch.Generator().manual_seed(0)
    history = torch.rand(3, max(lag for *_, lag in pairs), 4, dtype=torch.float64, generator=gen) * 0.08
    height = (torch.rand(3, 4, dtype=torch.float64, generator=gen) * 0.08).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda h: synchrony_error(h, history, torch.tensor([40, 40, 2]), pairs),
                                    (height,), eps=1e-7, atol=1e-9)


def test_the_gait_variants_train_with_synchrony_and_the_trot_without():
    from diffloco_ext.tasks.velocity.env_cfg import GAIT_SYNCHRONY, AnymalDFlatGallopEnvCfg

    assert AnymalDFlatEnvCfg().rewards.gait_synchrony == 0.0
    assert AnymalDFlatPaceEnvCfg().rewards.gait_synchrony == GAIT_SYNCHRONY > 0
    assert AnymalDFlatGallopEnvCfg().rewards.gait_synchrony == GAIT_SYNCHRONY


def test_synchrony_reward_prefers_the_gait_to_standing_and_standing_to_the_opposite():
    """The env's term on hand-made foot heights: a pace walked scores near 1, standing 0, a trot (the pace's opposite
    relation for the lateral pairs) below 0; its gradient reaches the feet's heights now."""
    from diffloco_ext.tasks import registry

    cfg = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD-Pace")
    cfg.num_envs = 3
    env = registry.make_env("DiffLoco-Velocity-Flat-AnymalD-Pace", cfg)
    order = [LEGS.index(n[:2]) for n in env.foot_names]
    cycle = env.foot_height_history.shape[1]
    walks = [_heights("pace", cycle + 1, cycle), torch.zeros(cycle + 1, 4, dtype=torch.float64),
             _heights("trot", cycle + 1, cycle)]
    env.foot_height = torch.stack([w[-1, order] for w in walks]).to(env.dtype).requires_grad_(True)
    env.foot_height_history = torch.stack([w[:-1].flip(0)[:, order] for w in walks]).to(env.dtype)
    env.episode_length_buf = torch.full((3,), 100, dtype=torch.long)
    reward = env._gait_synchrony()
    assert reward[0] > 0.5 and reward[1].item() == 0.0 and reward[2] < -0.5
    reward.sum().backward()
    assert env.foot_height.grad.abs().sum() > 0
