"""``kbatch explain``, ``kbatch jobs`` and ``kbatch queues`` answered by ``kbatch run``'s
visibility API (``kbatch.visibility.served``, ``api_server``,
``kbatch.cli.visibility_served``): the same document as computed by the command itself,
from one request; the command computes it itself when the API does not answer or an
estimate is not fresh."""

import dataclasses
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.cli import visibility_served
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import api_server, published, served, standing
from kbatch.visibility.api_server import VisibilityApi
from kbatch.visibility.publisher import EtaPublisher, PublisherSettings
from kbatch.visibility.tls import FrontProxy, ServingTls
from kbatch.webhooks.certificates import self_signed
from scenarios import live
from scenarios import objects as o

NOW = 10.0
DOCUMENTS = [
    o.node("n1", cpu="4"),
    o.queue("research", 2),
    *live.gang("first", 4, duration="45s", deadline=45),
    *live.gang("second", 4, duration="30s", deadline=30, queue="research"),
    *live.gang("third", 2, duration="30s", deadline=30, submit_at="1s"),
]
EVENT = {
    "metadata": {"name": "e1", "namespace": "default"},
    "involvedObject": {"kind": "PodGroup", "name": "third", "namespace": "default"},
    "type": "Normal", "reason": "Enqueued", "message": "admitted", "lastTimestamp": "1970-01-01T00:00:05Z",
}  # fmt: skip


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Served:
    """A cluster as the commands read it, and ``kbatch run``'s visibility API on it."""

    def __init__(self, clock: Clock, documents: list[dict[str, Any]] = DOCUMENTS) -> None:
        self.listed = live.cluster_at(documents, NOW)
        self.state, _ = standing.load_state(self.listed)
        self.view = served.VisibilityView(
            self.state, default_conf, "kbatch run's default", clock=clock
        )
        self.api = VisibilityApi(self.view, lambda ns, group, pods: [EVENT], lambda: True)
        self.asked: list[str] = []
        self.answering = True

    # the Source the commands read
    def objects(self, *, events_in: str | None) -> Any:
        self.asked.append("objects")
        return dataclasses.replace(self.listed, events=[EVENT] if events_in else [])

    def served(self, path: str) -> dict[str, Any] | None:
        self.asked.append("served")
        answer = self.api.get(path, "alice")
        if not self.answering or answer.code != 200:
            return None
        return json.loads(json.dumps(answer.body))

    def held_jobs(self) -> list[dict]:
        self.asked.append("jobs")
        return list(self.listed.jobs)

    def conf(self):
        return default_conf(), "kbatch run's default"

    def publish(self, clock: Clock) -> None:
        """One round of the ETA publisher, its session offered to the view."""

        def write(namespace: str, name: str, patch: dict[str, Any]) -> None:
            group = self.state.get("PodGroup", namespace, name)
            assert group is not None
            self.state.apply({**group, "status": {**group.get("status", {}), **patch["status"]}})

        metrics = SchedulerMetrics(CollectorRegistry())
        settings = PublisherSettings(interval=30.0, budget=30.0)
        EtaPublisher(
            self.state, default_conf, lambda: True, write, metrics, settings,
            clock=clock, offer=self.view.offer, unpublished=self.view.keep_unpublished,
        ).run_once()  # fmt: skip


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Served:
    clock = Clock()
    source = Served(clock)
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)
    monkeypatch.setattr(visibility_served, "clock", clock)
    return source


def kbatch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_explain_from_the_scheduler_is_the_document_computed_here(cluster, capsys) -> None:
    code, answered = kbatch(capsys, "explain", "third", "-o", "json")
    assert code == 0 and cluster.asked == ["served"]
    code, computed = kbatch(capsys, "explain", "third", "-o", "json", "--no-ask-scheduler")
    assert code == 0 and cluster.asked == ["served", "objects"]
    assert json.loads(answered) == json.loads(computed)
    assert json.loads(answered)["events"][0]["reason"] == "Enqueued"


def test_jobs_from_the_scheduler_are_the_listing_computed_here(cluster, capsys) -> None:
    _, answered = kbatch(capsys, "jobs", "-o", "json", "-q", "research")
    _, computed = kbatch(capsys, "jobs", "-o", "json", "-q", "research", "--no-ask-scheduler")
    assert cluster.asked == ["served", "objects"]
    assert json.loads(answered) == json.loads(computed)
    assert [job["name"] for job in json.loads(answered)["jobs"]] == ["second"]


def test_a_table_says_who_answered_and_when(cluster, capsys) -> None:
    cluster.view.current()  # the line as of NOW
    visibility_served.clock.now = NOW + 12  # type: ignore[attr-defined]
    _, out = kbatch(capsys, "explain", "default/third")
    assert "kbatch run's default; answered by kbatch run, as of 12s ago" in out


def test_a_fresh_published_estimate_is_read_from_the_scheduler(cluster, capsys) -> None:
    cluster.publish(Clock(NOW))
    _, out = kbatch(capsys, "explain", "third", "--eta", "-o", "json")
    data = json.loads(out)
    assert cluster.asked == ["served"] and cluster.view.lines_made == 0  # the publisher's line
    assert data["eta"]["confidence"] == "high" and data["eta"]["publishedAt"] == NOW


def test_a_pod_of_its_own_has_the_publishers_estimate_though_nothing_carries_it(
    monkeypatch, capsys
) -> None:
    clock = Clock()
    solo = o.at(o.pod("solo", cpu="2", duration="30s", activeDeadlineSeconds=30), "1s")
    cluster = Served(clock, [*DOCUMENTS, solo])
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: cluster)
    monkeypatch.setattr(visibility_served, "clock", clock)
    cluster.publish(Clock(NOW))
    assert cli.main(["explain", "solo", "--eta", "-o", "json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert cluster.asked == ["served"] and explained["kind"] == "Pod"
    assert explained["eta"]["publishedAt"] == NOW and explained["eta"]["seconds"] is not None
    assert cli.main(["jobs", "--eta", "-o", "json"]) == 0
    listed = {job["name"]: job for job in json.loads(capsys.readouterr().out)["jobs"]}
    assert cluster.asked == ["served", "served"] and listed["solo"]["eta"] == explained["eta"]


def test_a_stale_or_missing_estimate_is_forecast_here(cluster, capsys) -> None:
    _, out = kbatch(capsys, "explain", "third", "--eta", "-o", "json")
    assert cluster.asked == ["served", "objects", "jobs"] and json.loads(out)["eta"]
    cluster.asked.clear()
    cluster.publish(Clock(NOW))
    visibility_served.clock.now = NOW + 301  # type: ignore[attr-defined]
    kbatch(capsys, "explain", "third", "--eta", "--eta-max-age", "300s", "-o", "json")
    assert cluster.asked == ["served", "objects", "jobs"]


def test_jobs_submitted_since_the_last_estimates_are_listed_without_one(
    monkeypatch, capsys
) -> None:
    clock = Clock()
    late = live.gang("late", 1, duration="30s", deadline=30, submit_at="1s", queue="research")
    cluster = Served(clock, [*DOCUMENTS, *late])
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: cluster)
    monkeypatch.setattr(visibility_served, "clock", clock)
    cluster.publish(Clock(NOW))
    group = cluster.state.get("PodGroup", "default", "late")
    assert group is not None
    conditions = [c for c in group["status"]["conditions"] if c["type"] != published.CONDITION]
    cluster.state.apply({**group, "status": {**group["status"], "conditions": conditions}})
    clock.now = NOW + 5  # "late" is 14 s old: after the round, as it were
    assert cli.main(["jobs", "--eta", "-q", "research", "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert cluster.asked == ["served"]
    jobs = {job["name"]: job for job in json.loads(out)["jobs"]}
    assert "eta" not in jobs["late"] and jobs["second"]["eta"]["publishedAt"] == NOW
    assert "1 job(s) submitted in the last 120s have no estimate yet (default/late)" in err
    clock.now = NOW + 115  # "late" 124 s old, still without one: forecast here
    assert cli.main(["jobs", "--eta", "-q", "research", "-o", "json"]) == 0
    assert cluster.asked == ["served", "served", "objects", "jobs"]
    assert (
        "eta" in {job["name"]: job for job in json.loads(capsys.readouterr().out)["jobs"]}["late"]
    )


def test_another_conf_or_no_answer_is_computed_here(cluster, capsys, tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: enqueue, allocate\n")
    kbatch(capsys, "explain", "third", "--scheduler-conf", str(conf))
    assert cluster.asked == ["objects"]
    cluster.answering = False
    kbatch(capsys, "explain", "third")
    assert cluster.asked == ["objects", "served", "objects"]


def test_an_answer_of_another_shape_is_said_and_computed_here(cluster, capsys) -> None:
    cluster.served = lambda path: {"asOf": "yesterday", "jobs": [{"name": 1}]}  # type: ignore[method-assign]
    for command in ("explain", "jobs"):
        code = cli.main([command, *(["third"] if command == "explain" else []), "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0 and json.loads(out), command
        assert "kbatch run's answer cannot be read here" in err, command


# ----------------------------------------------------------------------------- queues
TREE = [
    *DOCUMENTS,
    {**o.queue("team"), "spec": {"weight": 1, "parent": "research"}},
    {**o.queue("squad"), "spec": {"weight": 1, "parent": "team"}},
]


@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_queues_from_the_scheduler_are_what_is_computed_here(cluster, capsys, output) -> None:
    code, answered = kbatch(capsys, "queues", "-o", output)
    assert code == 0 and cluster.asked == ["served"]
    _, computed = kbatch(capsys, "queues", "-o", output, "--no-ask-scheduler")
    assert cluster.asked == ["served", "objects"]
    assert answered == computed
    if output == "json":
        data = json.loads(answered)
        assert (data["asOf"], data["schedulerConf"]) == (
            "1970-01-01T00:00:10.000000Z", "kbatch run's default",
        )  # fmt: skip
        assert [q["name"] for q in data["queues"]] == ["research", "default"]


def test_a_tree_of_queues_from_the_scheduler_reads_as_the_one_computed_here(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    source = Served(Clock(), TREE)
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)
    _, answered = kbatch(capsys, "queues")
    _, computed = kbatch(capsys, "queues", "--no-ask-scheduler")
    assert source.asked == ["served", "objects"] and answered == computed
    assert "    └ squad" in answered  # two deep, as its parents in the answer make it


def test_a_queues_share_reads_the_same_read_back_from_its_data() -> None:
    from kbatch.visibility import output, rows

    row = rows.QueueRow("q", 1, "Open", 0.0049996, {}, {}, {}, None, 0, 0, 0, 0, 1)
    read_back = rows.queue_rows_of([output.queue_data(row)])
    assert output.queue_data(read_back[0]) == output.queue_data(row)
    tables = [[*output.queues_table(r).columns[3].cells] for r in ([row], read_back)]
    assert tables[0] == tables[1] == ["0.01"]  # the data's 0.005, not 0.0049996's 0.00


@pytest.mark.parametrize(
    "flags",
    [("--no-ask-scheduler",), ("--scheduler-name", "kbatch"), ("--scheduler-conf", "CONF")],
)
def test_queues_for_another_conf_or_not_asked_are_computed_here(
    cluster, capsys, tmp_path: Path, flags
) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: enqueue, allocate\n")
    code, _ = kbatch(capsys, "queues", *[str(conf) if f == "CONF" else f for f in flags])
    assert code == 0 and cluster.asked == ["objects"]


def test_queues_the_scheduler_does_not_answer_or_answers_unreadably_are_computed_here(
    cluster, capsys
) -> None:
    cluster.answering = False
    code, out = kbatch(capsys, "queues", "-o", "json")
    assert code == 0 and cluster.asked == ["served", "objects"] and json.loads(out)["queues"]
    for answer in (
        {"asOf": "yesterday", "queues": []},
        {"asOf": "1970-01-01T00:00:10.000000Z", "queues": [{"name": "research"}]},
    ):
        cluster.served = lambda path, answer=answer: answer  # type: ignore[method-assign]
        code = cli.main(["queues", "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0 and len(json.loads(out)["queues"]) == 2, answer
        assert "kbatch run's answer cannot be read here" in err, answer


# ----------------------------------------------------------------------------- the view
def test_a_line_is_kept_while_nothing_changed_or_it_is_young() -> None:
    clock = Clock()
    cluster = Served(clock)
    view = cluster.view

    def change(weight: int) -> None:
        queue = cluster.state.get("Queue", "", "research")
        assert queue is not None
        cluster.state.apply({**queue, "spec": {"weight": weight}})

    view.current()
    clock.now += 1000
    assert view.current() is view.current() and view.lines_made == 1  # nothing changed
    change(3)
    view.current()
    assert view.lines_made == 2  # changed, and too old to answer
    change(4)
    clock.now += served.MAX_AGE + 1
    kept = view.current("default/third")
    assert view.lines_made == 2 and view._wake.is_set()  # stale: answers, made again aside
    assert view.current("default/newcomer") is not kept  # not in it: made now
    assert view.lines_made == 3
    change(5)
    clock.now += served.STALE_LIMIT + 1
    view.current()
    assert view.lines_made == 4


def test_the_line_is_kept_fresh_only_while_it_is_asked_for() -> None:
    clock = Clock()
    cluster = Served(clock)
    view = cluster.view
    assert view.refresh() == view.max_age and view.lines_made == 0  # never asked
    view.current()
    clock.now += view.max_age + 1
    view.refresh()
    assert view.lines_made == 1  # nothing changed
    queue = cluster.state.get("Queue", "", "research")
    assert queue is not None
    cluster.state.apply({**queue, "spec": {"weight": 3}})
    assert view.refresh() == view.max_age and view.lines_made == 2
    assert view.current().made == clock.now  # answered from it
    cluster.state.apply({**queue, "spec": {"weight": 4}})
    clock.now += served.WARM_FOR + 1
    view.refresh()
    assert view.lines_made == 2  # not asked for lately


def test_the_api_answers_only_the_front_proxy_and_only_when_synced() -> None:
    cluster = Served(Clock())
    path = f"{visibility_served.ROOT}/namespaces/default/podgroups/third/explanation"
    assert cluster.api.get(path, None).code == 401
    assert cluster.api.get(path, "alice").body["name"] == "third"
    missing = cluster.api.get(path.replace("third", "nobody"), "alice")
    assert (missing.code, missing.body["message"]) == (404, "no PodGroup or pod default/nobody")
    not_synced = VisibilityApi(cluster.view, lambda ns, group, pods: [], lambda: False)
    assert not_synced.get(path, "alice").code == 503
    discovery = cluster.api.get(visibility_served.ROOT, None).body
    assert [r["name"] for r in discovery["resources"]] == [
        "podgroups/explanation", "waitingjobs", "queuesummaries",
    ]  # fmt: skip


def test_queue_summaries_are_cluster_wide_and_answer_as_the_others() -> None:
    cluster = Served(Clock())
    path = f"{visibility_served.ROOT}/queuesummaries"
    assert cluster.api.get(path, None).code == 401
    assert [q["name"] for q in cluster.api.get(path, "alice").body["queues"]] == [
        "research", "default",
    ]  # fmt: skip
    namespaced = f"{visibility_served.ROOT}/namespaces/default/queuesummaries"
    assert cluster.api.get(namespaced, "alice").code == 404
    not_synced = VisibilityApi(cluster.view, lambda ns, group, pods: [], lambda: False)
    assert not_synced.get(path, "alice").code == 503
    discovery = cluster.api.get(visibility_served.ROOT, None).body["resources"]
    assert next(r for r in discovery if r["name"] == "queuesummaries") == {
        "name": "queuesummaries", "singularName": "", "namespaced": False,
        "kind": "QueueSummaries", "verbs": ["list"],
    }  # fmt: skip


# ----------------------------------------------------------------------------- TLS
def _client_cert(tmp_path: Path, name: str, common_name: str) -> tuple[Path, Path, bytes]:
    """A self-signed client certificate (its own CA) and its key, PEM files."""
    cert, key = self_signed([common_name], client=True)
    (tmp_path / f"{name}.crt").write_bytes(cert)
    (tmp_path / f"{name}.key").write_bytes(key)
    return tmp_path / f"{name}.crt", tmp_path / f"{name}.key", cert


def test_https_takes_the_front_proxys_certificate_only(tmp_path: Path) -> None:
    cluster = Served(Clock())
    proxy_crt, proxy_key, proxy_ca = _client_cert(tmp_path, "proxy", "front-proxy-client")
    other_crt, other_key, _ = _client_cert(tmp_path, "other", "front-proxy-client")
    proxy = FrontProxy(proxy_ca.decode(), frozenset({"front-proxy-client"}))
    tls = ServingTls(None, ["127.0.0.1"], lambda: proxy)
    server = api_server.VisibilityServer("127.0.0.1:0", cluster.api, tls)
    server.start()
    path = f"{visibility_served.ROOT}/namespaces/default/podgroups/third/explanation"
    try:
        assert _get(server.port, path, proxy_crt, proxy_key)[0] == 200
        assert _get(server.port, path, None, None)[0] == 401
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _get(server.port, path, other_crt, other_key)
    finally:
        server.stop()


def _get(port: int, path: str, cert: Path | None, key: Path | None) -> tuple[int, Any]:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(cert, key)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.request("GET", path, headers={"X-Remote-User": "alice"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_certificate_of_the_ca_with_a_name_it_does_not_allow_is_no_caller() -> None:
    proxy = FrontProxy("a CA", frozenset({"front-proxy-client"}))
    peer = {"subject": ((("commonName", "someone-else"),),)}
    assert api_server.caller_of(peer, {"X-Remote-User": "alice"}, proxy) is None
    peer = {"subject": ((("commonName", "front-proxy-client"),),)}
    assert api_server.caller_of(peer, {"X-Remote-User": "alice"}, proxy) == "alice"
    assert api_server.caller_of({}, {"X-Remote-User": "alice"}, proxy) is None


def test_an_explanations_events_are_asked_for_by_object(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbatch import kubeapi
    from kbatch.cli import run_workers

    asked: list[dict[str, str]] = []
    monkeypatch.setattr(
        kubeapi, "list_items", lambda api, path, query=None: asked.append(query) or []
    )
    run_workers.events_of(None, "ns", "g", ["g-1", "g-0"])
    assert sorted(q["fieldSelector"] for q in asked) == [
        "involvedObject.kind=Pod,involvedObject.name=g-0",
        "involvedObject.kind=Pod,involvedObject.name=g-1",
        "involvedObject.kind=PodGroup,involvedObject.name=g",
    ]


def test_a_large_gangs_story_shows_the_groups_events_not_each_pods() -> None:
    facts = standing.JobFacts(None, [], {}, {}, frozenset({"g-0", "g-1", "g-2"}))  # type: ignore[arg-type]
    assert facts.event_pods == {"g-0", "g-1", "g-2"}
    more = dataclasses.replace(facts, pod_names=frozenset(f"g-{i}" for i in range(4)))
    assert more.event_pods == frozenset()
