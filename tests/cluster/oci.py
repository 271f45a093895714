#!/usr/bin/env python3
"""Writes container images as OCI image-layout tar archives with the Python standard library only
(no daemon, no registry), for `ctr -n k8s.io images import` on the single-node cluster.

  oci.py pause     OUT.tar NAME BUSYBOX        a sandbox (pause) image: a shell that blocks and exits on TERM/INT
  oci.py kruntimes OUT.tar NAME BINARY         FROM scratch: /kubectl-kruntimes, USER 65532 (what Dockerfile builds)
  oci.py busybox   OUT.tar NAME BUSYBOX        a user image: busybox with its applets in /bin, no kruntimes inside
  oci.py runtime-server OUT.tar NAME BINARY    busybox (from /bin/busybox) plus the tests' runtime server as
                                               /runtime-server, serving the runtime contract on 127.0.0.1:9091
  oci.py bash-runtime OUT.tar NAME BINARY      the Go project's Bash runtime image (Dockerfile.bash-runtime): its
                                               server BINARY (../shared/runtimes/kruntimes-bash-runtime) as
                                               /bash-runtime on :9091 with /workspace, bash (/bin/bash-static)
                                               and busybox's applets, USER 65532

Each archive holds one uncompressed layer, the config, the manifest and an index whose manifest carries the
`io.containerd.image.name` annotation (NAME, fully qualified), so the import names the image.
"""

import hashlib
import io
import json
import subprocess
import sys
import tarfile

EPOCH = 0


def _add_file(tar, path, data, mode, uid=0):
    info = tarfile.TarInfo(path)
    info.size = len(data)
    info.mode = mode
    info.uid = info.gid = uid
    info.mtime = EPOCH
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar, path, mode=0o755):
    info = tarfile.TarInfo(path)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = EPOCH
    tar.addfile(info)


def _add_symlink(tar, path, target):
    info = tarfile.TarInfo(path)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mtime = EPOCH
    tar.addfile(info)


def _busybox_layer(tar, busybox):
    with open(busybox, "rb") as f:
        data = f.read()
    for d in ("bin", "tmp", "etc"):
        _add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
    _add_file(tar, "bin/busybox", data, 0o755)
    applets = subprocess.run([busybox, "--list"], check=True, capture_output=True, text=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            _add_symlink(tar, f"bin/{applet}", "busybox")
    _add_file(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65532:65532:nobody:/:/bin/sh\n", 0o644)
    _add_file(tar, "etc/group", b"root:x:0:\nnobody:x:65532:\n", 0o644)


def _blob(out, data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _add_file(out, "blobs/sha256/" + digest.split(":")[1], data, 0o644)
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def write_image(path, name, fill_layer, config):
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        fill_layer(layer)
    layer_bytes = layer_buf.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    with tarfile.open(path, mode="w", format=tarfile.PAX_FORMAT) as out:
        _add_file(out, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644)
        layer_desc = _blob(out, layer_bytes, "application/vnd.oci.image.layer.v1.tar")
        config_desc = _blob(out, json.dumps(image_config).encode(), "application/vnd.oci.image.config.v1+json")
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config_desc,
            "layers": [layer_desc],
        }
        manifest_desc = _blob(out, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
        manifest_desc["annotations"] = {
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
        }
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
        _add_file(out, "index.json", json.dumps(index).encode(), 0o644)


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    kind, out, name, source = argv[1:]
    if kind == "pause":
        script = "trap 'exit 0' TERM INT; while true; do sleep 3600 & wait $!; done"
        write_image(out, name, lambda t: _busybox_layer(t, source),
                    {"Entrypoint": ["/bin/sh", "-c", script], "Env": ["PATH=/bin"]})
    elif kind == "kruntimes":
        with open(source, "rb") as f:
            binary = f.read()

        def layer(t):
            _add_file(t, "kubectl-kruntimes", binary, 0o755)

        write_image(out, name, layer, {
            "Entrypoint": ["/kubectl-kruntimes"],
            "User": "65532:65532",
            "Labels": {
                "org.opencontainers.image.title": "kubectl-kruntimes",
                "org.opencontainers.image.description": "A scheduler for logical resources on Kubernetes: the scheduler, runtimed and the kubectl plugin in one static binary.",
                "org.opencontainers.image.source": "https://github.com/kruntimes/kubectl-kruntimes",
                "org.opencontainers.image.licenses": "Apache-2.0",
                "org.opencontainers.image.version": "0.1.0",
            },
        })
    elif kind == "busybox":
        write_image(out, name, lambda t: _busybox_layer(t, source),
                    {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]})
    elif kind == "runtime-server":
        with open(source, "rb") as f:
            binary = f.read()

        def layer(t):
            _busybox_layer(t, "/bin/busybox")
            _add_file(t, "runtime-server", binary, 0o755)

        write_image(out, name, layer, {
            "Entrypoint": ["/runtime-server", "--listen", "127.0.0.1:9091"],
            "Env": ["PATH=/bin"],
        })
    elif kind == "bash-runtime":
        with open(source, "rb") as f:
            binary = f.read()
        with open("/bin/bash-static", "rb") as f:
            bash = f.read()

        def layer(t):
            _busybox_layer(t, "/bin/busybox")
            _add_file(t, "bin/bash", bash, 0o755)
            _add_file(t, "bash-runtime", binary, 0o755)

        write_image(out, name, layer, {
            "Entrypoint": ["/bash-runtime"],
            "User": "65532",
            "Env": ["PATH=/bin"],
        })
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
