#!/usr/bin/env bash
# Extract jax's own test files, at the tag of the jax that is installed, to a
# folder outside this repository, for tests/tools/test_jax_suite.py (which
# runs the ones that reach a function jaxsearch.patch() serves, under
# `pytest -p jaxsearch.autopatch`).
#
#   bench/fetch_jax_tests.sh SOURCE [DEST]
#
#   SOURCE  a jax git directory (a clone, or a bare mirror) or a URL to clone
#           from, e.g. https://github.com/jax-ml/jax (then only the tag's
#           commit and the files extracted are fetched, into a temporary
#           folder removed afterwards).
#   DEST    where the files go (default: ~/.cache/jaxsearch/jax-tests/VERSION);
#           it must lie outside this repository: we carry no code from
#           elsewhere.
#
# The jax whose version it reads is the one `${PYTHON:-python}` imports. It
# writes DEST/tests/ (jax's test files), DEST/conftest.py and
# DEST/pyproject.toml (jax's pytest configuration: filterwarnings=error,
# --import-mode=importlib), and DEST/JAX_VERSION (the version and the
# commit), which the suite checks against the installed jax. Then:
#
#   JAXSEARCH_JAX_TESTS=DEST pytest tests/tools/test_jax_suite.py
#
# From a local git directory it takes under a second; from a URL, as long as
# the shallow clone takes (a few seconds to a minute).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || $1 == -h || $1 == --help ]]; then
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
source=$1
version=$("${PYTHON:-python}" -c 'import importlib.metadata as m; print(m.version("jax"))')
tag="jax-v$version"
dest=${2:-"$HOME/.cache/jaxsearch/jax-tests/$version"}

repo_root=$(realpath "$(dirname "$0")/..")
dest=$(realpath -m "$dest")
if [[ $dest == "$repo_root" || $dest == "$repo_root"/* ]]; then
    echo "fetch_jax_tests: DEST $dest lies inside this repository; choose a folder outside it" >&2
    exit 2
fi
mkdir -p "$dest"

scratch=""
cleanup() { if [[ -n $scratch ]]; then rm -rf "$scratch"; fi; }
trap cleanup EXIT

if [[ -d $source ]]; then
    gitdir=$(git -C "$source" rev-parse --absolute-git-dir 2>/dev/null) || {
        echo "fetch_jax_tests: $source is not a git directory" >&2; exit 2; }
    if ! commit=$(git --git-dir="$gitdir" rev-parse --verify --quiet "$tag^{commit}"); then
        echo "fetch_jax_tests: no tag $tag (the installed jax's) in $source; tags like it:" \
             $(git --git-dir="$gitdir" tag --list "jax-v${version%.*}*") >&2
        exit 1
    fi
    rm -rf "$dest/tests"
    git --git-dir="$gitdir" archive --format=tar "$commit" tests conftest.py pyproject.toml \
        | tar -x -C "$dest"
else
    # The tag's commit only, and of its files only those wanted (the sparse
    # checkout fetches them in one batch), into a temporary folder.
    scratch=$(mktemp -d)
    echo "fetch_jax_tests: cloning $tag from $source" >&2
    git clone --quiet --depth 1 --filter=blob:none --no-checkout --branch "$tag" \
        "$source" "$scratch/jax"
    git -C "$scratch/jax" sparse-checkout set --no-cone /tests/ /conftest.py /pyproject.toml
    git -C "$scratch/jax" checkout --quiet "$tag"
    commit=$(git -C "$scratch/jax" rev-parse "$tag^{commit}")
    rm -rf "$dest/tests"
    cp -R "$scratch/jax/tests" "$scratch/jax/conftest.py" "$scratch/jax/pyproject.toml" "$dest/"
fi
printf '%s %s\n' "$version" "$commit" > "$dest/JAX_VERSION"
echo "fetch_jax_tests: jax $version's tests ($commit) in $dest" >&2
echo "$dest"
