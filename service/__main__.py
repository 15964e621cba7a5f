from service.cli.main import app

app(prog_name="python -m service")
