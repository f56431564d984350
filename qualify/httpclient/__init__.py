"""httpclient"""
