"""One module per operation; routes, jobs and CLI commands call the same flow."""
