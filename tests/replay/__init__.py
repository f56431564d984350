"""A replay of vLLM and SGLang servers from their recorded outputs (tests/fixtures/engines/)."""
