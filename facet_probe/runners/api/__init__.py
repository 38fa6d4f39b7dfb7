"""API runners: Gemini, Claude, OpenAI and OpenAI-compatible servers, on one async call engine."""
