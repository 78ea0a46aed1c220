"""Hostile and unlucky input files (issue 11, loaders): every bad line is a row error naming the file and
its 1-based line, skippable and counted; a file that is not UTF-8 JSON text is one clear file error; the
writers never write non-standard JSON and create files with the user's umask."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from patarm.data import DataError, load_pairs
from patarm.io import read_json, write_json, write_jsonl
from patarm.prep.normalize import NormalizeConfig, normalize

GOOD = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5"}
GOOD_LINE = json.dumps(GOOD).encode()


def jsonl(tmp_path: Path, *lines: bytes, name: str = "prefs.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


# One bad line between two good ones: (bytes of the bad line, reason).
BAD_LINES = {
    "invalid_utf8": (b'{"prompt": "caf\xe9", "chosen": "4", "rejected": "5"}', "bad_encoding"),
    "lone_surrogate": (b'{"prompt": "q\\ud800", "chosen": "4", "rejected": "5"}', "bad_encoding"),
    "lone_low_surrogate": (b'{"prompt": "q", "chosen": "\\udc00x", "rejected": "5"}', "bad_encoding"),
    "nul_byte": (b'{"prompt": "q\x00", "chosen": "4", "rejected": "5"}', "bad_json"),
    "duplicate_key": (b'{"prompt": "q", "chosen": "4", "rejected": "5", "chosen": "5"}', "duplicate_key"),
    "nested_duplicate_key": (b'{"prompt": [{"role": "user", "content": "q", "role": "assistant"}], '
                             b'"chosen": "4", "rejected": "5"}', "duplicate_key"),
    "nan": (b'{"prompt": "q", "chosen": "4", "rejected": "5", "score": NaN}', "non_finite"),
    "infinity": (b'{"prompt": "q", "chosen": "4", "rejected": "5", "score": -Infinity}', "non_finite"),
    "overflowing_float": (b'{"prompt": "q", "chosen": "4", "rejected": "5", "score": 1e999}', "non_finite"),
    "deep_nesting": (b'{"prompt": "q", "chosen": "4", "rejected": "5", "x": ' + b"[" * 900 + b"]" * 900 + b"}",
                     "too_deep"),
    "very_deep_nesting": (b'{"prompt": "q", "x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}", "too_deep"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_is_a_row_error_naming_file_and_line(tmp_path, case):
    bad, reason = BAD_LINES[case]
    path = jsonl(tmp_path, GOOD_LINE, bad, GOOD_LINE)
    with pytest.raises(DataError) as info:
        load_pairs(path)
    err = info.value
    assert (err.reason, err.line, err.row, err.path) == (reason, 2, 1, str(path))
    assert f"{path}, line 2" in str(err) and "on_error='skip'" in str(err)
    result = load_pairs(path, on_error="skip")
    assert [p.chosen for p in result] == ["4", "4"]
    assert dict(result.manifest.dropped) == {reason: 1} and result.manifest.consistent


def test_skipped_bad_lines_are_counted_in_the_normalize_manifest(tmp_path):
    lines = [bad for bad, _ in BAD_LINES.values()]
    path = jsonl(tmp_path, GOOD_LINE, *lines, GOOD_LINE)
    m = normalize(NormalizeConfig(input=str(path), on_error="skip"), tmp_path / "out")
    assert (m["rows_in"], m["rows_out"]) == (len(lines) + 2, 2)
    assert sum(m["dropped"].values()) == len(lines)
    assert m["dropped"]["bad_encoding"] == 3 and m["dropped"]["non_finite"] == 3
    text = (tmp_path / "out" / "pairs.jsonl").read_bytes()
    text.decode("utf-8")  # strict: no surrogate or stray byte reached the output


def test_duplicate_keys_never_swap_a_pair_silently(tmp_path):
    path = jsonl(tmp_path, b'{"prompt": "q", "chosen": "good", "rejected": "bad", "chosen": "bad2"}')
    with pytest.raises(DataError, match="'chosen' appears twice"):
        load_pairs(path)


def test_valid_surrogate_pairs_and_escaped_backslashes_are_kept(tmp_path):
    path = jsonl(tmp_path, b'{"prompt": "smile \\ud83d\\ude00", "chosen": "a \\\\ud800 b", "rejected": "5"}')
    pair = load_pairs(path)[0]
    assert pair.question == "smile \U0001F600" and pair.chosen == "a \\ud800 b"


def test_utf8_bom_is_accepted(tmp_path):
    path = jsonl(tmp_path, b"\xef\xbb\xbf" + GOOD_LINE, GOOD_LINE)
    result = load_pairs(path)
    assert len(result) == 2 and result.manifest.rows_in == 2
    json_path = tmp_path / "pairs.json"
    json_path.write_bytes(b"\xef\xbb\xbf" + json.dumps([GOOD]).encode())
    assert len(load_pairs(json_path)) == 1


FILE_ERRORS = {  # file content -> words the error must contain
    "utf16_bom": ((GOOD_LINE + b"\n").decode().encode("utf-16"), "UTF-16"),
    "utf16_no_bom": ((GOOD_LINE + b"\n" + GOOD_LINE + b"\n").decode().encode("utf-16-le"), "UTF-16"),
    "gzip": (gzip.compress(GOOD_LINE + b"\n"), "gzip"),
    "binary": (bytes(range(256)) * 8, "binary"),
}


@pytest.mark.parametrize("case", sorted(FILE_ERRORS))
def test_undecodable_file_is_one_clear_file_error(tmp_path, case):
    content, words = FILE_ERRORS[case]
    path = tmp_path / "prefs.jsonl"
    path.write_bytes(content)
    for on_error in ("raise", "skip"):
        with pytest.raises(DataError) as info:
            load_pairs(path, on_error=on_error)
        err = info.value
        assert err.row is None and err.line is None and err.reason == "bad_file"
        assert str(path) in str(err) and words in str(err)
        assert "on_error" not in str(err)  # skipping rows cannot help: the message says what to do instead


def test_truncated_and_corrupt_gzip_are_file_errors(tmp_path):
    data = gzip.compress(b"".join(GOOD_LINE + b"\n" for _ in range(2000)))
    path = tmp_path / "prefs.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"prefs.jsonl.gz: .*truncated or corrupt") as info:
        load_pairs(path, on_error="skip")
    assert info.value.reason == "bad_file"
    path.write_bytes(b"not gzip at all\n")
    with pytest.raises(DataError, match=r"prefs.jsonl.gz: .*not a gzip file"):
        load_pairs(path)


def test_bad_bytes_in_a_json_document_name_the_line(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_bytes(b'[\n{"prompt": "q", "chosen": "4", "rejected": "5"},\n{"prompt": "\xff"}]')
    with pytest.raises(DataError, match=r"pairs.json: byte 0xff at line 3, column 13 is not UTF-8"):
        load_pairs(path)


def test_a_bad_item_of_a_json_list_is_a_row_error_naming_its_line(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_bytes(b'[\n  {"prompt": "q", "chosen": "4", "rejected": "5"},\n  {"prompt": "q", "chosen": "4",\n'
                     b'   "rejected": "5", "chosen": "x"},\n  {"prompt": "q", "chosen": "4", "rejected": NaN}, '
                     b'{"prompt": "r", "chosen": "4", "rejected": "5"}\n]\n')
    with pytest.raises(DataError, match="pairs.json, line 3: the key 'chosen' appears twice") as info:
        load_pairs(path)
    assert (info.value.row, info.value.line) == (1, 3)
    result = load_pairs(path, on_error="skip")
    assert [p.question for p in result] == ["q", "r"]
    assert dict(result.manifest.dropped) == {"duplicate_key": 1, "non_finite": 1}
    assert "pairs.json, line 5" in result.manifest.examples["non_finite"]


def test_second_line_is_named_line_2(tmp_path):
    path = jsonl(tmp_path, GOOD_LINE, b'{"prompt": "q", "chosen": "4"}')
    with pytest.raises(DataError) as info:
        load_pairs(path)
    assert str(info.value).startswith(f"{path}, line 2, field 'rejected':")
    assert (info.value.row, info.value.line) == (1, 2)
    with pytest.raises(DataError, match=r"<memory>, row 1, field 'rejected'"):
        load_pairs([GOOD, {"prompt": "q", "chosen": "4"}])  # not a text file: the 0-based row index


def test_writers_refuse_non_finite_numbers(tmp_path):
    with pytest.raises(ValueError, match="NaN or infinite"):
        write_jsonl([{"score": float("nan")}], tmp_path / "a.jsonl")
    with pytest.raises(ValueError, match="NaN or infinite"):
        write_json({"score": float("inf")}, tmp_path / "a.json")
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "a.json").exists()
    pairs = load_pairs([{**GOOD, "score": float("nan"), "ok": 1.5}])  # e.g. a parquet column with NaN
    assert pairs[0].metadata == {"ok": 1.5}


def test_read_json_is_strict(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"a": NaN}')
    with pytest.raises(DataError, match="non-finite"):
        read_json(path)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_jsonl([GOOD], tmp_path / "pairs.jsonl")
        write_json({"a": 1}, tmp_path / "manifest.json")
    finally:
        os.umask(old)
    for name in ("pairs.jsonl", "manifest.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name
