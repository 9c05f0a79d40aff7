"""The fidelity bench's tree (issue 17): deep nesting, odd names (non-UTF-8, newline, spaces,
leading dash), hard links, symlinks of every kind, xattrs, ACLs, owners that are no user or
group here, set-id and sticky modes, pre-1970 and sub-second mtimes, fifos, a device, a file
capability, a sparse file. Generated at run time, as root (owners, trusted., devices)."""
import base64
import os
import shutil
import socket
import stat
import subprocess

CAP_NET_RAW = base64.b64decode("AQAAAgAgAAAAAAAAAAAAAAAAAAA=")  # cap_net_raw+ep, VFS_CAP_REVISION_2


def make(root):
    root = os.fsencode(root)
    j = lambda *p: os.path.join(root, *[os.fsencode(x) if isinstance(x, str) else x for x in p])
    os.makedirs(root)
    deep = j(*["level%02d" % i for i in range(40)])
    os.makedirs(deep)
    with open(os.path.join(deep, b"bottom"), "wb") as f:
        f.write(b"deep\n")
    odd = [b"caf\xe9 latin-1", b"\xff\xfe not utf-8", b"new\nline", b"  spaces  ", b"-leading dash", "日本語".encode()]
    os.makedirs(j("names"))
    for i, n in enumerate(odd):
        with open(os.path.join(j("names"), n), "wb") as f:
            f.write(bytes([i]) * (i * 1000 + 1))
    # Hard links: a group of three across directories, a pair, and one inside the deep nest.
    os.makedirs(j("links", "a"))
    os.makedirs(j("links", "b"))
    with open(j("links", "a", "three"), "wb") as f:
        f.write(os.urandom(200_000))
    os.link(j("links", "a", "three"), j("links", "b", "three-2"))
    os.link(j("links", "a", "three"), j("links", "three-3"))
    with open(j("links", "pair"), "wb") as f:
        f.write(b"pair\n")
    os.link(j("links", "pair"), os.path.join(deep, b"pair-deep"))
    # Symlinks: relative, absolute, dangling, to a directory, to a symlink, a loop.
    os.makedirs(j("sym"))
    os.symlink(b"../links/pair", j("sym", "relative"))
    os.symlink(b"/etc/hostname", j("sym", "absolute"))
    os.symlink(b"/nonexistent/dangling", j("sym", "dangling"))
    os.symlink(b"../links", j("sym", "to-dir"))
    os.symlink(b"relative", j("sym", "to-symlink"))
    os.symlink(b"loop", j("sym", "loop"))
    # Owners that are no user or group on this host; modes.
    os.makedirs(j("meta"))
    for name, mode, uid, gid in [("suid", 0o4755, 54321, 54322), ("sgid", 0o2750, 0, 54322), ("private", 0o600, 54321, 0),
                                 ("nothing", 0o000, 0, 0), ("exec", 0o711, 1, 1)]:
        p = j("meta", name)
        with open(p, "wb") as f:
            f.write(name.encode())
        os.chown(p, uid, gid)
        os.chmod(p, mode)  # after chown, which clears set-id bits
    os.makedirs(j("meta", "sticky"))
    os.chmod(j("meta", "sticky"), 0o1777)
    os.makedirs(j("meta", "setgid-dir"))
    os.chown(j("meta", "setgid-dir"), 0, 54322)
    os.chmod(j("meta", "setgid-dir"), 0o2775)
    os.symlink(b"suid", j("meta", "owned-link"))
    os.chown(j("meta", "owned-link"), 54321, 54322, follow_symlinks=False)
    # Extended attributes, ACLs, a file capability.
    with open(j("meta", "xattrs"), "wb") as f:
        f.write(b"x")
    os.setxattr(j("meta", "xattrs"), "user.text", b"hello")
    os.setxattr(j("meta", "xattrs"), "user.binary", bytes(range(256)))
    os.setxattr(j("meta", "xattrs"), "trusted.secret", b"t")
    with open(j("meta", "capable"), "wb") as f:
        f.write(b"#!/bin/sh\n")
    os.chmod(j("meta", "capable"), 0o755)
    os.setxattr(j("meta", "capable"), "security.capability", CAP_NET_RAW)
    if shutil.which("setfacl"):
        subprocess.run(["setfacl", "-m", "u:54321:rw,g:54322:r,u:daemon:r,g:bin:w", j("meta", "xattrs")], check=True)
        subprocess.run(["setfacl", "-d", "-m", "u:54321:rwx", j("meta", "sticky")], check=True)
    # Special files.
    os.makedirs(j("special"))
    os.mkfifo(j("special", "fifo"), 0o640)
    os.mknod(j("special", "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    # Times: before 1970 with nanoseconds, sub-second, far future; set last (children change
    # their directory's mtime).
    os.utime(j("names", odd[0]), ns=(0, -1_234_567_890_123_456_789))
    os.utime(j("links", "pair"), ns=(0, 1_600_000_000_987_654_321))
    os.utime(j("sym", "dangling"), ns=(0, 1_500_000_000_000_000_001), follow_symlinks=False)
    # A sparse file: 64 MiB with 1 MiB of data (its allocation is h17a's part of issue 17).
    with open(j("sparse"), "wb") as f:
        f.seek(32 << 20)
        f.write(os.urandom(1 << 20))
        f.truncate(64 << 20)
    with open(j("empty"), "wb"):
        pass
    for dirpath, dirnames, _ in os.walk(root, topdown=False):
        for d in dirnames:
            os.utime(os.path.join(dirpath, d), ns=(0, 1_400_000_000_500_000_000), follow_symlinks=False)
    return root


def mutate(root):
    """The same tree a while later, for the update round (h17n): entries that changed kind (a file,
    a symlink and a fifo that became directories, an empty directory that became a file, a file
    that became a symlink), entries removed (for --delete), a directory emptied of one entry, and
    a hard-link group split. What the receiver does with each is compared with rsync's."""
    root = os.fsencode(root)
    j = lambda *p: os.path.join(root, *[os.fsencode(x) if isinstance(x, str) else x for x in p])
    os.makedirs(j("changes", "was-empty"))
    for name in ("file-to-dir", "file-to-link"):
        with open(j("changes", name), "wb") as f:
            f.write(name.encode())
    os.symlink(b"nowhere", j("changes", "link-to-dir"))
    os.mkfifo(j("changes", "fifo-to-dir"))
    return lambda: _change(j)


def _change(j):
    for name in ("file-to-dir", "link-to-dir", "fifo-to-dir"):
        os.unlink(j("changes", name))
        os.makedirs(j("changes", name))
        with open(j("changes", name, "inside"), "wb") as f:
            f.write(b"now a directory")
    os.rmdir(j("changes", "was-empty"))
    with open(j("changes", "was-empty"), "wb") as f:
        f.write(b"now a file")
    os.unlink(j("changes", "file-to-link"))
    os.symlink(b"was-empty", j("changes", "file-to-link"))
    os.unlink(j("links", "b", "three-2"))  # the group of three loses a name
    with open(j("links", "b", "three-2"), "wb") as f:
        f.write(b"split from its group")
    shutil.rmtree(j("sym"))  # gone: --delete removes it
    os.unlink(j("empty"))
    os.utime(j("links", "b"), ns=(0, 1_400_000_000_500_000_000))
    os.utime(j("changes"), ns=(0, 1_300_000_000_000_000_001))
    for name in ("file-to-dir", "link-to-dir", "fifo-to-dir"):
        os.utime(j("changes", name), ns=(0, -1_000_000_000))
