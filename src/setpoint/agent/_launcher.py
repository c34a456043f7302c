"""Start one container process (or an exec in one): the last step before the program runs.

Run by the agent as ``python3 -I -S _launcher.py SPEC.json`` with stdout and stderr already
the container's log pipes, in a new session. It uses the standard library only (it runs
before any site packages are importable, and must start fast), does what can only be done
from inside the new process, then executes the program:

1. joins the container's cgroups (so every descendant is a member from its birth);
2. enters the pod's network namespace, and a UTS namespace named after the pod;
3. as root with ``mount_ns``: a private mount namespace whose root is a tmpfs mirroring the
   host's (every top-level entry bind-mounted, recursively) plus the container's volumes
   bind-mounted at their ``mountPath``; a directory that does not exist on the host (say
   ``/etc/config``) is made by mirroring its parent entry by entry in the tmpfs too, so the
   host's own ``/etc`` is never written. Then ``chroot`` into it. An exec enters the target
   container's namespaces and root instead;
4. changes to ``workingDir``, resolves the program on ``PATH`` (a missing one is a
   ``StartError``, exit code 128, written to ``start_error`` as Kubernetes reports it);
5. for a container: marks itself a child subreaper and executes ``/bin/sh`` as a tiny
   supervisor that runs the program in the foreground (the program keeps the default
   signal dispositions), waits for it, and writes its exit status to ``exit_file`` before
   exiting with it — so the status survives an agent that is not there to wait for it, and
   orphans of the program are reparented to the supervisor, inside the container, not to
   init. An exec executes the program directly. Executing closes the "ready" pipe
   (``ready_fd``): the agent takes the container as started then, when its namespaces exist
   and an exec can enter them.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import Any, NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER = 36
TIOCSCTTY = 0x540E

# The supervisor: $1 is where the exit status goes, the rest is the program and arguments.
# Signals sent to the supervisor are handled (a no-op) once the program exits; the program
# itself gets them with their default meaning.
SHIM = 'f=$1; shift; trap : TERM INT HUP QUIT USR1 USR2; "$@"; c=$?; echo "$c" > "$f"; exit "$c"'

libc = ctypes.CDLL(None, use_errno=True)


class StartError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise StartError(f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    _check(libc.mount(source.encode() if source else None, target.encode(),
                      fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                      data.encode() if data else None),
           f"mount {source or fstype} on {target}")


def _setns(path: str, nstype: int) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def _join_cgroups(files: list[str]) -> None:
    me = str(os.getpid())
    for path in files:
        try:
            with open(path, "w") as f:
                f.write(me)
        except OSError as e:
            raise StartError(f"join cgroup {path}: {e.strerror}") from e


def _placeholder(src: str, dst: str) -> bool:
    """Make ``dst`` in the mirror look like ``src``: a dir, an empty file, or a symlink."""
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return False
    if os.path.isdir(src):
        os.mkdir(dst, 0o755)
    else:
        os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    return True


def _mirror(host_dir: str, mirror_root: str, shadowed: set[str]) -> None:
    """Mirror ``host_dir`` in ``mirror_root``: entries bound from the host, except shadowed
    directories, which are mirrored entry by entry themselves."""
    for name in os.listdir(host_dir):
        src = os.path.join(host_dir, name)
        dst = mirror_root + src
        if src in shadowed and os.path.isdir(src) and not os.path.islink(src):
            os.mkdir(dst, 0o755)
            _mirror(src, mirror_root, shadowed)
            continue
        try:
            if _placeholder(src, dst):
                _mount(src, dst, None, MS_BIND | MS_REC)
        except (OSError, StartError):
            continue  # vanished, or a special file that cannot be bound: leave it out


def _mounts_under(prefix: str) -> list[str]:
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                target = line.split()[4].replace("\\040", " ")
                if target.startswith(prefix):
                    out.append(target)
    except OSError:
        pass
    return sorted(out, key=len, reverse=True)


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def _build_root(spec: dict[str, Any]) -> None:
    """A private mount namespace with the container's root at spec['root'] (see step 3)."""
    _check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    # Slave, not private: nothing mounted here reaches the host, but what the host unmounts
    # (a deleted pod's network namespace file) is unmounted here too, so it can be removed.
    _mount(None, "/", None, MS_REC | MS_SLAVE)
    root = spec["root"]
    _mount("tmpfs", root, "tmpfs", 0, "mode=0755")
    needed = [m["target"] for m in spec["mounts"]]
    if spec.get("cwd"):
        needed.append(spec["cwd"])
    shadowed = {"/"}
    for path in needed:
        if not os.path.lexists(path):
            ancestor = _nearest_existing(path)
            while ancestor not in shadowed:  # shadow the chain from / down to it
                shadowed.add(ancestor)
                ancestor = os.path.dirname(ancestor)
    _mirror("/", root, shadowed)
    for m in spec["mounts"]:
        dst = root + m["target"]
        if not os.path.lexists(dst):
            if os.path.isdir(m["source"]):
                os.makedirs(dst, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(dst), 0o755, exist_ok=True)
                os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        _mount(m["source"], dst, None, MS_BIND | MS_REC)
        if m.get("readOnly"):
            _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    if spec.get("cwd"):
        os.makedirs(root + spec["cwd"], 0o755, exist_ok=True)
    os.chdir(root)
    os.chroot(".")
    # The mirror of the directory that holds the root shows the tmpfs again: hide it. And the
    # container has no use for the host's network namespace files (its copies of them would
    # keep a deleted pod's file busy).
    libc.umount2(root.encode(), MNT_DETACH)
    for target in _mounts_under("/run/netns/"):
        libc.umount2(target.encode(), MNT_DETACH)


def _enter_container(spec: dict[str, Any]) -> None:
    """An exec: the target container's network, UTS and mount namespaces, and its root."""
    target = spec["target_pid"]
    root_fd = os.open(f"/proc/{target}/root", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for ns, flag in (("net", CLONE_NEWNET), ("uts", CLONE_NEWUTS), ("mnt", CLONE_NEWNS)):
            if os.readlink(f"/proc/{target}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"):
                _setns(f"/proc/{target}/ns/{ns}", flag)
        os.fchdir(root_fd)
        os.chroot(".")
    finally:
        os.close(root_fd)


def _which(program: str, env: dict[str, str]) -> str | None:
    if "/" in program:
        return program if os.access(program, os.X_OK) else None
    for d in (env.get("PATH") or os.defpath).split(":"):
        candidate = os.path.join(d or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _fail(spec: dict[str, Any], message: str, code: int) -> NoReturn:
    try:
        with open(spec["start_error"], "w") as f:
            json.dump({"exitCode": code, "reason": "StartError", "message": message}, f)
    except (OSError, KeyError):
        pass
    sys.stderr.write(message + "\n")
    os._exit(code)


def main(path: str) -> None:
    with open(path) as f:
        spec: dict[str, Any] = json.load(f)
    env: dict[str, str] = spec["env"]
    if spec.get("ready_fd") is not None:
        # Closed by the exec below (or by exiting): the agent's sign that the program runs.
        os.set_inheritable(int(spec["ready_fd"]), False)
    try:
        if spec.get("tty"):
            os.setsid()
            import fcntl  # only an exec with a terminal needs it
            fcntl.ioctl(0, TIOCSCTTY, 0)
        _join_cgroups(spec.get("cgroups") or [])
        if spec.get("mode") == "exec" and spec.get("target_pid"):
            _enter_container(spec)
        else:
            if spec.get("netns"):
                _setns(spec["netns"], CLONE_NEWNET)
            if spec.get("hostname"):
                _check(libc.unshare(CLONE_NEWUTS), "unshare UTS namespace")
                name = spec["hostname"].encode()
                _check(libc.sethostname(name, len(name)), "sethostname")
            if spec.get("mount_ns"):
                _build_root(spec)
        cwd = spec.get("cwd") or "/"
        try:
            os.chdir(cwd)
        except OSError as e:
            raise StartError(f'chdir to cwd ("{cwd}") set in config.json failed: '
                             f"{(e.strerror or str(e)).lower()}") from e
        program = _which(spec["argv"][0], env)
        if program is None:
            raise StartError(f'exec: "{spec["argv"][0]}": executable file not found in $PATH')
    except StartError as e:
        if spec.get("mode") == "exec":  # what kubectl exec prints, and its exit code
            _fail(spec, f"OCI runtime exec failed: exec failed: unable to start container "
                        f"process: {e}: unknown", 126)
        _fail(spec, "failed to create containerd task: failed to create shim task: OCI runtime "
                    f"create failed: runc create failed: unable to start container process: {e}"
                    ": unknown", 128)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; programs must not
        signal.signal(sig, signal.SIG_DFL)
    if spec.get("mode") == "exec":
        os.execve(program, spec["argv"], env)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    shell = spec.get("shell") or "/bin/sh"
    os.execve(shell, [shell, "-c", SHIM, "sh", spec["exit_file"], program, *spec["argv"][1:]],
              env)


def _child(spec_path: str, fds: list[int]) -> NoReturn:
    """In a forked child of the spawner: become the container's launcher."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)  # 0, 1, 2 and the ready pipe (3)
        os.closerange(len(fds), 1 << 16)
        main(spec_path)
    except BaseException as e:  # nothing may return into the spawner's loop
        try:
            os.write(2, f"setpoint launcher: {e}\n".encode())
        finally:
            os._exit(127)
    os._exit(127)


def serve(sock_fd: int) -> None:
    """The spawner: fork a launcher per request, report each child's exit status.

    Requests arrive on a SOCK_SEQPACKET socket (fd ``sock_fd``) as ``{"id": N, "spec": PATH}``
    with the new process's stdin, stdout, stderr and ready-pipe descriptors attached; the
    answer is ``{"id": N, "pid": PID}``, and ``{"exited": PID, "code": CODE}`` follows when
    that child ends (128 + signal for a signal). Forking this small, already started process
    costs a fraction of starting a new interpreter. It exits when the agent's end closes
    (its children, in their own sessions, keep running).
    """
    import select
    import socket

    sock = socket.socket(fileno=sock_fd)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: set[int] = set()

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            sock.send(json.dumps({"exited": pid, "code": 128 - code if code < 0 else code})
                      .encode())

    while True:
        ready, _, _ = select.select([sock_fd, wake_r], [], [])
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        reap()
        if sock_fd not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        except InterruptedError:
            continue
        if not data:
            return
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request["spec"], fds)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main(sys.argv[1])
