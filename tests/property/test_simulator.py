"""The simulator on generated manifest text: malformed objects are refused alone (warned
about) and the rest runs; input that cannot be read is one of its documented ValueErrors
(ManifestError, ConfigError, DurationError). Nothing else comes out."""

import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st
from property import junk

from kbatch.config import ConfigError
from kbatch.sim import simulate
from kbatch.sim.clock import DurationError
from kbatch.sim.manifests import ManifestError


def _identified(obj: dict, base: dict) -> dict:
    """``obj`` with ``base``'s apiVersion, kind and name: a document the simulator reads,
    to be refused (or run) when due, rather than input it cannot read at all."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["name"] = base["metadata"]["name"]
    return {**obj, "apiVersion": base["apiVersion"], "kind": base["kind"], "metadata": meta}


@st.composite
def _workload(draw: st.DrawFn) -> list[dict]:
    """A node and a queue that work, then broken objects of every kind (identified)."""
    kinds = draw(st.lists(st.sampled_from(sorted(junk.BASES)), min_size=1, max_size=4))
    out = [junk.node(), junk.queue(), junk.priority_class()]
    for index, kind in enumerate(kinds):
        base = junk.BASES[kind]()
        base["metadata"]["name"] = f"{kind.lower()}-{index}"
        out.append(_identified(draw(st.one_of(st.just(base), junk.broken(base))), base))
    return out


DOCUMENTS = st.one_of(
    _workload(),
    st.lists(junk.objects(), min_size=1, max_size=3),
)
TEXTS = st.one_of(
    DOCUMENTS.map(lambda docs: yaml.safe_dump_all(docs, allow_unicode=True)),
    st.text(max_size=30),
    st.sampled_from(["---\nkind: [", "- 1\n- 2", "kind: Pod", "{}\n---\n3"]),
)


@junk.SETTINGS
@given(TEXTS)
def test_simulate_raises_only_its_documented_errors(text: str) -> None:
    junk.counted("simulate")
    warnings: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            simulate([path], until="2m", warn=warnings.append)
        except (ManifestError, ConfigError, DurationError) as exc:
            junk.check_refusal("simulate", "-", str(exc))
        except Exception as exc:
            junk.escaped("simulate", exc)
    for warning in warnings:
        junk.check_refusal("simulate", "-", warning)
