"""`qualify diff`: two signed qualifications compared, both verified first (see compare.py)."""
