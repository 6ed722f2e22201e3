"""The node's security: authentication, authorization, client quotas, certificates.

    principal.py     principal names (``User:<name>``, ``Node:<id>``, ``User:ANONYMOUS``)
    sessions.py      the broker's side of SCRAM-SHA-256 over gRPC and its session tokens
    authn.py         who is calling: inter-node token, SCRAM session, client certificate
    authorizer.py    Kafka's ACL decision (super users, deny beats allow, deny by default)
    rules.py         every RPC's declared access rule (what it needs, on which resources)
    quotas.py        produce/fetch byte-rate quotas per user and client id (token buckets)
    interceptor.py   the one gRPC server interceptor that applies all of the above
    service.py       the ``Security`` gRPC service (SCRAM exchange, users, ACLs, quotas)
    certs.py         a local CA and certificates (``spark-log dev up --tls``, tests)
    node_security.py what the node assembles from its ``[security]`` config

Nothing here reaches into the broker's handlers: the interceptor wraps every RPC the
node's server serves, so an RPC cannot skip authentication, and one without a declared
rule is refused once the authorizer is on.
"""
