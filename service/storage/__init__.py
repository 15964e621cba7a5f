"""The only package that talks SQL: tables, engine, and one module per kind of row."""
