"""HVS loaders: exact public formats, clear errors naming file and field, missing-file report."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from bayesobs.errors import BayesobsInputError
from bayesobs.hvs.loaders import (
    expected_files,
    load_fixations,
    load_folder,
    load_ranks,
    load_sis10k,
    missing_files,
    missing_report,
)


def _rec(**kw):
    rec = {
        "name": "000000123.jpg",
        "subject": 2,
        "task": "bottle",
        "condition": "present",
        "bbox": [100, 200, 50, 80],
        "X": [840.0, 700.5, 1200.0],
        "Y": [525.0, 600.0, 300.0],
        "T": [250, 180, 400],
        "length": 3,
        "fixOnTarget": True,
        "correct": 1,
        "split": "train",
    }
    rec.update(kw)
    return rec


def _write(tmp_path, data, name="coco_search18_fixations_TP_train.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return p


def test_load_fixations_reads_the_public_schema(tmp_path):
    p = _write(tmp_path, [_rec(), _rec(subject=3, X=[1, 2, 1000], length=3)])
    recs = load_fixations(p, "search")
    assert len(recs) == 2
    r = recs[0]
    assert (r["name"], r["subject"], r["task"], r["condition"]) == (
        "000000123.jpg",
        2,
        "bottle",
        "present",
    )
    assert r["X"] == [840.0, 700.5, 1200.0] and r["T"] == [250.0, 180.0, 400.0]
    assert r["bbox"] == [100.0, 200.0, 50.0, 80.0] and r["length"] == 3
    assert r["fixOnTarget"] is True and r["split"] == "train"


def test_freeview_needs_no_task_or_bbox(tmp_path):
    rec = _rec()
    for k in ("task", "condition", "bbox"):
        rec.pop(k)
    recs = load_fixations(
        _write(tmp_path, [rec], "COCOFreeView_fixations_trainval.json"), "freeview"
    )
    assert recs[0]["task"] == "" and recs[0]["bbox"] is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('[{"name": "a.jpg", "subject": 1, "X": [1, 2', "not valid JSON (truncated or corrupt?)"),
        ("", "empty file"),
        ({"annotations": []}, "expected a JSON list of scanpath records; got annotations"),
        (
            [_rec(T=[250, 180])],
            "record 0 (name='000000123.jpg', subject=2): fields X, Y, T have 3, 3, 2",
        ),
        ([_rec(length=4)], "but 'length' is 4"),
        ([_rec(), {k: v for k, v in _rec().items() if k != "T"}], "record 1: missing field 'T'"),
        ([_rec(condition="absent")], "looks like a target-absent file"),
        ([_rec(X=[10, 20, 500], Y=[10, 20, 300])], "looks like the rescaled (512x320) version"),
        ([_rec(T=[0.25, 0.18, 0.4])], "durations look like seconds"),
        ([_rec(X=[840, "a", 3])], "field 'X' holds 'a', expected numbers"),
        ([_rec(bbox=[1, 2, 3])], "field 'bbox' needs 4 numbers"),
    ],
)
def test_load_fixations_errors_name_file_and_field(tmp_path, data, message):
    p = _write(tmp_path, data)
    with pytest.raises(BayesobsInputError) as e:
        load_fixations(p, "search")
    assert str(p) in str(e.value)
    assert message in str(e.value)


def _sis(**kw):
    data = {
        "images": [{"id": 7, "file_name": "a.jpg", "width": 640, "height": 480}],
        "annotations": [
            {"id": 1, "image_id": 7, "category_id": 1, "bbox": [1, 2, 30, 40]},
            {"id": 2, "image_id": 7, "category_id": 2, "bbox": [100, 50, 20, 20]},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "dog"}],
    }
    data.update(kw)
    return data


def test_load_sis10k(tmp_path):
    out = load_sis10k(_write(tmp_path, _sis(), "train.json"))
    assert out["a.jpg"]["width"] == 640 and out["a.jpg"]["height"] == 480
    assert [i["category"] for i in out["a.jpg"]["instances"]] == ["person", "dog"]
    assert out["a.jpg"]["instances"][0]["bbox"] == [1.0, 2.0, 30.0, 40.0]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"images": [], "annotations": []}, "missing section 'categories'"),
        (_sis(images=[{"id": 7, "width": 1, "height": 1}]), "images[0]: missing field 'file_name'"),
        (
            _sis(annotations=[{"id": 1, "image_id": 9, "category_id": 1, "bbox": [0, 0, 1, 1]}]),
            "annotations[0]: field 'image_id' 9 names no image",
        ),
        (
            _sis(annotations=[{"id": 1, "image_id": 7, "category_id": 1}]),
            "annotations[0]: missing field 'bbox'",
        ),
    ],
)
def test_load_sis10k_errors(tmp_path, data, message):
    p = _write(tmp_path, data, "train.json")
    with pytest.raises(BayesobsInputError, match=None) as e:
        load_sis10k(p)
    assert str(p) in str(e.value) and message in str(e.value)


def _csv(tmp_path, text):
    p = tmp_path / "ranks.csv"
    p.write_text(text, encoding="utf-8")
    return p


def test_load_ranks_sorts_by_rank_and_reads_size_from_image(tmp_path):
    (tmp_path / "images").mkdir()
    Image.new("RGB", (320, 200)).save(tmp_path / "images" / "a.png")
    p = _csv(
        tmp_path,
        "image,instance,bbox,rank,label\n"
        'a.png,i2,"10 20 30 40",2,the dog\n'
        '"a.png",i1,"[1, 2, 3, 4]",1,the person\n',
    )
    out = load_ranks(p)
    assert (out["a.png"]["width"], out["a.png"]["height"]) == (320, 200)
    assert [i["instance"] for i in out["a.png"]["instances"]] == ["i1", "i2"]
    assert out["a.png"]["instances"][1]["bbox"] == [10.0, 20.0, 30.0, 40.0]
    assert out["a.png"]["instances"][0]["label"] == "the person"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("image,bbox,rank\na.png,1 2 3 4,1\n", "missing column(s) instance"),
        ("image,instance,bbox,rank,width,height\na.png,i,1 2 3,1,10,10\n", "row 2: field 'bbox'"),
        (
            "image,instance,bbox,rank,width,height\na.png,i,1 2 3 4,first,10,10\n",
            "row 2: field 'rank'",
        ),
        (
            "image,instance,bbox,rank,width,height\na.png,i,1 2 3 4,1,10,10\na.png,j,1 2 3 4,3,10,10\n",
            "image 'a.png': field 'rank' values [1, 3] are not 1..n",
        ),
        ("image,instance,bbox,rank\nb.png,i,1 2 3 4,1\n", "no width/height columns and the image"),
        ("image,instance,bbox,rank\nb.png,i,1,2,3,4,1\n", "row 2: more fields than the header"),
    ],
)
def test_load_ranks_errors(tmp_path, text, message):
    p = _csv(tmp_path, text)
    with pytest.raises(BayesobsInputError) as e:
        load_ranks(p)
    assert str(p) in str(e.value) and message in str(e.value)


def test_missing_report_lists_exactly_what_is_missing(tmp_path):
    expected = [p for p, _ in expected_files(tmp_path)]
    assert len(expected) == 10
    assert missing_files(tmp_path) == expected
    # create everything except the test split and the SIS10K annotations
    for p in expected:
        if p.suffix:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("[]")
        else:
            p.mkdir(parents=True, exist_ok=True)
    (tmp_path / "coco_search18" / "coco_search18_fixations_TP_test.json").unlink()
    missing = missing_files(tmp_path)
    assert missing == [
        tmp_path / "coco_search18" / "coco_search18_fixations_TP_test.json",
        tmp_path / "sis10k" / "annotations",  # a folder without *.json counts as missing
    ]
    report = missing_report(tmp_path)
    assert report.startswith(
        f"HVS sources: 2 expected file(s) or folder(s) missing under {tmp_path}"
    )
    assert f"missing file {missing[0]}  <- COCO-Search18" in report
    assert f"missing folder {missing[1]}  <- SIS10K" in report
    assert "  saliency_ranks/ranks.csv" in report  # the layout follows
    with pytest.raises(BayesobsInputError, match="2 expected file"):
        load_folder(tmp_path)
    (tmp_path / "sis10k" / "annotations" / "x.json").write_text("{}")
    (tmp_path / "coco_search18" / "coco_search18_fixations_TP_test.json").write_text("[]")
    assert missing_report(tmp_path) == ""
