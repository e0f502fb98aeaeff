"""The controllers' CRDs and webhook configurations, taken from the built modules and pointed at loopback.

`controlplane/build` copies each controller's YAML out of the module version it built (JobSet
`config/components`, Trainer `manifests/base`, Kueue `config/components`). Upstream installs them with kustomize,
which adds a Service and cert-manager or the controller's own certificate rotation; out of a cluster the API server
reaches the webhooks by URL instead (as controller-runtime's envtest does, `pkg/envtest/webhook.go`). So this
module does what their kustomizations do, then points every webhook and every CRD conversion webhook at
`https://127.0.0.1:<port><path>` with the control plane's CA as `caBundle`:

- CRDs: the `resources` of `crd/kustomization.yaml` (Trainer: `crds/`); a CRD whose kustomization patches in a
  conversion webhook (Kueue's clusterqueues, cohorts, localqueues, multikueueclusters and workloads; JobSet's
  jobsets) gets `strategy: Webhook` with the URL of `/convert`;
- webhooks: `webhook/manifests.yaml` with the kustomization's patches: JobSet's pod webhooks get their
  `objectSelector` (`jobset.sigs.k8s.io/jobset-name` Exists), Trainer's names and `objectSelector`s, Kueue's
  `namespaceSelector` that leaves out kube-system and kueue-system. Each configuration is renamed with its
  controller's prefix, as the kustomize `namePrefix` does, so the three do not collide;
- Kueue serves only the integrations it is configured with (`KUEUE_FRAMEWORKS`), so only the webhooks of those
  (and of Kueue's own kinds) are registered: a webhook for a kind nobody serves would refuse every such write.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

Obj = dict[str, Any]

KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
"""The Kueue integrations the real cluster enables: what the project's TrainJobs go through."""
_KUEUE_INTEGRATION_RESOURCES = {
    ("batch", "jobs"),
    ("jobset.x-k8s.io", "jobsets"),
    ("trainer.kubeflow.org", "trainjobs"),
}


@dataclass(frozen=True)
class Component:
    """One controller's manifests in a build: where its kustomizations are, its webhook port, its name prefix."""

    name: str
    crd_dir: Path
    webhook_dir: Path
    port: int
    prefix: str


def _documents(path: Path) -> list[Obj]:
    with path.open(encoding="utf-8") as stream:
        return [d for d in yaml.safe_load_all(stream) if isinstance(d, dict)]


def _client_config(url: str, ca_bundle: bytes) -> Obj:
    return {"url": url, "caBundle": base64.b64encode(ca_bundle).decode()}


def _kustomization(directory: Path) -> Obj:
    path = directory / "kustomization.yaml"
    return _documents(path)[0] if path.is_file() else {}


def crds(component: Component, ca_bundle: bytes) -> list[Obj]:
    """The component's CRDs as its kustomization installs them, conversion webhooks pointed at loopback."""
    kustomization = _kustomization(component.crd_dir)
    resources = kustomization.get("resources") or sorted(
        p.name for p in component.crd_dir.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    found: list[Obj] = []
    for resource in resources:
        found.extend(d for d in _documents(component.crd_dir / resource) if d.get("kind") == "CustomResourceDefinition")
    converted: set[str] = set()
    for patch in kustomization.get("patches") or []:
        path = patch.get("path") if isinstance(patch, dict) else None
        if not path or not (component.crd_dir / path).is_file():
            continue
        for document in _documents(component.crd_dir / path):
            conversion = (document.get("spec") or {}).get("conversion") or {}
            if conversion.get("strategy") == "Webhook":
                converted.add(str(document["metadata"]["name"]))
    for crd in found:
        if crd["metadata"]["name"] in converted:
            crd.setdefault("spec", {})["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": _client_config(f"https://127.0.0.1:{component.port}/convert", ca_bundle),
                    "conversionReviewVersions": ["v1"],
                },
            }
    return found


def _json6902(documents: list[Obj], kustomization: Obj, directory: Path) -> list[Obj]:
    """Apply the kustomization's JSON 6902 patch files to the documents their `target` names."""
    patched = [copy.deepcopy(d) for d in documents]
    for entry in kustomization.get("patches") or []:
        if not isinstance(entry, dict) or "path" not in entry:
            continue
        operations = yaml.safe_load((directory / entry["path"]).read_text())
        if not isinstance(operations, list):
            continue  # a strategic-merge patch file; none of the webhook kustomizations read here has one
        target = entry.get("target") or {}
        for index, document in enumerate(patched):
            if target.get("kind") and document.get("kind") != target["kind"]:
                continue
            if target.get("name") and document["metadata"].get("name") != target["name"]:
                continue
            patched[index] = jsonpatch.apply_patch(document, operations)
    return patched


def _kueue_namespace_selectors(documents: list[Obj], kustomization: Obj) -> None:
    """Kueue's inline patch and `replacements`: the vpod namespaceSelector copied to every job webhook."""
    selector: Obj | None = None
    for entry in kustomization.get("patches") or []:
        inline = entry.get("patch") if isinstance(entry, dict) else None
        if not inline:
            continue
        for webhook in (yaml.safe_load(inline) or {}).get("webhooks") or []:
            if webhook.get("namespaceSelector"):
                selector = webhook["namespaceSelector"]
    if selector is None:
        return
    names: set[str] = set()
    for replacement in kustomization.get("replacements") or []:
        source = (replacement.get("source") or {}).get("fieldPath", "")
        names.update(re.findall(r"webhooks\.\[name=([^\]]+)\]", source))
        for target in replacement.get("targets") or []:
            for field in target.get("fieldPaths") or []:
                names.update(re.findall(r"webhooks\.\[name=([^\]]+)\]", field))
    for document in documents:
        for webhook in document.get("webhooks") or []:
            if webhook.get("name") in names:
                webhook["namespaceSelector"] = copy.deepcopy(selector)


def _kueue_serves(webhook: Obj) -> bool:
    """Whether Kueue, with `KUEUE_FRAMEWORKS` only, serves this webhook's kind."""
    for rule in webhook.get("rules") or []:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                plain = str(resource).split("/")[0]
                if group == "kueue.x-k8s.io" or (group, plain) in _KUEUE_INTEGRATION_RESOURCES:
                    return True
    return False


def webhook_configurations(component: Component, ca_bundle: bytes) -> list[Obj]:
    """The component's Mutating/ValidatingWebhookConfigurations, kustomized and pointed at loopback."""
    kustomization = _kustomization(component.webhook_dir)
    documents = [
        d
        for d in _documents(component.webhook_dir / "manifests.yaml")
        if d.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    documents = _json6902(documents, kustomization, component.webhook_dir)
    if component.name == "kueue":
        _kueue_namespace_selectors(documents, kustomization)
    result = []
    for document in documents:
        webhooks = document.get("webhooks") or []
        if component.name == "kueue":
            webhooks = [w for w in webhooks if _kueue_serves(w)]
        for webhook in webhooks:
            service = (webhook.get("clientConfig") or {}).get("service") or {}
            path = str(service.get("path") or "/")
            webhook["clientConfig"] = _client_config(f"https://127.0.0.1:{component.port}{path}", ca_bundle)
        document["webhooks"] = webhooks
        name = str(document["metadata"]["name"])
        if not name.startswith(component.prefix):
            document["metadata"]["name"] = component.prefix + name
        result.append(document)
    return result


def components(manifests: Path, ports: dict[str, int]) -> list[Component]:
    """JobSet, Trainer and Kueue in a build's `manifests/` folder, with their webhook ports."""
    return [
        Component(
            "jobset",
            manifests / "jobset/config/components/crd",
            manifests / "jobset/config/components/webhook",
            ports["jobset"],
            "jobset-",
        ),
        Component(
            "trainer",
            manifests / "trainer/manifests/base/crds",
            manifests / "trainer/manifests/base/webhook",
            ports["trainer"],
            "",  # its kustomization names them itself (defaulter./validator.trainer.kubeflow.org)
        ),
        Component(
            "kueue",
            manifests / "kueue/config/components/crd",
            manifests / "kueue/config/components/webhook",
            ports["kueue"],
            "kueue-",
        ),
    ]


def crd_names(documents: Iterable[Obj]) -> list[str]:
    return [str(d["metadata"]["name"]) for d in documents]
