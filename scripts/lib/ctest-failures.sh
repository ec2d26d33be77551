# shellcheck shell=bash
# ctest_failures BUILD_DIR: what each test of the last ctest run in
# BUILD_DIR that failed printed about its failure (googletest's failure
# lines and the lines after them, pytest's "E " lines, errors), a few lines
# per test, cut to 400 characters each.  For the end of a CI log, which is
# often all that is kept of it: the tests' whole output is printed above by
# --output-on-failure.
ctest_failures() {  # <build-dir>
  local tmp=$1/Testing/Temporary name
  [ -s "$tmp/LastTestsFailed.log" ] || return 0
  while IFS= read -r name; do
    name=${name#*:}
    echo "---- $name"
    awk -v t="$name" '
      index($0, "Testing: " t) && $0 ~ ("Testing: " t "$") { on = 1 }
      on && index($0, "\"" t "\" end time") { exit }
      on { print }' "$tmp/LastTest.log" |
      grep -E -A3 ": Failure$|^\[  FAILED  \]|^E  |^FAILED |[Ee]rror: |Timeout|Segmentation fault|Aborted|Sanitizer|runtime error" |
      head -n 40 | cut -c1-400
  done < "$tmp/LastTestsFailed.log"
}
