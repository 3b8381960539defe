"""`quicbench slurm` and `quicbench k8s` without a cluster: the sbatch script and the Indexed Job
manifest have the structure the schedulers need, and bad input is exit 2 with nothing written."""

import json
import sys

import pytest

from quicbench.model.shard import parse_shard

PLAN = 'name = "k8s-test"\nprotocols = ["h2", "h3"]\nrepetitions = 2\n[[workloads]]\nsize = "10KB"\n'


def cli(args, capfd, monkeypatch):
    from quicbench.cli.main import main
    monkeypatch.setattr(sys, "argv", ["quicbench", *args])
    with pytest.raises(SystemExit) as e:
        main()
    out = capfd.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def plan(tmp_path):
    p = tmp_path / "plan.toml"
    p.write_text(PLAN)
    return p


def parse_manifest(text: str) -> dict:
    """The manifest is JSON after its comment lines: YAML 1.2 reads it the same."""
    return json.loads("\n".join(l for l in text.splitlines() if not l.startswith("#")))


def test_k8s_manifest_is_an_indexed_job_one_pod_per_node(plan, tmp_path, capfd, monkeypatch):
    out = tmp_path / "job.yaml"
    code, _, err = cli(["k8s", str(plan), "--shards", "4", "--image", "reg.example/quicbench:0.1.0",
                        "--pvc", "qb-results", "--out", str(out)], capfd, monkeypatch)
    assert code == 0, err
    m = parse_manifest(out.read_text())
    assert m["kind"] == "List"
    cm, job = m["items"]
    assert cm["kind"] == "ConfigMap" and cm["data"]["plan.toml"] == PLAN
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 4 and spec["parallelism"] == 4
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    assert c["image"] == "reg.example/quicbench:0.1.0" and c["securityContext"] == {"privileged": True}
    assert c["command"] == ["quicbench"] and c["args"][:4] == ["run", "/plan/plan.toml", "--shard", "auto/4"]
    out_dir = c["args"][c["args"].index("--out") + 1]
    mounts = {v["name"]: v["mountPath"] for v in c["volumeMounts"]}
    assert out_dir.startswith(mounts["results"] + "/")
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["results"]["persistentVolumeClaim"]["claimName"] == "qb-results"
    assert vols["plan"]["configMap"]["name"] == cm["metadata"]["name"]
    env = {e["name"]: e for e in c["env"]}
    assert "job-completion-index" in env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    # one pod per node: required anti-affinity on the hostname against the job's own pods
    sel = spec["template"]["metadata"]["labels"]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert all(sel[k] == v for k, v in anti["labelSelector"]["matchLabels"].items())
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    # the completion indexes 0..3 are the shards 1..4 of --shard auto/4
    assert [parse_shard("auto/4", {"JOB_COMPLETION_INDEX": str(i)}).index for i in range(4)] == [1, 2, 3, 4]


def test_k8s_caps_instead_of_privileged(plan, capfd, monkeypatch):
    code, out, err = cli(["k8s", str(plan), "--shards", "2", "--caps", "--parallelism", "1"], capfd, monkeypatch)
    assert code == 0, err
    job = parse_manifest(out)["items"][1]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"] == {"capabilities": {"add": ["NET_ADMIN", "SYS_ADMIN"]}}
    assert job["spec"]["parallelism"] == 1


def test_sbatch_script(plan, tmp_path, capfd, monkeypatch):
    out = tmp_path / "sl"
    code, _, err = cli(["slurm", str(plan), "--shards", "3", "--partition", "debug", "--out", str(out),
                        "--only", "protocol=h3", "--time", "1:00:00"], capfd, monkeypatch)
    assert code == 0, err
    s = (out / "quicbench.sbatch").read_text()
    for line in ("#SBATCH --array=1-3", "#SBATCH --exclusive", "#SBATCH --partition=debug", "#SBATCH --time=1:00:00",
                 f"#SBATCH --output={out.resolve()}/logs/shard-%a.log"):
        assert line in s.splitlines()
    last = s.strip().splitlines()[-1]
    assert last.startswith("exec ") and "--shard auto/3" in last and f"--out {out.resolve()}/shards" in last
    assert str(plan.resolve()) in last and "--only protocol=h3" in last
    assert "make -C" in s
    # array task ids 1..3 are the shards 1..3
    assert [parse_shard("auto/3", {"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_MIN": "1"}).index
            for i in (1, 2, 3)] == [1, 2, 3]


@pytest.mark.parametrize("args,needle", [
    (["slurm", "{plan}", "--shards", "0"], "--shards"),
    (["slurm", "{plan}", "--shards", "3", "--partition", "a b;rm"], "--partition"),
    (["slurm", "{plan}", "--shards", "3", "--setup", "magic"], "--setup"),
    (["slurm", "{plan}", "--shards", "3", "--time", "soon"], "--time"),
    (["slurm", "{plan}", "--shards", "3", "--only", "protocol=h9"], "--only"),
    (["slurm", "{tmp}/nope.toml", "--shards", "3"], "nope.toml"),
    (["k8s", "{plan}", "--shards", "0"], "--shards"),
    (["k8s", "{plan}", "--shards", "2", "--image", "bad image"], "--image"),
    (["k8s", "{plan}", "--shards", "2", "--pvc", "$(x)"], "--pvc"),
    (["k8s", "{plan}", "--shards", "2", "--name", "Bad_Name"], "--name"),
])
def test_bad_input_is_exit_2_one_line_nothing_written(args, needle, plan, tmp_path, capfd, monkeypatch):
    out = tmp_path / "out"
    args = [a.format(plan=plan, tmp=tmp_path) for a in args] + ["--out", str(out)]
    code, _, err = cli(args, capfd, monkeypatch)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
