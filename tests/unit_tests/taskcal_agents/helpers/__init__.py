"""Helpers shared by the taskcal_agents unit tests (no tests here): fakes and small test data.

Test modules import these, never one another.
"""
