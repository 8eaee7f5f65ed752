"""The object parsers (``kbatch.cluster.records``) and ClusterState on malformed objects:
only ObjectError or FieldError may come out, naming the field, in kbatch's own words."""

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from property import junk

from kbatch.cluster import records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.fields import FieldError
from kbatch.cluster.state import ClusterState

PARSERS = records.PARSERS


def _parse_refusing_only_by_field(test: str, parse: Callable[[], object]) -> None:
    junk.counted(test)
    try:
        parse()
    except (ObjectError, FieldError) as exc:
        junk.check_refusal(test, exc.field, str(exc))
    except Exception as exc:
        junk.escaped(test, exc)


@junk.SETTINGS
@given(junk.objects(tuple(PARSERS)))
def test_parsers_refuse_naming_the_field(obj: dict) -> None:
    parse = PARSERS.get(str(obj.get("kind")), records.parse_pod)
    _parse_refusing_only_by_field("parsers", lambda: parse(obj))


@junk.SETTINGS
@given(st.sampled_from(sorted(PARSERS)), junk.JUNK)
def test_parsers_on_junk_that_is_no_object_at_all(kind: str, body: object) -> None:
    obj = {"kind": kind, "metadata": body} if isinstance(body, (list, str)) else body
    if not isinstance(obj, dict):
        obj = {"kind": kind, "spec": obj}
    _parse_refusing_only_by_field("parsers-junk", lambda: PARSERS[kind](obj))


@junk.SETTINGS
@given(junk.objects(tuple(PARSERS)), junk.objects(tuple(PARSERS)))
def test_cluster_state_refuses_alone_and_keeps_working(first: dict, second: dict) -> None:
    state = ClusterState()
    for obj in (first, second):
        _parse_refusing_only_by_field("state", lambda obj=obj: state.apply(obj))
    _parse_refusing_only_by_field("state", state.snapshot)


NEGATIVE = st.sampled_from(["-5", "-1Gi", "-500m", -3, "-0.1"])


@junk.SETTINGS
@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), NEGATIVE)
def test_negative_capability_and_min_resources_name_the_field(resource: str, value: Any) -> None:
    junk.counted("negative")
    cases = (
        (junk.queue(), "spec.capability", records.parse_queue),
        (junk.pod_group(), "spec.minResources", records.parse_pod_group),
    )
    for obj, field, parse in cases:
        obj["spec"][field.split(".")[1]] = {resource: value}
        try:
            parse(obj)
        except ObjectError as exc:
            assert exc.field == f"{field}.{resource}"
            assert exc.why == f"must not be negative, not {value}"
        else:
            raise AssertionError(f"{field}.{resource}: {value!r} accepted")
