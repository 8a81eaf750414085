"""The three answer labs' hidden materials (labtwin.tasks.materials_common): what every
sampled campaign draws and what it tells. Each lab's own test file checks that its scaled
campaign is exactly the named crystal's model scaled, and that the table answer fails."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.tasks.materials_common import ENERGY_SCALE_RANGE, LENGTH_SCALE_RANGE, scales_of

LABS = ["LatticeConstant-v1", "VacancyFormation-v1", "SurfaceEnergy-v1"]


@pytest.mark.parametrize("lab", LABS)
def test_sampled_campaigns_hide_the_material(lab) -> None:
    """Factors inside the stated ranges that vary (200 campaigns; uniform draws have standard
    deviations 0.023 and 0.115), told to nobody: the campaign's description and the chat
    view's public conditions name neither; the nominal campaign is the named crystal."""
    task = labtwin.load_task(lab)
    drawn = [task.sample_conditions(np.random.default_rng(seed)) for seed in range(200)]
    lengths = np.array([c["length_scale"] for c in drawn])
    energies = np.array([c["energy_scale"] for c in drawn])
    assert LENGTH_SCALE_RANGE[0] <= lengths.min() and lengths.max() <= LENGTH_SCALE_RANGE[1]
    assert ENERGY_SCALE_RANGE[0] <= energies.min() and energies.max() <= ENERGY_SCALE_RANGE[1]
    assert lengths.std() > 0.015 and energies.std() > 0.08
    public = {spec.name for spec in task.public_conditions}
    assert not public & {"length_scale", "energy_scale"}
    for c in drawn[:20]:
        told = task.describe_conditions(c)
        assert "scale" not in told.replace("scaled", "")
        assert str(c["length_scale"]) not in told and str(c["energy_scale"]) not in told
    assert scales_of(task.nominal_conditions()) == (1.0, 1.0)
