"""scripts/compare_test_ids.py: test ids mapped through renamed and split files; a lost id is named."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import compare_test_ids as cmp  # noqa: E402


def test_ids_follow_renames_and_splits_and_a_lost_one_is_named(tmp_path, capsys):
    before = ["tests/a.py::test_x", "tests/a.py::test_y[1]", "tests/big.py::test_p", "tests/big.py::test_q",
              "tests/same.py::test_s"]
    after = ["tests/sub/a.py::test_x", "tests/sub/a.py::test_y[1]", "tests/t1.py::test_p", "tests/same.py::test_s",
             "tests/new.py::test_n"]
    per_file, lost, new = cmp.compare(before, after, {"tests/a.py": ["tests/sub/a.py"],
                                                      "tests/big.py": ["tests/t1.py", "tests/t2.py"]})
    assert per_file == {"tests/a.py": [2, 2], "tests/big.py": [2, 1], "tests/same.py": [1, 1]}
    assert lost == ["tests/big.py::test_q"] and new == ["tests/new.py::test_n"]
    (tmp_path / "b.txt").write_text("\n".join(before) + "\n\n5 tests collected\n")
    (tmp_path / "a.txt").write_text("\n".join(after) + "\n")
    code = cmp.main([str(tmp_path / "b.txt"), str(tmp_path / "a.txt"), "--map", "tests/a.py=tests/sub/a.py",
                     "--map", "tests/big.py=tests/t1.py,tests/t2.py"])
    out = capsys.readouterr().out
    assert code == 1 and "lost: tests/big.py::test_q" in out and "lost 1, new 1" in out
    assert any("tests/big.py -> tests/t1.py, tests/t2.py  LOST 1" in line for line in out.splitlines())


def test_a_complete_move_exits_zero(tmp_path):
    (tmp_path / "b.txt").write_text("tests/a.py::test_x\n")
    (tmp_path / "a.txt").write_text("tests/b/a.py::test_x\n")
    assert cmp.main([str(tmp_path / "b.txt"), str(tmp_path / "a.txt"), "--map", "tests/a.py=tests/b/a.py"]) == 0
