"""One local Ray cluster per test module (``ray.init(num_cpus=2)``).

``address="local"`` starts a cluster of the module's own, never joining one that
another pytest-xdist worker started; each has its own temporary directory (short:
Ray's socket paths must fit in 107 bytes) and no dashboard, so two can run at once.
The test labs of :mod:`ray_labs` are pickled by value, so that Ray's worker
processes need not import them from the tests folder.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    import ray_labs
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(ray_labs)
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=temp_dir,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(ray_labs)
        shutil.rmtree(temp_dir, ignore_errors=True)
