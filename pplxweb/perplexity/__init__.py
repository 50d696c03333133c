"""Speaking Perplexity's undocumented web protocol (docs/protocol.md).

No Django here: only the standard library, httpx (with anyio and h11) and curl_cffi. The pieces:
sse (bytes -> events), merge (events -> snapshot), extract (snapshot -> result), request
(ask bodies and headers), client (HTTP calls), transport (TLS fingerprint), errors.
"""
