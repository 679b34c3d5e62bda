#!/usr/bin/env bash
# Print the path of a working Python X.Y interpreter (the argument), or nothing and exit 1.
# Looks on PATH, then in /usr/bin and /usr/local/bin, then under pyenv's versions (whose shims on PATH
# answer only for the versions pyenv is set to): the first that runs is the answer.
set -uo pipefail
version=${1:?usage: find_python.sh X.Y}
candidates=("$(command -v "python${version}" 2>/dev/null)" "/usr/bin/python${version}" "/usr/local/bin/python${version}")
for dir in "${PYENV_ROOT:-${HOME}/.pyenv}"/versions/"${version}".*/bin; do
  candidates+=("${dir}/python${version}")
done
for python in "${candidates[@]}"; do
  if [[ -n "${python}" && -x "${python}" ]] && "${python}" -c 'import ensurepip, venv' 2>/dev/null; then
    echo "${python}"
    exit 0
  fi
done
exit 1
