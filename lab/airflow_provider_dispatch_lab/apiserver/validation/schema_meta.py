"""Name rules and generic ObjectMeta validation, shared by the built-in kinds and the custom resources.

Names and label syntax follow `k8s.io/apimachinery/pkg/util/validation/validation.go` (`IsDNS1123Subdomain`,
`IsDNS1123Label`, `IsDNS1035Label`, `IsQualifiedName`, `IsValidLabelValue`, `RegexError`, `MaxLenError`); the
object checks follow `k8s.io/apimachinery/pkg/api/validation/objectmeta.go` (`ValidateObjectMetaAccessor`,
`ValidateObjectMetaAccessorUpdate`, `ValidateAnnotations`, `ValidateOwnerReferences`, `ValidateFinalizers`)
and `pkg/apis/meta/v1/validation/validation.go` (`ValidateLabels`). Both the custom-resource validator
(`customresource/validator.go`, with `NameIsDNSSubdomain`) and the built-in kinds' validators call these
first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.patching import ATOMIC, ListSemantics
from airflow_provider_dispatch_lab.apiserver.validation import schema_fields as f
from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import FieldCause

NameCheck = Callable[[str], list[str]]

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = re.compile("^" + _DNS1123_LABEL_FMT + "$")
_DNS1123_SUBDOMAIN = re.compile("^" + _DNS1123_SUBDOMAIN_FMT + "$")
_DNS1035_LABEL = re.compile("^" + _DNS1035_LABEL_FMT + "$")
_QUALIFIED_NAME = re.compile("^" + _QUALIFIED_NAME_FMT + "$")
_LABEL_VALUE = re.compile("^" + _LABEL_VALUE_FMT + "$")

_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """`validation.RegexError`, including its doubled space between examples."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _DNS1123_LABEL.match(value):
        if _DNS1123_SUBDOMAIN.match(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character",
                    _DNS1123_LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN.match(value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                "'-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _DNS1035_LABEL.match(value):
        errors.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errors


def qualified_name(value: str) -> list[str]:
    """`IsQualifiedName`: label keys, annotation keys, finalizers."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + msg for msg in dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part " + max_len_error(63))
    if not _QUALIFIED_NAME.match(name):
        errors.append(
            "name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(max_len_error(63))
    if not _LABEL_VALUE.match(value):
        errors.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def _mask_trailing_dash(name: str) -> str:
    """`generateName` may end in '-': `maskTrailingDash` in `apimachinery/pkg/api/validation/generic.go`."""
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def validate_labels(labels: Any, path: str) -> list[FieldCause]:
    causes: list[FieldCause] = []
    if not isinstance(labels, dict):
        return causes
    for k, v in labels.items():
        causes.extend(f.invalid(path, k, msg) for msg in qualified_name(str(k)))
        if isinstance(v, str):
            causes.extend(f.invalid(path, v, msg) for msg in label_value(v))
    return causes


def validate_object_meta(
    meta: Any, namespaced: bool, name_check: NameCheck, path: str = "metadata"
) -> list[FieldCause]:
    """`ValidateObjectMetaAccessor`: name, namespace, generation, labels, annotations, owners, finalizers."""
    if not isinstance(meta, dict):
        return [f.required(path, "")]
    causes: list[FieldCause] = []
    generate_name = meta.get("generateName")
    if isinstance(generate_name, str) and generate_name:
        causes.extend(
            f.invalid(f.child(path, "generateName"), generate_name, msg)
            for msg in name_check(_mask_trailing_dash(generate_name))
        )
    name = meta.get("name")
    if not name:
        causes.append(f.required(f.child(path, "name"), "name or generateName is required"))
    elif isinstance(name, str):
        causes.extend(f.invalid(f.child(path, "name"), name, msg) for msg in name_check(name))
    namespace = meta.get("namespace")
    if namespaced:
        if not namespace:
            causes.append(f.required(f.child(path, "namespace"), ""))
        elif isinstance(namespace, str):
            causes.extend(f.invalid(f.child(path, "namespace"), namespace, msg) for msg in dns1123_label(namespace))
    elif namespace:
        causes.append(f.forbidden(f.child(path, "namespace"), "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(f.invalid(f.child(path, "generation"), generation, "must be greater than or equal to 0"))
    causes.extend(validate_labels(meta.get("labels"), f.child(path, "labels")))
    causes.extend(_validate_annotations(meta.get("annotations"), f.child(path, "annotations")))
    causes.extend(_validate_owner_references(meta.get("ownerReferences"), f.child(path, "ownerReferences")))
    causes.extend(_validate_finalizers(meta.get("finalizers"), f.child(path, "finalizers")))
    return causes


def _validate_annotations(annotations: Any, path: str) -> list[FieldCause]:
    if not isinstance(annotations, dict):
        return []
    causes: list[FieldCause] = []
    size = 0
    for k, v in annotations.items():
        causes.extend(f.invalid(path, k, msg) for msg in qualified_name(str(k).lower()))
        size += len(str(k)) + len(str(v))
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(f.too_long_bytes(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def _validate_owner_references(references: Any, path: str) -> list[FieldCause]:
    """`ValidateOwnerReferences`: the four identifying fields, and at most one controller."""
    if not isinstance(references, list):
        return []
    causes: list[FieldCause] = []
    controllers: list[str] = []
    for reference in references:
        if not isinstance(reference, dict):
            continue
        for field_name, what in (
            ("apiVersion", "version"),
            ("kind", "kind"),
            ("name", "name"),
            ("uid", "uid"),
        ):
            if not reference.get(field_name):
                causes.append(f.invalid(path, reference.get(field_name, ""), f"{what} must not be empty"))
        if reference.get("controller") is True:
            controllers.append(f"{reference.get('kind')}/{reference.get('name')}")
    if len(controllers) > 1:
        causes.append(
            f.invalid(
                path,
                references,
                'Only one reference can have Controller set to true. Found "true" in references for '
                + " and ".join(controllers),
            )
        )
    return causes


def _validate_finalizers(finalizers: Any, path: str) -> list[FieldCause]:
    if not isinstance(finalizers, list):
        return []
    causes: list[FieldCause] = []
    for finalizer in finalizers:
        if isinstance(finalizer, str):
            causes.extend(f.invalid(path, finalizer, msg) for msg in qualified_name(finalizer))
    return causes


_IMMUTABLE_META = ("name", "namespace", "uid", "creationTimestamp")


def validate_object_meta_update(meta: Any, old_meta: Any, path: str = "metadata") -> list[FieldCause]:
    """`ValidateObjectMetaAccessorUpdate`: the identity of an object cannot change."""
    if not isinstance(meta, dict) or not isinstance(old_meta, dict):
        return []
    causes: list[FieldCause] = []
    for name in _IMMUTABLE_META:
        if name in old_meta and meta.get(name) != old_meta.get(name):
            causes.append(f.invalid(f.child(path, name), meta.get(name, ""), "field is immutable"))
    return causes


OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
        "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
"""The JSON fields of `metav1.ObjectMeta` (`apimachinery/pkg/apis/meta/v1/types.go`). A custom resource's
metadata is coerced to them (`apiextensions-apiserver/pkg/apiserver/schema/objectmeta/coerce.go`); anything
else is dropped."""

OBJECT_META_LISTS = {
    "ownerReferences": ListSemantics("map", ("uid",)),
    "finalizers": ListSemantics("set"),
    "managedFields": ATOMIC,
}
"""`metav1.ObjectMeta` list markers: `ownerReferences` `+listType=map +listMapKey=uid` (patchMergeKey uid),
`finalizers` `+listType=set` (patchStrategy merge), `managedFields` `+listType=atomic`
(`kubernetes/kubernetes:api/openapi-spec/v3/api__v1_openapi.json`,
`io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`). The two strategies agree for every ObjectMeta list."""


_META_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "creationTimestamp",
         "deletionTimestamp"),
        (str,),
    ),
    **dict.fromkeys(("generation", "deletionGracePeriodSeconds"), (int,)),
    **dict.fromkeys(("labels", "annotations"), (dict,)),
    **dict.fromkeys(("ownerReferences", "finalizers", "managedFields"), (list,)),
}  # fmt: skip


def validate_meta_types(meta: Any, path: str = "metadata") -> list[FieldCause]:
    """A custom resource's metadata must decode as `metav1.ObjectMeta` (`objectmeta.GetObjectMeta`, which
    `objectmeta.Coerce` uses); a field of the wrong type fails the request."""
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return [f.type_invalid(path, _kind(meta), "must be of type object")]
    causes: list[FieldCause] = []
    for name, value in meta.items():
        expected = _META_TYPES.get(name)
        if expected is None or value is None:
            continue
        if not isinstance(value, expected) or isinstance(value, bool):
            causes.append(f.type_invalid(f.child(path, name), _kind(value), f"must be of type {_json_name(expected)}"))
        elif name in ("labels", "annotations") and isinstance(value, dict):
            causes.extend(
                f.type_invalid(f.key(f.child(path, name), str(k)), _kind(v), "must be of type string")
                for k, v in value.items()
                if not isinstance(v, str)
            )
        elif name == "finalizers" and isinstance(value, list):
            causes.extend(
                f.type_invalid(f.index(f.child(path, name), i), _kind(v), "must be of type string")
                for i, v in enumerate(value)
                if not isinstance(v, str)
            )
        elif name == "ownerReferences" and isinstance(value, list):
            causes.extend(
                f.type_invalid(f.index(f.child(path, name), i), _kind(v), "must be of type object")
                for i, v in enumerate(value)
                if not isinstance(v, dict)
            )
    return causes


def _json_name(types: tuple[type, ...]) -> str:
    return {str: "string", int: "integer", dict: "object", list: "array"}[types[0]]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
