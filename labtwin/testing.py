"""``check_lab``: what every lab, built in or third party, must satisfy.

    >>> from labtwin.testing import check_lab
    >>> check_lab("BatchReactor-v1", budget=3)  # doctest: +SKIP

It raises ``AssertionError`` with a readable message at the first broken
promise, and returns the names of the checks that passed:

- ``gymnasium``: Gymnasium's ``check_env`` passes on the numeric view (a
  ``Box``, where the lab has one) and on the text view (the experiment as JSON
  text), and ``rgb_array`` frames are images;
- ``seeding``: the same seed gives the same observations, rewards and
  measurements; another seed gives other ones;
- ``batching``: instance ``i`` of a vector env seeded ``s`` equals a single env
  seeded ``s + i`` (all instances measured in one simulator call);
- ``declared_observables``: an ``ok`` measurement holds exactly the declared
  observables, in their declared units, with finite values and uncertainties;
- ``bad_proposals``: malformed, out-of-range, oversized and wrongly typed
  proposals become ``invalid`` measurements with a short reason, and the
  campaign goes on;
- ``hostile_inputs``: Hypothesis draws JSON-like values, JSON text, raw text
  and arrays (huge integers, NaN, deep nesting, unknown fields, wrong types)
  and sends them through ``task.measure``, ``LabEnv``, ``VectorLabEnv`` (next
  to a valid batch-mate that must be measured as if alone) and the chat view;
  nothing raises, every reason is short (the TRL reward function and the
  rollout engine are held to the same strategy in labtwin's agent tests);
- ``chat``: the tool view runs a campaign from tool-call text, answers included;
- ``run_store``: campaigns recorded by the run store read back, re-score to
  the recorded scores with the recorded conditions, and replay from their
  seeds to the same records;
- ``cost_budget``: for a lab with a cost budget (``Task.default_cost_budget``),
  a campaign's ``cost_left`` is the budget less the costs of its
  measurements, the numeric header shows that fraction, a campaign whose
  costs reach the budget ends ("cost budget spent") and no other does, and the
  chat view says so;
- ``calibration``: a lab that reports any uncertainty declares at least
  three calibration points (:mod:`labtwin.calibration`) covering every
  observable with an error bar that it does not exempt with a reason, and a
  few seeds of each point measure ``ok``. The calibration itself (64 seeds
  per point, spread against error bars, mean against the reference) runs in
  each lab's own tests: it is too costly for a generic check.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import check_env

from labtwin.campaign import CampaignBatch
from labtwin.env import LabEnv
from labtwin.experiment import Answer, field_bounds
from labtwin.registry import load_task
from labtwin.runs import RunStore, load
from labtwin.task import Task
from labtwin.tools import ChatLabEnv, format_tool_call
from labtwin.vector import VectorLabEnv

#: an invalid measurement's reason must be readable, not a dump of the proposal
MAX_REASON_CHARS = 2000


def random_proposal(task: Task, rng: np.random.Generator) -> Any:
    """A valid proposal drawn at random: a vector for numeric labs, JSON text otherwise."""
    if task.numeric_view is not None:
        return rng.uniform(-1.0, 1.0, task.numeric_view.space.shape).astype(np.float32)
    return json.dumps(task.random_experiment(rng).model_dump(mode="json"))


def hostile_proposals(task: Task) -> list[Any]:
    """Proposals that must each come back ``invalid`` (never raise, never run)."""
    fields = list(task.experiment_model.model_fields)
    cases: list[Any] = [
        "",
        "{",
        '{"a": ' * 50,
        "[" * 100_000 + "]" * 100_000,  # deep nesting
        "null",
        "[1, 2, 3]",
        42,
        None,
        3.5,
        {"no_such_field": 1.0},
        {name: float("nan") for name in fields},
        {name: "9" * 5000 for name in fields},
        '{"' + fields[0] + '": ' + "9" * 5000 + "}",  # a 5,000-digit integer in JSON
        {name: 10**400 for name in fields},
        {name: [] for name in fields},
        {},
        np.zeros(()),  # a 0-d array
        np.full(7, np.nan),
        ["a", "b"],
        b"\xff\xfe",
    ]
    if task.numeric_view is not None:
        d = task.numeric_view.space.shape[0]
        cases += [np.full(d, 2.0), np.full(d + 1, 0.0), np.full(d, np.inf), [10**400] * d]
    return cases


def _rollout(env: LabEnv, seed: int, n: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out: list[tuple] = [(obs,)]
    for _ in range(n):
        obs, reward, terminated, truncated, info = env.step(random_proposal(env.task, rng))
        out.append((obs, reward, terminated, info["measurement"]))
        if terminated or truncated:
            break
    return out


def _same(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if not np.array_equal(x[0], y[0]) or x[1:] != y[1:]:
            return False
    return True


def check_gymnasium(task: Task) -> None:
    env = LabEnv(task, render_mode="rgb_array")
    check_env(env, skip_render_check=True)
    if task.numeric_view is not None:  # every lab also has the text view an LLM uses
        check_env(LabEnv(task, action_view="text"), skip_render_check=True)
    env.reset(seed=0)
    first = env.render()
    env.step(random_proposal(task, np.random.default_rng(0)))
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3, "bad rgb frame"
    assert first.shape == frame.shape, (  # Gymnasium's RecordVideo needs one frame size
        f"render() frames change size within a campaign: {first.shape} -> {frame.shape}"
    )
    if task.numeric_view is None:
        assert env.action_space.contains(random_proposal(task, np.random.default_rng(1))), (
            "a text lab's JSON experiment must lie in its Text action space"
        )


def check_seeding(task: Task, n_steps: int) -> None:
    a = _rollout(LabEnv(task), 7, n_steps)
    b = _rollout(LabEnv(task), 7, n_steps)
    c = _rollout(LabEnv(task), 8, n_steps)
    assert _same(a, b), f"{task.id}: the same seed gave different campaigns"
    assert not _same(a, c), f"{task.id}: seeds 7 and 8 gave identical campaigns"


def check_batching(task: Task, n_steps: int, n_envs: int = 3, seed: int = 11) -> None:
    """Vector instance i equals a single env seeded seed + i. Float32 observations may
    differ by round-off of vectorised against scalar kernels (rtol 1e-6)."""
    rng = np.random.default_rng(seed)
    proposals = [[random_proposal(task, rng) for _ in range(n_envs)] for _ in range(n_steps)]
    venv = VectorLabEnv(task, n_envs)
    obs, _ = venv.reset(seed=seed)
    vec_obs, vec_rewards = [obs], []
    for step in proposals:
        obs, rewards, terminated, _, _ = venv.step(step)
        vec_obs.append(obs)
        vec_rewards.append(rewards)
        if terminated.any():
            break
    for i in range(n_envs):
        env = LabEnv(task)
        o, _ = env.reset(seed=seed + i)
        np.testing.assert_allclose(o, vec_obs[0][i], rtol=1e-6, atol=1e-9)
        for k in range(len(vec_rewards)):
            o, r, *_ = env.step(proposals[k][i])
            np.testing.assert_allclose(
                o, vec_obs[k + 1][i], rtol=1e-6, atol=1e-9, err_msg=f"{task.id}: vector != single"
            )
            assert math.isclose(r, vec_rewards[k][i], rel_tol=1e-9, abs_tol=1e-12), (
                f"{task.id}: reward of instance {i} differs between vector and single env"
            )


def check_declared_observables(task: Task) -> None:
    rng = np.random.default_rng(3)
    proposals = [random_proposal(task, rng) for _ in range(2)]
    specs = {spec.name: spec for spec in task.observables}
    nominal = task.measure(proposals, seed=3)  # the lab outside a campaign
    sampled = task.measure(proposals, seed=3, conditions=task.sample_conditions(rng))
    for m in nominal + sampled:
        assert m.status in ("ok", "failed"), f"{task.id}: a random valid proposal was {m.status}"
        if not m.ok:
            continue
        assert set(m.observables) == set(specs), f"{task.id}: observables differ from declared"
        for name, value in m.observables.items():
            assert value.unit == specs[name].unit, f"{task.id}.{name}: unit {value.unit!r}"
            assert math.isfinite(value.value) and math.isfinite(value.uncertainty)
            assert value.uncertainty >= 0, f"{task.id}.{name}: negative uncertainty"
        assert m.cost >= 0 and m.cost_unit == (task.cost_unit or m.cost_unit)


def check_bad_proposals(task: Task) -> None:
    batch = CampaignBatch(task, 1, invalid_penalty=0.1, max_turns=10**6)
    budget_left = task.budget
    batch.reset([0], [0])
    for proposal in hostile_proposals(task):
        if budget_left == 1:  # keep the campaign alive: start another
            batch.reset([0], [0])
            budget_left = task.budget
        (record,) = batch.step([0], [proposal])
        budget_left -= 1
        m = record.measurement
        shown = _safe_repr(proposal, 60)
        assert m.status == "invalid", f"{task.id}: {shown} gave {m.status}, not invalid"
        assert m.reason and len(m.reason) <= MAX_REASON_CHARS, (
            f"{task.id}: {shown}: reason empty or {len(m.reason)} characters long"
        )
        assert record.reward <= 0.0, f"{task.id}: {shown} was paid {record.reward}"
        assert not batch.campaigns[0].done or budget_left == 0
    (record,) = batch.step([0], [random_proposal(task, np.random.default_rng(5))])
    assert record.measurement.status in ("ok", "failed"), f"{task.id}: campaign did not go on"


def _safe_repr(value: Any, limit: int = 200) -> str:
    try:
        return repr(value)[:limit]
    except (ValueError, RecursionError):  # an integer too long to print
        return f"<{type(value).__name__}>"


def _json_values(field_names: list[str]) -> Any:
    """Hypothesis strategy of JSON-like values an agent might send."""
    from hypothesis import strategies as st

    keys = st.sampled_from([*field_names, "answer", "x", ""]) | st.text(max_size=8)
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(10**30), max_value=10**30)
        | st.sampled_from([400, 5000, 63]).map(lambda digits: -(10**digits))  # huge integers
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=20)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=12,
    )


def _as_json(value: Any) -> str:
    try:
        return json.dumps(value)
    except (ValueError, TypeError, OverflowError):
        return _safe_repr(value, 500)


def _as_tool_call(value: Any, closed: bool = True) -> str:
    """A ``propose_experiment`` call whose arguments are ``value`` (as JSON where it can be)."""
    call = '<tool_call>{"name": "propose_experiment", "arguments": ' + _as_json(value) + "}"
    return call + "</tool_call>" if closed else call


def hostile_text_strategy(task: Task) -> Any:
    """Hypothesis strategy of hostile text: JSON of hostile values, tool calls with hostile
    arguments, and arbitrary text (what an LLM's reply can be)."""
    from hypothesis import strategies as st

    values = _json_values(list(task.experiment_model.model_fields))
    calls = values.map(lambda v: _as_tool_call(v, closed=False))  # generation cut short
    return values.map(_as_json) | calls | st.text(max_size=200)


def hostile_strategy(task: Task) -> Any:
    """Hypothesis strategy of hostile proposals for one lab (values, text, bytes, arrays)."""
    from hypothesis import strategies as st

    values = _json_values(list(task.experiment_model.model_fields))
    proposals = values | hostile_text_strategy(task) | st.binary(max_size=40)
    d = task.numeric_view.space.shape[0] if task.numeric_view else 3
    arrays = st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=d + 2)
    return proposals | arrays.map(lambda v: np.array(v, dtype=np.float32))


def check_hostile_inputs(task: Task, max_examples: int = 30) -> None:
    """Hypothesis-drawn proposals through every view: nothing raises, reasons stay short."""
    from hypothesis import HealthCheck, given, settings

    good = random_proposal(task, np.random.default_rng(4))
    alone = task.measure(["{", good], seed=0)[1]  # position 1 of a batch, next to an invalid one
    env = LabEnv(task, max_turns=10**9)
    env.reset(seed=0)
    chat_seed = iter(range(10**6))
    examples = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same examples on every run: a check must not be flaky
        suppress_health_check=list(HealthCheck),
    )

    def short(m: Any, what: str, proposal: Any) -> None:
        assert m.status in ("ok", "invalid", "failed"), f"{task.id}: {what} gave {m.status}"
        assert len(m.reason) <= MAX_REASON_CHARS, (
            f"{task.id}: {what}: a reason of {len(m.reason)} characters for {_safe_repr(proposal, 80)}"
        )

    @examples
    @given(hostile_strategy(task))
    def through_every_view(proposal: Any) -> None:
        measured = task.measure([proposal, good], seed=0)
        short(measured[0], "measure", proposal)
        if measured[0].status == "invalid":  # an invalid batch-mate changes nothing
            assert measured[1].observables == alone.observables, f"{task.id}: batch-mate changed"
        if env.campaign.done:
            env.reset()
        _, reward, *_, info = env.step(proposal)
        short(info["measurement"], "LabEnv.step", proposal)
        assert np.isfinite(reward)
        reply = proposal if isinstance(proposal, str) else _as_tool_call(proposal)
        chat = ChatLabEnv(task)
        chat.reset([next(chat_seed)])
        (chat_reward,) = chat.step([reply])
        result = chat.conversations[0].messages[-1]["content"]
        assert np.isfinite(chat_reward) and len(result) <= MAX_REASON_CHARS + 400

    through_every_view()

    venv = VectorLabEnv(task, 2, max_turns=10**9)
    venv.reset(seed=[0, 1])
    for proposal in hostile_proposals(task)[:8]:
        _, _, _, _, infos = venv.step([proposal, good])
        assert infos["status"][0] == "invalid", (
            f"{task.id}: {_safe_repr(proposal, 60)} in a vector env"
        )
        assert infos["status"][1] in ("ok", "failed"), f"{task.id}: its valid batch-mate was lost"
        if any(c.done for c in venv.campaigns):
            venv.reset(seed=[0, 1])


def _tool_replies(task: Task, rng: np.random.Generator, n: int) -> list[str]:
    replies = []
    for k in range(n):
        if k == n - 1 and task.answer_model is not None:
            replies.append(format_tool_call("submit_answer", _tool_answer(task)))
        else:
            experiment = task.random_experiment(rng).model_dump(mode="json")
            replies.append(format_tool_call("propose_experiment", experiment))
    return replies


def check_chat(task: Task) -> None:
    env = ChatLabEnv(task)
    messages = env.reset([0])[0]
    assert messages[0]["role"] == "system" and task.brief.strip()[:20] in messages[0]["content"]
    told = task.describe_conditions(env.conversations[0].campaign.conditions)
    assert told in messages[1]["content"]
    rng = np.random.default_rng(0)
    for reply in _tool_replies(task, rng, min(task.budget, 2)) + ["not a tool call"] * task.budget:
        if not env.live:
            break
        env.step([reply])
    assert not env.live, f"{task.id}: the chat campaign did not end within its budget"
    conversation = env.conversations[0]
    kinds = [r.kind for r in conversation.campaign.history]
    assert kinds[0] == "experiment", kinds
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in conversation.messages)


def check_run_store(task: Task, n_steps: int) -> None:
    rng = np.random.default_rng(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run"
        with RunStore(path, {"task": task.id}, durable=False) as store:
            batch = CampaignBatch(task, 2, invalid_penalty=0.1, recorder=store)
            batch.reset([0, 1], [21, 22])
            for k in range(n_steps):
                live = [i for i in (0, 1) if not batch.campaigns[i].done]
                if not live:
                    break
                proposals = [random_proposal(task, rng) for _ in live]
                if k == 1:
                    proposals[0] = "{broken"
                if k == n_steps - 1 and task.answer_model is not None:
                    proposals[-1] = Answer(_tool_answer(task))
                batch.step(live, proposals)
        run = load(path)
        recorded = [r.score for r in run.records]
        assert len(run.records) == sum(len(c.history) for c in batch.campaigns)
        assert run.rescore(task) == recorded, f"{task.id}: re-scoring the run changed scores"
        for cid in run.campaigns:
            again = run.replay(task, cid)
            assert [r.to_dict(artifacts=False) for r in again] == [
                r.to_dict(artifacts=False) for r in run.records_of(cid)
            ], f"{task.id}: replaying campaign {cid} gave other records"


def check_cost_budget(task: Task, n_steps: int) -> None:
    """The cost budget, where the lab has one, as every view shows it: random campaigns with
    the lab's own budget, then one with a budget below the first positive cost (so that
    the ending is checked for every lab, whatever its costs)."""
    column = 1 + len(task.public_conditions)  # the header's cost column
    if task.cost_budget is None:  # the core never ends such a campaign on cost
        env = LabEnv(task)
        env.reset(seed=3)
        assert env.campaign.cost_left is None
        return
    budget = task.cost_budget
    try:
        for cost_budget, seed in ((budget, 3), (None, 4)):
            rng = np.random.default_rng(seed)
            env = LabEnv(task)
            obs, _ = env.reset(seed=seed)
            if cost_budget is None:  # below the first positive cost the lab charges
                task.cost_budget = cost_budget = _tiny_cost_budget(task, seed)
                obs, _ = env.reset(seed=seed)
            assert obs[0, column] == 1.0, f"{task.id}: a new campaign shows {obs[0, column]}"
            for _ in range(task.budget):
                obs, _, terminated, truncated, _ = env.step(random_proposal(task, rng))
                campaign = env.campaign
                spent = sum(r.measurement.cost for r in campaign.history)
                assert math.isclose(campaign.cost_left, cost_budget - spent, abs_tol=1e-9)
                shown = max(cost_budget - spent, 0.0) / cost_budget
                assert math.isclose(float(obs[0, column]), shown, rel_tol=1e-6, abs_tol=1e-7), (
                    f"{task.id}: the header shows {obs[0, column]} of the cost budget, "
                    f"{shown} is left"
                )
                ended = campaign.end_reason == "cost budget spent"
                assert ended == (campaign.cost_left <= 0 and campaign.remaining > 0), (
                    f"{task.id}: cost left {campaign.cost_left}, campaign "
                    f"{campaign.end_reason or 'live'}"
                )
                if terminated or truncated:
                    break
        assert ended, f"{task.id}: a cost budget of {cost_budget:g} did not end a campaign"
        chat = ChatLabEnv(task)
        chat.reset([4])
        text = format_tool_call(
            "propose_experiment", task.random_experiment(rng).model_dump(mode="json")
        )
        while chat.live:
            chat.step([text])
        assert "cost budget spent" in json.dumps(chat.conversations[0].messages[-1]), (
            f"{task.id}: the chat view did not say the cost budget was spent"
        )
    finally:
        task.cost_budget = budget


def _tiny_cost_budget(task: Task, seed: int) -> float:
    """Half the smallest positive cost of a few random experiments (the first ones a
    campaign seeded ``seed`` measures, as :func:`check_cost_budget` draws them)."""
    rng = np.random.default_rng(seed)
    costs = [m.cost for m in task.measure([random_proposal(task, rng) for _ in range(3)])]
    positive = [c for c in costs if c > 0]
    assert positive, f"{task.id}: has a cost budget, but three experiments cost nothing"
    return min(positive) / 2


def _tool_answer(task: Task) -> dict[str, Any]:
    """A valid answer: the middle of each bounded field (0.5 where unbounded)."""
    values = {}
    for name, f in task.answer_model.model_fields.items():
        low, high = field_bounds(f) or (0.0, 1.0)
        values[name] = 0.5 * (low + high)
    return values


def check_calibration_declared(task: Task, n_seeds: int = 2) -> None:
    """Every observable with an error bar is calibrated somewhere, or exempt with a reason."""
    from labtwin.calibration import calibrate

    names = {spec.name for spec in task.observables}
    unknown = set(task.calibration_exempt) - names
    assert not unknown, f"{task.id}: calibration_exempt names unknown observables {unknown}"
    points = task.calibration_points()
    rng = np.random.default_rng(5)
    measured = task.measure([random_proposal(task, rng) for _ in range(2)], seed=5)
    uncertain = {
        name for m in measured if m.ok for name, v in m.observables.items() if v.uncertainty > 0
    } - set(task.calibration_exempt)
    if not uncertain and not points:
        return
    assert len(points) >= 3, (
        f"{task.id}: reports uncertainties for {sorted(uncertain)} but declares "
        f"{len(points)} calibration points (at least 3 are needed)"
    )
    covered: set[str] = set()
    for point in points:
        results = calibrate(task, point, n_seeds=n_seeds, reference=False)
        bad = [r for r in results if r.n_ok != r.n_seeds]
        assert not bad and results, f"{task.id}: calibration point {point.label!r} did not measure"
        covered |= {r.observable for r in results}
    missing = uncertain - covered
    assert not missing, f"{task.id}: no calibration point checks {sorted(missing)}"


def check_lab(task_or_id: Task | str, n_steps: int = 3, **task_kwargs: Any) -> list[str]:
    """Run every check on a lab (a :class:`Task` or a registered id); returns the checks run.

    ``task_kwargs`` go to the lab when an id is given (``budget=3`` keeps it quick).
    """
    task = load_task(task_or_id, **task_kwargs) if isinstance(task_or_id, str) else task_or_id
    checks = {
        "gymnasium": lambda: check_gymnasium(task),
        "seeding": lambda: check_seeding(task, n_steps),
        "batching": lambda: check_batching(task, n_steps),
        "declared_observables": lambda: check_declared_observables(task),
        "bad_proposals": lambda: check_bad_proposals(task),
        "hostile_inputs": lambda: check_hostile_inputs(task),
        "chat": lambda: check_chat(task),
        "run_store": lambda: check_run_store(task, n_steps),
        "cost_budget": lambda: check_cost_budget(task, n_steps),
        "calibration": lambda: check_calibration_declared(task),
    }
    for check in checks.values():
        check()
    return list(checks)
