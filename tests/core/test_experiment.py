"""The experiment model as validation, tool schema and numeric action space."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest

from labtwin import Experiment, Invalid, NumericView, knob, parse_experiment, tool_schema


class Synthesis(Experiment):
    temperature_K: float = knob(300, 400, unit="K", description="temperature")
    time_min: float = knob(1, 1000, unit="min", description="time", log=True)
    stir_rpm: int = knob(100, 1000, unit="rpm", description="stirring")
    solvent: Literal["water", "ethanol", "toluene"]
    smiles: str = "CCO"


def test_numeric_view_round_trip() -> None:
    view = NumericView(Synthesis, fixed={"smiles": "CCO"})
    assert view.names == ["temperature_K", "time_min", "stir_rpm", "solvent"]
    assert view.space.shape == (4,)
    exp = view.to_experiment(np.array([-1.0, 0.0, 1.0, 0.0]))
    assert exp.temperature_K == 300 and exp.stir_rpm == 1000 and exp.solvent == "ethanol"
    assert exp.time_min == pytest.approx(math.sqrt(1000))  # log scale: centre is the geometric mean
    assert exp.smiles == "CCO"  # non-numeric fields take the view's fixed value
    back = view.to_vector(exp)
    np.testing.assert_allclose(back[:3], [-1.0, 0.0, 1.0], atol=1e-6)
    assert view.to_experiment(back) == exp


def test_field_without_numeric_reading_has_no_automatic_view() -> None:
    """A string field, even with a default, is not silently frozen by a Box view."""

    class NoDefault(Experiment):
        smiles: str

    for model in (NoDefault, Synthesis):
        with pytest.raises(TypeError, match="no numeric reading"):
            NumericView(model)

    class OnlyDefaults(Experiment):
        smiles: str = "CCO"

    with pytest.raises(TypeError, match="no numeric"):
        NumericView(OnlyDefaults)


def test_tool_schema_carries_bounds_units_and_choices() -> None:
    schema = tool_schema(Synthesis)
    props = schema["properties"]
    assert props["temperature_K"]["minimum"] == 300 and props["temperature_K"]["maximum"] == 400
    assert props["time_min"]["unit"] == "min" and props["time_min"]["scale"] == "log"
    assert props["solvent"]["enum"] == ["water", "ethanol", "toluene"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"temperature_K", "time_min", "stir_rpm", "solvent"}


def test_parse_reports_every_problem() -> None:
    out = parse_experiment(Synthesis, {"temperature_K": 10, "solvent": "acetone", "x": 1})
    assert isinstance(out, Invalid)
    for part in ("temperature_K", "solvent", "x: unknown field", "time_min: field required"):
        assert part in out.reason
