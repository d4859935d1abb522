"""The evaluation set (tests/eval/): every case file is well formed and its log
is there, the set is kept apart from the corpus the rules were tuned on, and
the scorer (tests/eval/run.py) really scores: a check analyze does not meet
fails, one it meets holds, and `run.py` runs end to end on a case.

The score itself is a report (make eval), not a gate: this file tests the
means of measuring, not the figure."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, CORPUS, SOURCE

EVAL = SOURCE / "tests" / "eval"
sys.path.insert(0, str(EVAL))
import run as evalrun  # noqa: E402  (tests/eval/run.py)

CASE_FILES = sorted((EVAL / "cases").glob("*.yaml"))


def load_all():
    return [evalrun.load_case(str(p)) for p in CASE_FILES]


def test_every_case_file_is_well_formed_and_its_log_is_there():
    assert CASE_FILES, "no case files under tests/eval/cases"
    cases = load_all()  # raises CaseError naming the file on any defect
    for path, case in zip(CASE_FILES, cases):
        assert case["id"] == path.stem, f"{path.name}: id {case['id']} is not the file name"
        assert os.path.getsize(case["log_path"]) > 0, f"{case['log_path']} is empty"
        assert case["checks"], f"{path.name}: no checks"
        src = case["source"]
        assert src["url"].startswith("https://"), f"{path.name}: source url {src['url']}"
        if "repo" in src:
            assert len(str(src.get("commit", ""))) == 40, f"{path.name}: a repository file needs its commit"
            assert src.get("path"), f"{path.name}: a repository file needs its path"
        assert case.get("cut"), f"{path.name}: say the cut (or 'none')"
        for check in case["checks"]:
            assert check.get("about"), f"{path.name}: a check without 'about'"
            if not check.get("no_alarm"):  # a whole-run finding may have no one line: then its text
                assert "rule" in check and ("line" in check or "text" in check), \
                    f"{path.name}: '{check['about']}' needs a rule and a line (or a text)"
        if case["kind"] == "healthy":
            assert any(c.get("no_alarm") for c in case["checks"]), \
                f"{path.name}: a control checks for no alarm"


def test_ids_are_unique_and_every_log_has_a_case():
    cases = load_all()
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    logs = {os.path.realpath(c["log_path"]) for c in cases}
    for log in (EVAL / "logs").iterdir():
        assert os.path.realpath(log) in logs, f"{log.name} has no case file"


def test_the_set_is_kept_apart_from_the_tuning_corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}: cannot compare the set with it")

    def digest(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    corpus = {digest(p) for p in CORPUS.rglob("*") if p.is_file() and p.stat().st_size < 8 << 20}
    for log in (EVAL / "logs").iterdir():
        assert digest(log) not in corpus, f"{log.name} is a corpus file: the set must be apart from it"


def test_the_set_stays_small_enough_for_ci():
    total = sum(p.stat().st_size for p in (EVAL / "logs").iterdir())
    assert total < 40 << 20, f"the eval logs take {total} bytes"


FINDING = {"rule": "nan_loss", "severity": "error", "title": "Loss became NaN at step 750",
           "evidence": "first non-finite loss: NaN at step 750 (x.log:347)", "line": 347,
           "rank": 0, "step": 750}


@pytest.mark.parametrize("check, holds", [
    ({"rule": ["nan_loss"], "severity": "error", "line": 347, "step": 750}, True),
    ({"rule": ["nan_loss"], "severity": "error", "line": [12, 347]}, True),
    ({"rule": ["crash"], "severity": "error", "line": 347}, False),
    ({"rule": ["nan_loss"], "severity": "error", "line": 348}, False),
    ({"rule": ["nan_loss"], "severity": "error", "line": 347, "step": 14}, False),
    ({"rule": ["nan_loss"], "severity": "error", "line": 347, "step": 740, "step_tol": 10}, True),
    ({"rule": ["nan_loss"], "severity": "error", "line": 347, "rank": 3}, False),
    ({"rule": ["nan_loss"], "severity": "error", "line": 347, "text": "diverged"}, False),
    ({"no_alarm": True}, False),
])
def test_a_check_holds_only_when_a_finding_meets_every_field(check, holds):
    assert evalrun.check_holds(check, [FINDING], "/x/x.log") is holds


def test_a_control_with_only_info_findings_raises_no_alarm():
    info = dict(FINDING, severity="info")
    assert evalrun.check_holds({"no_alarm": True}, [info], "/x/x.log")
    assert evalrun.check_holds({"no_alarm": True}, [], "/x/x.log")


def test_a_case_file_with_a_defect_is_refused_naming_it(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.log").write_text("a line\n")
    bad = tmp_path / "x.yaml"
    bad.write_text("id: x\nhalf: sideways\nkind: crash\nsource: {url: https://e.org}\n"
                   "conclusion: c\nchecks: [{about: a, rule: crash, line: 1}]\n")
    with pytest.raises(evalrun.CaseError, match="x.yaml: half must be dev or holdout"):
        evalrun.load_case(str(bad))


def test_run_py_scores_a_real_case_end_to_end(tmp_path):
    """One case through the real binary: a check it meets and one it cannot."""
    case = load_all()[0]
    (tmp_path / "cases").mkdir()
    text = (EVAL / "cases" / f"{case['id']}.yaml").read_text()
    # a check no finding can meet: a line past the end of the log
    text += "  - about: an impossible check\n    rule: [crash]\n    line: 99999999\n"
    (tmp_path / "cases" / f"{case['id']}.yaml").write_text(text)
    # the case's log is looked up beside run.py's own cases, so keep the id
    p = subprocess.run([sys.executable, str(EVAL / "run.py"), "--build", str(BUILD),
                        "--cases", str(tmp_path / "cases"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert len(rows) == 1 and rows[0]["id"] == case["id"]
    assert rows[0]["total"] == len(case["checks"]) + 1
    assert rows[0]["held"] <= len(case["checks"])
    assert any("line=99999999" in m for m in rows[0]["missed"])


def test_run_py_says_why_it_cannot_run(tmp_path):
    p = subprocess.run([sys.executable, str(EVAL / "run.py"), "--build", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "no trainwatch binary" in p.stderr and str(tmp_path) in p.stderr


def test_the_readme_shows_the_sets_kinds_as_they_are():
    p = subprocess.run([sys.executable, str(EVAL / "run.py"), "--kinds"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    readme = (EVAL / "README.md").read_text()
    assert p.stdout.strip() in readme, "tests/eval/README.md's kinds table is stale: run run.py --kinds"
