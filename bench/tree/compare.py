#!/usr/bin/env python3
"""Compares two trees as rsync -aHAXS would keep them: per relative path (bytes, so non-UTF-8
names compare exactly) the type, mode, owner, group, size, mtime (ns), device number, symlink
target, content (SHA-256), extended attributes (ACLs included: they are system.posix_acl_*),
link count, and the hard-link groups (which paths share an inode). Allocation (st_blocks) is
reported apart, as "allocated", because sparse files are issue 17's other half.

usage: compare.py A B [--json]    exit 0 if no difference (allocation aside), 1 otherwise
"""
import hashlib
import json
import os
import stat
import sys


def entries(root):
    root = os.fsencode(root)
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = p
    return out


def describe(p):
    st = os.lstat(p)
    d = {
        "type": stat.S_IFMT(st.st_mode),
        "mode": oct(stat.S_IMODE(st.st_mode)),
        "uid": st.st_uid,
        "gid": st.st_gid,
        "mtime_ns": st.st_mtime_ns,
        "nlink": st.st_nlink if not stat.S_ISDIR(st.st_mode) else None,  # directories: fs-specific
    }
    if stat.S_ISREG(st.st_mode):
        d["size"] = st.st_size
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        d["sha256"] = h.hexdigest()
    if stat.S_ISLNK(st.st_mode):
        d["target"] = os.readlink(p).decode("utf-8", "backslashreplace")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        d["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
    try:
        names = sorted(os.listxattr(p, follow_symlinks=False))
    except OSError:
        names = []
    d["xattrs"] = {n: os.getxattr(p, n, follow_symlinks=False).hex() for n in names}
    return d, st


def groups(tree):
    by_ino = {}
    for rel, p in tree.items():
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            by_ino.setdefault(st.st_ino, []).append(rel)
    return sorted(sorted(g) for g in by_ino.values() if len(g) > 1)


def compare(a, b):
    ta, tb = entries(a), entries(b)
    diffs, allocated = [], []
    show = lambda rel: rel.decode("utf-8", "backslashreplace")
    for rel in sorted(set(ta) | set(tb)):
        if rel not in tb or rel not in ta:
            diffs.append({"path": show(rel), "only_in": a if rel in ta else b})
            continue
        (da, sa), (db, sb) = describe(ta[rel]), describe(tb[rel])
        for k in sorted(set(da) | set(db)):
            if da.get(k) != db.get(k):
                diffs.append({"path": show(rel), "field": k, "a": da.get(k), "b": db.get(k)})
        if stat.S_ISREG(sa.st_mode) and sa.st_blocks != sb.st_blocks:
            allocated.append({"path": show(rel), "a_bytes": sa.st_blocks * 512, "b_bytes": sb.st_blocks * 512})
    ga, gb = groups(ta), groups(tb)
    if ga != gb:
        diffs.append({"field": "hard-link groups", "a": [[show(x) for x in g] for g in ga],
                      "b": [[show(x) for x in g] for g in gb]})
    return {"entries": len(ta), "differences": diffs, "allocated": allocated, "link_groups": len(ga)}


def main():
    a, b = sys.argv[1], sys.argv[2]
    r = compare(a, b)
    if "--json" in sys.argv:
        print(json.dumps(r, default=str))
    else:
        for d in r["differences"]:
            print("DIFF", d)
        for d in r["allocated"]:
            print("ALLOCATED", d)
        print(f"{r['entries']} entries, {r['link_groups']} hard-link groups, {len(r['differences'])} differences, "
              f"{len(r['allocated'])} allocation differences")
    sys.exit(1 if r["differences"] else 0)


if __name__ == "__main__":
    main()
