# Shared by the ci/*.sh steps (sourced, not run).
#
# skip REASON: the step could not run. Outside CI (CI unset, empty, 0 or
# false) it says so and exits 77, so a caller sees that nothing was checked.
# Under CI it fails (exit 1), unless .ci/run declared the step optional
# (CI_OPTIONAL=1), where it exits 77 and .ci/run's summary lists the step as
# optional-skipped.
in_ci() {
  case "${CI:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac
}

skip() {
  local step
  step=$(basename "$0" .sh)
  if in_ci && [ "${CI_OPTIONAL:-}" != 1 ]; then
    echo "$step: FAILED: could not run ($1), and CI requires this step"
    exit 1
  fi
  echo "$step: SKIPPED ($1)"
  exit 77
}
