"""preflight/checks"""
