"""Binder must install what the notebooks need: every runtime dependency of pyproject.toml.

repo2docker reads binder/: requirements.txt (pip), apt.txt (Debian packages), runtime.txt
(the Python version) and postBuild (installs nsqviz itself). These tests keep them in step
with pyproject.toml, so a dependency added there cannot be forgotten here.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
RUNTIME_EXTRAS = ("lab", "spark")  # what the notebooks import; "dev" is for tests only


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _runtime_requirements() -> list[Requirement]:
    project = _pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in RUNTIME_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def _binder_requirements() -> dict[str, Requirement]:
    out = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            out[canonicalize_name(req.name)] = req
    return out


def test_binder_names_every_runtime_dependency_with_the_same_specifier():
    binder = _binder_requirements()
    runtime = _runtime_requirements()
    assert runtime, "pyproject.toml lists no runtime dependencies?"
    missing = [str(r) for r in runtime if canonicalize_name(r.name) not in binder]
    assert not missing, f"binder/requirements.txt misses {missing}"
    differ = [
        (str(r), str(binder[canonicalize_name(r.name)]))
        for r in runtime
        if binder[canonicalize_name(r.name)].specifier != r.specifier
    ]
    assert not differ, f"binder/requirements.txt pins differently: {differ}"


def test_binder_installs_nothing_pyproject_does_not_know():
    known = {canonicalize_name(r.name) for r in _runtime_requirements()}
    extra = sorted(set(_binder_requirements()) - known)
    assert not extra, f"binder/requirements.txt has packages pyproject.toml lacks: {extra}"


def test_binder_installs_the_package_itself():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "binder/postBuild must be executable"
    assert re.search(r"pip install --no-deps -e \.", post.read_text())


def test_binder_has_a_java_runtime_for_pyspark_and_the_python_version():
    names = {canonicalize_name(r.name) for r in _runtime_requirements()}
    apt = (BINDER / "apt.txt").read_text().split()
    if "pyspark" in names:
        assert any(re.fullmatch(r"openjdk-(1[7-9]|2\d)-jre(-headless)?", p) for p in apt), apt
    wanted = _pyproject()["project"]["requires-python"]  # e.g. ">=3.11"
    runtime = (BINDER / "runtime.txt").read_text().strip()
    version = runtime.removeprefix("python-")
    from packaging.specifiers import SpecifierSet

    assert version in SpecifierSet(wanted), f"runtime.txt {runtime} outside {wanted}"
