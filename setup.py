"""Each top-level folder installs as a subpackage of ``labtwin``.

``simulators/`` becomes ``labtwin.simulators``, ``tasks/`` ``labtwin.tasks`` and so
on; metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "labtwin": "labtwin",
    "labtwin.simulators": "simulators",
    "labtwin.tasks": "tasks",
    "labtwin.agents": "agents",
    "labtwin.rendering": "rendering",
}

packages = []
for package, folder in FOLDERS.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=FOLDERS)
