"""The command line: `main` (``python -m jaxsearch``), its commands
(`bench`, `info`), the autotuner's (`autotune`), and their shared argument
parsers (`args`).
"""
