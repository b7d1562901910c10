"""The one JSONL reader (`bayesobs.jsonl.read_records`) shared by the log, folders and trial files."""

import pytest

from bayesobs.errors import BayesobsInputError
from bayesobs.jsonl import read_records


def test_lenient_read_skips_and_counts_torn_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n\n[1, 2]\n{"a": 2}\n\xff\xfe\n{"a": 3, "b"')
    records, lines, torn = read_records(path)
    assert records == [{"a": 1}, {"a": 2}]
    assert lines == [1, 4]
    assert torn == 3  # a list, bytes that are not UTF-8, and the cut last line


def test_strict_read_names_the_line_and_a_cut_last_line(tmp_path):
    path = tmp_path / "trials.jsonl"
    path.write_text('{"a": 1}\n{"a": 2')
    with pytest.raises(
        BayesobsInputError, match=r"line 2: not valid JSON .*last line is incomplete"
    ):
        read_records(path, strict=True)
    path.write_text('{"a": 1}\n[1]\n{"a": 2}\n')
    with pytest.raises(BayesobsInputError, match=r"line 2: expected a JSON object per line"):
        read_records(path, strict=True)


def test_missing_file_reads_as_empty(tmp_path):
    assert read_records(tmp_path / "absent.jsonl") == ([], [], 0)
