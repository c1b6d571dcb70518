#!/usr/bin/env bash
# Build the sandbox image WITHOUT a registry: a minimal root filesystem copied from this
# host (python3 + its standard library, bash, coreutils and the shared libraries they load),
# imported with `docker import`. Fast (a few seconds) and offline. For a full image with
# pip and compilers, build containers/Dockerfile instead (needs a registry for its base).
#
# usage: containers/build_rootfs_image.sh [TAG]     (default: ai-scientist-sandbox:latest)
# honours DOCKER_HOST; needs the `docker` CLI (Debian package docker.io) and python3.
set -euo pipefail
TAG="${1:-ai-scientist-sandbox:latest}"
DOCKER="${DOCKER:-/usr/bin/docker}"
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"
PY="$(readlink -f /usr/bin/python3)"
PYVER="$(basename "$PY")"                   # python3.11
ROOT="$(mktemp -d /tmp/ai-sci-rootfs.XXXXXX)"
trap 'rm -rf "$ROOT"' EXIT

BINS=(bash dash sh cat echo env id ls mkdir rm cp mv sleep head tail true false yes dd
      touch chmod wc sort grep sed printf uname timeout kill ps "$PYVER" python3)
mkdir -p "$ROOT"/{usr/bin,usr/lib,etc,tmp,workspace,resources,env,proc,dev,sys}
chmod 1777 "$ROOT/tmp"
ln -s usr/bin "$ROOT/bin"; ln -s usr/lib "$ROOT/lib"; ln -s usr/lib64 "$ROOT/lib64"; mkdir -p "$ROOT/usr/lib64"
for b in "${BINS[@]}"; do
  # system binaries only (never a pyenv/asdf shim from PATH)
  src=""; for d in /usr/bin /bin /usr/sbin /sbin; do [ -x "$d/$b" ] && { src="$d/$b"; break; }; done
  [ -n "$src" ] && cp -aL "$src" "$ROOT/usr/bin/$b" 2>/dev/null || true
done
# the Python standard library, and the Debian-packaged Python modules (python3-numpy,
# python3-matplotlib, ... when apt installed them), so the image offers what /usr/bin/python3
# offers on the host; AI_SCI_IMAGE_NO_DIST=1 leaves the latter out
cp -a "/usr/lib/$PYVER" "$ROOT/usr/lib/"
rm -rf "$ROOT/usr/lib/$PYVER/test" "$ROOT/usr/lib/$PYVER/site-packages" "$ROOT/usr/lib/$PYVER"/__pycache__
mkdir -p "$ROOT/usr/lib/$PYVER/site-packages"
if [ -d /usr/lib/python3/dist-packages ] && [ -z "${AI_SCI_IMAGE_NO_DIST:-}" ]; then
  mkdir -p "$ROOT/usr/lib/python3"; cp -a /usr/lib/python3/dist-packages "$ROOT/usr/lib/python3/"
fi
# every shared library the binaries and Python extension modules load
{ for f in "$ROOT"/usr/bin/* "$ROOT/usr/lib/$PYVER"/lib-dynload/*.so \
           $(find "$ROOT/usr/lib/python3" -name '*.so*' -type f 2>/dev/null); do ldd "$f" 2>/dev/null || true; done; } \
  | grep -oE '/[^ ]+\.so[^ ]*' | sort -u | while read -r lib; do
      mkdir -p "$ROOT$(dirname "$lib")"; cp -aL "$lib" "$ROOT$lib"; done
# ld.so itself under its canonical path
cp -aL /lib64/ld-linux-x86-64.so.2 "$ROOT/usr/lib64/" 2>/dev/null || true
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' > "$ROOT/etc/group"
echo "sandbox" > "$ROOT/etc/hostname"
chown 1000:1000 "$ROOT/workspace" "$ROOT/env"
tar -C "$ROOT" -c . | "$DOCKER" import \
  --change 'USER 1000:1000' --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/workspace' \
  --change 'LABEL org.ai-scientist.sandbox=rootfs-from-host' \
  - "$TAG" >/dev/null
echo "built $TAG from host rootfs ($PYVER)"
