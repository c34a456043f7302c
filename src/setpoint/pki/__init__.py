"""Keys and certificates: a cluster CA, serving and client certificates, private files.

Pure of asyncio; uses ``cryptography``. ``files`` writes secrets safely, ``certs`` makes and
reads certificates, ``authority`` keeps a data directory's CA and certificates current.
"""
