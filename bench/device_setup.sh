#!/usr/bin/env bash
# On the GPU machine of docs/benchmarks.md (no network): install the wheels carried in earlier
# calls (kept in /root/keep; Ray's 79 MB wheel came in two parts, over two calls) into /tmp/site.
# Usage: source bench/device_setup.sh
set -e
mkdir -p /root/keep
for d in .whl/a .whl/b; do [ -d "$d" ] && cp -n "$d"/* /root/keep/ 2>/dev/null || true; done
if [ ! -d /tmp/site/ray ]; then
  cat /root/keep/ray.part.* > /root/keep/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site /root/keep/*.whl
  python3 -m compileall -q -j 0 /tmp/site >/dev/null  # as pip's default would (not timed)
fi
export PYTHONPATH=/tmp/site:$PWD
set +e
