"""docker-compose.yml and deploy/Dockerfile, checked without a Docker engine:
the compose file against the Compose Specification's JSON Schema (as shipped by
the ``check-jsonschema`` package), and every reference in both files against
the project — services, Settings variables, ports, paths and commands."""

from __future__ import annotations

import json
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft202012Validator

from spindle.cli.config_reference import env_names
from spindle.cli.main import build_parser
from spindle.dev.embedded import SEARCH_ATTRIBUTES
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SPINDLE_SERVICES = ("worker", "gateway")
# Variables the Spindle containers may carry besides Settings: OpenTelemetry's
# standard configuration (docs/design.md §7).
STANDARD_PREFIXES = ("OTEL_",)
# Where each backing service listens inside the compose network.
SERVICE_PORTS = {"temporal": 7233, "redis": 6379, "mongodb": 27017, "jaeger": 4318}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def interpolate(value: str) -> str:
    """Compose's ``${NAME:-default}`` / ``${NAME}`` with nothing set in the shell."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {name: interpolate(str(value)) for name, value in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def waits_for(services: dict[str, dict[str, Any]], name: str) -> set[str]:
    """Every service ``name`` waits for, directly or through others."""
    found: set[str] = set()
    pending = list(depends_on(services[name]))
    while pending:
        target = pending.pop()
        if target not in found:
            found.add(target)
            pending.extend(depends_on(services[target]))
    return found


def test_compose_file_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    errors = sorted(
        Draft202012Validator(schema).iter_errors(compose), key=lambda e: list(e.absolute_path)
    )
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
    )


def test_the_stack_has_every_part(services: dict[str, dict[str, Any]]) -> None:
    required = {"temporal", "temporal-ui", "redis", "mongodb", "worker", "gateway", "jaeger"}
    assert required <= set(services)
    # Temporal has a database of its own, not the dev server's SQLite.
    assert "postgres12" in environment(services["temporal"]).values()
    assert services["mongodb"]["image"].startswith("mongo:7")


def test_every_service_has_an_image_or_a_build(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        image = service.get("image", "")
        if "build" not in service:
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag"


def test_worker_and_gateway_are_built_from_the_dockerfile(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in SPINDLE_SERVICES:
        build = services[name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE


def test_worker_and_gateway_commands_are_spindle_commands(
    services: dict[str, dict[str, Any]],
) -> None:
    from spindle.cli import main as cli

    parser = build_parser()
    for name in [*SPINDLE_SERVICES, "register-examples"]:
        command = services[name]["command"]
        argv = shlex.split(command) if isinstance(command, str) else command
        handler = parser.parse_args(argv).handler
        if name in SPINDLE_SERVICES:
            assert handler is getattr(cli, f"_cmd_{name}"), name


def test_spindle_environment_names_are_settings(services: dict[str, dict[str, Any]]) -> None:
    known = {env for field in Settings.model_fields for env in env_names(field)}
    for name in [*SPINDLE_SERVICES, "register-examples"]:
        env = environment(services[name])
        unknown = {var for var in env if var not in known and not var.startswith(STANDARD_PREFIXES)}
        assert not unknown, f"{name}: not a Settings variable: {sorted(unknown)}"
        # The values parse as Settings would read them in the container.
        settings = Settings.model_validate({k: v for k, v in env.items() if v != ""})
        assert settings.llm_provider == "offline"


def test_spindle_services_address_services_that_exist(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in SPINDLE_SERVICES:
        env = environment(services[name])
        settings = Settings.model_validate({k: v for k, v in env.items() if v != ""})
        targets = {
            "temporal": f"//{settings.temporal_address}",
            "redis": settings.redis_url,
            "mongodb": settings.mongo_url,
            "jaeger": env["OTEL_EXPORTER_OTLP_ENDPOINT"],
        }
        for service, url in targets.items():
            parts = urlsplit(url)
            assert (parts.hostname, parts.port) == (service, SERVICE_PORTS[service]), (name, url)
            assert service in waits_for(services, name), f"{name} must wait for {service}"


def test_dependencies_exist_and_form_no_cycle(services: dict[str, dict[str, Any]]) -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert condition in conditions, (name, target, condition)
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{target} has no healthcheck"

    visiting: set[str] = set()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in visiting, f"dependency cycle: {' -> '.join([*path, name])}"
        if name in done:
            return
        visiting.add(name)
        for target in depends_on(services[name]):
            visit(target, [*path, name])
        visiting.discard(name)
        done.add(name)

    for name in services:
        visit(name, [])


def test_spindle_services_wait_for_healthy_backends(services: dict[str, dict[str, Any]]) -> None:
    for name in SPINDLE_SERVICES:
        deps = depends_on(services[name])
        assert deps["redis"] == "service_healthy"
        assert deps["mongodb"] == "service_healthy"
        assert deps["temporal-setup"] == "service_completed_successfully"
    assert "healthcheck" in services["gateway"]
    assert "healthcheck" in services["temporal"]


def test_published_host_ports_do_not_clash(services: dict[str, dict[str, Any]]) -> None:
    seen: dict[int, str] = {}
    for name, service in services.items():
        for entry in service.get("ports", []):
            host_port = int(str(entry).split(":")[-2] if ":" in str(entry) else entry)
            assert host_port not in seen, f"{name} and {seen[host_port]} both publish {host_port}"
            seen[host_port] = name


def test_gateway_listens_where_it_is_published_and_probed(
    services: dict[str, dict[str, Any]],
) -> None:
    gateway = services["gateway"]
    settings = Settings.model_validate({k: v for k, v in environment(gateway).items() if v != ""})
    assert settings.gateway_host == "0.0.0.0"
    container_ports = {int(str(p).split(":")[-1]) for p in gateway["ports"]}
    assert settings.gateway_port in container_ports
    probe = " ".join(gateway["healthcheck"]["test"])
    assert f":{settings.gateway_port}/readyz" in probe


def test_mounted_files_exist(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).is_file(), f"{name} mounts missing {source}"


def test_temporal_setup_creates_the_search_attributes_spindle_uses() -> None:
    script = (ROOT / "deploy" / "temporal-setup.sh").read_text()
    for attribute in SEARCH_ATTRIBUTES:
        name, kind = attribute.split("=")
        assert name in script
        assert kind == "Keyword"  # the script creates Keyword attributes


def test_temporal_dynamic_config_is_valid_yaml_with_the_tuning() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "temporal-dynamic-config.yaml").read_text())
    assert config["history.transferProcessorMaxPollRPS"] == [{"value": 1000}]
    for key, values in config.items():
        assert isinstance(values, list) and all("value" in v for v in values), key


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    instructions = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_copies_paths_that_exist_and_are_not_ignored() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    copies = [rest.split()[:-1] for keyword, rest in dockerfile_instructions() if keyword == "COPY"]
    assert copies
    for sources in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such path"
            assert source not in ignored, f"COPY {source}: excluded by .dockerignore"
    copied = {source for sources in copies for source in sources}
    # Everything the package build needs: pyproject's packages and its readme.
    assert {"pyproject.toml", "README.md", "shared", "worker", "gateway", "spindle"} <= copied


def test_dockerfile_is_slim_non_root_runtime_only_with_spindle_entrypoint() -> None:
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert "pip install" in runs and "[test]" not in runs and "-e " not in runs
    entrypoint = [rest for keyword, rest in instructions if keyword == "ENTRYPOINT"]
    assert entrypoint == ['["spindle"]']
