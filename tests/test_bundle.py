"""Model-card bundles (``constructions/interop/bundle.py``, ``python -m theorems.bundle``): the
Hugging Face mixin layout, a card generated from the claim, and a load that rebuilds the model
bit for bit. They need safetensors (the ``interop`` extra) and skip without it, except under CI."""

from __future__ import annotations

import json
import os

import pytest
import torch

from constructions.circuits import induction_circuit
from constructions.induction_heads import two_layer_induction
from constructions.interop.bundle import load_bundle, write_bundle
from constructions.power_method import looped_power_transformer
from constructions.recording import build
from theorems.bundle import main

CLAIM = {"id": "area.slug", "title": "A title", "statement": r"$x = y$ for every $x$",
         "correction": None,
         "sources": [{"ref": "Someone (2024)", "arxiv": "2401.00001", "where": "Theorem 1",
                      "tag": "V"}]}
RECORD = {"status": "verified", "summary": {"passed": 3, "checks": 3, "examples": 120,
                                            "tiers": ["property", "symbolic"]}}


@pytest.fixture(scope="module", autouse=True)
def safetensors():
    try:
        import safetensors
    except ImportError:
        if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail("safetensors is missing, but THEOREMS_REQUIRE_EXTRAS says every extra "
                        "is installed")
        pytest.skip("bundles need safetensors, in the interop extra")
    return safetensors


def _bits(model) -> list[torch.Tensor]:
    return [t.contiguous().reshape(-1).view(torch.uint8) for t in model.state_dict().values()]


@pytest.mark.interop
def test_a_bundle_round_trips_bit_for_bit(tmp_path):
    model = two_layer_induction(4, 6)
    write_bundle(model, tmp_path / "b", claim=CLAIM, record=RECORD)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "README.md", "config.json", "model.safetensors"]
    loaded = load_bundle(tmp_path / "b")
    assert type(loaded) is type(model)
    assert all(torch.equal(a, b) for a, b in zip(_bits(loaded), _bits(model), strict=True))
    tokens = torch.tensor([[0, 1, 2, 3, 0, 1]])
    assert torch.equal(loaded(tokens), model(tokens))  # same weights, same code: same bits
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["architectures"] == ["InductionTransformer"] and config["claim"] == "area.slug"
    assert config["transformer_lens"]["exportable"]
    assert config["transformer_lens"]["config"]["d_model"] == model.d_model
    assert config["transformer_lens"]["config"]["dtype"] == "float64"
    card = (tmp_path / "b" / "README.md").read_text()
    for text in ("# A title", CLAIM["statement"], "**Status:** verified", "3 of 3 checks",
                 "to_transformer_bridge", "NNsight(model)", "two_layer_induction(4, 6)"):
        assert text in card, text


@pytest.mark.interop
def test_edited_weights_or_files_are_refused(tmp_path):
    model = two_layer_induction(3, 4)
    with torch.no_grad():
        model.W_U.mul_(2)  # no longer what the builder builds
    write_bundle(model, tmp_path / "edited")
    with pytest.raises(ValueError, match="rebuilds different weights"):
        load_bundle(tmp_path / "edited")
    write_bundle(two_layer_induction(3, 4), tmp_path / "ok")
    weights = tmp_path / "ok" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b" ")
    with pytest.raises(ValueError, match="SHA-256 differs"):
        load_bundle(tmp_path / "ok")


@pytest.mark.interop
def test_a_construction_transformer_lens_cannot_express_says_so(tmp_path):
    model = build(looped_power_transformer, 3, 0.5)
    write_bundle(model, tmp_path / "p")
    section = json.loads((tmp_path / "p" / "config.json").read_text())["transformer_lens"]
    assert not section["exportable"] and any("looped" in f for f in section["lacks"])
    assert "TransformerLens cannot express it" in (tmp_path / "p" / "README.md").read_text()
    assert torch.equal(_bits(load_bundle(tmp_path / "p"))[0], _bits(model)[0])


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        write_bundle("model", tmp_path)
    with pytest.raises(TypeError, match="directory must be a str or Path"):
        write_bundle(two_layer_induction(3, 4), 3)
    with pytest.raises(TypeError, match="claim must be a mapping"):
        write_bundle(two_layer_induction(3, 4), tmp_path, claim="area.slug")
    with pytest.raises(ValueError, match="carries no record of its builder call"):
        write_bundle(torch.nn.Linear(2, 2), tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is not a directory"):
        write_bundle(two_layer_induction(3, 4), tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="no bundle directory"):
        load_bundle(tmp_path / "missing")


@pytest.mark.interop
def test_the_cli_bundles_a_claims_construction(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["induction-heads.two-layer-exact", str(out), "--args", "[3]", "--kwargs",
                 '{"max_len": 5}', "--evidence", str(tmp_path / "none.json")]) == 0
    loaded = load_bundle(out)
    assert all(torch.equal(a, b) for a, b in zip(_bits(loaded), _bits(two_layer_induction(3, 5)),
                                                 strict=True))
    card = (out / "README.md").read_text()
    assert "induction-heads.two-layer-exact" in card and "not in the evidence file" in card
    with pytest.raises(SystemExit, match="unknown claim"):
        main(["no.such-claim", str(out)])
    with pytest.raises(SystemExit, match="--kwargs is not JSON"):
        main(["induction-heads.two-layer-exact", str(out), "--kwargs", "{"])
    with pytest.raises(SystemExit, match="--args must be a JSON list"):
        main(["induction-heads.two-layer-exact", str(out), "--args", "{}"])


@pytest.mark.interop
@pytest.mark.parametrize("claim", ["induction-heads.two-layer-exact",
                                   "circuits.induction-sufficient"])
def test_a_circuit_case_bundle_holds_its_circuit(tmp_path, claim):
    out = tmp_path / "circuit"
    assert main([claim, str(out), "--args", "[4]", "--kwargs", '{"max_len": 6}',
                 "--evidence", str(tmp_path / "none.json")]) == 0
    data = json.loads((out / "circuit.json").read_text())
    assert data == induction_circuit("two_layer", 4, 6).to_mib_json()
    assert {k for k, v in data["edges"].items() if v["in_graph"]} == {"input->a1.h0<v>",
                                                                      "a1.h0->logits"}
    assert "resample_next_token" in (out / "README.md").read_text()
    assert all(torch.equal(a, b) for a, b in zip(_bits(load_bundle(out)),
                                                 _bits(two_layer_induction(4, 6)), strict=True))


@pytest.mark.interop
def test_no_circuit_is_claimed_off_the_derived_construction(tmp_path):
    out = tmp_path / "hot"
    assert main(["induction-heads.two-layer-exact", str(out), "--args", "[4]", "--kwargs",
                 '{"max_len": 6, "recency": 0.0}', "--evidence", str(tmp_path / "n.json")]) == 0
    assert not (out / "circuit.json").exists()
    assert "None written" in (out / "README.md").read_text()
    out = tmp_path / "plain"  # a construction that is no circuit case gets no circuit.json
    assert main(["power-method.looped-shifted-power", str(out), "--args", "[3, 0.5]",
                 "--evidence", str(tmp_path / "n.json")]) == 0
    assert not (out / "circuit.json").exists()
