"""The real-CLI fixtures of tests/agents/test_real_agents.py, for the example agent loop."""

from tests.agents.test_real_agents import agent_bin, agents  # noqa: F401  (fixtures)
