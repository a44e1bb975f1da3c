#!/usr/bin/env python3
"""Offline checks of deploy/: the Kubernetes manifests and the container build file.

  deploy_files_test.py manifests  --source REPO   the manifests validate against the Kubernetes
                                                  API schemas (kubernetes-validate --strict, its
                                                  bundled schemas, without network) and hang
                                                  together: ports, probes, the token Secret,
                                                  the database claim, grace periods, GPUs
  deploy_files_test.py broken     --source REPO   a copy with a field of the wrong type fails
                                                  that validation
  deploy_files_test.py dockerfile --source REPO   deploy/Dockerfile installs what scripts/setup
                                                  does, by running it

Run with the Python of scripts/setup's test environment (.venv-test: PyYAML and
kubernetes-validate). Exit status 0 passed, 1 failed.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

MANIFESTS = ("daemon.yaml", "workers.yaml")


class Failure(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Failure(msg)


def validator():
    exe = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    expect(os.access(exe, os.X_OK), f"no kubernetes-validate beside {sys.executable} (scripts/setup installs it)")
    return exe


def validate(paths):
    """Runs kubernetes-validate --strict on paths, in a network namespace of its own (no
    network at all) where this host allows one, so that passing proves it works offline."""
    argv = [validator(), "--strict", *paths]
    env = dict(os.environ, HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    offline = shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    if offline:
        argv = ["unshare", "-n", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    return r, offline


def load(source):
    docs = {}
    for name in MANIFESTS:
        with open(os.path.join(source, "deploy", "k8s", name)) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def flag(args, name):
    """The value of --name=VALUE in a container's args (None when absent)."""
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def check_manifests(source):
    paths = [os.path.join(source, "deploy", "k8s", n) for n in MANIFESTS]
    r, offline = validate(paths)
    expect(r.returncode == 0, f"kubernetes-validate failed:\n{r.stdout}\n{r.stderr}")
    passed = re.findall(r"passed for resource (\S+)", r.stdout + r.stderr)
    print(f"kubernetes-validate --strict{' (no network)' if offline else ''}: {', '.join(passed)}")

    docs = load(source)
    expect(not any(kind == "Secret" for kind, _ in docs), "a Secret is committed; the token is created by hand")
    sts = docs.get(("StatefulSet", "tune-daemon"))
    expect(sts is not None, "no StatefulSet tune-daemon")
    expect(sts["spec"]["replicas"] == 1, "the daemon must have one replica (one SQLite writer)")
    pod = sts["spec"]["template"]["spec"]
    (daemon,) = pod["containers"]
    args = daemon["args"]
    expect(args[0] == "serve", f"the daemon runs {args[0]}, not serve")
    listen_port = int(flag(args, "listen").rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in daemon["ports"]}
    expect(ports.get("grpc") == listen_port, f"containerPort {ports} is not the --listen port {listen_port}")

    # The database lives on the claim template's volume; the token comes from the Secret.
    claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}
    mounts = {m["name"]: m["mountPath"] for m in daemon["volumeMounts"]}
    db = flag(args, "db")
    expect(any(db.startswith(mounts[c] + "/") for c in claims if c in mounts),
           f"--db={db} is not on a PersistentVolumeClaim mount ({mounts}, claims {claims})")
    check_token(pod, daemon, "daemon")

    # The probes make a real call to this daemon, on its port, with the token.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = daemon.get(probe, {}).get("exec", {}).get("command")
        expect(cmd, f"the daemon has no exec {probe}")
        expect(cmd[0] == "tune" and cmd[1] in ("workers", "jobs"), f"{probe} runs {cmd}")
        expect(flag(cmd, "server") == f"127.0.0.1:{listen_port}", f"{probe} asks {flag(cmd, 'server')}")
        expect(flag(cmd, "token-file") == flag(args, "token-file"), f"{probe} has another token file")

    for svc_name in ("tune-daemon", sts["spec"]["serviceName"]):
        svc = docs.get(("Service", svc_name))
        expect(svc is not None, f"no Service {svc_name}")
        expect(svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items(),
               f"Service {svc_name} does not select the daemon's pods")
        expect(any(p["port"] == listen_port and p["targetPort"] in ("grpc", listen_port) for p in svc["spec"]["ports"]),
               f"Service {svc_name} does not carry port {listen_port}")

    # Workers: GPU ones take one GPU each and measure on it; CPU ones measure llvm. Their
    # grace period covers --stop-grace (the batch in hand) plus the goodbye's RPC deadlines.
    targets = {}
    for (kind, name), doc in docs.items():
        if kind not in ("Deployment", "DaemonSet"):
            continue
        wpod = doc["spec"]["template"]["spec"]
        (worker,) = wpod["containers"]
        wargs = worker["args"]
        expect(wargs[0] == "worker", f"{name} runs {wargs[0]}")
        expect(flag(wargs, "server") == f"tune-daemon:{listen_port}", f"{name} talks to {flag(wargs, 'server')}")
        check_token(wpod, worker, name)
        grace = float(flag(wargs, "stop-grace") or 10)
        expect(wpod["terminationGracePeriodSeconds"] >= grace + 10,
               f"{name}: terminationGracePeriodSeconds {wpod['terminationGracePeriodSeconds']} < stop grace {grace} + 10")
        target = flag(wargs, "target")
        gpus = worker.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if target.startswith("cuda"):
            expect(gpus == 1, f"{name}: a cuda worker must limit nvidia.com/gpu to 1, not {gpus}")
            expect(target == "cuda:0", f"{name}: the container's one GPU is cuda:0, not {target}")
        else:
            expect(target == "llvm" and gpus is None, f"{name}: target {target} with {gpus} GPUs")
        targets[target.split(":")[0]] = name
    expect(set(targets) == {"cuda", "llvm"}, f"workers for {sorted(targets)}, not both cuda and llvm")
    print(f"manifests hang together: daemon on {listen_port}, db {db}, workers {targets}")


def check_token(pod, container, who):
    """The --token-file is a file of a volume mounted from the Secret tune-token."""
    args = container["args"]
    token = flag(args, "token-file")
    expect(token, f"{who} has no --token-file")
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in container["volumeMounts"]:
        if token.startswith(m["mountPath"] + "/"):
            secret = volumes[m["name"]].get("secret", {})
            expect(secret.get("secretName") == "tune-token", f"{who}: {token} is not from the Secret tune-token")
            # Secret files belong to root and the pod's fsGroup: a non-root container reads a
            # file that is not world-readable only through that group.
            mode = secret.get("defaultMode", 0o644)
            user = pod.get("securityContext", {}).get("runAsUser", 0)
            group_readable = mode & 0o040 and pod.get("securityContext", {}).get("fsGroup") is not None
            expect(user == 0 or mode & 0o004 or group_readable,
                   f"{who}: runs as user {user} but cannot read {token} (mode {oct(mode)}, no fsGroup)")
            return
    raise Failure(f"{who}: --token-file={token} is on no mounted volume")


def check_broken(source):
    """A copy of the daemon manifest with spec.replicas a string must fail validation."""
    with open(os.path.join(source, "deploy", "k8s", "daemon.yaml")) as f:
        text = f.read()
    broken = re.sub(r"(?m)^  replicas: 1$", '  replicas: "one"', text)
    expect(broken != text, "found no 'replicas: 1' to break")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "daemon-broken.yaml")
        with open(path, "w") as f:
            f.write(broken)
        r, _ = validate([path])
    out = r.stdout + r.stderr
    expect(r.returncode != 0, f"a string spec.replicas passed validation:\n{out}")
    expect(re.search(r"spec\.replicas: 'one' is not of type 'integer'", out), f"not the expected error:\n{out}")
    print("the broken copy fails: " + next(line for line in out.splitlines() if "replicas" in line))


def check_dockerfile(source):
    with open(os.path.join(source, "deploy", "Dockerfile")) as f:
        text = f.read()
    # Joined continuation lines, comments dropped: one instruction per line.
    lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
    expect(lines[0].split() == ["FROM", "debian:12"], f"the image is not based on debian:12: {lines[0]}")
    copied = any(re.match(r"COPY\s+\.\s+/opt/tune$", l) for l in lines)
    expect(copied, "the Dockerfile does not COPY the repository (scripts/setup with it)")
    runs = [l for l in lines if l.startswith("RUN ")]
    expect(any(re.search(r"(^|[\s;&|])scripts/(build|setup)(\s|$)", r[4:]) for r in runs),
           "no RUN step invokes scripts/build or scripts/setup")
    with open(os.path.join(source, "scripts", "build")) as f:
        expect(re.search(r'^"\$root/scripts/setup"$', f.read(), re.M), "scripts/build no longer runs scripts/setup")
    # Packages named in the Dockerfile itself: only the container's own, never a second copy
    # of scripts/setup's list that could drift from it.
    with open(os.path.join(source, "scripts", "setup")) as f:
        setup = f.read()
    pkgs = set(re.search(r"PKGS=\(([^)]*)\)", setup).group(1).split())
    expect(pkgs, "no PKGS list in scripts/setup")
    named = set()
    for r in runs:
        for m in re.finditer(r"apt-get install((?:\s+-\S+)*)((?:\s+[a-z0-9][a-z0-9.+-]*)+)", r):
            named |= set(m.group(2).split())
    twice = named & pkgs
    expect(not twice, f"the Dockerfile installs {sorted(twice)} itself; scripts/setup owns them")
    extra = named - {"ca-certificates", "tini", "nvidia-cuda-toolkit"}
    expect(not extra, f"packages beyond scripts/setup's and the container's own: {sorted(extra)}")
    print(f"deploy/Dockerfile: debian:12, runs scripts/build (scripts/setup: {len(pkgs)} packages), "
          f"besides them only {sorted(named)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("check", choices=("manifests", "broken", "dockerfile"))
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    try:
        {"manifests": check_manifests, "broken": check_broken, "dockerfile": check_dockerfile}[a.check](a.source)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
