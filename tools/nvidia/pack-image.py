#!/usr/bin/env python3
"""pack-image.py ROOTFS REF OUT.tar — one directory as a one-layer image in `docker save` form (what `ctr images
import` reads), reproducible (uid/gid 0, mtime 0, sorted entries). The nvidia tier builds its image locally: no
image registry is reachable from this machine kind (tools/realnode/images.sh packs the real node's two images the
same way)."""

import hashlib
import io
import json
import os
import sys
import tarfile


def layer(rootfs: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                info = t.gettarinfo(full, os.path.relpath(full, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(full, "rb") as f:
                        t.addfile(info, f)
                else:
                    t.addfile(info)
    return buf.getvalue()


def main(rootfs: str, ref: str, out: str) -> None:
    data = layer(rootfs)
    diff = hashlib.sha256(data).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]},
        },
        sort_keys=True,
    ).encode()
    cid = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{cid}.json", "RepoTags": [ref], "Layers": [f"{diff}/layer.tar"]}]).encode()
    with tarfile.open(out, "w") as t:
        for path, blob in ((f"{cid}.json", config), (f"{diff}/layer.tar", data), ("manifest.json", manifest)):
            info = tarfile.TarInfo(path)
            info.size = len(blob)
            info.mtime = 0
            t.addfile(info, io.BytesIO(blob))


if __name__ == "__main__":
    main(*sys.argv[1:4])
