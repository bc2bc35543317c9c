"""locate's verdicts are one enum whose members are the words the files always held."""

from __future__ import annotations

import json

from commbench.locate.verdict import Verdict, failed, is_bad


def test_bad_is_a_confirmed_finding_whether_an_enum_or_read_back_from_a_file():
    for kind in ("gpu", "node", "rail", "link", "switch"):
        assert is_bad(Verdict.bad(kind)) and is_bad(f"bad {kind}")
    for word in ("ok", "transient", "inconclusive", "hung", "not measured", "bad", "badly"):
        assert not is_bad(word)
    assert failed("hung") and failed(Verdict.BAD_RAIL) and not failed("inconclusive")


def test_the_files_keep_their_words():
    assert json.dumps({"verdict": Verdict.BAD_GPU}) == '{"verdict": "bad gpu"}'
    assert f"{Verdict.NOT_MEASURED:<12}|" == "not measured|"
