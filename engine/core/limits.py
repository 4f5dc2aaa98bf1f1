"""How many rows a read shows by default, and the most it may ask for: one place for every page size."""

RUNS_LIST = 200  # `runs list`, /api/runs and read.runs.list_runs without --limit
API_MAX = 1000  # the most rows one /api request may ask for
WEB_PAGE = 50  # runs per page of the web page's history (then "older")
CHART_RUNS = 200  # runs drawn in a schedule's start-delay chart
NOTIFICATIONS = 50  # `notifications list` without --limit
NOTIFICATIONS_MAX = 10000  # the most `notifications list --limit` takes
SCHEDULE_ALERTS = 10  # alerts shown on a schedule's page
ERROR_TEXT = 4000  # characters of an error message stored (runs, steps, attempts) or logged; the rest is cut
ECHOED_VALUE = 200  # characters of a bad value an error quotes (then an ellipsis and its length)
