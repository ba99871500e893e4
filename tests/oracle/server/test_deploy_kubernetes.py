"""deploy/kubernetes checked offline, against the schemas and against the real `pagoda serve`:

- every built-in object (Deployment, Service, PersistentVolumeClaim) validates strictly (unknown fields refused)
  against Kubernetes' OpenAPI schemas, bundled by PyPI's kubernetes-validate, for the oldest and newest versions
  checked here; the LeaderWorkerSet's pod templates validate as Kubernetes pod templates;
- the custom resources (ServiceMonitor, LeaderWorkerSet) validate against their CRDs' openAPIV3Schema (vendored in
  crds/, Apache-2.0), with unknown fields refused as `kubectl apply --validate=strict` does;
- each check is shown to catch a typo;
- every container's args are `pagoda serve` flags (`--help`), the probes' port is the --port pagoda listens on and
  their path /health, the Service and ServiceMonitor ports lead to it, and pagoda started with the Deployment's own
  args and the Secret's variable answers the probes and /metrics without a key while /v1 needs it;
- the probe timings fit a model load and a drain, the pods run as the image's non-root user, and
  docs/deployment-multinode.md shows leaderworkerset.yaml as it is.

Not run: a cluster (no kubelet, scheduler or GPU device plugin here)."""

import copy
import functools
import lzma
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from deploy_args import arg_problems, flag_value, help_default, runnable_here, serve_flags
from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

ROOT = Path(__file__).resolve().parents[3]
KUBE = ROOT / "deploy" / "kubernetes"
CRDS = Path(__file__).resolve().parent / "crds"
CRD_FILES = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitors.yaml.xz",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.x-k8s.io_leaderworkersets.yaml.xz",
}
# The LeaderWorkerSet controller needs 1.26 or newer; 1.29 is the oldest release still common in managed clusters.
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.utils.latest_version()]
API_KEY = "sk-from-the-secret"


def objects():
    """(file name, object) for every document of every manifest."""
    out = []
    for path in sorted(KUBE.glob("*.yaml")):
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for _, d in out} >= {"Deployment", "Service", "ServiceMonitor", "LeaderWorkerSet",
                                          "PersistentVolumeClaim"}
    return out


def the(kind, name=None):
    found = [d for _, d in objects() if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def pod_specs():
    """(where, pod spec) of every pod the manifests make."""
    lws = the("LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    return [("deployment", the("Deployment")["spec"]["template"]["spec"]),
            ("lws leader", lws["leaderTemplate"]["spec"]), ("lws worker", lws["workerTemplate"]["spec"])]


def containers():
    return [(f"{where}/{c['name']}", spec, c) for where, spec in pod_specs() for c in spec["containers"]]


def k8s_problems(obj, version):
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    return []


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_builtin_objects_validate_against_kubernetes(version):
    checked = 0
    for name, obj in objects():
        if (obj["apiVersion"], obj["kind"]) in CRD_FILES:
            continue
        # A kind without a bundled schema raises SchemaNotFoundError: a failure here, not a skip.
        assert k8s_problems(obj, version) == [], name
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_lws_pod_templates_validate_as_kubernetes_pod_templates(version):
    lws = the("LeaderWorkerSet")
    for role in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][role]
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role.lower()}, "template": template}
        assert k8s_problems(wrapped, version) == [], role


def test_kubernetes_schemas_catch_typos():
    version = KUBERNETES_VERSIONS[-1]
    deployment = the("Deployment")
    c = lambda d: d["spec"]["template"]["spec"]["containers"][0]  # noqa: E731
    typo = copy.deepcopy(deployment)
    c(typo)["readinesProbe"] = c(typo).pop("readinessProbe")
    wrong_type = copy.deepcopy(deployment)
    c(wrong_type)["ports"][0]["containerPort"] = "eight thousand"
    misplaced = copy.deepcopy(deployment)
    misplaced["spec"]["template"]["spec"]["runAsNonRoot"] = True  # belongs in securityContext
    for bad in (typo, wrong_type, misplaced):
        assert k8s_problems(bad, version), bad


@functools.cache
def crd_schema(api_version, kind):
    # The LeaderWorkerSet CRD is 1.3 MB of YAML: libyaml's loader when PyYAML has it, and read once.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(lzma.open(CRDS / CRD_FILES[(api_version, kind)]).read(), Loader=loader)
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    served = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    assert len(served) == 1, f"{kind} {api_version} is not served by the vendored CRD"
    return served[0]["schema"]["openAPIV3Schema"]


def unknown_fields(obj, schema, path="."):
    """Fields the schema does not declare: the API server drops them silently (pruning), kubectl --validate=strict
    refuses them; jsonschema alone lets them pass."""
    out = []
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        if props is None or schema.get("x-kubernetes-preserve-unknown-fields"):
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                for k, v in obj.items():
                    out += unknown_fields(v, extra, f"{path}{k}.")
            return out
        for k, v in obj.items():
            if k not in props:
                out.append(f"{path}{k}: unknown field")
            else:
                out += unknown_fields(v, props[k], f"{path}{k}.")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(obj):
            out += unknown_fields(v, schema["items"], f"{path}{i}.")
    return out


def crd_problems(obj):
    schema = crd_schema(obj["apiVersion"], obj["kind"])
    validator = jsonschema.Draft4Validator(schema)  # openAPIV3Schema is a subset of draft 4 plus x- keys
    problems = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
    problems += unknown_fields(obj, schema)
    # The CRD leaves the top-level metadata to the API server's ObjectMeta: check it as a ConfigMap's.
    meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}
    problems += k8s_problems(meta, KUBERNETES_VERSIONS[-1])
    return problems


def test_custom_resources_validate_against_their_crds():
    custom = [(name, obj) for name, obj in objects() if (obj["apiVersion"], obj["kind"]) in CRD_FILES]
    assert {obj["kind"] for _, obj in custom} == {"ServiceMonitor", "LeaderWorkerSet"}
    for name, obj in custom:
        assert crd_problems(obj) == [], name


def test_crd_checks_catch_typos():
    monitor = copy.deepcopy(the("ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["paht"] = monitor["spec"]["endpoints"][0].pop("path")
    assert any("paht: unknown field" in p for p in crd_problems(monitor))
    lws = copy.deepcopy(the("LeaderWorkerSet"))
    lws["spec"]["leaderWorkerTemplate"]["size"] = "two"
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateGroup"
    problems = crd_problems(lws)
    assert any("size" in p for p in problems) and any("restartPolicy" in p for p in problems), problems
    lws = copy.deepcopy(the("LeaderWorkerSet"))
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["resource"] = worker.pop("resources")
    assert any("resource: unknown field" in p for p in crd_problems(lws))
    lws["metadata"]["nmae"] = "x"
    assert any("nmae" in p for p in crd_problems(lws))


def test_every_arg_is_a_pagoda_serve_flag(pagoda_bin):
    flags = serve_flags(pagoda_bin)
    for where, _, c in containers():
        assert c.get("command") is None, f"{where}: keep the image's entrypoint (pagoda serve)"
        assert arg_problems(c["args"], flags) == [], where


def container_port(container, port):
    """A probe's or Service's port (a name or a number) as the container's port number."""
    numbers = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if isinstance(port, int):
        assert port in numbers.values(), (port, numbers)
        return port
    assert port in numbers, f"no container port named {port}: {numbers}"
    return numbers[port]


def listen_port(pagoda_bin, container):
    return int(flag_value(container["args"], "--port", help_default(pagoda_bin, "--port")))


def test_probes_reach_health_on_the_port_pagoda_listens_on(pagoda_bin):
    probed = 0
    for where, _, c in containers():
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if kind not in c:
                continue
            get = c[kind]["httpGet"]
            assert get["path"] == "/health", (where, kind)
            assert container_port(c, get["port"]) == listen_port(pagoda_bin, c), (where, kind)
            probed += 1
        # Only node 0 serves HTTP: the others take --nnodes and a --node-rank other than 0, and have no probes.
        serves_http = flag_value(c["args"], "--node-rank", "0") == "0"
        assert ("readinessProbe" in c) == serves_http, where
        assert ("--host" in c["args"]) == serves_http, where
    assert probed == 6


def test_services_and_the_monitor_lead_to_pagodas_port(pagoda_bin):
    pods = {"pagoda": the("Deployment")["spec"]["template"], "pagoda-qwen3-32b": None}
    lws = the("LeaderWorkerSet")
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    pods["pagoda-qwen3-32b"] = {"metadata": {"labels": {**leader["metadata"]["labels"],
                                                        "leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"]}},
                                "spec": leader["spec"]}
    monitor = the("ServiceMonitor")["spec"]
    alerts = (ROOT / "deploy" / "prometheus" / "pagoda-alerts.yml").read_text()
    jobs = set(re.findall(r'job="([^"]+)"', alerts))
    assert jobs == {"pagoda"}, jobs
    for name, template in pods.items():
        service = the("Service", name)
        labels = template["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items()), name
        c = template["spec"]["containers"][0]
        for port in service["spec"]["ports"]:
            assert container_port(c, port["targetPort"]) == listen_port(pagoda_bin, c), name
        # The monitor selects this Service, scrapes a port it names, and the job label is the alerts' job.
        assert all(service["metadata"]["labels"].get(k) == v for k, v in monitor["selector"]["matchLabels"].items())
        for endpoint in monitor["endpoints"]:
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}, name
            assert endpoint["path"] == "/metrics"
        assert service["metadata"]["labels"][monitor["jobLabel"]] in jobs, name


def test_pagoda_runs_with_the_deployments_args_and_secret(pagoda_bin, demo_dir, tmp_path):  # noqa: F811
    c = the("Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["PAGODA_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "pagoda-api-key", "key": "api-key"}
    probe_path = c["readinessProbe"]["httpGet"]["path"]
    metrics_path = the("ServiceMonitor")["spec"]["endpoints"][0]["path"]
    server = OpsServer(runnable_here(c["args"], serve_flags(pagoda_bin), demo_dir), tmp_path,
                       env={"PAGODA_API_KEY": API_KEY})

    def status(path, key=None):
        req = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {key}"} if key else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    try:
        # As the startup probe does: 503 while the model loads, then 200. The kubelet's probes send no key.
        deadline = time.time() + 120
        while (code := status(probe_path)[0]) == 503 and time.time() < deadline:
            time.sleep(0.1)
        assert code == 200
        code, text = status(metrics_path)
        assert code == 200 and "pagoda:num_requests_running" in text
        assert status("/v1/models")[0] == 401
        code, body = status("/v1/models", API_KEY)
        assert code == 200 and '"qwen3-8b"' in body  # the Deployment's --served-model-name
    finally:
        assert server.stop() == 0


def window(probe):
    return probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)


def test_probe_timings_fit_a_model_load_and_a_drain(pagoda_bin):
    unit = (ROOT / "deploy" / "systemd" / "pagoda.service").read_text()
    load = int(re.search(r"^TimeoutStartSec=(\d+)$", unit, re.M).group(1))
    for where, spec, c in containers():
        if "startupProbe" not in c:
            continue
        drain = int(flag_value(c["args"], "--shutdown-timeout", help_default(pagoda_bin, "--shutdown-timeout")))
        assert window(c["startupProbe"]) >= load, f"{where}: a model load may take {load} s, as under systemd"
        # A drain ends with SIGKILL only after the grace period, and liveness must not restart a draining pod.
        assert spec["terminationGracePeriodSeconds"] > drain, where
        assert window(c["livenessProbe"]) > drain, where
        assert window(c["readinessProbe"]) <= 15, f"{where}: a draining pod should leave the endpoints quickly"


def dockerfile_user():
    users = re.findall(r"^USER (\d+):(\d+)$", (ROOT / "deploy" / "docker" / "Dockerfile").read_text(), re.M)
    assert len(users) == 1
    return tuple(map(int, users[0]))


def test_pods_run_as_the_images_user_with_their_gpus_and_models():
    uid, gid = dockerfile_user()
    claim = the("PersistentVolumeClaim")["metadata"]["name"]
    for where, spec in pod_specs():
        ctx = spec["securityContext"]
        assert ctx["runAsNonRoot"] is True and (ctx["runAsUser"], ctx["runAsGroup"]) == (uid, gid), where
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in spec["containers"]:
            sec = c["securityContext"]
            assert sec["allowPrivilegeEscalation"] is False and sec["capabilities"]["drop"] == ["ALL"], where
            assert int(c["resources"]["limits"]["nvidia.com/gpu"]) >= 1, where
            # A pod that got a GPU it cannot use must fail, not serve on the CPU (--device auto would).
            assert flag_value(c["args"], "--device") == "cuda", where
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            model_dir = next(a for a in c["args"] if a.startswith("/"))
            mount = next(m for path, m in mounts.items() if model_dir.startswith(path + "/"))
            assert mount["readOnly"] is True, where
            assert volumes[mount["name"]]["persistentVolumeClaim"]["claimName"] == claim, where


def test_lws_gpus_add_up_to_the_tensor_parallel_size():
    lws = the("LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        c = lws[role]["spec"]["containers"][0]
        tp = int(flag_value(c["args"], "--tensor-parallel-size"))
        nnodes = int(flag_value(c["args"], "--nnodes"))
        assert nnodes == lws["size"], role
        assert int(c["resources"]["limits"]["nvidia.com/gpu"]) * nnodes == tp, role


def test_the_multinode_doc_shows_the_file():
    doc = (ROOT / "docs" / "deployment-multinode.md").read_text()
    section = doc.split("## Kubernetes LeaderWorkerSet", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert block == (KUBE / "leaderworkerset.yaml").read_text(), \
        "docs/deployment-multinode.md's LeaderWorkerSet differs from deploy/kubernetes/leaderworkerset.yaml"
