#!/usr/bin/env bash
# Trusts the project's own notebooks, as they were checked out, in this user's Jupyter
# trust database: JupyterLab sanitizes the stored HTML of an untrusted notebook (it drops
# the <style> blocks), so before a learner runs anything the hex views, trees and
# diagrams would show unstyled. A notebook changed since checkout, or one that git does
# not track, is left as Jupyter finds it: only what the project ships is vouched for.
# Called by scripts/lab.sh (make lab) and binder/postBuild.
set -euo pipefail
cd "$(dirname "$0")/.."
jupyter=${JUPYTER:-jupyter}
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: no notebook trusted" >&2; exit 0; }
mapfile -t changed < <(git diff --name-only HEAD -- notebooks)
own=()
while IFS= read -r nb; do
  [[ " ${changed[*]} " == *" $nb "* ]] || own+=("$nb")
done < <(git ls-files -- 'notebooks/*.ipynb')
[ ${#own[@]} -eq 0 ] || "$jupyter" trust "${own[@]}" >/dev/null
echo "trusted ${#own[@]} notebooks as checked out (${#changed[@]} changed, left alone)"
