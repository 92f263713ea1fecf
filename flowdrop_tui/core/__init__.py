"""The engine: records, state, index, flows and runs. Never imports Textual or Rich."""
