"""Label and field selectors parse, fail and match as the apiserver's (apimachinery labels/fields packages).

Expected messages are the apiserver's own wording, assembled from apimachinery's message constants.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch_lab.apiserver.storage.selectors import (
    SUPPORTED_FIELDS,
    FieldSelector,
    LabelSelector,
    SelectorError,
    field_values,
    parse_field_selector,
    supported_fields,
)

KEY_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
REQ = "unable to parse requirement: "
LONG_NAME = "n" * 64
LONG_PREFIX = ".".join(["p" * 63] * 4)  # 255 characters, every label valid


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", None, True),
        ("", {"a": "b"}, True),
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a!=b", {}, True),  # a missing label satisfies !=
        ("a!=b", {"a": "b"}, False),
        ("a!=b", {"a": "c"}, True),
        ("a", {"a": ""}, True),
        ("a", {"b": "x"}, False),
        ("!a", {"b": "x"}, True),
        ("!a", {"a": "x"}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {}, False),  # set-based: a missing label fails in
        ("a notin (x,y)", {}, True),  # ... and satisfies notin
        ("a notin (x,y)", {"a": "x"}, False),
        ("a in ()", {"a": ""}, True),  # "()" is the set holding the empty string
        ("a in ()", {"a": "x"}, False),
        ("a notin ()", {"a": ""}, False),
        ("a notin ()", {"a": "x"}, True),
        ("x in (foo,,baz)", {"x": ""}, True),
        ("x=a,b", {"x": "a", "b": "anything"}, True),  # the comma ends the value: x=a AND b exists
        ("x=a,b", {"x": "a,b"}, False),
        ("a=", {"a": ""}, True),
        ("a=,b", {"a": "", "b": "1"}, True),
        ("  a  =  b  ,\tc\n", {"a": "b", "c": "1"}, True),
        ("a in(x)", {"a": "x"}, True),
        ("in in (in)", {"in": "in"}, True),  # in and notin are plain identifiers where a key or value goes
        ("notin notin (notin)", {"notin": "x"}, True),
        ("x>1", {"x": "2"}, True),
        ("x>1", {"x": "1"}, False),
        ("x<1", {"x": "-5"}, True),
        ("x>1", {"x": "two"}, False),
        ("x>1", {}, False),
        (
            "example.com/app=web,app.kubernetes.io/name",
            {"example.com/app": "web", "app.kubernetes.io/name": ""},
            True,
        ),
        ("a=b,a!=b", {"a": "b"}, False),
        ("a=b,\x00c", {"a": "b", "c": ""}, True),  # Go's comma scan swallows the NUL: this is "a=b,c"
    ],
)
def test_label_selector_matches(selector: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("a b", REQ + "found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=b", "found '=', expected: !, identifier, or 'end of string'"),
        ("!", REQ + "found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=(b)", REQ + "found '(', expected: identifier"),
        ("x in a", REQ + "found 'a' expected: '('"),
        ("x in (a b)", REQ + "found 'b', expected: ',' or ')'"),
        ("x in (a,", REQ + "found '', expected: ',', or identifier"),
        ("x in (", REQ + "found '', expected: ',', ')' or identifier"),
        ("x in (=)", REQ + "found '=', expected: ',', ')' or identifier"),
        (
            "x>a",
            REQ + "values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("-a=b", REQ + f'<nil>: Invalid value: "-a": name part {KEY_NAME_RULE}'),
        ("a.=b", REQ + f'<nil>: Invalid value: "a.": name part {KEY_NAME_RULE}'),
        ("/a=b", REQ + '<nil>: Invalid value: "/a": prefix part must be non-empty'),
        (
            "a/=b",
            REQ + f'<nil>: Invalid value: "a/": name part must be non-empty; name part {KEY_NAME_RULE}',
        ),
        (
            "Example.com/a=b",
            REQ + f'<nil>: Invalid value: "Example.com/a": prefix part {SUBDOMAIN_RULE}',
        ),
        (
            "a/b/c",
            REQ + f'<nil>: Invalid value: "a/b/c": a valid label key {KEY_NAME_RULE} '
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        (
            f"{LONG_NAME}=x",
            REQ + f'<nil>: Invalid value: "{LONG_NAME}": name part must be no more than 63 characters',
        ),
        (
            f"{LONG_PREFIX}/a",
            REQ + f'<nil>: Invalid value: "{LONG_PREFIX}/a": prefix part must be no more than 253 characters',
        ),
        ("a=b@c", REQ + f'values[0][a]: Invalid value: "b@c": {VALUE_RULE}'),
        (
            f"a={'v' * 64}",
            REQ + f'values[0][a]: Invalid value: "{"v" * 64}": must be no more than 63 characters',
        ),
        (
            "a in (-x,y-)",
            REQ + f'[values[0][a]: Invalid value: "-x": {VALUE_RULE}, values[1][a]: Invalid value: "y-": {VALUE_RULE}]',
        ),
        ("a=b\x00c", "found 'c', expected: ',' or 'end of string'"),  # a NUL ends the identifier only
        (
            "a=b, \x00c",
            "found '', expected: identifier after ','",
        ),  # ... but ends the input where a token starts
    ],
)
def test_label_selector_errors(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as raised:
        LabelSelector.parse(selector)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("selector", "normalised"),
    [
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),  # Parse's own doc example
        ("b=1, a", "a,b=1"),  # requirements sorted by key
        ("f>3,d!=e,!c,a==b", "a==b,!c,d!=e,f>3"),
        ("", ""),
    ],
)
def test_label_selector_string_form(selector: str, normalised: str) -> None:
    parsed = LabelSelector.parse(selector)
    assert str(parsed) == normalised
    assert LabelSelector.parse(str(parsed)) == parsed
    assert parsed.empty is (selector == "")


POD: dict[str, Any] = {
    "metadata": {"name": "a,b=c\\d", "namespace": "ns"},
    "spec": {"nodeName": "n1", "restartPolicy": "Never", "serviceAccountName": "sa"},
    "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        (",,", True),
        ("metadata.namespace=ns", True),
        ("metadata.namespace==ns", True),
        ("metadata.namespace!=ns", False),
        ("metadata.name=a\\,b\\=c\\\\d", True),  # escaped comma, equals sign and backslash
        ("metadata.name=a", False),
        ("spec.nodeName=n1,status.phase=Running", True),
        ("spec.nodeName=n1,status.phase!=Running", False),
        ("spec.host=n1", True),  # legacy label converted to spec.nodeName
        ("spec.schedulerName=", True),  # a missing string is ""
        ("spec.hostNetwork=false", True),  # a missing bool is "false"
        ("status.podIP=10.0.0.1", True),  # the first of podIPs, as the internal type keeps it
        ("status.podIPs=10.0.0.1", False),  # accepted but never selectable: always ""
        ("status.nominatedNodeName!=x", True),
    ],
)
def test_pod_field_selector_matches(selector: str, expected: bool) -> None:
    assert parse_field_selector("Pod", selector).matches(field_values("Pod", POD)) is expected


@pytest.mark.parametrize(
    ("kind", "selector", "options", "message"),
    [
        ("Pod", "spec.unknown=x", {}, "field label not supported: spec.unknown"),
        ("Pod", "metadata.name=a,b", {}, "invalid selector: 'metadata.name=a,b'; can't understand 'b'"),
        ("Pod", "nonsense", {}, "invalid selector: 'nonsense'; can't understand 'nonsense'"),
        # every term is parsed before any field is checked, so the later syntax error wins
        ("Pod", "aaa=1,zzz", {}, "invalid selector: 'aaa=1,zzz'; can't understand 'zzz'"),
        ("Pod", "metadata.name=a=b", {}, "invalid field selector: unescaped character in value: 61"),
        ("Pod", "metadata.name=a\\,b,x=a\\x", {}, "invalid field selector: invalid escape sequence: \\x"),
        ("Pod", "metadata.name=a\\", {}, "invalid field selector: invalid escape sequence: \\"),
        (
            "Node",
            "metadata.namespace=x",
            {"namespaced": False},
            "field label not supported: metadata.namespace",
        ),
        (
            "Namespace",
            "metadata.namespace=x",
            {"namespaced": False},
            "field label not supported: metadata.namespace",
        ),
        ("Job", "status.succeeded=1", {}, 'field label "status.succeeded" not supported for batchv1.Job'),
        (
            "ConfigMap",
            "data.x=1",
            {},
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "TrainJob",
            "spec.suspend=true",
            {"custom_resource": True},
            "field label not supported: spec.suspend",
        ),
        (
            "ClusterQueue",
            "metadata.namespace=x",
            {"custom_resource": True, "namespaced": False},
            "field label not supported: metadata.namespace",
        ),
    ],
)
def test_field_selector_errors(kind: str, selector: str, options: dict[str, bool], message: str) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_field_selector(kind, selector, **options)
    assert str(raised.value) == message


def test_field_selector_parse_uses_the_given_fields_and_core_wording() -> None:
    selector = FieldSelector.parse("spec.x==1,metadata.name!=a\\,b", {"spec.x", "metadata.name"})
    assert selector.matches({"spec.x": "1", "metadata.name": "c"})
    assert not selector.matches({"spec.x": "1", "metadata.name": "a,b"})
    assert str(selector) == "metadata.name!=a\\,b,spec.x=1"
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.y$"):
        FieldSelector.parse("spec.y=1", {"spec.x"})


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        (
            "Pod",
            {"metadata": {"name": "p"}, "spec": {"hostNetwork": True}, "status": {"podIP": "10.1.1.1"}},
            {
                "metadata.name": "p",
                "metadata.namespace": "",
                "spec.nodeName": "",
                "spec.restartPolicy": "",
                "spec.schedulerName": "",
                "spec.serviceAccountName": "",
                "spec.hostNetwork": "true",
                "status.phase": "",
                "status.podIP": "10.1.1.1",  # no podIPs: conversion fills it from podIP
                "status.nominatedNodeName": "",
            },
        ),
        (
            "Node",
            {"metadata": {"name": "n"}, "spec": {"unschedulable": True}},
            {"spec.unschedulable": "true"},
        ),
        ("Node", {"metadata": {"name": "n"}}, {"spec.unschedulable": "false"}),
        ("Job", {"metadata": {"name": "j"}, "status": {"succeeded": 3}}, {"status.successful": "3"}),
        ("Job", {"metadata": {"name": "j"}}, {"status.successful": "0"}),
        (
            "Namespace",
            {"metadata": {"name": "x"}, "status": {"phase": "Terminating"}},
            {"status.phase": "Terminating"},
        ),
        (
            "Event",
            {
                "metadata": {"name": "e", "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "name": "p", "uid": "u1"},
                "reason": "Killing",
                "reportingComponent": "kubelet",
                "type": "Normal",
            },
            {
                "involvedObject.kind": "Pod",
                "involvedObject.name": "p",
                "involvedObject.uid": "u1",
                "involvedObject.namespace": "",
                "reason": "Killing",
                "reportingComponent": "kubelet",
                "source": "kubelet",  # source.component is empty, so the reporting controller stands in
                "type": "Normal",
            },
        ),
        (
            "Event",
            {"metadata": {"name": "e"}, "source": {"component": "scheduler"}, "reportingComponent": "x"},
            {"source": "scheduler"},
        ),
        (
            "TrainJob",
            {"metadata": {"name": "t", "namespace": "ns"}},
            {"metadata.name": "t", "metadata.namespace": "ns"},
        ),
    ],
)
def test_field_values(kind: str, obj: dict[str, Any], expected: dict[str, str]) -> None:
    values = field_values(kind, obj)
    assert {key: values[key] for key in expected} == expected
    assert set(values) >= {"metadata.name", "metadata.namespace"}


def test_supported_field_tables() -> None:
    assert SUPPORTED_FIELDS["Pod"] >= {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
    assert SUPPORTED_FIELDS["Job"] == {"metadata.name", "metadata.namespace", "status.successful"}
    assert all("metadata.name" in fields for fields in SUPPORTED_FIELDS.values())
    # every field a kind supports has a value to match against, except the upstream dead end status.podIPs
    sample = {"metadata": {"name": "x"}}
    for kind, fields in SUPPORTED_FIELDS.items():
        assert fields - {"status.podIPs"} <= set(field_values(kind, sample)), kind
    assert supported_fields("ConfigMap") == {"metadata.name", "metadata.namespace"}
    assert supported_fields("ClusterQueue", namespaced=False, custom_resource=True) == {"metadata.name"}
