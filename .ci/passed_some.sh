# Sourced by .ci/run and .ci/aarch64.
passed_some() {  # passed_some LOG: pytest's last summary line in LOG counts passed tests
  # (the last such line, not the log's last lines: xdist's workers may log
  # after it as they exit)
  grep -E '^=+ .* in [0-9.]+s' "$1" | tail -n 1 | grep -qE '[0-9]+ passed'
}
