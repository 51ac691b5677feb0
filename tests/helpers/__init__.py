"""Helpers of the tests: shared data, cases and the scripts some tests run in
processes of their own (imported as `helpers.<name>`, never by their bare names)."""
