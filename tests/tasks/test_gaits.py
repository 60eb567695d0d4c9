"""The named gaits' phase tables, the reference's shape per gait at hand-made times, and the gait config's
overrides and bad values."""

import math

import pytest
import torch

from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides
from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg, AnymalDFlatPaceEnvCfg, VelocityEnvCfg
from diffloco_ext.tasks.velocity.gaits import GAITS, LEGS, GaitCfg, named_gait, swing_height

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


def test_gait_clock_interface_reads_the_references_cycle_phase():
    """The clock tasks' policy reads 50 inputs: the 48, then ``(sin, cos)`` of the reference's cycle phase at the
    episode time (0 at a reset); the critic has it too; the 48-input gait task is unchanged."""
    from diffloco_ext.tasks import registry

    cfg = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD-Pace-Clock")
    cfg.num_envs = 2
    env = registry.make_env("DiffLoco-Velocity-Flat-AnymalD-Pace-Clock", cfg=cfg).unwrapped
    assert env.observation_space["policy"].shape == (50,) and cfg.gait.phase_offsets == GAITS["pace"]
    obs = env.get_observations()
    assert obs["policy"][:, 48:].tolist() == [[0.0, 1.0], [0.0, 1.0]]
    for k in range(1, 8):
        obs, _, _, _ = env.step(torch.zeros(2, 12))
        angle = 2.0 * math.pi * k * env.step_dt / cfg.gait.period
        expected = torch.tensor([math.sin(angle), math.cos(angle)], dtype=obs["policy"].dtype).expand(2, 2)
        torch.testing.assert_close(obs["policy"][:, 48:], expected, rtol=0, atol=1e-6)
        torch.testing.assert_close(obs["critic"][:, 48:50], expected, rtol=0, atol=1e-6)
    env._reset_envs(torch.tensor([True, False]))
    clock = env._observations()["policy"][:, 48:]
    assert clock[0].tolist() == [0.0, 1.0] and clock[1, 1] < 0.9
    plain = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD-Pace")
    assert not plain.gait_clock and not AnymalDFlatEnvCfg().gait_clock
    # the clock tasks' recipe adds the swing-force penalty; their play configs keep the clock
    for gait in ("Pace", "Bound", "Gallop"):
        task = f"DiffLoco-Velocity-Flat-AnymalD-{gait}-Clock"
        assert registry.load_cfg(task).rewards.swing_contact_force == -4.0 and registry.load_play_cfg(task).gait_clock
    assert plain.rewards.swing_contact_force == 0.0
    # the bound's also holds its pairs' forces equal
    assert [registry.load_cfg(f"DiffLoco-Velocity-Flat-AnymalD-{g}-Clock").rewards.paired_contact_force
            for g in ("Pace", "Bound", "Gallop")] == [0.0, -4.0, 0.0]


def test_gait_pairs_are_the_feet_with_equal_offsets():
    feet = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]
    assert named_gait("trot").pairs_of(feet) == [(0, 3), (1, 2)]
    assert named_gait("pace").pairs_of(feet) == [(0, 2), (1, 3)]
    assert named_gait("bound").pairs_of(feet) == [(0, 1), (2, 3)]
    assert len(named_gait("pronk").pairs_of(feet)) == 6 and named_gait("gallop").pairs_of(feet) == []
    assert named_gait("bound").pairs_of(["RH_FOOT", "LF_FOOT", "RF_FOOT", "LH_FOOT"]) == [(0, 3), (1, 2)]


def test_paired_contact_force_is_the_pairs_force_difference_over_the_weight():
    from diffloco_ext.tasks.velocity.rewards import paired_contact_force

    pairs = torch.tensor([[0, 1], [2, 3]])
    force = torch.tensor([[100.0, 100.0, 150.0, 150.0],  # a bound's pairs loaded together: 0
                          [200.0, 0.0, 0.0, 300.0],  # both pairs split: (200 + 300) / 500
                          [-5.0, 0.0, 50.0, 0.0]])  # a pulling force counts as none
    weight = torch.tensor([500.0, 500.0, 500.0])
    torch.testing.assert_close(paired_contact_force(pairs, force, weight), torch.tensor([0.0, 1.0, 0.1]))
    assert paired_contact_force(torch.zeros(0, 2, dtype=torch.long), force, weight).tolist() == [0.0] * 3


def test_gait_clock_override():
    cfg = AnymalDFlatPaceEnvCfg()
    apply_overrides(cfg, {"gait_clock": "true"}, "env")
    assert cfg.gait_clock is True
    with pytest.raises(ConfigOverrideError, match="env.gait_clock"):
        apply_overrides(cfg, {"gait_clock": "sometimes"}, "env")
