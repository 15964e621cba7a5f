"""Pure policy: no I/O, no database, network or model. Imports only service.core and errors."""
