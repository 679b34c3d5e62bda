"""The lab's image builder: reproducible bytes, and manifests a registry accepts."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import oci
import pytest


def sample() -> oci.Image:
    return oci.Image(
        files=[
            oci.File("etc/b.txt", b"second\n"),
            oci.File("bin", is_dir=True, mode=0o755),
            oci.File("bin/tool", b"#!/bin/sh\necho hi\n", mode=0o755),
            oci.File("bin/alias", link="tool", mode=0o777),
        ],
        entrypoint=["/bin/tool"],
        cmd=["--flag"],
    )


def test_same_inputs_give_the_same_digest() -> None:
    assert oci.assemble(sample()).digest == oci.assemble(sample()).digest


def test_any_content_change_changes_the_digest() -> None:
    changed = sample()
    changed.files[0] = oci.File("etc/b.txt", b"Second\n")
    assert oci.assemble(changed).digest != oci.assemble(sample()).digest


def test_layer_entries_are_sorted_root_owned_and_dated_at_the_epoch() -> None:
    blobs = oci.assemble(sample())
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blobs.layers[-1]))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["bin", "bin/alias", "bin/tool", "etc/b.txt"]
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, 0)}
    assert members[1].issym()
    assert members[1].linkname == "tool"
    assert members[2].mode == 0o755


def test_manifest_points_at_the_config_and_layer_by_digest_and_size() -> None:
    blobs = oci.assemble(sample())
    manifest = json.loads(blobs.manifest)
    assert manifest["mediaType"] == oci.MANIFEST_V2
    assert manifest["config"] == {
        "mediaType": oci.CONFIG_V1,
        "size": len(blobs.config),
        "digest": oci.sha256(blobs.config),
    }
    (layer,) = blobs.layers
    assert manifest["layers"] == [{"mediaType": oci.LAYER_TGZ, "size": len(layer), "digest": oci.sha256(layer)}]
    config = json.loads(blobs.config)
    # diff_ids name the uncompressed layer, as docker checks after extracting it.
    assert config["rootfs"]["diff_ids"] == [oci.sha256(gzip.decompress(layer))]
    assert config["config"]["Entrypoint"] == ["/bin/tool"]
    assert "created" not in config


def test_only_plain_http_registries_are_spoken_to() -> None:
    with pytest.raises(ValueError, match="got: file:///etc/passwd"):
        oci._request("GET", "file:///etc/passwd")


def test_base_layers_come_first_in_manifest_and_config() -> None:
    base = oci.layer_from_tar(oci.layer_tar([oci.File("etc/os-release", b"ID=debian\n")]))
    image = sample()
    image.base = [base]
    blobs = oci.assemble(image)
    manifest, config = json.loads(blobs.manifest), json.loads(blobs.config)
    assert [entry["digest"] for entry in manifest["layers"]] == [oci.sha256(b) for b in blobs.layers]
    assert blobs.layers[0] == base.blob
    assert config["rootfs"]["diff_ids"][0] == base.diff_id
    assert len(config["rootfs"]["diff_ids"]) == 2
