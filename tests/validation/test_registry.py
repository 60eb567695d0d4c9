"""Backends by name: aliases, unknown names, engines that cannot be imported (a clear message; skipped by `all`)."""

from __future__ import annotations

import pytest

from diffloco_ext.validation import backend_registry as registry
from diffloco_ext.validation.backend_registry import BackendSpec, BackendUnavailable


def test_names_and_aliases():
    assert registry.resolve("hard") == (["hard"], False)
    assert registry.resolve(["isaaclab"]) == (["isaaclab-physx", "isaaclab-newton"], False)
    names, lenient = registry.resolve(["mujoco", "all"])
    assert names == ["mujoco", "hard", "isaaclab-physx", "isaaclab-newton"] and lenient  # not the reference
    assert registry.resolve("smoothed") == (["smoothed"], False)
    assert registry.resolve("mujoco-soft") == (["mujoco-soft"], False)  # a stress test: not in `all`
    assert registry.BACKENDS["isaaclab-physx"].factory == "diffloco_ext.isaaclab.validation_backend:make_backend"
    assert registry.BACKENDS["isaaclab-newton"].options == {"engine": "newton"}
    with pytest.raises(KeyError, match="unknown backend 'bullet'"):
        registry.resolve(["bullet"])
    assert registry.available("hard") == (True, "") and registry.available("mujoco") == (True, "")


def test_a_missing_engine_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "isaaclab-physx",
                        BackendSpec("diffloco_ext.isaaclab.absent_module:make_backend", 0.005, {"engine": "physx"}))
    ok, reason = registry.available("isaaclab-physx")
    assert not ok and "needs the Isaac Lab layer (diffloco_ext.isaaclab)" in reason and "No module named" in reason
    monkeypatch.setitem(registry.BACKENDS, "isaaclab-newton",
                        BackendSpec(registry.ISAACLAB_FACTORY, 0.005, {"engine": "newton"},
                                    requires=("isaaclab_not_installed",)))
    with pytest.raises(BackendUnavailable, match="needs isaaclab_not_installed, which is not installed"):
        registry.make_backend("isaaclab-newton", None, 1, policy_dt=0.02)
    with pytest.raises(BackendUnavailable, match="has no factory 'nothing'"):
        registry.factory("diffloco_ext.validation.sim_backend:nothing")


def test_a_user_backend_by_reference():
    from diffloco_ext.assets import get_robot

    backend = registry.make_backend("diffloco_ext.validation.mujoco_backend:make_backend", get_robot("anymal_d"), 2,
                                    policy_dt=0.02)
    assert backend.name == "mujoco" and backend.substeps == 4  # the default 5 ms step of a user backend


def test_the_training_contact_as_a_reference_backend():
    from diffloco_ext.assets import get_robot

    backend = registry.make_backend("smoothed", get_robot("anymal_d"), 2, policy_dt=0.02)
    assert backend.name == "smoothed" and backend.bridge.sim.contact.mode == "smoothed"
