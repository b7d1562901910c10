"""--image-detail: OpenAI's detail of image parts, sent, logged and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bayesobs.cli import main
from bayesobs.run.imagecost import anthropic_image_tokens, openai_image_tokens, png_size
from bayesobs.testing.fakeserver import FakeChatServer


def _trials(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x.strip()]


def _run(srv, out: Path, *extra: str) -> int:
    return main(
        [
            "run",
            "line_ratio",
            "--subject",
            "openai:m",
            "--trials",
            "2",
            "--out",
            str(out),
            "--base-url",
            srv.url,
            "--no-cache",
            "--no-progress",
            *extra,
        ]
    )


@pytest.mark.parametrize("detail", [None, "low", "high"])
def test_detail_is_sent_on_every_image_part_and_logged(tmp_path, detail):
    extra = ["--image-detail", detail] if detail else []
    expected = detail or "auto"  # the default, OpenAI's own, sent explicitly
    with FakeChatServer() as srv:
        code = _run(srv, tmp_path / "o", "--modality", "multimodal", "--modality", "text", *extra)
        requests = list(srv.requests)
    assert code == 0
    parts = [
        p
        for b in requests
        for m in b["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    assert parts and all(p["image_url"]["detail"] == expected for p in parts)
    rows = _trials(tmp_path / "o")
    assert {r["image_detail"] for r in rows if r["modality"] == "multimodal"} == {expected}
    assert {r["image_detail"] for r in rows if r["modality"] == "text"} == {None}  # no image
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["requests"]["openai:m"]["image_detail"] == expected
    # a non-default detail is part of the experiment: a resume with another is refused
    assert (manifest["experiment"]["chat"].get("image_detail")) == detail


def test_resume_with_another_detail_is_refused(tmp_path, capsys):
    with FakeChatServer() as srv:
        assert _run(srv, tmp_path / "o", "--modality", "image", "--image-detail", "low") == 0
        n = srv.count
        assert _run(srv, tmp_path / "o", "--modality", "image", "--image-detail", "high") == 2
        assert srv.count == n
    assert "image_detail" in capsys.readouterr().err


def test_a_bad_detail_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "line_ratio", "--subject", "openai:m", "--image-detail", "ultra"])
    assert info.value.code == 2 and "ultra" in capsys.readouterr().err


def test_dry_run_counts_image_tokens_by_detail(tmp_path, capsys):
    def tokens(detail: str) -> int:
        argv = ["run", "maze_distance", "--subject", "openai:m", "--modality", "image"]
        argv += ["--trials", "1", "--out", str(tmp_path / detail), "--dry-run"]
        assert main([*argv, "--image-detail", detail]) == 0
        out = capsys.readouterr().out
        return int(out.split("about ")[1].split(" input")[0].replace(",", ""))

    low, high, auto = tokens("low"), tokens("high"), tokens("auto")
    # maze_distance shows one 520 x 520 image: 4 tiles at high detail (765 tokens), 85 at low
    sessions = 3
    assert high - low == sessions * (765 - 85)
    assert auto == high  # auto is counted as the most it may cost


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # OpenAI's example: 768 x 768, four tiles
        ((2048, 4096), "high", 1105),  # 1024 x 2048, then 768 x 1536: six tiles
        ((4096, 8192), "low", 85),
        ((420, 180), "high", 255),  # not enlarged: one tile
        ((420, 180), "auto", 255),
    ],
)
def test_openai_image_tokens_follow_the_documented_accounting(size, detail, tokens):
    assert openai_image_tokens(*size, detail) == tokens


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((420, 180), 15 * 7), ((1092, 1092), 39 * 39), ((3136, 1568), 56 * 28)],
)
def test_anthropic_image_tokens_count_28px_patches(size, tokens):
    assert anthropic_image_tokens(*size) == tokens


def test_png_size_reads_the_header():
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (37, 11)).save(buf, format="PNG")
    assert png_size(buf.getvalue()) == (37, 11)
    with pytest.raises(ValueError, match="not a PNG"):
        png_size(b"GIF89a" + bytes(30))
