"""Reading deploy/kubernetes the way a cluster would: kustomize renders, the
Kubernetes schemas of ``kubernetes-validate``, and small accessors the manifest
tests share (tests/unit/test_kubernetes_manifests.py)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from jsonschema import Draft202012Validator
from kubernetes_validate.utils import major_minor
from referencing import Registry, Resource

from spindle.cli.kubernetes_config import SECRET_FILE
from spindle.dev.processes import bin_path
from spindle.shared.platform.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
BASE = KUBE / "base"


@functools.cache
def schema_validator(kind: str, api_version: str, version: str) -> Draft202012Validator | None:
    """The strict schema of one kind for one Kubernetes version, from
    ``kubernetes-validate``'s files (as its ``validate`` finds them), built once:
    rebuilding it per document would cost a second per test."""
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folder = folder / f"v{major_minor(version)}.0-local-strict"
    schema_file = folder / f"{kind.lower()}-{group}.json"
    if not schema_file.is_file():
        return None
    schema = json.loads(schema_file.read_text())
    definitions = Resource.from_contents(json.loads((folder / "_definitions.json").read_text()))
    registry = Resource.from_contents(schema) @ (definitions @ Registry())  # type: ignore[var-annotated]
    return Draft202012Validator(schema, registry=registry)


def render(kustomization_dir: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of a directory: what ``kubectl apply -k`` would send."""
    out = subprocess.run(
        [bin_path("kubectl"), "kustomize", str(kustomization_dir)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def with_component(tmp: Path, component: Path) -> Path:
    """A throwaway kustomization: the base plus one component."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize takes no absolute paths here
                "resources": [os.path.relpath(BASE, tmp)],
                "components": [os.path.relpath(component, tmp)],
            }
        )
    )
    return tmp


def one(docs: list[dict[str, Any]], kind: str, name_prefix: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name_prefix)]
    assert len(found) == 1, f"{kind}/{name_prefix}: {len(found)} found"
    return found[0]


def container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    spec = deployment["spec"]["template"]["spec"]
    return next(
        c for c in [*spec.get("initContainers", []), *spec["containers"]] if c["name"] == name
    )


def config_data(docs: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = one(docs, "ConfigMap", "spindle-config-")["data"]
    return data


def secret_example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SECRET_FILE.read_text())
    return data


def settings_from(data: dict[str, str]) -> Settings:
    """The Settings a pod with exactly this environment reads (as its env vars:
    JSON lists parsed, aliases applied)."""
    with mock.patch.dict(os.environ, data, clear=True):
        return Settings(_env_file=None)  # type: ignore[call-arg]


def port_number(c: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return int(next(p["containerPort"] for p in c["ports"] if p["name"] == port))
