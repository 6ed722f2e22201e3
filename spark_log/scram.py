"""SCRAM-SHA-256 (RFC 5802, RFC 7677): the math and the four messages, for clients and brokers.

Pure functions and small immutable values; no sockets, clocks or module-level randomness
(nonces and salts are passed in).  Both sides build on it: the client in ``spark_log``
(``ScramClient``), the broker in ``brokers.security`` (``server_first``/``verify_client_final``
over a stored ``ScramCredential``).

The exchange, as the RFC writes it (no channel binding: gs2 header ``n,,``)::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>            (the client checks it: mutual)

    SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key")     StoredKey = SHA-256(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

What a broker stores (``ScramCredential``) is salt, iterations, StoredKey and ServerKey:
enough to verify a proof, not enough to compute one or to recover the password.  The
password is normalised with NFKC (SASLprep's mapping step; its prohibited-character
tables are not applied).  Every parse error raises ``AuthenticationError`` with a message
that holds no secret.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import unicodedata
from dataclasses import dataclass, field

from .errors import AuthenticationError, InvalidConfigError

__all__ = [
    "MECHANISM",
    "MIN_ITERATIONS",
    "MAX_ITERATIONS",
    "ScramCredential",
    "ScramClient",
    "ServerFirst",
    "make_credential",
    "salted_password",
    "client_first_bare",
    "parse_client_first",
    "server_first_message",
    "parse_server_first",
    "verify_client_final",
    "escape_username",
    "check_iterations",
]

MECHANISM = "SCRAM-SHA-256"
MIN_ITERATIONS = 4096  # Kafka's bounds for SCRAM-SHA-256
MAX_ITERATIONS = 16384
_GS2 = "n,,"
_CHANNEL = base64.b64encode(_GS2.encode()).decode()  # "biws"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker stores for one user: never the password, never SaltedPassword."""

    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    mechanism: str = MECHANISM


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise AuthenticationError(f"SCRAM: {what} is not base64") from None


def check_iterations(iterations: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or not (
            MIN_ITERATIONS <= iterations <= MAX_ITERATIONS):
        raise InvalidConfigError(f"SCRAM iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                                 f"got {iterations!r}", key="iterations")


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2-HMAC-SHA-256)."""
    normalised = unicodedata.normalize("NFKC", password).encode("utf-8")
    return hashlib.pbkdf2_hmac("sha256", normalised, salt, iterations)


def make_credential(password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential of ``password`` (computed where the password is: the client)."""
    if not isinstance(password, str) or not password:
        raise InvalidConfigError("a SCRAM password must be a non-empty string", key="password")
    if len(salt) < 16:
        raise InvalidConfigError("a SCRAM salt must have at least 16 bytes", key="salt")
    check_iterations(iterations)
    salted = salted_password(password, salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    return ScramCredential(salt=salt, iterations=iterations, stored_key=hashlib.sha256(client_key).digest(),
                           server_key=_hmac(salted, b"Server Key"))


def escape_username(name: str) -> str:
    """RFC 5802's saslname: "=" -> "=3D", "," -> "=2C"."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_username(text: str) -> str:
    if "=" in text.replace("=3D", "").replace("=2C", ""):
        raise AuthenticationError("SCRAM: badly escaped username")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationError(f"SCRAM: malformed {what}")
        out.setdefault(key, value)
    return out


def client_first_bare(username: str, client_nonce: str) -> str:
    return f"n={escape_username(username)},r={client_nonce}"


def parse_client_first(message: str) -> tuple[str, str, str]:
    """``(username, client nonce, client-first-bare)`` of a client-first message."""
    if not message.startswith(_GS2):
        raise AuthenticationError("SCRAM: only gs2 header 'n,,' is supported (no channel binding)")
    bare = message[len(_GS2):]
    attrs = _attributes(bare, "client-first message")
    if "n" not in attrs or "r" not in attrs or not attrs["r"] or "m" in attrs:
        raise AuthenticationError("SCRAM: client-first message needs n= and r=")
    return _unescape_username(attrs["n"]), attrs["r"], bare


def server_first_message(nonce: str, salt: bytes, iterations: int) -> str:
    return f"r={nonce},s={_b64(salt)},i={iterations}"


@dataclass(frozen=True, slots=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int


def parse_server_first(message: str, client_nonce: str) -> ServerFirst:
    attrs = _attributes(message, "server-first message")
    nonce = attrs.get("r", "")
    if not nonce.startswith(client_nonce) or len(nonce) <= len(client_nonce):
        raise AuthenticationError("SCRAM: the server's nonce does not extend the client's")
    try:
        iterations = int(attrs.get("i", ""))
    except ValueError:
        raise AuthenticationError("SCRAM: server-first message has no iteration count") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise AuthenticationError(f"SCRAM: iteration count {iterations} out of bounds")
    return ServerFirst(nonce=nonce, salt=_unb64(attrs.get("s", ""), "salt"), iterations=iterations)


def _final_without_proof(nonce: str) -> str:
    return f"c={_CHANNEL},r={nonce}"


def verify_client_final(message: str, *, client_first_bare_message: str, server_first: str, nonce: str,
                        credential: ScramCredential) -> str:
    """Check a client-final message against ``credential``; returns the server-final
    message.  Raises ``AuthenticationError`` (wrong password, replayed or foreign nonce)."""
    without_proof, sep, proof_part = message.rpartition(",p=")
    if not sep:
        raise AuthenticationError("SCRAM: client-final message has no proof")
    attrs = _attributes(without_proof, "client-final message")
    if attrs.get("c") != _CHANNEL:
        raise AuthenticationError("SCRAM: unexpected channel binding")
    if attrs.get("r") != nonce:
        raise AuthenticationError("SCRAM: nonce mismatch")
    proof = _unb64(proof_part, "proof")
    auth_message = f"{client_first_bare_message},{server_first},{without_proof}".encode()
    signature = _hmac(credential.stored_key, auth_message)
    if len(proof) != len(signature):
        raise AuthenticationError("SCRAM: proof has the wrong length")
    client_key = _xor(proof, signature)
    if not hmac.compare_digest(hashlib.sha256(client_key).digest(), credential.stored_key):
        raise AuthenticationError("SCRAM: invalid credentials")
    return f"v={_b64(_hmac(credential.server_key, auth_message))}"


class ScramClient:
    """One client exchange: ``first()`` -> send; ``final(server_first)`` -> send;
    ``verify(server_final)``.  Keeps the password only for the duration of the exchange
    (the caller holds it anyway); ``repr`` never shows it."""

    def __init__(self, username: str, password: str, client_nonce: str) -> None:
        if not username:
            raise InvalidConfigError("a SCRAM username must not be empty", key="username")
        self.username = username
        self._password = password
        self._nonce = client_nonce
        self._bare = client_first_bare(username, client_nonce)
        self._expected_signature: bytes | None = None

    def __repr__(self) -> str:
        return f"ScramClient(username={self.username!r})"

    def first(self) -> str:
        return _GS2 + self._bare

    def final(self, server_first: str) -> str:
        parsed = parse_server_first(server_first, self._nonce)
        salted = salted_password(self._password, parsed.salt, parsed.iterations)
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = _final_without_proof(parsed.nonce)
        auth_message = f"{self._bare},{server_first},{without_proof}".encode()
        proof = _xor(client_key, _hmac(stored_key, auth_message))
        self._expected_signature = _hmac(_hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}"

    def verify(self, server_final: str) -> None:
        """Check the server's signature (it proves the broker holds this user's credential)."""
        attrs = _attributes(server_final, "server-final message")
        if "e" in attrs:
            raise AuthenticationError(f"SCRAM: the server refused: {attrs['e']}")
        if self._expected_signature is None or not hmac.compare_digest(
                _unb64(attrs.get("v", ""), "server signature"), self._expected_signature):
            raise AuthenticationError("SCRAM: the server's signature does not match (not the real cluster?)")
