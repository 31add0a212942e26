"""The analysis' defaults that the command line shows in its help, in a module that imports nothing: the
`tierlab` command parses its arguments without loading pandas and the compiled metrics (about a second),
which its small commands (manifest, tiers check) do not need."""

# recent requests per device a sequential read may continue
STREAM_WINDOW = 8
# a query is random above this % of random read pages, and repeated above this repeat access rate
RANDOM_PCT_THRESHOLD = 50.0
REPEAT_THRESHOLD = 1.1
# the trace formats trace-stats reads
FORMATS = ("auto", "binary", "blkparse", "ftrace", "ftrace-raw")
# Linux's default read-ahead window (read_ahead_kb 128): the requests a sequential scan becomes
SCAN_REQUEST_BYTES = 128 << 10
