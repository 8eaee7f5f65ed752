"""kbatch.api.yaml_text reads YAML as PyYAML's safe loader does: the same documents and
nodes from libyaml's parser, and PyYAML's own error where libyaml refuses the text."""

import pytest
import yaml

from kbatch.api import yaml_text

TEXT = """\
kind: Queue
metadata: {name: a, labels: {x: "1"}}
spec:
  weight: 2.5
  when: 2024-01-01
  yes: on
  list: [1, 0x10, ~, "s", 1e3, .inf]
"""
BROKEN = ("a: [1, 2", "a: b: c", "\tx: 1", "a: 1\n---\nb: 2")


def test_documents_and_nodes_are_pyyamls() -> None:
    assert yaml_text.safe_load(TEXT) == yaml.safe_load(TEXT)
    both = TEXT + "---\n- 1\n---\n"
    assert yaml_text.safe_load_all(both) == list(yaml.safe_load_all(both))
    fast, own = yaml_text.compose(TEXT), yaml.compose(TEXT)
    assert fast is not None and own is not None
    assert [(k.value, v.start_mark.line) for k, v in fast.value] == [
        (k.value, v.start_mark.line) for k, v in own.value
    ]


@pytest.mark.parametrize("text", BROKEN)
def test_an_error_is_pyyamls_own(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as own:
        yaml.safe_load(text)
    with pytest.raises(yaml.YAMLError) as read:
        yaml_text.safe_load(text)
    assert str(read.value) == str(own.value)
    with pytest.raises(yaml.YAMLError) as composed:
        yaml_text.compose(text)
    assert str(composed.value) == str(own.value)


def test_an_error_of_a_later_document_is_pyyamls_own() -> None:
    text = "a: 1\n---\nb: [1\n"
    with pytest.raises(yaml.YAMLError) as own:
        list(yaml.safe_load_all(text))
    with pytest.raises(yaml.YAMLError) as read:
        yaml_text.safe_load_all(text)
    assert str(read.value) == str(own.value)


def test_libyaml_is_used_where_pyyaml_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    loaders = []
    real = yaml.load

    def spy(text: str, Loader: type) -> object:  # (PyYAML's keyword)
        loaders.append(Loader)
        return real(text, Loader=Loader)

    monkeypatch.setattr(yaml, "load", spy)
    assert yaml_text.safe_load("a: 1") == {"a": 1}
    assert loaders == [yaml.CSafeLoader]
