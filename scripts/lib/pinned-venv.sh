# shellcheck shell=bash
# A venv of pinned PyPI packages for a test suite, built once and reused:
# sourced by scripts/dask-test-env.sh and scripts/s3-test-env.sh, which say
# what goes into theirs.
#
#   pinned_venv NAME [--python PYTHON] [--venv-flag FLAG]... [--executable PATH]...
#               [--smoke FUNCTION] [--venv VENV] -- REQUIREMENT...
#
# NAME names everything: messages start "NAME-test-env: ", the venv is VENV
# or, when VENV is empty or not given, ${BUILD_DIR:-build}/NAME-venv
# (relative to the source tree), its stamp file VENV/.ufspack-NAME-stamp and
# its lock file VENV.lock.
#   --python      the interpreter that makes the venv (default /usr/bin/python3)
#   --venv-flag   passed to `PYTHON -m venv` (e.g. --system-site-packages)
#   --executable  a path below VENV (besides bin/python) that a complete venv
#                 has, checked as executable before the venv counts as built
#   --smoke       a function called as `FUNCTION VENV` once the packages are
#                 in: it returns non-zero, having said why on stderr, when the
#                 venv cannot serve on this machine (an import fails, a binary
#                 does not run)
#   REQUIREMENT   pip requirements, installed in this order, one pip call each
#                 (so that a failure names the package)
#
# Prints the venv's absolute path on its last line and exits the script: it
# is the last thing a script calls.  Fast (bash only, no python started) when
# the venv is complete: the stamp holds the interpreter and the requirement
# list it was built with, and the venv is rebuilt from scratch whenever that
# list changes.  Concurrent runs on the same venv (ctest -j) wait for each
# other on the lock file.
#
# Exit status: 0 ready; 77 pip could not install a requirement (no network,
# no wheel for this platform) or the smoke check failed: callers skip their
# tests; anything else is a bug or a broken interpreter.
#
# REQUIRES: bash with `set -euo pipefail`, flock(1).

pinned_venv() {
  local name=$1
  shift
  local python=/usr/bin/python3 smoke="" venv=""
  local -a flags=() executables=(bin/python)
  while [ $# -gt 0 ]; do
    case $1 in
      --python) python=$2; shift 2 ;;
      --venv-flag) flags+=("$2"); shift 2 ;;
      --executable) executables+=("$2"); shift 2 ;;
      --smoke) smoke=$2; shift 2 ;;
      --venv) venv=$2; shift 2 ;;
      --) shift; break ;;
      *) echo "pinned_venv: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  local -a requirements=("$@")
  local me=$name-test-env

  local src
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ -z "$venv" ]; then
    venv=${BUILD_DIR:-build}/$name-venv
    case $venv in /*) ;; *) venv=$src/$venv ;; esac
  fi
  mkdir -p "$(dirname "$venv")"
  venv=$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")
  local stamp=$venv/.ufspack-$name-stamp
  local expected
  expected=$(printf 'python %s\n' "$python"; printf '%s\n' "${requirements[@]}")

  if _pinned_venv_complete; then
    echo "$venv"
    exit 0
  fi
  # One builder at a time; whoever waited finds the venv complete.
  exec 9>"$venv.lock"
  if ! flock -w 600 9; then
    echo "$me: timed out after 600 s waiting for $venv.lock" >&2
    exit 1
  fi
  if _pinned_venv_complete; then
    echo "$venv"
    exit 0
  fi

  local start
  start=$(date +%s)
  echo "$me: creating $venv (${requirements[*]})" >&2
  rm -rf "$venv"
  if ! "$python" -m venv "${flags[@]}" "$venv" >&2; then
    echo "$me: '$python -m venv ${flags[*]}${flags[*]:+ }$venv' failed (Debian: apt-get install python3-venv)" >&2
    rm -rf "$venv"
    exit 1
  fi
  # `pip check` sees the system site-packages of a --system-site-packages
  # venv, and on Debian they are not consistent by pip's rules (e.g.
  # "pygobject 3.42.2 requires pycairo, which is not installed"), which has
  # nothing to do with this venv.  So the check below fails only on problems
  # that were not there before the installs: the fresh venv's report is the
  # baseline (in an isolated venv that is "No broken requirements found.").
  local baseline after new
  baseline=$("$venv/bin/python" -m pip check 2>&1 | sort || true)
  local -a pip=("$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q
                --retries 2 --timeout 30)
  local req
  for req in "${requirements[@]}"; do
    if ! "${pip[@]}" "$req" >&2; then
      echo "$me: pip could not install '$req' into $venv (is PyPI reachable?)" >&2
      rm -rf "$venv"
      exit 77
    fi
  done
  # The later installs must not have moved an earlier pin, nor broken (or
  # shadowed with an incompatible version) a system package.
  after=$("$venv/bin/python" -m pip check 2>&1 | sort || true)
  if new=$(comm -13 <(echo "$baseline") <(echo "$after") | grep -v '^No broken requirements found\.$'); then
    echo "$new" >&2
    echo "$me: inconsistent dependencies in $venv after installing ${requirements[*]}" >&2
    rm -rf "$venv"
    exit 1
  fi
  if [ -n "$smoke" ] && ! "$smoke" "$venv"; then
    rm -rf "$venv"
    exit 77
  fi
  echo "$expected" >"$stamp"
  echo "$me: ready in $(($(date +%s) - start)) s" >&2
  echo "$venv"
  exit 0
}

# Whether pinned_venv's venv is built: its executables are there and its
# stamp names the same interpreter and requirements.  Reads pinned_venv's
# locals (venv, executables, stamp, expected).
_pinned_venv_complete() {
  local exe
  for exe in "${executables[@]}"; do
    [ -x "$venv/$exe" ] || return 1
  done
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$expected" ]
}
