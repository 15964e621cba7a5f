"""`python -m service`: the same commands as the `memory-service` script."""

from service.cli.main import app

app(prog_name="python -m service")
