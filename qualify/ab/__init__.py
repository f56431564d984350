"""The paired speculative-decoding A/B: prompts, driving one run, lane tables, KV capacity."""
