#!/usr/bin/env bash
# images.sh OUTDIR — the real node's two images as docker-save tarballs (what `ctr images import` reads):
#   OUTDIR/pause.tar    dra-migrate.local/pause:1     a static pause program (pause.c, gcc -static)
#   OUTDIR/busybox.tar  dra-migrate.local/busybox:test  Debian's busybox-static with its applets as links,
#                                                       /bin/sh, and our fake nvidia-smi
# Built locally because no image registry is reachable from this machine kind.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$1
mkdir -p "$OUT"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

mkdir -p "$W/pause/rootfs"
gcc -static -O2 -o "$W/pause/rootfs/pause" "$HERE/pause.c"
strip "$W/pause/rootfs/pause"

BB=$(command -v busybox)
readelf -l "$(readlink -f "$BB")" | grep -q 'program interpreter' && { echo "images.sh: $BB is not static (install busybox-static)" >&2; exit 1; }
R=$W/busybox/rootfs
mkdir -p "$R/bin" "$R/usr/bin" "$R/tmp" "$R/dev" "$R/proc" "$R/sys" "$R/etc"
cp "$BB" "$R/bin/busybox"
for a in $("$BB" --list); do [[ $a == busybox ]] || ln -sf busybox "$R/bin/$a"; done
cp "$HERE/nvidia-smi" "$R/usr/bin/nvidia-smi"
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"

python3 - "$W" "$OUT" <<'PY'
import hashlib, io, json, os, sys, tarfile
work, out = sys.argv[1], sys.argv[2]

def layer(rootfs: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                info = t.gettarinfo(full, os.path.relpath(full, rootfs))
                info.uid = info.gid = 0; info.uname = info.gname = ""; info.mtime = 0
                if info.isfile():
                    with open(full, "rb") as f:
                        t.addfile(info, f)
                else:
                    t.addfile(info)
    return buf.getvalue()

def image(name: str, ref: str, cmd: list[str], env: list[str]) -> None:
    data = layer(os.path.join(work, name, "rootfs"))
    diff = hashlib.sha256(data).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": cmd, "Env": env},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]},
    }, sort_keys=True).encode()
    cid = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{cid}.json", "RepoTags": [ref], "Layers": [f"{diff}/layer.tar"]}]).encode()
    with tarfile.open(os.path.join(out, f"{name}.tar"), "w") as t:
        for path, blob in ((f"{cid}.json", config), (f"{diff}/layer.tar", data), ("manifest.json", manifest)):
            info = tarfile.TarInfo(path); info.size = len(blob); info.mtime = 0
            t.addfile(info, io.BytesIO(blob))

image("pause", "dra-migrate.local/pause:1", ["/pause"], [])
image("busybox", "dra-migrate.local/busybox:test", ["sh"], ["PATH=/usr/bin:/bin"])
PY
echo "images.sh: wrote $OUT/pause.tar $OUT/busybox.tar" >&2
