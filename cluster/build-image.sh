#!/usr/bin/env bash
# Build (and push) the filegram-ray cluster images with buildah — no container daemon, chroot isolation for the
# RUN steps, so it runs in an unprivileged CI container as well as on a workstation. From the repository root:
#
#   cluster/build-image.sh --pin                       resolve each base tag's digest into cluster/base-images.lock
#   cluster/build-image.sh [--push] [--dry-run] [--only cpu|gpu] REGISTRY [VERSION]
#
# Builds REGISTRY/filegram-ray:VERSION (cpu) and REGISTRY/filegram-ray:VERSION-gpu (gpu) from cluster/Dockerfile,
# each FROM the digest-pinned base of cluster/base-images.lock (refused when a variant has no digest). VERSION
# defaults to pyproject.toml's. --dry-run prints the commands instead of running them. Needs buildah (and skopeo
# or network access for buildah pull when pinning); pushing needs `buildah login REGISTRY` first.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=${FILEGRAM_BASE_LOCK:-cluster/base-images.lock}
pin=0 push=0 dry=0 only=""
args=()
while (($#)); do
  case "$1" in
    --pin) pin=1 ;;
    --push) push=1 ;;
    --dry-run) dry=1 ;;
    --only) only=$2; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "error: unknown option $1" >&2; exit 2 ;;
    *) args+=("$1") ;;
  esac
  shift
done
run() { if ((dry)); then printf '%q ' "$@"; echo; else "$@"; fi; }

digest_of() {  # the registry's digest of a name:tag
  if command -v skopeo >/dev/null; then
    skopeo inspect --format '{{.Digest}}' "docker://$1"
  else
    buildah pull --quiet "$1" >/dev/null && buildah images --digests --format '{{.Digest}}' "$1" | head -n1
  fi
}

if ((pin)); then
  tmp=$(mktemp)
  while read -r variant name digest; do
    if [[ -z "$variant" || "$variant" == \#* ]]; then continue; fi
    d=$(digest_of "$name")
    [[ "$d" == sha256:* ]] || { echo "error: no digest for $name (got '$d')" >&2; rm -f "$tmp"; exit 1; }
    echo "$variant $name $d" >>"$tmp"
  done <"$LOCK"
  { grep '^#' "$LOCK" | grep -v 'NOT PINNED YET'; cat "$tmp"; } >"$LOCK.new" && mv "$LOCK.new" "$LOCK"
  rm -f "$tmp"
  echo "pinned: $(grep -vc '^#' "$LOCK") base images in $LOCK (commit it)" >&2
  exit 0
fi

((${#args[@]} >= 1)) || { echo "usage: cluster/build-image.sh [--push] [--dry-run] [--only cpu|gpu] REGISTRY [VERSION]" >&2; exit 2; }
registry=${args[0]%/}
version=${args[1]:-$(sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n1)}
while read -r variant name digest; do
  if [[ -z "$variant" || "$variant" == \#* ]]; then continue; fi
  if [[ -n "$only" && "$variant" != "$only" ]]; then continue; fi
  if [[ "$digest" != sha256:* ]]; then
    echo "error: $LOCK has no digest for $variant ($name): run cluster/build-image.sh --pin where docker.io is reachable" >&2
    exit 1
  fi
  base="${name}@${digest}"               # name:tag@sha256:… (the digest decides; the tag is for the reader)
  case "$variant" in
    cpu) tag="$registry/filegram-ray:$version"; extra=(--build-arg EXTRAS=all) ;;
    gpu) tag="$registry/filegram-ray:$version-gpu"; extra=(--build-arg TORCH_INDEX= --build-arg EXTRAS=all,gpu) ;;
    *) echo "error: unknown variant $variant in $LOCK" >&2; exit 1 ;;
  esac
  run buildah bud --isolation chroot --layers --pull=missing -f cluster/Dockerfile \
    --ignorefile cluster/Dockerfile.dockerignore --build-arg "RAY_IMAGE=$base" --build-arg "VERSION=$version" \
    "${extra[@]}" -t "$tag" .
  if ((push)); then run buildah push "$tag"; fi
done <"$LOCK"
