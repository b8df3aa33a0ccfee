"""Ctrl-C during a solve: exit 130, a clear message, no partial or temporary file, the old file kept."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "attention_fwd_hopper.tir"


def test_ctrl_c_leaves_the_previous_file_untouched(tmp_path):
    out = tmp_path / "schedule.json"
    out.write_text("previous\n")
    cmd = [sys.executable, "-c", "from twill_cli.main import main; main()", "solve", str(EXAMPLE), "--gpu", "h100",
           "--warps", "8", "--no-cache", "-o", str(out)]  # a search of minutes
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)  # well inside the search
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schedule.json"]
