#!/usr/bin/env python3
"""tune under a real single-node Slurm cluster on localhost, through scripts/slurm/.

Starts munged (with a key made here), slurmctld and slurmd from a temporary folder (its own
slurm.conf, ports, sockets, state and logs), then the daemon as a Slurm job
(tune-serve.sbatch) and two CPU workers as a job array (tune-workers). A two-task model is
submitted; while a worker holds a batch, its array task is scancelled. The job must finish
with exactly one search record per config (none lost, none twice), the cancelled worker must
have left on SIGTERM and be listed gone, and scancelling the daemon's job must shut it down
and remove its address file. Everything this test started is ended in all cases.

With --gpu-plumbing the node has two stand-in GPUs (gres/gpu on device files made here) and the
test checks that GPU workers submitted by tune-workers get one GPU each and measure on
cuda:0, with a stand-in tune (there is no GPU here to measure on).

Exit status: 0 passed, 1 failed, 77 skipped (slurmctld/slurmd cannot run here for lack of
permission, i.e. not root).

  slurm_cluster_test.py --tune BUILD/bin/tune --source REPO [--gpu-plumbing] [--keep]
"""

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
MARKER = "TUNE_SLURM_TEST_DIR"  # in the environment of every process this test starts
TRIALS = 16                     # per task
BATCH = 8                       # per round, split over the live workers
STOP_GRACE = 1                  # the workers' --stop-grace (below KillWait): a batch may outlast it
KILL_WAIT = 30                  # slurm.conf KillWait: SIGTERM .. SIGKILL


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_for(what, pred, limit_s, interval=0.2):
    """Polls pred() until it returns something truthy (returned) or limit_s passes (Failure).
    The limit is a safety net against hangs, not a timing assertion."""
    end = time.monotonic() + limit_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Failure(f"timed out after {limit_s} s waiting for {what}")
        time.sleep(interval)


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
        return "\n".join(lines[-n:])
    except OSError as e:
        return f"({e})"


class Cluster:
    """munged + slurmctld + slurmd in `root`, their processes children of this one."""

    def __init__(self, root, env, gpus=0):
        self.root = root
        self.env = env
        self.gpus = gpus
        self.procs = {}
        self.node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip() or "localhost"
        self.conf = os.path.join(root, "slurm.conf")
        self.env["SLURM_CONF"] = self.conf

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def start(self):
        for d in ("munge", "state", "spool"):
            os.makedirs(self.path(d))
        # munged refuses a socket folder that others cannot traverse, and a key others can read.
        os.chmod(self.root, 0o755)
        os.chmod(self.path("munge"), 0o755)
        subprocess.run(["mungekey", "--create", "--keyfile", self.path("munge", "munge.key")], check=True,
                       env=self.env)
        sock = self.path("munge", "munge.sock")
        self.spawn("munged", ["munged", "--foreground", "--key-file", self.path("munge", "munge.key"), "--socket",
                              sock, "--pid-file", self.path("munge", "munged.pid"), "--log-file",
                              self.path("munge", "munged.log"), "--seed-file", self.path("munge", "munged.seed")])
        wait_for("munged", lambda: self.alive("munged") and subprocess.run(
            ["munge", "--socket", sock, "--no-input"], capture_output=True, env=self.env).returncode == 0, 30)

        gres = ""
        if self.gpus:
            # Stand-in GPUs: Slurm's gres/gpu wants character devices; these are /dev/null's
            # and /dev/zero's numbers under other names. Nothing opens them.
            os.makedirs(self.path("dev"))
            for i in range(self.gpus):
                try:
                    os.mknod(self.path("dev", f"nvidia{i}"), 0o666 | stat.S_IFCHR, os.makedev(1, 3 + 2 * (i % 2)))
                except PermissionError as e:
                    raise Skip(f"cannot make stand-in GPU device files here: {e}")
            with open(self.path("gres.conf"), "w") as f:
                f.write(f"NodeName={self.node} Name=gpu File={self.path('dev')}/nvidia[0-{self.gpus - 1}]\n")
            gres = f"GresTypes=gpu\n"
        ctld_port, slurmd_port = free_ports(2)
        with open(self.conf, "w") as f:
            f.write(f"""# A throwaway single-node cluster of tests/deploy/slurm_cluster_test.py.
ClusterName=tunetest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={self.path("state")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("slurmctld.log")}
SlurmdLogFile={self.path("slurmd.log")}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait={KILL_WAIT}
# Four CPUs on a two-core host: the daemon's job and two workers' jobs (one CPU each) at once.
SlurmdParameters=config_overrides
{gres}NodeName={self.node} NodeAddr=127.0.0.1 CPUs=4 {f"Gres=gpu:{self.gpus} " if self.gpus else ""}State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.node])
        try:
            wait_for("the node to be idle in sinfo",
                     lambda: self.check_alive() and "idle" in self.run(["sinfo", "-h", "-o", "%T"]).stdout, 60, 0.5)
        except Failure:
            self.skip_if_permission()
            raise

    def spawn(self, name, argv):
        out = open(self.path(name + ".stdio"), "w")
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)

    def alive(self, name):
        return self.procs[name].poll() is None

    def check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                self.skip_if_permission()
                raise Failure(f"{name} exited with status {p.returncode}:\n{self.logs(name)}")
        return True

    def logs(self, name):
        logfile = {"munged": self.path("munge", "munged.log"), "slurmctld": self.path("slurmctld.log"),
                   "slurmd": self.path("slurmd.log")}[name]
        return tail(self.path(name + ".stdio"), 20) + "\n" + tail(logfile, 30)

    def skip_if_permission(self):
        text = "".join(self.logs(n) for n in ("slurmctld", "slurmd"))
        if re.search(r"Permission denied|Operation not permitted|must be run as root|setuid|setgid", text):
            raise Skip("slurmctld/slurmd cannot run here for lack of permission:\n" + text)

    def run(self, argv, check=False, timeout=60):
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise Failure(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def jobs(self):
        """Job id (array tasks as J_T) -> state, from squeue."""
        r = self.run(["squeue", "-h", "-r", "-o", "%i %T"])
        return dict(line.split() for line in r.stdout.splitlines() if line.strip())

    def stop(self):
        """Cancels every job, waits for them to end, stops the daemons."""
        if self.procs.get("slurmctld") is not None and self.alive("slurmctld"):
            try:
                self.run(["scancel", "--full", "--signal", "KILL", "--user", "root"], timeout=20)
                self.run(["scancel", "--user", "root"], timeout=20)
                end = time.monotonic() + 20
                while time.monotonic() < end and self.jobs():
                    time.sleep(0.5)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def sweep(marker_value):
    """SIGKILLs every process whose environment carries this test's marker (job steps,
    slurmstepd, tune processes that outlived their jobs), other than this one."""
    needle = f"{MARKER}={marker_value}".encode() + b"\0"
    killed = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read() + b"\0":
                    continue
            os.kill(int(pid), signal.SIGKILL)
            killed.append(int(pid))
        except (OSError, ProcessLookupError):
            pass
    return killed


class Scenario:
    def __init__(self, cluster, tune, source):
        self.c = cluster
        self.tune = tune
        self.slurm_dir = os.path.join(source, "scripts", "slurm")
        self.token = cluster.path("token")
        self.address_file = cluster.path("daemon.address")
        self.db = cluster.path("records.db")
        with open(self.token, "w") as f:
            f.write(secrets.token_hex(16) + "\n")
        os.chmod(self.token, 0o600)
        env = cluster.env
        env.update(TUNE_BIN=tune, TUNE_TOKEN_FILE=self.token, TUNE_ADDRESS_FILE=self.address_file)
        env.pop("TUNE_TOKEN", None)
        env.pop("TUNE_SERVER", None)
        self.address = None

    def tune_cmd(self, *args, timeout=60):
        return self.c.run([self.tune, *args, "--server", self.address, "--token-file", self.token], timeout=timeout)

    def workers(self):
        """name -> state, from `tune workers`."""
        r = self.tune_cmd("workers")
        if r.returncode != 0:
            raise Failure(f"tune workers exited {r.returncode}: {r.stderr}")
        rows = {}
        for line in r.stdout.splitlines():
            m = re.match(r"\s*\d+\s+(\S+)\s+\S+\s+\S+\s+(\S+)\s", line)
            if m:
                rows[m.group(1)] = m.group(2)
        return rows

    def run(self):
        c = self.c
        # The daemon, as a Slurm job, on loopback; it writes its address for the workers.
        serve_env = dict(c.env, TUNE_DB=self.db, TUNE_LISTEN="127.0.0.1:0", TUNE_ADVERTISE_HOST="127.0.0.1")
        serve_job = subprocess.run(
            ["sbatch", "--parsable", "--chdir", c.root, "--output", c.path("serve-%j.out"),
             os.path.join(self.slurm_dir, "tune-serve.sbatch")],
            capture_output=True, text=True, env=serve_env, timeout=60)
        if serve_job.returncode != 0:
            raise Failure(f"sbatch tune-serve.sbatch: {serve_job.stderr}")
        serve_id = serve_job.stdout.strip().split(";")[0]
        log(f"daemon job {serve_id} submitted")
        self.address = wait_for("the daemon's address file", lambda: self._read_address(serve_id), 60)
        log(f"daemon at {self.address}")

        # Two CPU workers as one job array.
        worker_env = dict(c.env, TUNE_WORKER_TARGET="llvm", TUNE_STOP_GRACE=str(STOP_GRACE))
        r = subprocess.run([os.path.join(self.slurm_dir, "tune-workers"), "2", "--chdir", c.root,
                            "--output", c.path("worker-%A_%a.out")],
                           capture_output=True, text=True, env=worker_env, timeout=60)
        if r.returncode != 0:
            raise Failure(f"tune-workers: {r.stderr}")
        array_id = r.stdout.strip().split(";")[0]
        names = {f"{c.node}/slurm-{array_id}_{t}": f"{array_id}_{t}" for t in (0, 1)}
        log(f"worker array {array_id} submitted")
        wait_for("both workers to register", lambda: self._registered(names), 90, 0.5)
        log("both workers registered: " + ", ".join(names))

        model = c.path("two.json")
        with open(model, "w") as f:
            json.dump({"name": "two", "layers": [
                {"name": "mm", "op": "matmul", "shape": "48,40,56"},
                {"name": "fc", "op": "dense", "shape": "1,96,128", "bias": True}]}, f)
        submit_out = open(c.path("submit.out"), "w")
        submit = subprocess.Popen(
            [self.tune, "submit", model, "--server", self.address, "--token-file", self.token, "--trials",
             str(TRIALS), "--batch", str(BATCH), "--strategy", "random", "--seed", "7"],
            stdout=submit_out, stderr=subprocess.STDOUT, env=c.env)
        try:
            # A worker measuring a search batch (more than the one default config, not yet
            # committed): cancel its array task.
            busy, batch = wait_for("a worker measuring a search batch", lambda: next(
                filter(None, (self._search_batch_in_hand(n, t) for n, t in names.items())), None), 120, 0.05)
            victim = names[busy]
            c.run(["scancel", victim], check=True)
            log(f"scancelled {victim} ({busy}) while it measured batch {batch}")
            other = next(n for n in names if n != busy)
            rc = submit.wait(300)
        finally:
            if submit.poll() is None:
                submit.kill()
                submit.wait()
            submit_out.close()
        out = tail(c.path("submit.out"), 30)
        if rc != 0 or not re.search(r"job 1 done", out):
            raise Failure(f"tune submit exited {rc}:\n{out}")
        log("job 1 done")

        # The cancelled worker left on its SIGTERM (its stop, then exit 0), before KillWait's
        # SIGKILL, and said goodbye.
        victim_out = c.path(f"worker-{victim}.out")
        wait_for(f"job {victim} to end", lambda: victim not in c.jobs(), KILL_WAIT + 30, 0.5)
        text = open(victim_out, errors="replace").read()
        if not re.search(r"tune worker: batch \d+: \d+ configs", text):
            raise Failure(f"the cancelled worker never measured a batch:\n{text}")
        # The batch in hand was finished and returned or given back within the stop grace, or
        # (when the signal came a moment after it was measured) committed before the stop.
        stop = re.search(rf"tune worker: stopping: batch {batch} (finished and returned|given back unmeasured|"
                         r"abandoned unfinished, given back unmeasured)", text)
        committed = re.search(rf"tune worker: batch {batch} committed.*tune worker: stopping\n", text, re.DOTALL)
        if not (stop or committed) or not text.endswith("tune worker: stopping\n"):
            raise Failure(f"the cancelled worker did not stop on SIGTERM with batch {batch} in hand:\n{text}")
        log(f"the cancelled worker: batch {batch} {stop.group(1) if stop else 'committed before the stop'}")
        state = self.workers()
        if state.get(busy) != "gone":
            raise Failure(f"the cancelled worker {busy} is {state.get(busy)}, not gone: {state}")
        if state.get(other) not in ("idle", "busy"):
            raise Failure(f"the other worker {other} is {state.get(other)}: {state}")
        log(f"{busy} listed gone, {other} {state.get(other)}")
        self.check_records()

        # The daemon's job: scancel shuts the daemon down through the script, which removes the
        # address file.
        c.run(["scancel", serve_id], check=True)
        wait_for(f"job {serve_id} to end", lambda: serve_id not in c.jobs(), KILL_WAIT + 30, 0.5)
        serve_out = open(c.path(f"serve-{serve_id}.out"), errors="replace").read()
        if "SIGTERM, shutting down" not in serve_out or "daemon exited with status 0" not in serve_out:
            raise Failure(f"the daemon did not shut down on SIGTERM:\n{serve_out}")
        if os.path.exists(self.address_file):
            raise Failure("the daemon's address file outlived it")
        log(f"daemon job {serve_id} shut down cleanly")
        self.check_records()  # and nothing changed on the way out

    def _registered(self, names):
        """True once every worker is listed idle; a Failure when one's job ended before."""
        listed = self.workers()
        if all(listed.get(n) == "idle" for n in names):
            return True
        jobs = self.c.jobs()
        for name, task in names.items():
            if task not in jobs and name not in listed:
                raise Failure(f"worker job {task} ended without registering:\n" +
                              tail(self.c.path(f"worker-{task}.out")))
        return False

    def _search_batch_in_hand(self, name, task):
        """(name, batch id) when the worker's last batch has several configs and no commit yet."""
        try:
            with open(self.c.path(f"worker-{task}.out"), errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        started = re.findall(r"tune worker: batch (\d+): (\d+) configs", text)
        if not started or int(started[-1][1]) < 2:
            return None
        batch = started[-1][0]
        return None if f"batch {batch} committed" in text else (name, batch)

    def _read_address(self, serve_id):
        if serve_id not in self.c.jobs():
            raise Failure(f"the daemon's job {serve_id} ended:\n" + tail(self.c.path(f"serve-{serve_id}.out")))
        try:
            with open(self.address_file) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def check_records(self):
        """Each task holds exactly TRIALS search records, one per config, all measured ok."""
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            tasks = [r[0] for r in db.execute("SELECT id FROM tasks ORDER BY id")]
            if len(tasks) != 2:
                raise Failure(f"{len(tasks)} tasks in the database, not 2")
            for task in tasks:
                rows = db.execute(
                    "SELECT config_index, count(*), group_concat(status) FROM records "
                    "WHERE task_id = ? AND strategy NOT IN ('default', 'finalist') GROUP BY config_index",
                    (task,)).fetchall()
                twice = [(i, n) for i, n, _ in rows if n != 1]
                if twice:
                    raise Failure(f"task {task}: configs recorded more than once (index, count): {twice}")
                if len(rows) != TRIALS:
                    raise Failure(f"task {task}: {len(rows)} configs recorded, not {TRIALS}")
                bad = [(i, s) for i, _, s in rows if s != "ok"]
                if bad:
                    raise Failure(f"task {task}: configs not measured ok: {bad}")
        finally:
            db.close()
        log(f"records: 2 tasks x {TRIALS} configs, each once, all ok")


class GpuScenario:
    """GPU workers through tune-workers on a node with two stand-in GPUs: each array task gets
    one GPU of its own (CUDA_VISIBLE_DEVICES) and runs `tune worker --target cuda:0`. A stand-in
    tune prints what it was given (no GPU here to measure on); a cuda worker submitted without
    --gres=gpu:1 refuses to start."""

    def __init__(self, cluster):
        self.c = cluster
        self.fake = cluster.path("fake-tune")
        with open(self.fake, "w") as f:
            f.write('#!/bin/sh\necho "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES tune $*"\n')
        os.chmod(self.fake, 0o755)

    def run(self, slurm_dir):
        c = self.c
        env = dict(c.env, TUNE_BIN=self.fake, TUNE_SERVER="127.0.0.1:9", TUNE_WORKER_TARGET="cuda")
        r = subprocess.run([os.path.join(slurm_dir, "tune-workers"), "2", "--chdir", c.root, "--output",
                            c.path("gpu-%A_%a.out")], capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0:
            raise Failure(f"tune-workers: {r.stderr}")
        array_id = r.stdout.strip().split(";")[0]
        plain = subprocess.run(["sbatch", "--parsable", "--chdir", c.root, "--output", c.path("nogpu-%j.out"),
                                os.path.join(slurm_dir, "tune-worker.sbatch")],
                               capture_output=True, text=True, env=env, timeout=60)
        if plain.returncode != 0:
            raise Failure(f"sbatch tune-worker.sbatch: {plain.stderr}")
        plain_id = plain.stdout.strip().split(";")[0]
        tasks = [f"{array_id}_{t}" for t in (0, 1)]
        wait_for("the GPU worker jobs to end", lambda: not set(tasks + [plain_id]) & set(c.jobs()), 60, 0.5)
        devices = set()
        for task in tasks:
            text = tail(c.path(f"gpu-{task}.out"))
            m = re.search(r"^CUDA_VISIBLE_DEVICES=(\d+) tune worker (.*)$", text, re.M)
            if not m or "--target cuda:0" not in m.group(2) or f"/slurm-{task} " not in m.group(2) + " ":
                raise Failure(f"GPU worker {task} did not run `tune worker --target cuda:0` on one GPU:\n{text}")
            devices.add(m.group(1))
        if devices != {"0", "1"}:
            raise Failure(f"the two GPU workers got devices {sorted(devices)}, not one each of 0 and 1")
        log(f"GPU workers {', '.join(tasks)}: one GPU each ({', '.join(sorted(devices))}), --target cuda:0")
        text = tail(c.path(f"nogpu-{plain_id}.out"))
        if "needs a GPU" not in text or "CUDA_VISIBLE_DEVICES=" in text:
            raise Failure(f"a cuda worker without --gres=gpu:1 started:\n{text}")
        log("a cuda worker without --gres=gpu:1 refused to start")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tune", required=True, help="the tune executable")
    ap.add_argument("--source", required=True, help="the repository (for scripts/slurm)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--gpu-plumbing", action="store_true",
                    help="instead: GPU workers on stand-in GPUs get one each (GpuScenario)")
    args = ap.parse_args()
    tune = os.path.abspath(args.tune)
    if not os.access(tune, os.X_OK):
        print(f"FAIL: no tune executable at {tune}")
        return 1
    if os.geteuid() != 0:
        print("SKIP: slurmd must run as root to start jobs as their users, and this is not root")
        return SKIP
    missing = [t for t in ("munged", "mungekey", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scancel",
                           "sinfo") if shutil.which(t) is None]
    if missing:
        print(f"FAIL: {' '.join(missing)} not installed (scripts/setup installs slurm-wlm and munge)")
        return 1

    root = tempfile.mkdtemp(prefix="tune-slurm-")
    env = dict(os.environ, **{MARKER: root})
    for k in list(env):
        if k.startswith("SLURM_"):  # this test may itself run under Slurm: talk to our cluster only
            del env[k]
    cluster = Cluster(root, env, gpus=2 if args.gpu_plumbing else 0)
    start = time.monotonic()
    status = 1
    try:
        log(f"cluster in {root}, node {cluster.node}")
        cluster.start()
        log("munged, slurmctld and slurmd up")
        if args.gpu_plumbing:
            GpuScenario(cluster).run(os.path.join(args.source, "scripts", "slurm"))
        else:
            Scenario(cluster, tune, args.source).run()
        status = 0
    except Skip as e:
        print(f"SKIP: {e}")
        status = SKIP
    except Exception as e:  # a Failure, or a bug here: the logs either way
        print(f"FAIL: {e}" if isinstance(e, Failure) else f"FAIL: {traceback.format_exc()}")
        for name in ("slurmctld", "slurmd"):
            print(f"--- {name} ---\n{tail(cluster.path(name + '.log'), 15)}")
        for f in sorted(os.listdir(root)):
            if f.endswith(".out") or f.endswith(".log") and f.startswith("tune-serve"):
                print(f"--- {f} ---\n{tail(os.path.join(root, f), 25)}")
    finally:
        cluster.stop()
        killed = sweep(root)
        if killed:
            log(f"ended {len(killed)} leftover processes: {killed}")
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if status == 0:
        log(f"PASS in {time.monotonic() - start:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
