"""The Kubernetes manifests in deploy/ (docs/deployment.md#kubernetes), checked offline.

Built-in kinds are validated by `kubernetes-validate` against its bundled schemas (strict:
an unknown field fails); the operators' kinds against the openAPIV3Schema of their CRDs,
vendored in deploy/crds/ (made strict the same way). Every kustomization's files must exist
and parse; where `kubectl` is installed the base and the overlay are built and the result
validated too; without kubectl a small renderer here (the kustomize features deploy/ uses)
builds them, and where both run they must agree. Then what docs/deployment.md promises:
probes, resources, budgets, settings every process accepts, quorum queues on 3 nodes, TLS,
and alert rules that name metrics the code exports.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import promql_parser
import pytest
import yaml

from cronhooks_common.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CRDS = DEPLOY / "crds"
OVERLAY = DEPLOY / "overlays" / "production"
# The oldest Kubernetes minor the manifests are meant for (every field they use exists there).
KUBERNETES_VERSION = "1.30"
SERVICES = {"admin-api": 8080, "importer": 8081, "scheduler": 8082, "dispatcher": 8083}

Doc = dict[str, Any]


def _yaml_docs(path: Path) -> list[Doc]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are large
    return [d for d in yaml.load_all(path.read_text(), Loader=loader) if d]


def _kustomizations() -> list[Path]:
    return sorted(DEPLOY.rglob("kustomization.yaml"))


def _listed_files(kustomization: Path) -> Iterator[tuple[str, Path]]:
    """(role, path) of every file a kustomization names; directories are kustomizations."""
    spec = yaml.safe_load(kustomization.read_text())
    for entry in spec.get("resources", []):
        yield "resource", kustomization.parent / entry
    for patch in spec.get("patches", []):
        if "path" in patch:
            role = "json6902" if "target" in patch else "patch"
            yield role, kustomization.parent / patch["path"]


def _manifest_files() -> list[Path]:
    """Every file of resources (not patches) that a kustomization lists."""
    found = []
    for kustomization in _kustomizations():
        for role, path in _listed_files(kustomization):
            if role == "resource" and path.is_file():
                found.append(path)
    return sorted(set(found))


@cache
def _crd_schemas() -> dict[tuple[str, str], Doc]:
    """(apiVersion, kind) → strict openAPIV3Schema, from the vendored CRDs."""
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        for crd in _yaml_docs(path):
            assert crd["kind"] == "CustomResourceDefinition", path
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def _strict(schema: Any) -> Any:
    """As the API server prunes unknown fields, refuse them: every object schema with
    `properties` and no `additionalProperties` (nor preserve-unknown-fields) gets
    `additionalProperties: false`. The CRDs' CEL rules (x-kubernetes-validations) are not
    evaluated here."""
    if isinstance(schema, dict):
        for value in schema.values():
            _strict(value)
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        for item in schema:
            _strict(item)
    return schema


def _validate(doc: Doc, where: str) -> None:
    key = (doc["apiVersion"], doc["kind"])
    crd = _crd_schemas().get(key)
    if crd is not None:
        errors = sorted(
            jsonschema.Draft7Validator(crd).iter_errors(doc), key=lambda e: list(e.path)
        )
        assert not errors, f"{where}: {key}: " + "; ".join(
            f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:5]
        )
        return
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(map(str, exc.path))
        raise AssertionError(
            f"{where}: {key} {doc['metadata']['name']}: {path}: {exc.message}"
        ) from None
    except kubernetes_validate.SchemaNotFoundError:
        raise AssertionError(
            f"{where}: {key}: no schema (vendor its CRD into deploy/crds)"
        ) from None


# --- the files -------------------------------------------------------------------------


def test_every_file_a_kustomization_lists_exists_and_parses() -> None:
    assert {p.parent.relative_to(DEPLOY).as_posix() for p in _kustomizations()} == {
        "base",
        "overlays/production",
    }
    for kustomization in _kustomizations():
        for role, path in _listed_files(kustomization):
            if role == "resource" and path.is_dir():
                assert (path / "kustomization.yaml").is_file(), f"{kustomization}: {path}"
                continue
            assert path.is_file(), f"{kustomization} lists {path}, which does not exist"
            docs = _yaml_docs(path)
            assert docs, f"{path}: empty"
            if role == "json6902":
                assert all({"op", "path"} <= set(op) for op in docs[0]), path
            else:
                assert all({"apiVersion", "kind", "metadata"} <= set(d) for d in docs), path
    # and no manifest lies in deploy/ unlisted (it would never be applied or validated)
    listed = {p.resolve() for k in _kustomizations() for _, p in _listed_files(k)}
    for path in DEPLOY.rglob("*.yaml"):
        if CRDS in path.parents or path.name == "kustomization.yaml":
            continue
        assert path.resolve() in listed, f"{path} is in no kustomization"


def test_every_manifest_validates_offline() -> None:
    files = _manifest_files()
    assert len(files) >= 10
    kinds = set()
    for path in files:
        for doc in _yaml_docs(path):
            _validate(doc, str(path.relative_to(ROOT)))
            kinds.add(doc["kind"])
    assert {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Job",
        "ConfigMap",
        "Secret",
        "Ingress",
        "Cluster",
        "ScheduledBackup",
        "RabbitmqCluster",
        "ServiceMonitor",
        "PrometheusRule",
    } <= kinds


def test_the_validation_catches_mistakes() -> None:
    deployment = _yaml_docs(DEPLOY / "base" / "dispatcher.yaml")[0]
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo
    with pytest.raises(AssertionError, match="readinesProbe"):
        _validate(broken, "test")
    rabbit = _yaml_docs(DEPLOY / "base" / "rabbitmq.yaml")[0]
    broken = copy.deepcopy(rabbit)
    broken["spec"]["replica"] = 3
    with pytest.raises(AssertionError, match="replica"):
        _validate(broken, "test")
    cluster = _yaml_docs(DEPLOY / "base" / "postgres.yaml")[0]
    broken = copy.deepcopy(cluster)
    broken["spec"]["instances"] = "three"
    with pytest.raises(AssertionError, match="instances"):
        _validate(broken, "test")


def test_vendored_crds_name_their_source() -> None:
    readme = (CRDS / "README.md").read_text()
    for path in CRDS.glob("*.yaml"):
        line = next((x for x in readme.splitlines() if path.name in x), "")
        assert re.search(r"github\.com/\S+", line) and re.search(r"v\d+\.\d+\.\d+", line), (
            f"deploy/crds/README.md: no source and version for {path.name}"
        )
    assert {k for _, k in _crd_schemas()} == {
        "Cluster",
        "ScheduledBackup",
        "RabbitmqCluster",
        "ServiceMonitor",
        "PrometheusRule",
    }


# --- the overlay, built ----------------------------------------------------------------


def _kubectl_build(directory: Path) -> list[Doc] | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _merge(base: Any, patch: Any) -> Any:
    """A strategic merge patch as deploy/'s patches use it: maps merge, the rest replaces."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = _merge(base[key], value) if key in base else value
        return merged
    return copy.deepcopy(patch)


def _json_patch(doc: Doc, ops: list[Doc]) -> None:
    for op in ops:
        assert op["op"] in {"replace", "add"}, op
        keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
        target: Any = doc
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        last = keys[-1]
        if isinstance(target, list):
            target[int(last)] = copy.deepcopy(op["value"])
        else:
            target[last] = copy.deepcopy(op["value"])


def _render(directory: Path) -> list[Doc]:
    """kustomize's build for the features deploy/ uses: resources, labels (not selectors),
    images, replicas, patches (strategic merge, and JSON 6902 replace/add), namespace."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs: list[Doc] = []
    for entry in spec.get("resources", []):
        path = directory / entry
        docs += _render(path) if path.is_dir() else _yaml_docs(path)
    for doc in docs:
        for labels in spec.get("labels", []):
            assert labels.get("includeSelectors") is False, labels
            doc["metadata"].setdefault("labels", {}).update(labels["pairs"])
        for container in _containers(doc):
            for image in spec.get("images", []):
                if container["image"].split(":")[0] == image["name"]:
                    container["image"] = f"{image['newName']}:{image['newTag']}"
        for replicas in spec.get("replicas", []):
            if doc["metadata"]["name"] == replicas["name"] and "replicas" in doc.get("spec", {}):
                doc["spec"]["replicas"] = replicas["count"]
    for patch in spec.get("patches", []):
        (body,) = [yaml.safe_load((directory / patch["path"]).read_text())]
        target = patch.get("target") or {"kind": body["kind"], "name": body["metadata"]["name"]}
        (index,) = [
            i
            for i, d in enumerate(docs)
            if (d["kind"], d["metadata"]["name"]) == (target["kind"], target["name"])
        ]
        if "target" in patch:
            _json_patch(docs[index], body)
        else:
            docs[index] = _merge(docs[index], body)
    if "namespace" in spec:
        for doc in docs:
            if doc["kind"] != "Namespace":
                doc["metadata"]["namespace"] = spec["namespace"]
    return docs


def _containers(doc: Doc) -> list[Doc]:
    pod = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def _build(directory: Path) -> list[Doc]:
    """kubectl's build where kubectl is installed, else ours (and they must agree)."""
    built = _kubectl_build(directory)
    return _render(directory) if built is None else built


def _by_name(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_the_renderer_here_builds_what_kubectl_builds() -> None:
    for directory in (DEPLOY / "base", OVERLAY):
        built = _kubectl_build(directory)
        if built is None:
            pytest.skip("kubectl is not installed: the builds here are this test's own")
        assert _by_name(_render(directory)) == _by_name(built), directory


@pytest.fixture(scope="module")
def production() -> list[Doc]:
    return _build(OVERLAY)


def _one(docs: list[Doc], kind: str, name: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_base_and_overlay_build_and_validate(production: list[Doc]) -> None:
    for doc in [*_build(DEPLOY / "base"), *production]:
        _validate(doc, "kubectl kustomize")
    assert {d["metadata"].get("namespace") for d in production if d["kind"] != "Namespace"} == {
        "cronhooks"
    }


def test_deployments(production: list[Doc]) -> None:
    pdbs = [d for d in production if d["kind"] == "PodDisruptionBudget"]
    for service, port in SERVICES.items():
        deployment = _one(production, "Deployment", f"cronhooks-{service}")
        assert deployment["spec"]["replicas"] >= 2
        pod = deployment["spec"]["template"]["spec"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        # Kubernetes' service links would set CRONHOOKS_*_PORT=tcp://… : unknown or
        # malformed CRONHOOKS_* variables stop a process at start.
        assert pod["enableServiceLinks"] is False
        assert pod["terminationGracePeriodSeconds"] > 30  # the drain takes up to 30 s
        (container,) = pod["containers"]
        assert container["args"] == ["run", service]
        assert container["image"].startswith("registry.example.com/cronhooks:")
        assert container["ports"] == [{"name": "http", "containerPort": port}]
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), service
        assert "memory" in resources["limits"], service
        assert any(
            all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
            for pdb in pdbs
        ), f"no PodDisruptionBudget for {service}"
        svc = _one(production, "Service", f"cronhooks-{service}")
        assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    job = _one(production, "Job", "cronhooks-migrate")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["enableServiceLinks"] is False


def _environment(production: list[Doc], container: Doc) -> dict[str, str]:
    """What the process would see, secrets replaced by valid stand-ins."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(_one(production, "ConfigMap", source["configMapRef"]["name"])["data"])
    stand_ins = {
        "CRONHOOKS_SECRET_KEY": "k" * 48,
        "CRONHOOKS_DATABASE_URL": "postgresql://cronhooks:pw@cronhooks-pg-rw.cronhooks:5432/cronhooks",
        "CRONHOOKS_AMQP_URL": "amqp://u:pw@cronhooks-rabbitmq.cronhooks.svc:5672/",
    }
    for var in container.get("env", []):
        env[var["name"]] = var["value"] if "value" in var else stand_ins[var["name"]]
    return env


def test_every_process_accepts_its_settings(production: list[Doc]) -> None:
    containers = [
        _one(production, "Deployment", f"cronhooks-{s}")["spec"]["template"]["spec"]["containers"][
            0
        ]
        for s in SERVICES
    ]
    containers.append(
        _one(production, "Job", "cronhooks-migrate")["spec"]["template"]["spec"]["containers"][0]
    )
    for container in containers:
        settings = Settings.from_mapping(_environment(production, container))
        assert settings.bind == "0.0.0.0"
        assert settings.queue_type == "quorum"
        assert settings.public_url == "https://cronhooks.example.org"
        assert settings.api_public_url == "https://api.cronhooks.example.org"
        assert not settings.dev_mode
        refs = {
            v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"] if "valueFrom" in v
        }
        assert refs["CRONHOOKS_SECRET_KEY"] == {"name": "cronhooks", "key": "secret-key"}
        assert refs["CRONHOOKS_DATABASE_URL"] == {"name": "cronhooks-pg-app", "key": "uri"}


def test_the_example_secret_key_is_refused(production: list[Doc]) -> None:
    """A placeholder left in place stops the services instead of sealing secrets with it."""
    secret = _one(production, "Secret", "cronhooks")
    placeholder = secret["stringData"]["secret-key"]
    assert "REPLACE" in placeholder
    with pytest.raises(SettingsError, match="CRONHOOKS_SECRET_KEY"):
        Settings.from_mapping({"CRONHOOKS_SECRET_KEY": placeholder})


def test_postgres_and_rabbitmq_come_from_their_operators(production: list[Doc]) -> None:
    assert not [d for d in production if d["kind"] == "StatefulSet"]
    cluster = _one(production, "Cluster", "cronhooks-pg")
    assert cluster["spec"]["instances"] >= 2
    assert cluster["spec"]["bootstrap"]["initdb"] == {"database": "cronhooks", "owner": "cronhooks"}
    assert cluster["spec"]["backup"]["barmanObjectStore"]["destinationPath"].startswith("s3://")
    backup = _one(production, "ScheduledBackup", "cronhooks-pg-nightly")
    assert backup["spec"]["cluster"]["name"] == "cronhooks-pg"
    rabbit = _one(production, "RabbitmqCluster", "cronhooks-rabbitmq")
    assert rabbit["spec"]["replicas"] == 3
    config = _one(production, "ConfigMap", "cronhooks-config")["data"]
    assert config["CRONHOOKS_QUEUE_TYPE"] == "quorum"


def test_ingress_is_tls_for_admin_api_and_importer_only(production: list[Doc]) -> None:
    ingress = _one(production, "Ingress", "cronhooks")
    assert "cert-manager.io/cluster-issuer" in ingress["metadata"]["annotations"]
    hosts = {rule["host"] for rule in ingress["spec"]["rules"]}
    assert hosts <= {h for tls in ingress["spec"]["tls"] for h in tls["hosts"]}
    backends = {}
    for rule in ingress["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            backends[(rule["host"], path["path"])] = path["backend"]["service"]["name"]
    assert set(backends.values()) == {"cronhooks-admin-api", "cronhooks-importer"}
    for _, path in backends:
        assert not path.startswith(("/metrics", "/healthz", "/readyz", "/debug")), path


# --- monitoring ------------------------------------------------------------------------


@cache
def _exported_metrics() -> set[str]:
    """Names of the metrics the code defines (Counter/Gauge/Histogram in libs and services)."""
    names = set()
    pattern = re.compile(r"\b(Counter|Gauge|Histogram)\(\s*\"(cronhooks_[a-z_]+)\"")
    for folder in ("libs", "services"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(m[1] for m in pattern.findall(path.read_text()))
    return names


def _series_names(name: str) -> set[str]:
    return {name, f"{name}_bucket", f"{name}_count", f"{name}_sum", f"{name}_created"}


def test_alert_rules_name_exported_metrics(production: list[Doc]) -> None:
    exported = set().union(*(_series_names(n) for n in _exported_metrics()))
    assert "cronhooks_relay_leader" in exported  # the scan finds the code's metrics
    rule = _one(production, "PrometheusRule", "cronhooks")
    alerts = {}
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            alerts[r["alert"]] = r["expr"]
            try:
                promql_parser.parse(r["expr"])
            except ValueError as exc:
                raise AssertionError(f"{r['alert']}: not PromQL: {exc}") from None
            for name in re.findall(r"\bcronhooks_[a-z_]+\b", r["expr"]):
                assert name in exported, f"{r['alert']}: {name} is not exported by the code"
            assert r["labels"]["severity"] in {"warning", "critical"}
            assert r["annotations"]["summary"]
    # the alerts that matter (docs/deployment.md#monitoring-and-alerts)
    for wanted in (
        "CronhooksServiceDown",  # readiness
        "CronhooksWebhookFailing",  # consecutive failures / alerts raised
        "CronhooksDeadLettered",
        "CronhooksNoRelayLeader",
        "CronhooksRelayStalled",
    ):
        assert wanted in alerts
    monitor = _one(production, "ServiceMonitor", "cronhooks")
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    selected = set(monitor["spec"]["selector"]["matchExpressions"][0]["values"])
    assert selected == set(SERVICES)


def test_the_resources_shown_in_the_docs_validate() -> None:
    """docs/deployment.md's YAML (the restore Cluster, the rotation's env entry) is valid."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    blocks = [
        yaml.safe_load(re.sub(r"^ {3}", "", block, flags=re.M))
        for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    ]
    resources = [b for b in blocks if isinstance(b, dict) and "kind" in b]
    assert [r["kind"] for r in resources] == ["Cluster"]
    for resource in resources:
        _validate(resource, "docs/deployment.md")
    env_entries = [b[0] for b in blocks if isinstance(b, list)]
    assert [e["name"] for e in env_entries] == ["CRONHOOKS_SECRET_KEY_PREVIOUS"]
    container = _yaml_docs(DEPLOY / "base" / "dispatcher.yaml")[0]["spec"]["template"]["spec"][
        "containers"
    ][0]
    _validate(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "rotation"},
            "spec": {"containers": [{**container, "env": [*container["env"], *env_entries]}]},
        },
        "docs/deployment.md",
    )
