#!/usr/bin/env python3
"""Validates Larmor's Kubernetes manifests offline (no cluster, no network).

Every document of every docker/k8s/*.yaml is checked against the Kubernetes API models of Debian's
python3-kubernetes: each field must exist in its model (a misspelt or misplaced key is an error, as a
strict kubectl apply would make it), values must have the model's types, and required fields must be
there (the models refuse them missing). Then what the API does not check but a deployment needs:
selectors that match the pod labels, probe and Service ports that name a container port, the chain
ConfigMap equal to config/ (scripts/k8s-chains.sh), --memory-limit under the container's memory limit,
and SIGTERM's grace under terminationGracePeriodSeconds.

    /usr/bin/python3 scripts/validate-k8s.py [DIR]      exit 0: valid; 1: errors; 77: no python3-kubernetes
"""
import datetime
import pathlib
import re
import subprocess
import sys

try:
    import yaml
    from kubernetes import client
except ImportError as e:  # CTest's SKIP_RETURN_CODE
    print(f"validate-k8s: skipped, {e} (Debian: apt-get install python3-kubernetes)")
    sys.exit(77)

KINDS = {
    ("apps/v1", "Deployment"): "V1Deployment",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
}
PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
errors = []


def model_class(name):
    return getattr(client.models, name, None)


def check(value, type_name, path):
    """Checks value against the OpenAPI type name of the client (e.g. 'list[V1Container]')."""
    if value is None:
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, v in enumerate(value):
            check(v, m.group(1), f"{path}[{i}]")
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            check(v, m.group(1), f"{path}.{k}")
        return
    if type_name in PRIMITIVES:
        if type_name == "str" and isinstance(value, (int, float)) and not isinstance(value, bool):
            errors.append(f"{path}: expected a string, got the number {value} (quote it)")
        elif not isinstance(value, PRIMITIVES[type_name]) or (type_name == "int" and isinstance(value, bool)):
            errors.append(f"{path}: expected {type_name}, got {type(value).__name__} {value!r}")
        return
    if type_name == "datetime":
        if not isinstance(value, (str, datetime.datetime)):
            errors.append(f"{path}: expected a time")
        return
    cls = model_class(type_name)
    if cls is None:
        errors.append(f"{path}: unknown model {type_name}")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a {type_name} object, got {type(value).__name__}")
        return
    fields = {json: py for py, json in cls.attribute_map.items()}
    for key, v in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: no such field in {type_name}")
            continue
        check(v, cls.openapi_types[fields[key]], f"{path}.{key}")


def construct(doc, type_name, path):
    """Builds the model objects, so the client's required-field checks run."""
    api = client.ApiClient()
    try:
        api._ApiClient__deserialize(doc, type_name)  # the client's own deserialiser
    except (ValueError, TypeError) as e:
        errors.append(f"{path}: {e}")


def memory_bytes(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B?|)", str(text))
    if not m:
        return None
    unit = m.group(2).rstrip("B")
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    return float(m.group(1)) * scale[unit]


def arg(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def semantics(docs, root):
    deployments = [d for _, d in docs if d.get("kind") == "Deployment"]
    for path, d in docs:
        try:
            semantics_of(path, d, deployments, root)
        except (KeyError, TypeError, AttributeError) as e:
            errors.append(f"{path}: cannot check its references, {type(e).__name__} {e}")


def semantics_of(path, d, deployments, root):
    kind = d.get("kind")
    if kind == "Deployment":
        spec = d["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        for k, v in spec["selector"].get("matchLabels", {}).items():
            if labels.get(k) != v:
                errors.append(f"{path}: selector {k}={v} does not match the pod labels {labels}")
        pod = spec["template"]["spec"]
        grace_period = pod.get("terminationGracePeriodSeconds", 30)
        for c in pod["containers"]:
            names = {p.get("name") for p in c.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                port = c.get(probe, {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in names:
                    errors.append(f"{path}: {c['name']}.{probe} names port {port!r}, not one of {sorted(names)}")
            args = c.get("args", [])
            limit = memory_bytes(c.get("resources", {}).get("limits", {}).get("memory", ""))
            budget = arg(args, "--memory-limit")
            if budget and limit and not budget.endswith("%"):
                b = memory_bytes(budget)
                if b is None or b >= limit:
                    errors.append(f"{path}: --memory-limit {budget} is not below the container limit")
            grace = arg(args, "--shutdown-grace")
            if grace is not None and int(grace) + 10 > grace_period:
                errors.append(f"{path}: --shutdown-grace {grace} leaves under 10 s before SIGKILL "
                              f"(terminationGracePeriodSeconds {grace_period})")
            mounts = {m["name"] for m in c.get("volumeMounts", [])}
            volumes = {v["name"] for v in pod.get("volumes", [])}
            for m in mounts - volumes:
                errors.append(f"{path}: volumeMount {m!r} has no volume")
    elif kind in ("Service", "PodDisruptionBudget"):
        selector = d["spec"].get("selector", {})
        selector = selector.get("matchLabels", selector) if kind == "PodDisruptionBudget" else selector
        targets = [x for x in deployments
                   if all(x["spec"]["template"]["metadata"].get("labels", {}).get(k) == v
                          for k, v in selector.items())]
        if not targets:
            errors.append(f"{path}: selector {selector} selects no Deployment's pods")
        if kind == "Service":
            ports = {p.get("name") for t in targets for c in t["spec"]["template"]["spec"]["containers"]
                     for p in c.get("ports", [])}
            for p in d["spec"].get("ports", []):
                t = p.get("targetPort")
                if isinstance(t, str) and t not in ports:
                    errors.append(f"{path}: targetPort {t!r} names no container port")
    elif kind == "ConfigMap" and d["metadata"]["name"] == "larmor-chains":
        expected = subprocess.run(["bash", str(root / "scripts/k8s-chains.sh"), "-"], capture_output=True,
                                  text=True, check=True).stdout
        if yaml.safe_load(expected) != d:
            errors.append(f"{path}: differs from config/ (run scripts/k8s-chains.sh)")


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    folder = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "docker/k8s"
    docs = []
    for f in sorted(folder.glob("*.yaml")):
        for i, d in enumerate(yaml.safe_load_all(f.read_text())):
            if d is None:
                continue
            path = f"{f.name}#{i} {d.get('kind', '?')}/{d.get('metadata', {}).get('name', '?')}"
            model = KINDS.get((d.get("apiVersion"), d.get("kind")))
            if model is None:
                errors.append(f"{path}: apiVersion {d.get('apiVersion')} kind {d.get('kind')} is not one Larmor "
                              "ships (add it to KINDS)")
                continue
            check(d, model, path)
            construct(d, model, path)
            docs.append((path, d))
    if not docs and not errors:
        errors.append(f"no manifests in {folder}")
    semantics(docs, root)
    for e in errors:
        print("validate-k8s:", e)
    if errors:
        return 1
    print(f"validate-k8s: {len(docs)} documents valid in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
