"""The chart's flight recording (``record.*``): off by default; on, the Deployment runs
``kbatch run --record`` into a new directory per pod and start on the volume of each
kind; the schema and the template refuse what cannot work."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chart.test_chart import assert_schema_refuses, container
from chart.tools import CHART, by_kind, helm, one, require_tool, template

require_tool("helm", module=True)

MOUNT = "/var/lib/kbatch/recording"


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def recording_volume(objects: list[dict[str, Any]]) -> dict[str, Any]:
    c = container(objects)
    assert {"name": "recording", "mountPath": MOUNT} in c["volumeMounts"]
    return next(v for v in pod_spec(objects)["volumes"] if v["name"] == "recording")


def test_off_by_default() -> None:
    objects = template()
    c = container(objects)
    assert "command" not in c  # the image's entrypoint, kbatch run
    assert not [a for a in c["args"] if a.startswith("--record")]
    assert all(m["mountPath"] != MOUNT for m in c["volumeMounts"])
    assert all(v["name"] != "recording" for v in pod_spec(objects)["volumes"])
    assert not by_kind(objects, "PersistentVolumeClaim")


def test_on_records_on_an_empty_dir_with_the_bound() -> None:
    objects = template("--set", "record.enabled=true,record.maxBytes=64M")
    c = container(objects)
    assert c["command"][:2] == ["/bin/sh", "-c"]
    assert "--record-max-bytes=64M" in c["args"]
    assert "--record-checkpoint-every=16M" in c["args"]
    assert f'dir="{MOUNT}/$POD_NAME"' in c["command"][2]
    assert any(e["name"] == "POD_NAME" for e in c["env"])
    assert recording_volume(objects) == {"name": "recording", "emptyDir": {}}
    assert not by_kind(objects, "PersistentVolumeClaim")
    limited = template("--set", "record.enabled=true,record.volume.sizeLimit=1Gi")
    assert recording_volume(limited)["emptyDir"] == {"sizeLimit": "1Gi"}


def test_on_an_existing_claim() -> None:
    objects = template(
        "--set", "record.enabled=true,record.volume.type=existingClaim,record.volume.claimName=rec"
    )
    assert recording_volume(objects) == {
        "name": "recording",
        "persistentVolumeClaim": {"claimName": "rec"},
    }
    assert not by_kind(objects, "PersistentVolumeClaim")


def test_on_a_new_claim_the_chart_makes() -> None:
    objects = template(
        "--set",
        "record.enabled=true,record.volume.type=newClaim,record.volume.size=20Gi,"
        "record.volume.storageClass=fast,record.volume.accessMode=ReadWriteMany",
    )
    claim = one(objects, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "kbatch-recording"
    assert claim["metadata"]["namespace"] == "kbatch-system"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "fast",
        "resources": {"requests": {"storage": "20Gi"}},
    }
    assert recording_volume(objects)["persistentVolumeClaim"] == {"claimName": "kbatch-recording"}
    one_replica = template(
        "--set",
        "record.enabled=true,record.volume.type=newClaim,replicaCount=1,"
        "leaderElection.enabled=false",
    )
    assert one(one_replica, "PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_a_read_write_once_claim_for_two_replicas_is_refused() -> None:
    result = helm(
        "template", "kbatch", str(CHART), "--set", "record.enabled=true,record.volume.type=newClaim",
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "record.volume.accessMode: ReadWriteOnce cannot be mounted by 2 replicas" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"record": {"enabled": "yes"}}, "record.enabled: Invalid type"),
        ({"record": {"maxBytes": "256 MB"}}, "record.maxBytes: Does not match pattern"),
        ({"record": {"volume": {"type": "hostPath"}}},
         'record.volume.type must be one of the following: "emptyDir", "existingClaim", "newClaim"'),
        ({"record": {"volume": {"type": "existingClaim"}}},
         "record.volume.claimName: String length must be greater than or equal to 1"),
        ({"record": {"volume": {"size": "lots"}}}, "record.volume.size: Does not match pattern"),
        ({"record": {"volume": {"acessMode": "ReadWriteMany"}}},
         "Additional property acessMode is not allowed"),
    ],
)  # fmt: skip
def test_a_wrong_record_value_fails_with_the_schemas_message(tmp_path, values, message) -> None:
    assert_schema_refuses(tmp_path, values, message)


def test_each_start_records_anew_and_keeps_the_last_start_s_recording(tmp_path: Path) -> None:
    """The container's script, run by sh with a stand-in kbatch: each start gets a new
    directory under the pod's; of the earlier ones, only the newest stays."""
    script = container(template("--set", "record.enabled=true"))["command"][2]
    # As the kubelet gives it to sh ($$ escapes $), with the mount in a temporary folder.
    script = script.replace("$$", "$").replace(MOUNT, str(tmp_path / "mount"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "kbatch"
    stand_in.write_text('#!/bin/sh\necho "$@"\n')
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    pod = tmp_path / "mount" / "kbatch-abc"
    for older in ("20260101T000000Z", "20260102T000000Z"):
        (pod / older).mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "POD_NAME": "kbatch-abc"}
    done = subprocess.run(
        ["/bin/sh", "-c", script, "kbatch-run", "--log-level=info"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    args = done.stdout.split()
    assert args[:3] == ["run", "--log-level=info", "--record"]
    started = Path(args[3])
    assert started.parent == pod and started.name.endswith("Z") and len(started.name) == 16
    assert sorted(p.name for p in pod.iterdir()) == ["20260102T000000Z"]
