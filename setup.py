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

# data files shipped inside the packages (the synthesis lab's building-block stock; the
# alloy lab's reference-hull table; the viewer's vendored JavaScript, CSS and their licences)
PACKAGE_DATA = {
    "labtwin.tasks": ["data/*.csv"],
    "labtwin.simulators.materials": ["data/*.csv"],
    "labtwin.rendering": ["assets/*", "assets/*/*"],
}

setup(packages=packages, package_dir=FOLDERS, package_data=PACKAGE_DATA)
