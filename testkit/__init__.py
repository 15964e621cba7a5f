"""What the test suite and the benchmarks both drive: the OpenAI-compatible stand-in LLM, the
service run in-process, the filter loader, scripted LLM answers and `wait_until`.

It imports only the service, never `tests` or `bench` (tests/unit/test_import_contract.py).
"""
