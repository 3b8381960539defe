"""issue 45 part 3: generated scripts take only checked names, and quote what they take."""

import shlex

import pytest

from quicbench.errors import QuicbenchError
from quicbench.model.plan import plan_from_dict
from quicbench.fleet import batch


@pytest.mark.parametrize("name", ["x\ntouch /tmp/p #", "ünïcode", "", "-x", "a b", "a;b", "a'b", "x" * 65, "a\x7f"])
def test_plan_names_outside_the_stated_set_are_refused(name):
    with pytest.raises(QuicbenchError, match=r"name: name .*1-64 characters of A-Z, a-z, 0-9, '\.', '_', '-'"):
        plan_from_dict({"name": name, "workloads": [{"size": "10KB"}]})


@pytest.mark.parametrize("name", ["x\ntouch /tmp/p #", "ünïcode", "a b"])
def test_the_script_writers_refuse_an_unchecked_name_themselves(tmp_path, name):
    with pytest.raises(QuicbenchError, match="plan name"):
        batch.sbatch_script(None, name, 2, tmp_path, setup="none")
    with pytest.raises(QuicbenchError, match="plan name"):
        batch.k8s_manifest("", name, 2, "img", "pvc")


def test_sbatch_log_path_is_checked_and_every_argument_quoted(tmp_path):
    with pytest.raises(QuicbenchError, match=r"--out .*no spaces"):
        batch.sbatch_script(None, "ok", 2, tmp_path / "a b", setup="none")
    text = batch.sbatch_script(None, "ok", 2, tmp_path / "o", setup="none", only=["condition=a;b$(id)"])
    last = text.strip().splitlines()[-1]
    assert shlex.split(last)[-1] == "condition=a;b$(id)"     # one word, not shell
    assert "#SBATCH --job-name=qb-ok" in text


def test_k8s_job_name_never_empty():
    m = batch.k8s_manifest("", "A.B_C", 2, "img", "pvc")
    assert m["items"][1]["metadata"]["name"] == "qb-a-b-c"
