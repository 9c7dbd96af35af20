#!/bin/sh
# Builds the release archive the AWS template's machines install (docs/deploy.md "Releases"): the
# repository at HEAD with everything `npm ci` installs (the service's libraries are development
# dependencies of the package, docs/sdk.md "Packaging"), the pinned Node among them as
# node_modules/.bin/node, which bin/svc-agent, bin/svc-engine and the Node workers' unit run, and the
# built bundles (dist/).
# Dependencies with native parts (Node, workerd) are this machine's: build on Linux of the
# machines' architecture (arm64 for the template's default Graviton images).
#   infra/aws/release.sh svc-cloud-<version>.tar.gz
set -eu
[ $# -eq 1 ] || { echo "usage: infra/aws/release.sh <archive.tar.gz>" >&2; exit 2; }
out=$(realpath -m "$1")
repo=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$repo" archive HEAD | tar -x -C "$work"
cd "$work"
npm ci --no-audit --no-fund
npm run build
node_modules/.bin/node --version
tar --owner=0 --group=0 -czf "$out" .
echo "wrote $out"
