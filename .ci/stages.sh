# Stage times for .ci/run and tests/run-all.sh (sourced, never run). Each stage is a wall-clock span:
#   stage LABEL     ends the stage before (ok) and starts LABEL, printing "== LABEL"
#   stage_end       ends the stage in progress (ok); the time until the next `stage` belongs to none
# An EXIT trap (set by `stages_init`) ends a stage still in progress as FAILED with the script's exit
# code and prints the table, so the table is there also when a stage failed or a signal stopped the run.
# A script run under another (run-all.sh under .ci/run) finds the caller's file in MCB_STAGE_TIMES,
# adds its rows there with its prefix and leaves the printing to the caller: one table per run.
# Rows are "seconds<TAB>result<TAB>label"; labels are ours, so the file stays a few lines long.

# stages_init PREFIX: starts the clock; PREFIX ("" or "tests: ") goes before every label of this script.
stages_init() {
    _stage_prefix="$1"
    _stage_label=""
    _stage_t0=$SECONDS
    _stages_t0=$SECONDS
    if [ -n "${MCB_STAGE_TIMES:-}" ] && [ -f "$MCB_STAGE_TIMES" ]; then
        _stages_owner=0
    else
        _stages_owner=1
        MCB_STAGE_TIMES="$(mktemp -t mcb-stage-times.XXXXXX)"
        export MCB_STAGE_TIMES
    fi
    trap '_stages_exit $?' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# _stage_record RESULT: writes the stage in progress (if any) to the table with RESULT.
_stage_record() {
    if [ -n "$_stage_label" ]; then
        printf '%s\t%s\t%s%s\n' "$((SECONDS - _stage_t0))" "$1" "$_stage_prefix" "$_stage_label" \
            >>"$MCB_STAGE_TIMES"
    fi
    _stage_label=""
}

stage() {
    _stage_record ok
    _stage_label="$1"
    _stage_t0=$SECONDS
    echo "== $_stage_prefix$1"
}

stage_end() {
    _stage_record ok
}

# stages_table RC: the table on stdout, with the owner's wall time from stages_init to now as the total.
stages_table() {
    echo "== stage times (wall clock, seconds)"
    awk -F '\t' '{ printf "%6d  %-44s %s\n", $1, $3, $2 }' "$MCB_STAGE_TIMES"
    printf '%6d  %-44s %s\n' "$((SECONDS - _stages_t0))" "total (wall time of the whole run)" \
        "$([ "$1" = 0 ] && echo ok || echo "FAILED (exit $1)")"
}

_stages_exit() {
    local rc="$1"
    if [ "$rc" = 0 ]; then
        _stage_record ok
    else
        _stage_record "FAILED (exit $rc)"
    fi
    if [ "$_stages_owner" = 1 ]; then
        stages_table "$rc"
        rm -f "$MCB_STAGE_TIMES"
    fi
    exit "$rc"
}
