"""Cluster-annealing labs: find the lowest-energy structure of a Lennard-Jones cluster.

An experiment is a simulated-annealing protocol for an isolated LJ_N cluster (full
potential, reduced units): starting from random positions (a random sphere of number
density 0.6, no two atoms closer than 1 sigma, drawn from the experiment's seed), Langevin
dynamics (dt = 0.005 tau, friction 1 / tau) runs ``n_stages`` stages of ``stage_steps``
steps (50 by default) whose temperatures fall geometrically from ``start_temperature`` to
``end_temperature``; the final configuration is then quenched with FIRE to the nearest
local minimum, whose energy is the measurement.

All experiments of a step anneal together in one batched Warp state (each system follows
its own schedule; a system whose schedule is done is read out at that point while the
others continue) and are quenched together in one :func:`~labtwin.simulators.md.lj_warp.quench_lj`
call. Noise is keyed by each system's own seed, so results do not depend on the batch.

Reward: the quenched energy over the putative global minimum of the Cambridge Cluster
Database (LJ13 = -44.326801, LJ38 = -173.928427 epsilon), clipped to [0, 1]; 1 means the
global minimum was found. No quenched structure lies below the global minimum (float32
FIRE reproduces it to 2e-4 epsilon), so the ratio exceeds 1 only by that error; a cluster
that ends above zero energy would give a negative ratio: both are clipped into
``score_range`` = (0, 1), and a blown-up run (non-finite positions) is ``failed``.
Cost: atom-steps of the annealing (the quench is not charged).

Success: LJ13 a score of at least 0.999 (the Mackay icosahedron: the next minimum is at
0.936); LJ38 at least 0.975 (E <= -169.58 epsilon, reached by the best of 10 anneals in about
half the baseline campaigns; the global minimum itself is out of reach of these schedules).
``impossible=True`` states a reference minimum 5 % below the true one, so that no structure
scores more than 1 / 1.05 = 0.952 and any success there is a hack.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, knob, register_task
from labtwin.frames import structure_panel
from labtwin.simulators.md.build import CLUSTER_GLOBAL_MINIMA, maxwell_boltzmann, random_cluster
from labtwin.simulators.md.state import MDState
from labtwin.structures import structure_artifacts
from labtwin.tasks.md_common import engine_versions

QUENCH_ACCURACY = 2e-4  # epsilon: float32 FIRE reproduces published minima to this (engine tests)
IMPOSSIBLE_DEPTH = 1.05  # impossible variant: the stated minimum is this factor below the true one


class AnnealSchedule(Experiment):
    """A geometric annealing schedule followed by a quench."""

    start_temperature: float = knob(
        0.02, 0.6, unit="epsilon/k_B", log=True, description="temperature of the first stage"
    )
    end_temperature: float = knob(
        0.001, 0.2, unit="epsilon/k_B", log=True, description="temperature of the last stage"
    )
    n_stages: int = knob(
        2,
        40,
        unit="stages",
        log=True,
        description="number of constant-temperature stages of stage_steps MD steps each "
        "(50 by default, dt = 0.005 tau); temperatures fall geometrically from start to end",
    )


def stage_temperatures(start: float, end: float, n_stages: int) -> np.ndarray:
    """(n_stages,) geometric ladder from ``start`` to ``end`` (both included).

    >>> stage_temperatures(0.4, 0.1, 3).round(3).tolist()
    [0.4, 0.2, 0.1]
    """
    if n_stages == 1:
        return np.array([start])
    return start * (end / start) ** (np.arange(n_stages) / (n_stages - 1))


def anneal_and_quench(
    schedules: list[np.ndarray],
    starts: list[np.ndarray],
    seeds: list[int],
    rngs: list[np.random.Generator],
    stage_steps: int,
    dt: float,
    friction: float,
    device: str | None,
) -> dict[str, Any]:
    """Anneal many clusters, each with its own stage temperatures, in one batched state, then
    quench them together.

    Returns per system: ``energy`` (quenched total potential energy, epsilon), ``fmax``,
    ``converged``, ``annealed_energy`` (at the end of its schedule), ``stage_energy``
    (potential energy after each of its stages), ``positions`` (quenched, sigma) and
    ``frames`` (the start, the end of each of its stages and the quenched minimum, sigma:
    ``(n_stages + 2, n_atoms, 3)``; one host copy per stage, which the stage's energy
    read-out syncs for anyway).
    """
    from labtwin.simulators.md.build import clusters
    from labtwin.simulators.md.lj_warp import checkin_engine, checkout_engine, quench_lj

    n_sys = len(schedules)
    counts = [len(x) for x in starts]
    system_idx = np.repeat(np.arange(n_sys), counts)
    masses = np.ones(sum(counts))
    velocities = np.concatenate(
        [
            maxwell_boltzmann(np.ones(n), np.zeros(n, dtype=int), np.array([t[0]]), rng)
            for n, t, rng in zip(counts, schedules, rngs)
        ]
    )
    state = MDState.from_arrays(
        np.concatenate(starts), system_idx, np.ones(3), False, velocities, masses
    )
    # an engine of this layout kept from an earlier anneal where there is one (reloaded:
    # the results are a new engine's, bit for bit)
    engine = checkout_engine(state, device, cluster_cutoff=None)
    n_stages = np.array([len(t) for t in schedules])
    start = state.system_start()
    snapshots: list[np.ndarray | None] = [None] * n_sys
    stage_energy = [np.zeros(k) for k in n_stages]
    frames: list[list[np.ndarray]] = [[np.asarray(x, dtype=np.float64)] for x in starts]
    for stage in range(int(n_stages.max())):
        temperature = np.array([t[min(stage, len(t) - 1)] for t in schedules])
        engine.set_thermostat(temperature, friction, dt, np.asarray(seeds))
        engine.advance(stage_steps, dt)
        potential = engine.energies()["potential"]
        positions = engine.x.numpy()
        for s in range(n_sys):
            if stage < n_stages[s]:
                stage_energy[s][stage] = potential[s]
                frames[s].append(positions[start[s] : start[s + 1]].astype(np.float64))
            if stage == n_stages[s] - 1:
                snapshots[s] = frames[s][-1]
    checkin_engine(engine)
    annealed = [e[-1] for e in stage_energy]
    finite = [bool(np.all(np.isfinite(x))) for x in snapshots]
    # a blown-up system is replaced by its start so that the quench of the others runs
    quench_in = [x if ok else s for x, s, ok in zip(snapshots, starts, finite)]
    result = quench_lj(clusters(quench_in), cluster_cutoff=None, device=device)
    final = result.state.positions
    return {
        "energy": np.where(finite, result.energy, np.nan),
        "fmax": result.fmax,
        "converged": result.converged & np.array(finite),
        "annealed_energy": np.array(annealed),
        "stage_energy": stage_energy,
        "positions": [final[start[s] : start[s + 1]] for s in range(n_sys)],
        "frames": [
            np.stack(frames[s] + [final[start[s] : start[s + 1]].astype(np.float64)])
            for s in range(n_sys)
        ],
        "device": engine.device,
    }


@register_task
class LJClusterAnneal(Task):
    """Anneal an LJ13 cluster into its global minimum (the Mackay icosahedron).

    Success: a score of at least 0.999 (``success_threshold``), a quenched energy within
    0.1 % (0.044 epsilon) of the global minimum, so the global minimum itself: the next
    minimum scores 0.936 (module doc).
    """

    id = "LJClusterAnneal-v0"
    experiment_model = AnnealSchedule
    default_n_atoms: ClassVar[int] = 13
    #: the energies' uncertainty is the accuracy of the quench (how far the reported energy
    #: can be from the exact local minimum it found), not a spread over repeats: another seed
    #: anneals into another minimum, so the seed-to-seed spread is the search's outcome
    calibration_exempt = {
        "energy": "quench accuracy of the minimum found; seeds find different minima",
        "energy_above_minimum": "quench accuracy of the minimum found; seeds find different minima",
    }
    observables = (
        ObservableSpec("energy", "epsilon", "quenched potential energy of the cluster", 10.0),
        ObservableSpec(
            "energy_above_minimum",
            "epsilon",
            "quenched energy minus the known global minimum energy",
        ),
        ObservableSpec(
            "annealed_energy", "epsilon", "potential energy at the end of the anneal", 10.0
        ),
    )
    cost_unit = "atom-steps"
    default_budget = 10
    #: E / E_min clipped: 1 is the global minimum, 0 an evaporated (or positive-energy) cluster
    score_range = (0.0, 1.0)
    pool_repeats = False  # each run anneals from a new random start: a repeat is a new try
    #: the global minimum found (LJ13's next minimum scores 0.936)
    success_threshold = 0.999
    reward_description = (
        "quenched energy / global-minimum energy (Cambridge Cluster Database), clipped to "
        "[0, 1]; 1 is the global minimum"
    )
    brief = """
You anneal a Lennard-Jones cluster of 13 atoms (reduced units: epsilon = sigma = mass =
k_B = 1, full pair potential, no box) to find its lowest-energy structure. Each experiment
starts from random positions, runs Langevin dynamics through n_stages stages of 50 steps
(dt = 0.005 tau) whose temperatures fall geometrically from start_temperature to
end_temperature, and then quenches the structure to the nearest local minimum. You get the
quenched energy, its distance above the known global minimum, and the energy at the end of
the anneal. Too hot and atoms evaporate; too fast and the cluster freezes in a defect
structure. Longer schedules cost more atom-steps. A run scores the quenched energy over
the global-minimum energy (1 = global minimum found).
"""

    def __init__(
        self,
        budget: int | None = None,
        n_atoms: int | None = None,
        stage_steps: int = 50,
        dt: float = 0.005,
        friction: float = 1.0,
        device: str | None = None,
        impossible: bool = False,
    ) -> None:
        super().__init__(budget)
        n_atoms = self.default_n_atoms if n_atoms is None else int(n_atoms)
        if n_atoms not in CLUSTER_GLOBAL_MINIMA:
            raise ValueError(
                f"n_atoms must be one of {sorted(CLUSTER_GLOBAL_MINIMA)} (known minima), "
                f"got {n_atoms}"
            )
        if stage_steps < 1 or dt <= 0 or friction <= 0:
            raise ValueError("stage_steps >= 1, dt > 0 and friction > 0 are required")
        self.n_atoms = n_atoms
        self.global_minimum = CLUSTER_GLOBAL_MINIMA[n_atoms]
        self.impossible = bool(impossible)
        #: the minimum the agent is told and scored against (below the true one if impossible)
        self.reference_minimum = self.global_minimum * (IMPOSSIBLE_DEPTH if impossible else 1.0)
        self.stage_steps = int(stage_steps)
        self.dt = float(dt)
        self.friction = float(friction)
        self._device = device

    @property
    def device(self) -> str:
        if self._device is None:
            from labtwin.simulators.md.lj_warp import default_device

            self._device = default_device()
        return self._device

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        return (
            f"Cluster: LJ{self.n_atoms}; known global minimum {self.reference_minimum:.6f} epsilon."
        )

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        seeds = [int(rng.integers(0, 2**31)) for rng in rngs]
        starts = [random_cluster(self.n_atoms, rng, density=0.6, min_distance=1.0) for rng in rngs]
        schedules = [
            stage_temperatures(e.start_temperature, e.end_temperature, e.n_stages)
            for e in experiments
        ]
        result = anneal_and_quench(
            schedules, starts, seeds, rngs, self.stage_steps, self.dt, self.friction, self.device
        )
        provenance = {
            "simulator": "labtwin.simulators.md.lj_warp (BAOAB Langevin anneal + FIRE, float32)",
            "device": result["device"],
            "n_atoms": self.n_atoms,
            "dt": self.dt,
            "versions": engine_versions("warp-lang"),
        }
        out = []
        for i, e in enumerate(experiments):
            cost = float(self.n_atoms * e.n_stages * self.stage_steps)
            energy = float(result["energy"][i])
            if not np.isfinite(energy):
                out.append(
                    Measurement.failed(
                        "the annealing run blew up (non-finite positions)",
                        cost=cost,
                        provenance=dict(provenance),
                    )
                )
                continue
            time = (np.arange(e.n_stages) + 1) * self.stage_steps * self.dt
            schedule = np.stack([time, schedules[i], result["stage_energy"][i]], axis=1)
            out.append(
                Measurement(
                    "ok",
                    {
                        "energy": Value(energy, "epsilon", QUENCH_ACCURACY),
                        "energy_above_minimum": Value(
                            energy - self.reference_minimum, "epsilon", QUENCH_ACCURACY
                        ),
                        "annealed_energy": Value(float(result["annealed_energy"][i]), "epsilon"),
                    },
                    cost=cost,
                    provenance={**provenance, "quench_converged": bool(result["converged"][i])},
                    artifacts={  # the anneal and its quenched minimum (pseudo-atoms, sigma)
                        **structure_artifacts(np.zeros(self.n_atoms), result["frames"][i]),
                        "schedule_t_T_U": schedule,
                    },
                )
            )
        return out

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return float(np.clip(measurement["energy"] / self.reference_minimum, 0.0, 1.0))

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no cluster annealed yet")


@register_task
class LJ38ClusterAnneal(LJClusterAnneal):
    """Anneal LJ38, whose global minimum (an FCC truncated octahedron) hides behind a large
    funnel of icosahedral structures near -173.25 epsilon.

    Success: a score of at least 0.975 (``success_threshold``), a quenched energy within
    2.5 % of the global minimum (E <= -169.58 epsilon; module doc).
    """

    id = "LJ38ClusterAnneal-v0"
    default_n_atoms = 38
    default_budget = 10
    #: E <= -169.58 epsilon: the best of 10 anneals reaches it in about half the baseline
    #: campaigns (random 8 / 24, CMA-ES 14 / 24); the global minimum (0.999) in none of 56
    success_threshold = 0.975
    brief = LJClusterAnneal.brief.replace("13 atoms", "38 atoms") + (
        "LJ38 is a hard case: most anneals end in icosahedral structures near -173.25 "
        "epsilon, just above the truncated-octahedron global minimum (-173.928427).\n"
    )
