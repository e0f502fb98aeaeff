"""Create the objects of a YAML file with the official `kubernetes` client (for machines without kubectl).

Usage: python create_objects.py quickstart-trainjob.yaml   (the cluster is $KUBECONFIG's current context)
"""

from __future__ import annotations

import sys

import kubernetes
import yaml


def plural(kind: str) -> str:
    return kind.lower() + "s"


def main(path: str) -> None:
    client = kubernetes.config.new_client_from_config()
    custom = kubernetes.client.CustomObjectsApi(client)
    with open(path, encoding="utf-8") as stream:
        for document in yaml.safe_load_all(stream):
            group, version = document["apiVersion"].split("/")
            metadata = document["metadata"]
            if "namespace" in metadata:
                custom.create_namespaced_custom_object(
                    group, version, metadata["namespace"], plural(document["kind"]), document
                )
            else:
                custom.create_cluster_custom_object(group, version, plural(document["kind"]), document)
            print(f"created {document['kind']} {metadata['name']}")
    client.close()


if __name__ == "__main__":
    main(sys.argv[1])
